//! The one state machine of a run.
//!
//! [`Scheduler::handle`] takes an [`Input`] (an attempt finished, a retry timer fired, the user
//! asked to stop) and returns the [`Action`]s that follow from it (launch these attempts, arm
//! this timer, record this task as finished, stop everything). It performs no I/O and reads no
//! clock: the dispatcher in `baton-runner` records the actions, carries them out and feeds the
//! results back. That keeps every scheduling rule in one place and testable exhaustively.
//!
//! Rules it enforces:
//! - a task starts as soon as all it needs has succeeded (no waves);
//! - among ready tasks, the one with the longest chain of tasks waiting on it goes first;
//! - at most `concurrency` attempts run at once;
//! - two tasks whose scopes conflict never run at the same time;
//! - failures are retried with exponential backoff and jitter, then handled by `on_failure`.
//!
//! Every operation costs time proportional to the edges it touches, so a whole run is
//! O(V + E) plus a heap operation per launch.

mod backoff;
mod machine;
mod plan;

pub use backoff::backoff_delay;
pub use machine::{Action, Cause, Input, Scheduler, StopCause, hands_over};
pub use plan::{Plan, PlanTask, Replanned};
