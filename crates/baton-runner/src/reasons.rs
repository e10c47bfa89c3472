//! Words for why a task ended as it did, as shown in status and summaries.

use baton_graph::Graph;
use baton_model::{Outcome, TaskState, format_duration};
use baton_scheduler::{Cause, StopCause};

pub(crate) fn stop_reason(cause: StopCause) -> &'static str {
    match cause {
        StopCause::TaskFailed => "a task failed and on_failure is \"stop\"",
        StopCause::BudgetSpent => "budget spent",
        StopCause::Cancelled => "cancelled",
        StopCause::Killed => "killed",
    }
}

/// A stop cause of the scheduler's as the run's events record it.
pub(crate) fn recorded_cause(cause: StopCause) -> baton_model::StopCause {
    match cause {
        StopCause::TaskFailed => baton_model::StopCause::TaskFailed,
        StopCause::BudgetSpent => baton_model::StopCause::BudgetSpent,
        StopCause::Cancelled => baton_model::StopCause::Cancelled,
        StopCause::Killed => baton_model::StopCause::Killed,
    }
}

/// `reason` (a worktree task's command exited 127: the shell found no such command) with why
/// a worktree may lack it: a script the user has not committed is in their checkout, not in a
/// worktree made from a commit.
pub(crate) fn not_in_worktree(reason: String) -> String {
    format!(
        "{reason}; a worktree holds only what git tracks: commit what the task runs, set \
         [run] base = \"working-tree\", or worktree_include what git ignores"
    )
}

/// Why a task ended in `state`. `dep_state` gives the final state of another task (the one
/// whose failure blocked this one).
pub(crate) fn finish_reason(
    graph: &Graph,
    task: u32,
    state: TaskState,
    cause: Cause,
    last: Option<&Outcome>,
    attempts: u32,
    dep_state: impl Fn(u32) -> TaskState,
) -> Option<String> {
    match cause {
        Cause::DependencyFailed(dep) => {
            let how = match dep_state(dep) {
                TaskState::TimedOut => "timed out",
                TaskState::Cancelled => "was cancelled",
                _ => "failed",
            };
            Some(format!("needs `{}`, which {how}", graph.task(dep).id))
        }
        Cause::Stopped(StopCause::TaskFailed) if state == TaskState::Skipped => {
            Some("not started: the run stopped after a failure".into())
        }
        Cause::Stopped(cause) if state == TaskState::Skipped => {
            Some(format!("not started: run {}", stop_reason(cause)))
        }
        Cause::Stopped(StopCause::TaskFailed) => {
            Some("stopped: another task failed and on_failure is \"stop\"".into())
        }
        Cause::Stopped(cause) => Some(format!("run {}", stop_reason(cause))),
        // The dispatcher adds the person's words.
        Cause::Rejected => Some("rejected".into()),
        Cause::Replaced => Some("replaced: its planner planned what was left again".into()),
        Cause::Outcome if state == TaskState::Succeeded => None,
        Cause::Outcome => {
            let outcome = match (last, graph.task(task).timeout) {
                (Some(Outcome::TimedOut), Some(limit)) => {
                    format!("timed out after {}", format_duration(limit))
                }
                (Some(outcome), _) => outcome.to_string(),
                (None, _) => state.to_string(),
            };
            Some(if attempts > 1 {
                format!("{outcome} (after {attempts} attempts)")
            } else {
                outcome
            })
        }
    }
}
