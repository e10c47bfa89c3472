//! What one attempt produced.

use std::time::Duration;

use baton_model::{Containment, Outcome};

use crate::capture::Captured;

/// How an attempt ended and what it printed.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptReport {
    pub outcome: Outcome,
    /// From just before the spawn to the moment the attempt's pipes closed.
    pub duration: Duration,
    /// The task's output: head and tail within `output_limit`.
    pub stdout: Captured,
    /// The end of stderr within `stderr_limit`.
    pub stderr: Captured,
    /// Bytes handed to the log file; after a write error the count stops growing.
    pub log_bytes: u64,
    /// The first problem with the output record: the log could not be opened or written (disk
    /// full), or a pipe could not be read. The attempt itself is unaffected.
    pub log_error: Option<String>,
    /// A [`LineWatcher`](crate::LineWatcher) saw the final result and baton ended the
    /// process after [`finish_grace`](crate::AttemptSpec::finish_grace): the outcome's signal
    /// is baton's, not a crash.
    pub reaped_after_result: bool,
    /// The [`LineWatcher`](crate::LineWatcher) asked to stop the attempt (its outcome is
    /// `Cancelled`).
    pub stopped_by_watcher: bool,
    /// What held the attempt's processes: its own cgroup, or its process group only. `None`
    /// when no process was started.
    pub containment: Option<Containment>,
}
