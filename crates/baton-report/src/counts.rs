use std::fmt;

use baton_model::{EventKind, RunView, TaskState};

/// Tasks per state, kept up to date from events, or taken from a [`RunView`] at a turn's end.
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

    /// The counts of a run folded so far, as [`StateCounts::apply`] keeps them from the same
    /// events (at the end of a turn, when no attempt has ended without its task finishing or
    /// being retried): `running` tasks, `retrying` the pending ones a retry waits for.
    pub fn of(view: &RunView) -> Self {
        let mut counts = Self::new(view.tasks().count() as u32);
        counts.running = view.count(TaskState::Running);
        counts.retrying = view
            .tasks()
            .filter(|(_, task)| task.status == TaskState::Pending && task.next_attempt.is_some())
            .count() as u32;
        for state in TaskState::ALL
            .into_iter()
            .filter(|state| state.is_terminal())
        {
            *counts.slot(state) += view.count(state);
        }
        counts
    }

    /// Where a task that finished in `state` is counted.
    fn slot(&mut self, state: TaskState) -> &mut u32 {
        match state {
            TaskState::Succeeded | TaskState::SucceededWithWarnings => &mut self.succeeded,
            TaskState::Failed => &mut self.failed,
            TaskState::TimedOut => &mut self.timed_out,
            TaskState::Cancelled => &mut self.cancelled,
            TaskState::Blocked => &mut self.blocked,
            TaskState::Skipped => &mut self.skipped,
            _ => &mut self.other,
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
            EventKind::TaskFinished { state, .. } => *self.slot(*state) += 1,
            EventKind::GraphExpanded { added, .. } => self.total += added.len() as u32,
            EventKind::RunStarted { .. }
            | EventKind::RunStopping { .. }
            | EventKind::RunFinished { .. }
            | EventKind::RunResumed { .. }
            | EventKind::TaskReset { .. }
            | EventKind::BudgetChanged { .. }
            | EventKind::GraphReloaded { .. }
            | EventKind::WorkspaceCommitted(_)
            | EventKind::ResultMerged { .. }
            | EventKind::Checked { .. }
            | EventKind::TaskWaiting { .. }
            | EventKind::TaskDecided { .. }
            | EventKind::Reviewed { .. }
            | EventKind::Picked { .. }
            | EventKind::AgentActivity { .. }
            | EventKind::Replanning { .. }
            | EventKind::AttemptLost { .. } => {}
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

#[cfg(test)]
mod tests {
    use baton_model::{Event, Outcome, TaskId};

    use super::*;

    fn id(name: &str) -> TaskId {
        TaskId::new(name).unwrap()
    }

    #[derive(Clone, Copy)]
    enum Step {
        Start,
        /// The attempt ends and the task is retried.
        Retry,
        /// The attempt ends and the task finishes.
        Finish(TaskState),
    }

    /// The events of one turn: each step about a task's attempt `n`.
    fn turn(steps: &[(&str, u32, Step)]) -> Vec<EventKind> {
        let mut events = Vec::new();
        for &(task, n, step) in steps {
            let ended = EventKind::AttemptFinished {
                task: id(task),
                attempt: n,
                outcome: Outcome::Exited { code: 1 },
                duration_ms: 1,
                agent: None,
                containment: None,
            };
            match step {
                Step::Start => events.push(EventKind::AttemptStarted {
                    task: id(task),
                    attempt: n,
                    pid: None,
                }),
                Step::Retry => events.extend([
                    ended,
                    EventKind::RetryScheduled {
                        task: id(task),
                        attempt: n + 1,
                        delay_ms: 10,
                    },
                ]),
                Step::Finish(state) => events.extend([
                    ended,
                    EventKind::TaskFinished {
                        task: id(task),
                        state,
                        reason: None,
                    },
                ]),
            }
        }
        events
    }

    #[test]
    fn the_counts_of_a_fold_are_the_counts_kept_from_its_events() {
        use Step::*;
        let mut view = RunView::new(["a", "b", "c", "d", "e"].map(id));
        let mut kept = StateCounts::new(5);
        let turns = [
            turn(&[("a", 1, Start), ("b", 1, Start)]),
            turn(&[("a", 1, Retry), ("c", 1, Start)]),
            turn(&[("b", 1, Finish(TaskState::Succeeded)), ("a", 2, Start)]),
            turn(&[("c", 1, Retry), ("d", 1, Start)]),
            turn(&[
                ("a", 2, Finish(TaskState::Failed)),
                ("d", 1, Finish(TaskState::NeedsHuman)),
            ]),
            vec![EventKind::TaskFinished {
                task: id("e"),
                state: TaskState::Blocked,
                reason: None,
            }],
        ];
        for events in turns {
            for kind in events {
                kept.apply(&kind);
                view.apply(&Event {
                    seq: 0,
                    at_ms: 0,
                    kind,
                });
            }
            assert_eq!(StateCounts::of(&view), kept);
        }
        assert_eq!(kept.to_string(), "1 retrying · 1 ok · 1 failed · 1 blocked");
    }
}
