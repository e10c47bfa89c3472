//! The end of a run that will not go on: what its tasks committed is merged into the result
//! branch, the run's `verify` checks run on the merged result, and when one fails, the merge
//! order is bisected (as a merge queue does) to name the task whose merge made it fail.

use baton_attempt::launch::Launcher;
use baton_attempt::unit::run_checks;
use baton_attempt::workspace::{Consolidated, Workspaces};
use baton_exec::{AttemptSpec, Program, StopLevel};
use baton_graph::Graph;
use baton_layout::RunCheck;
use baton_model::{CheckResult, EventKind, Merge, Outcome};
use tokio::sync::watch;

pub(crate) struct Consolidation<'a> {
    pub graph: &'a Graph,
    pub workspaces: &'a Workspaces,
    pub launcher: &'a Launcher,
    /// Stop requests that come meanwhile stop the checks.
    pub stop: watch::Receiver<StopLevel>,
}

impl Consolidation<'_> {
    /// Merges what the run's tasks committed and checks it, when `succeeded` (the tasks all
    /// did: a run that failed is merged for a person to look at, not checked); how that went,
    /// and the events that say so.
    pub(crate) async fn run(&self, succeeded: bool) -> (Merge, Vec<EventKind>) {
        let mut events = Vec::new();
        let merge = self.merge_and_check(succeeded, &mut events).await;
        (merge, events)
    }

    async fn merge_and_check(&self, succeeded: bool, events: &mut Vec<EventKind>) -> Merge {
        let Some(consolidated) = self.workspaces.consolidate(self.graph) else {
            return Merge::NotAttempted;
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
                if checks.is_empty() || !succeeded {
                    events.push(merged(branch, Some(commit)));
                    return Merge::Merged;
                }
                let results = self.check_result(&commit, checks, RunCheck::Verify).await;
                let mut blamed = None;
                let mut merge = Merge::Merged;
                if let Some(failed) = results.iter().find(|c| !c.passed()) {
                    merge = Merge::ChecksFailed;
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
                merge
            }
            Consolidated::Conflict {
                branch,
                task,
                with,
                files,
            } => {
                // File names are a task's output too: a secret can be one.
                let files = files.iter().map(|f| self.launcher.redact(f)).collect();
                events.push(failed(branch, Some((task, with, files)), None));
                Merge::Conflict
            }
            Consolidated::Failed(error) => {
                events.push(failed(
                    String::new(),
                    None,
                    Some(self.launcher.redact(&error)),
                ));
                Merge::Failed
            }
        }
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
            self.check_result(commit, &command, RunCheck::Bisect)
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
        kind: RunCheck,
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
