use std::fmt;

use baton_model::{EventKind, TaskState};

/// Tasks per state, kept up to date from events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateCounts {
    pub total: u32,
    pub running: u32,
    pub retrying: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub timed_out: u32,
    pub cancelled: u32,
    pub blocked: u32,
    pub skipped: u32,
    pub other: u32,
    /// Tasks that had ended before this process took the run over.
    pub earlier: u32,
}

impl StateCounts {
    pub fn new(total: u32) -> Self {
        Self {
            total,
            ..Self::default()
        }
    }

    pub fn apply(&mut self, event: &EventKind) {
        match event {
            EventKind::AttemptStarted { attempt, .. } => {
                self.running += 1;
                if *attempt > 1 {
                    self.retrying = self.retrying.saturating_sub(1);
                }
            }
            EventKind::AttemptFinished { .. } => self.running = self.running.saturating_sub(1),
            EventKind::RetryScheduled { .. } => self.retrying += 1,
            EventKind::TaskFinished { state, .. } => {
                let slot = match state {
                    TaskState::Succeeded => &mut self.succeeded,
                    TaskState::Failed => &mut self.failed,
                    TaskState::TimedOut => &mut self.timed_out,
                    TaskState::Cancelled => &mut self.cancelled,
                    TaskState::Blocked => &mut self.blocked,
                    TaskState::Skipped => &mut self.skipped,
                    _ => &mut self.other,
                };
                *slot += 1;
            }
            EventKind::RunStarted { .. }
            | EventKind::RunStopping { .. }
            | EventKind::RunFinished { .. }
            | EventKind::RunResumed { .. }
            | EventKind::TaskReset { .. }
            | EventKind::BudgetChanged { .. }
            | EventKind::WorkspaceCommitted { .. }
            | EventKind::ResultMerged { .. }
            | EventKind::Checked { .. }
            | EventKind::TaskWaiting { .. }
            | EventKind::TaskDecided { .. } => {}
        }
    }

    pub fn finished(&self) -> u32 {
        self.succeeded
            + self.failed
            + self.timed_out
            + self.cancelled
            + self.blocked
            + self.skipped
            + self.other
            + self.earlier
    }

    pub fn waiting(&self) -> u32 {
        self.total
            .saturating_sub(self.finished() + self.running + self.retrying)
    }
}

impl fmt::Display for StateCounts {
    /// `3 running · 10 ok · 1 failed · 20 waiting`, leaving out what is zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            (self.running, "running"),
            (self.retrying, "retrying"),
            (self.succeeded, "ok"),
            (self.failed, "failed"),
            (self.timed_out, "timed out"),
            (self.cancelled, "cancelled"),
            (self.blocked, "blocked"),
            (self.skipped, "skipped"),
            (self.waiting(), "waiting"),
            (self.earlier, "done earlier"),
        ];
        let mut first = true;
        for (n, label) in parts {
            if n == 0 {
                continue;
            }
            if !first {
                f.write_str(" · ")?;
            }
            first = false;
            write!(f, "{n} {label}")?;
        }
        if first {
            f.write_str("nothing to do")?;
        }
        Ok(())
    }
}
