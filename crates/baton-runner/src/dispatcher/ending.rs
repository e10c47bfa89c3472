//! How an attempt's end is recorded: its `attempt-finished` and the events after it, what it
//! printed, and the scheduler told — or, for an attempt that never started, all of it at once.

use baton_attempt::launch::HeldOutput;
use baton_attempt::unit::AttemptDone;
use baton_model::{EventKind, Outcome};
use baton_scheduler::{Input, StopCause};
use baton_store::AttemptOutput;

use super::{Dispatcher, Turn};

/// How an attempt ended, as its dependents (its output), its planner (what it said last) and
/// the scheduler (its outcome) are told.
pub(super) struct Ending {
    pub(super) outcome: Outcome,
    pub(super) output: HeldOutput,
    pub(super) stderr_tail: String,
}

/// What an attempt's `attempt-finished` records beside its outcome, and the events after it.
pub(super) struct Record {
    pub(super) duration: std::time::Duration,
    pub(super) agent: Option<Box<baton_model::AgentUsage>>,
    pub(super) containment: Option<baton_model::Containment>,
    pub(super) committed: Option<baton_model::WorkspaceCommit>,
    pub(super) checks: Option<Vec<baton_model::CheckResult>>,
}

impl Record {
    /// An attempt that ran no process and took no time: a no-op task's.
    pub(super) fn instant() -> Self {
        Self {
            duration: std::time::Duration::ZERO,
            agent: None,
            containment: None,
            committed: None,
            checks: None,
        }
    }
}

impl Dispatcher<'_> {
    /// Records an attempt that ended and tells the scheduler how: the one way an attempt's
    /// end comes in, whatever started it (a unit here, a worker's, a best-of candidate, one
    /// that never started).
    pub(super) fn apply(&mut self, mut done: AttemptDone, turn: &mut Turn) {
        let (task, attempt) = (done.task, done.attempt);
        if let Some(worker) = done.lost_by.take() {
            // Said before its end, which it explains.
            self.ledger.push(EventKind::AttemptLost {
                task: self.graph.task(task).id.clone(),
                attempt,
                worker,
            });
        }
        let is_agent = self.launcher.is_agent(task);
        self.log_bytes += done.log_bytes;
        if is_agent && done.agent.is_none() {
            // Never started (or its unit failed): counted as an attempt that spent nothing,
            // and whatever it had spent live is its spend.
            self.shared
                .meter
                .finish((task, attempt), &baton_model::AgentUsage::default());
        }
        if self.gathering.contains_key(&task) {
            self.candidate_ended(done, turn);
        } else {
            self.attempt_ended(done, turn);
        }
        // What the agent spent may have reached the run's limits.
        if is_agent && self.shared.meter.exhausted() {
            turn.inputs.push_back(Input::Stop(StopCause::BudgetSpent));
        } else if is_agent {
            self.soft_pause();
        }
    }

    /// An attempt that is the scheduler's whole attempt (not one of a best-of task's
    /// candidates) ended.
    fn attempt_ended(&mut self, done: AttemptDone, turn: &mut Turn) {
        let AttemptDone {
            task,
            attempt,
            outcome,
            duration,
            containment,
            log_bytes: _,
            output,
            output_bytes,
            stderr_tail,
            agent,
            committed,
            changed,
            scope_warning,
            checks,
            set_up,
            tree,
            session,
            review_warnings,
            lost_by: _,
        } = done;
        // A planner that answered well grows the graph; one whose answer no longer fits it
        // fails as one whose answer never did.
        let (outcome, output) = match self.graph.task(task).plan {
            Some(_) if outcome.is_success() && !self.graph.run_settings().hold_plans => {
                match self.expand_or_replan(task, attempt, &output.text, turn) {
                    Ok(()) => (outcome, output),
                    Err(rejected) => (
                        Outcome::InvalidPlan {
                            problems: rejected.problems,
                        },
                        HeldOutput {
                            text: rejected.errors,
                            ..output
                        },
                    ),
                }
            }
            _ => (outcome, output),
        };
        if self.launcher.is_agent(task) {
            match session {
                Some(session) => self.sessions.insert(task, session),
                None => self.sessions.remove(&task),
            };
        }
        if let Some(changed) = changed {
            self.workspaces.changed(task, changed);
        }
        self.warnings |= scope_warning || review_warnings;
        self.workspaces.attempt_ended(task, set_up, &tree);
        self.record_finished(
            task,
            attempt,
            &outcome,
            Record {
                duration,
                agent,
                containment,
                committed,
                checks,
            },
        );
        let ending = Ending {
            outcome,
            output,
            stderr_tail,
        };
        self.ended(task, attempt, ending, output_bytes, turn);
    }

    /// Records that attempt `attempt` of `task` ended as `outcome`: its `attempt-finished`,
    /// then what it committed and what its checks found.
    pub(super) fn record_finished(
        &mut self,
        task: u32,
        attempt: u32,
        outcome: &Outcome,
        record: Record,
    ) {
        // One clone of the id per end: this is every attempt's path, a no-op task's too.
        self.ledger.push(EventKind::AttemptFinished {
            task: self.graph.task(task).id.clone(),
            attempt,
            outcome: outcome.clone(),
            duration_ms: record.duration.as_millis() as u64,
            agent: record.agent,
            containment: record.containment,
        });
        if let Some(committed) = record.committed {
            self.ledger.push(EventKind::WorkspaceCommitted(committed));
        }
        if let Some(checks) = record.checks {
            self.ledger.push(EventKind::Checked {
                task: Some(self.graph.task(task).id.clone()),
                attempt: Some(attempt),
                checks,
                blamed: None,
            });
        }
    }

    /// An attempt's end, once its `attempt-finished` is recorded: its output stored and held
    /// for its dependents, and the scheduler told.
    pub(super) fn ended(
        &mut self,
        task: u32,
        attempt: u32,
        ending: Ending,
        output_bytes: u64,
        turn: &mut Turn,
    ) {
        self.record_output(
            task,
            attempt,
            &ending.output,
            output_bytes,
            &ending.stderr_tail,
        );
        self.concluded(task, attempt, ending, turn);
    }

    /// Stores what attempt `attempt` of `task` printed.
    pub(super) fn record_output(
        &mut self,
        task: u32,
        attempt: u32,
        output: &HeldOutput,
        output_bytes: u64,
        stderr_tail: &str,
    ) {
        self.ledger.push_output(AttemptOutput {
            task: self.graph.task(task).id.clone(),
            attempt,
            output: output.text.clone(),
            output_bytes,
            output_json: output.json.as_ref().map(ToString::to_string),
            stderr_tail: stderr_tail.to_owned(),
            log_path: self.launcher.log_path(task, attempt).display().to_string(),
        });
    }

    /// The scheduler's attempt `attempt` of `task` ended as `outcome`: its output is held for
    /// its dependents, what it said kept for its planner, and the scheduler told.
    pub(super) fn concluded(
        &mut self,
        task: u32,
        attempt: u32,
        Ending {
            outcome,
            output,
            stderr_tail,
        }: Ending,
        turn: &mut Turn,
    ) {
        if outcome.is_success() {
            self.last_words.remove(&task);
        } else {
            let said = if stderr_tail.trim().is_empty() {
                &output.text
            } else {
                &stderr_tail
            };
            let start = said.len().saturating_sub(2048);
            let start = (start..said.len())
                .find(|&i| said.is_char_boundary(i))
                .unwrap_or(said.len());
            self.last_words
                .insert(task, said[start..].trim().to_owned());
        }
        self.ledger.mark_end(task);
        self.launcher.hold_output(task, output);
        self.last_outcome[task as usize] = Some(outcome.clone());
        turn.inputs.push_back(Input::Finished {
            task,
            attempt,
            outcome,
        });
    }

    /// Records attempt `attempt` of `task` as one that ended as `outcome` before it started.
    pub(super) fn never_started(&mut self, task: u32, attempt: u32, outcome: Outcome) {
        self.started(task, attempt, None);
        let done = AttemptDone::never_started(task, attempt, outcome);
        self.units.spawn(std::future::ready(done));
    }
}
