//! The vocabulary every other baton crate speaks: identifiers, the states a task and a run can be
//! in, how an attempt ended, and the versioned event type that the store records and reporters
//! read, and [`RunView`], the one fold of that log into a run's state. Nothing here performs
//! I/O.

mod candidate;
mod containment;
mod event;
mod evidence;
mod id;
mod literal;
mod outcome;
mod policy;
mod review;
mod state;
mod stop;
mod usage;
mod verdict;
mod view;

pub use candidate::{Candidate, pick};
pub use containment::Containment;
pub use event::{EVENT_SCHEMA_VERSION, Event, EventKind, EventName, WorkspaceCommit};
pub use evidence::{ChangeKind, CheckResult, Evidence, FileChange};
pub use id::{IdError, RunId, TASK_ID_RULE, TaskId, is_id_letter};
pub use literal::{
    LiteralError, civil_from_days, cut_marker, follow_clock, format_duration, format_size,
    format_usd, format_utc, now_ms, parse_duration, parse_size,
};
pub use outcome::{FailureClass, OUT_OF_CREDIT, Outcome, signal_name};
pub use policy::OnFailure;
pub use review::{Review, ReviewVerdict};
pub use state::{RunState, TaskState};
pub use stop::{BudgetScope, Stop, StopCause};
pub use usage::AgentUsage;
pub use verdict::{Ending, Merge, Stopped, observed};
pub use view::{Activity, Anomaly, AttemptView, RunHead, RunView, TaskView};
