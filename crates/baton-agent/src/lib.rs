//! Agent engines: how baton starts each agent CLI and how it reads what the agent prints.
//!
//! Nothing here spawns a process or does I/O: [`Invocation`] is the command line an engine
//! wants for one attempt, and [`StreamParser`] turns the agent's stdout, line by line, into an
//! [`AgentReport`] (the final message, tokens, cost, model, session, tool activity, and how the
//! agent says it ended). [`AgentReport::verdict`] then decides, together with how the process
//! ended, whether the attempt succeeded and, if not, whose failure it was. The parsers take
//! any bytes without panicking (they are fuzzed), since an agent's stream can be truncated,
//! malformed or hostile.

mod engine;
mod invocation;
mod price;
mod report;
pub mod stream;
mod version;

pub use engine::{Engine, EngineKind};
pub use invocation::{AgentOptions, Invocation, PromptInput, RecordFiles, render_arg};
pub use price::{Price, PriceTable};
pub use report::{AgentReport, Usage, Verdict};
pub use stream::{LineSignal, StreamParser};
pub use version::{Version, VersionCheck};
