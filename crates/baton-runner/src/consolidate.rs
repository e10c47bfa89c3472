//! The end of a run that will not go on: what its tasks committed is merged into the result
//! branch, the run's `verify` checks run on the merged result, and when one fails, the merge
//! order is bisected (as a merge queue does) to name the task whose merge made it fail.

use baton_exec::{AttemptSpec, Program, StopLevel};
use baton_graph::Graph;
use baton_model::{CheckResult, EventKind, Outcome, RunState};
use tokio::sync::watch;

use crate::attempt::run_checks;
use crate::launch::Launcher;
use crate::workspace::{Consolidated, Workspaces};

pub(crate) struct Consolidation<'a> {
    pub graph: &'a Graph,
    pub workspaces: &'a Workspaces,
    pub launcher: &'a Launcher<'a>,
    /// Stop requests that come meanwhile stop the checks.
    pub stop: watch::Receiver<StopLevel>,
}

impl Consolidation<'_> {
    /// The run's state once its result is merged and checked, from the state the scheduler
    /// ended it in, and the events that say how that went.
    pub(crate) async fn run(
        &self,
        scheduled: RunState,
        warnings: bool,
    ) -> (RunState, Vec<EventKind>) {
        let mut events = Vec::new();
        let state = self.merge_and_check(scheduled, warnings, &mut events).await;
        (state, events)
    }

    async fn merge_and_check(
        &self,
        state: RunState,
        warnings: bool,
        events: &mut Vec<EventKind>,
    ) -> RunState {
        if !self.workspaces.active() || matches!(state, RunState::Waiting | RunState::Cancelled) {
            return state;
        }
        let mut state = state;
        if state == RunState::Succeeded && warnings {
            state = RunState::SucceededWithWarnings;
        }
        let Some(consolidated) = self.workspaces.consolidate(self.graph) else {
            return state;
        };
        let base = Some(self.workspaces.base().to_owned());
        let merged = |branch, commit| EventKind::ResultMerged {
            branch,
            base: base.clone(),
            commit,
            conflict_task: None,
            conflict_with: Vec::new(),
            conflict_files: Vec::new(),
            error: None,
        };
        let failed = |branch, conflict: Option<(String, Vec<String>, Vec<String>)>, error| {
            let (task, with, files) = match conflict {
                Some((task, with, files)) => (Some(task), with, files),
                None => (None, Vec::new(), Vec::new()),
            };
            EventKind::ResultMerged {
                branch,
                base: base.clone(),
                commit: None,
                conflict_task: task,
                conflict_with: with,
                conflict_files: files,
                error,
            }
        };
        match consolidated {
            Consolidated::Merged {
                branch,
                commit,
                order,
            } => {
                let checks = &self.graph.run_settings().verify;
                if checks.is_empty() || !state.is_success() {
                    events.push(merged(branch, Some(commit)));
                    return state;
                }
                let results = self.check_result(&commit, checks, "verify").await;
                let mut blamed = None;
                if let Some(failed) = results.iter().find(|c| !c.passed()) {
                    state = RunState::Failed;
                    if !self.stopping() {
                        blamed = self.bisect(&commit, &order, &failed.command).await;
                    }
                }
                events.push(merged(branch, Some(commit)));
                events.push(EventKind::Checked {
                    task: None,
                    attempt: None,
                    checks: results,
                    blamed,
                });
            }
            Consolidated::Conflict {
                branch,
                task,
                with,
                files,
            } => {
                if state.is_success() {
                    state = RunState::NeedsHuman;
                }
                events.push(failed(branch, Some((task, with, files)), None));
            }
            Consolidated::Failed(error) => {
                if state.is_success() {
                    state = RunState::Failed;
                }
                events.push(failed(
                    String::new(),
                    None,
                    Some(self.launcher.redact(&error)),
                ));
            }
        }
        state
    }

    /// Which task's merge made `command` fail on the result: the first merge step at which it
    /// fails, found by bisecting the merge order (each probe checks out one step and runs the
    /// command). `None` when the base fails already, or the history is not one step per task.
    async fn bisect(&self, result: &str, order: &[String], command: &str) -> Option<String> {
        let steps = self.workspaces.merge_steps(result).ok()?;
        if steps.len() != order.len() || steps.is_empty() {
            return None;
        }
        let command = [command.to_owned()];
        let fails = async |commit: &str| {
            self.check_result(commit, &command, "bisect")
                .await
                .iter()
                .any(|c| !c.passed())
        };
        if fails(self.workspaces.base()).await {
            return None;
        }
        // Invariant: the check passes before step `low` and fails at step `high`.
        let (mut low, mut high) = (0, steps.len() - 1);
        while low < high {
            if self.stopping() {
                // Stopped half way: no one is to blame yet.
                return None;
            }
            let mid = (low + high) / 2;
            if fails(&steps[mid]).await {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        Some(order[high].clone())
    }

    /// Whether a stop was asked for.
    fn stopping(&self) -> bool {
        *self.stop.borrow() != StopLevel::Run
    }

    /// Runs `commands` on `commit`, in a worktree of its own, one after another, stopping at
    /// the first that fails: supervised like any attempt (process group, bounded capture,
    /// redacted log under `kind`, stopped by Ctrl-C).
    async fn check_result(
        &self,
        commit: &str,
        commands: &[String],
        kind: &str,
    ) -> Vec<CheckResult> {
        let checkout = match self.workspaces.checkout(commit) {
            Ok(checkout) => checkout,
            Err(error) => {
                return vec![CheckResult {
                    command: commands[0].clone(),
                    outcome: Outcome::SpawnFailed {
                        error: self.launcher.redact(&error),
                    },
                    duration_ms: 0,
                    output: String::new(),
                }];
            }
        };
        let dirs = self.launcher.dirs();
        let mut spec = AttemptSpec::new(
            Program::Shell(String::new()),
            checkout.path(),
            dirs.run_check_log(kind, 0),
        );
        spec.env = self.launcher.base_env();
        spec.inherit_env = false;
        spec.redactor = Some(self.launcher.redactor().clone());
        spec.kill_grace = self.launcher.kill_grace();
        run_checks(commands, &spec, |n| dirs.run_check_log(kind, n), &self.stop).await
    }
}
