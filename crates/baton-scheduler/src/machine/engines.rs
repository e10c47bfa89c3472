//! Where each task is in its chain of engines: its own first, then its fallbacks, one step
//! further each time an attempt fails in a way another engine may mend.

use baton_model::{FailureClass, Outcome};

use crate::plan::PlanTask;

/// One task's place in its chain. A few bytes: one per task of a 100,000-task graph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Chain {
    /// The engine its next attempt runs on: 0 is its own.
    pub at: u32,
    /// Engines after its own.
    fallbacks: u32,
    /// `fallback_on = "any"`: every failure hands over, not the machinery's alone.
    any: bool,
}

impl Chain {
    pub(super) fn of(task: &PlanTask) -> Self {
        Self {
            at: 0,
            fallbacks: task.fallbacks,
            any: task.fallback_on_any,
        }
    }

    /// Moves on to the next engine when `outcome` calls for one and there is one left.
    pub(super) fn hand_over(&mut self, outcome: &Outcome) -> bool {
        if self.at >= self.fallbacks || !hands_over(outcome, self.any) {
            return false;
        }
        self.at += 1;
        true
    }
}

/// Whether another engine may do better than the one that failed: the machinery's failures
/// (its CLI missing or crashed, its API unreachable, overloaded or rate-limited after the
/// CLI's own retries), an account out of credit; with `any`, every failure a new attempt
/// could mend. The CLIs retry their APIs themselves: an attempt that fails for the
/// machinery has outlasted those, so the next engine gets the next attempt at once.
pub fn hands_over(outcome: &Outcome, any: bool) -> bool {
    match outcome.failure_class() {
        Some(FailureClass::Infrastructure) => true,
        Some(FailureClass::Task) => any || outcome.is_out_of_credit(),
        None => false,
    }
}
