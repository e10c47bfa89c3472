//! What a person (or a program) sees of a run.
//!
//! Reporters receive events only after the dispatcher has recorded them, and hold no state that
//! matters: killing a reporter loses nothing. The [`RunResult`] is the versioned JSON document
//! `baton run --json` prints; [`summary`] renders the same data as a table.

mod board;
mod counts;
mod failure;
mod html;
mod live;
mod plain;
mod reporter;
mod result;
mod spend;
pub mod summary;
mod terminal;
mod timeline;

pub use board::{Board, Paint, QUIET_AFTER};
pub use counts::StateCounts;
pub use failure::failure_line;
pub use html::{GraphTask, Live, ReportInput, TaskExtras, render as render_html, render_task};
pub use live::LiveReporter;
pub use plain::PlainReporter;
pub use reporter::{NullReporter, Reporter, RunInfo};
pub use result::{
    AttemptEngine, FailedCheck, MergedResult, RESULT_SCHEMA_VERSION, ResultCheck, ResultConflict,
    RunResult, RunSection, TaskAgent, TaskCandidates, TaskResult, TaskWorkspace, Totals,
    VerifiedCheck,
};
pub use spend::{ModelSpend, RunSpend, Spend, budget_text, format_tokens, format_usd};
pub use terminal::{display_width, pad, terminal_safe};
pub use timeline::{Timeline, timeline};
