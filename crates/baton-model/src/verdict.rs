//! The one verdict on how a run ended. Everything it depends on is gathered in an [`Ending`]:
//! the scheduler fills in what its tasks did (and decides with [`Ending::state`] as far as it
//! knows), the dispatcher adds how their results came together, and the same function gives
//! the final state. Nothing else decides a run's state; readers only add what they can see of
//! a run still recorded as running ([`observed`]).

use crate::RunState;

/// Why a run stopped launching tasks, as far as its state is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// A task failed under `on_failure = "stop"`.
    TaskFailed,
    /// The run's budget was spent: tasks were left undone for want of money.
    BudgetSpent,
    /// A person stopped it (Ctrl-C, `baton cancel`).
    ByPerson,
}

/// How the tasks' results came together at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Merge {
    /// Nothing to merge: no task worked in a worktree, or none succeeded, or the run did not
    /// get that far.
    #[default]
    NotAttempted,
    /// Merged into the result branch (and the run's checks, if any, passed).
    Merged,
    /// Merged, but one of the run's `verify` checks failed on the result.
    ChecksFailed,
    /// A task's branch conflicted with those merged before it: a person must resolve it.
    Conflict,
    /// Merging failed for another reason (git itself).
    Failed,
}

/// Everything a run's final state depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ending {
    pub stopped: Option<Stopped>,
    /// The run's soft budget was reached with tasks left: it waits for a person.
    pub paused_with_work_left: bool,
    /// Some task ended failed, timed out or cancelled.
    pub any_failed: bool,
    /// Some task needs a person (its dependencies' changes conflict).
    pub any_needs_human: bool,
    /// Some task was blocked by a failed dependency.
    pub any_blocked: bool,
    /// Some task changed files outside its scope (under `scope_policy = "warn"`).
    pub scope_warnings: bool,
    pub merge: Merge,
    /// A person stopped the run while its result was merged and checked.
    pub stopped_while_merging: bool,
}

impl Ending {
    /// The run's state, from what is known of its end.
    pub fn state(&self) -> RunState {
        if self.paused_with_work_left && self.stopped.is_none() {
            return RunState::Waiting;
        }
        if self.stopped == Some(Stopped::ByPerson) {
            return RunState::Cancelled;
        }
        let by_tasks = if self.any_failed || self.stopped == Some(Stopped::BudgetSpent) {
            RunState::Failed
        } else if self.any_needs_human {
            RunState::NeedsHuman
        } else if self.any_blocked {
            RunState::Blocked
        } else {
            RunState::Succeeded
        };
        if by_tasks != RunState::Succeeded {
            // What was merged of a run that did not succeed changes nothing about it.
            return by_tasks;
        }
        let merged = match self.merge {
            Merge::Conflict => RunState::NeedsHuman,
            Merge::ChecksFailed | Merge::Failed => RunState::Failed,
            Merge::NotAttempted | Merge::Merged if self.scope_warnings => {
                RunState::SucceededWithWarnings
            }
            Merge::NotAttempted | Merge::Merged => RunState::Succeeded,
        };
        if self.stopped_while_merging && merged != RunState::Succeeded {
            // What the stop cut short is not the result's verdict.
            return RunState::Cancelled;
        }
        merged
    }
}

/// What a reader shows of a run recorded in `state`: one recorded as running whose driver is
/// gone was interrupted (`baton resume` finishes it).
pub fn observed(state: RunState, driver_gone: bool) -> RunState {
    match state {
        RunState::Running if driver_gone => RunState::Interrupted,
        state => state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending() -> Ending {
        Ending::default()
    }

    #[test]
    fn tasks_decide_first_then_the_merge() {
        assert_eq!(ending().state(), RunState::Succeeded);
        let failed = Ending {
            any_failed: true,
            any_blocked: true,
            ..ending()
        };
        assert_eq!(failed.state(), RunState::Failed);
        let blocked = Ending {
            any_blocked: true,
            merge: Merge::Conflict,
            ..ending()
        };
        assert_eq!(
            blocked.state(),
            RunState::Blocked,
            "a merge changes no failure"
        );
        let human = Ending {
            any_needs_human: true,
            any_blocked: true,
            ..ending()
        };
        assert_eq!(human.state(), RunState::NeedsHuman);
        for (merge, state) in [
            (Merge::Merged, RunState::Succeeded),
            (Merge::ChecksFailed, RunState::Failed),
            (Merge::Conflict, RunState::NeedsHuman),
            (Merge::Failed, RunState::Failed),
        ] {
            assert_eq!(Ending { merge, ..ending() }.state(), state, "{merge:?}");
        }
        let warned = Ending {
            scope_warnings: true,
            merge: Merge::Merged,
            ..ending()
        };
        assert_eq!(warned.state(), RunState::SucceededWithWarnings);
        let warned_conflict = Ending {
            merge: Merge::Conflict,
            ..warned
        };
        assert_eq!(warned_conflict.state(), RunState::NeedsHuman);
    }

    #[test]
    fn stops_and_pauses() {
        let paused = Ending {
            paused_with_work_left: true,
            any_failed: true,
            ..ending()
        };
        assert_eq!(paused.state(), RunState::Waiting);
        let cancelled = Ending {
            stopped: Some(Stopped::ByPerson),
            paused_with_work_left: true,
            ..ending()
        };
        assert_eq!(cancelled.state(), RunState::Cancelled);
        let broke = Ending {
            stopped: Some(Stopped::BudgetSpent),
            ..ending()
        };
        assert_eq!(
            broke.state(),
            RunState::Failed,
            "work left undone for want of money"
        );
        let stopped_on_failure = Ending {
            stopped: Some(Stopped::TaskFailed),
            any_failed: true,
            ..ending()
        };
        assert_eq!(stopped_on_failure.state(), RunState::Failed);
        // A stop while the result's checks ran: what it cut short is no verdict.
        let cut = Ending {
            merge: Merge::ChecksFailed,
            stopped_while_merging: true,
            ..ending()
        };
        assert_eq!(cut.state(), RunState::Cancelled);
        let cut_after = Ending {
            merge: Merge::Merged,
            stopped_while_merging: true,
            ..ending()
        };
        assert_eq!(cut_after.state(), RunState::Succeeded);
    }

    #[test]
    fn a_running_run_without_its_driver_was_interrupted() {
        assert_eq!(observed(RunState::Running, true), RunState::Interrupted);
        assert_eq!(observed(RunState::Running, false), RunState::Running);
        assert_eq!(observed(RunState::Failed, true), RunState::Failed);
    }
}
