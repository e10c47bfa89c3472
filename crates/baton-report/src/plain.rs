use std::io::Write;

use baton_model::{Event, EventKind, TaskId, TaskState, format_duration};

use crate::{Reporter, RunInfo, RunResult, StateCounts};

/// Line-by-line progress for logs and pipes (no cursor movement): a line per task that ends,
/// per retry, and per stop, on standard error.
pub struct PlainReporter<W: Write> {
    out: W,
    counts: StateCounts,
    list_successes: bool,
}

impl<W: Write> PlainReporter<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            counts: StateCounts::default(),
            list_successes: true,
        }
    }
}

impl<W: Write> Reporter for PlainReporter<W> {
    fn run_started(&mut self, info: &RunInfo) {
        self.counts = StateCounts::new(info.tasks);
        self.list_successes = info.tasks <= 200;
        let _ = writeln!(
            self.out,
            "baton: run {} of `{}`: {} tasks, concurrency {}",
            info.run_id, info.name, info.tasks, info.concurrency
        );
    }

    fn events(&mut self, events: &[Event]) {
        for event in events {
            self.counts.apply(&event.kind);
            let line = match &event.kind {
                EventKind::RetryScheduled {
                    task,
                    attempt,
                    delay_ms,
                } => describe_retry(task, *attempt, *delay_ms),
                EventKind::TaskFinished {
                    task,
                    state,
                    reason,
                } if *state != TaskState::Succeeded || self.list_successes => {
                    describe_finish(task, *state, reason.as_deref())
                }
                EventKind::RunStopping { reason } => format!("baton: stopping: {reason}"),
                _ => continue,
            };
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }

    fn run_finished(&mut self, _: &RunResult) {}
}

pub(crate) fn describe_retry(task: &TaskId, attempt: u32, delay_ms: u64) -> String {
    format!(
        "  ↻ {task}: retrying in {} (attempt {attempt})",
        format_duration(std::time::Duration::from_millis(delay_ms))
    )
}

pub(crate) fn describe_finish(task: &TaskId, state: TaskState, reason: Option<&str>) -> String {
    let mark = match state {
        TaskState::Succeeded => "✓",
        TaskState::Blocked | TaskState::Skipped => "⊘",
        _ => "✗",
    };
    match reason {
        Some(reason) => format!("  {mark} {task}: {state} ({reason})"),
        None => format!("  {mark} {task}: {state}"),
    }
}
