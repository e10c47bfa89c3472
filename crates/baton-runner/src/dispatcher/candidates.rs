//! Best-of tasks (`best_of = N`, `candidates = [...]`). One attempt of the scheduler's is N
//! candidates at once, each recorded as an attempt of its own (numbers `(a-1)·N+1 ..= a·N`
//! for the scheduler's attempt `a`), each in a worktree of its own from the same start, each
//! through the task's checks and review; once all N have ended, the best is picked
//! ([`baton_model::pick`]) and its end is the task's. To the scheduler the N are one task:
//! one slot, one scope.

use baton_attempt::launch::HeldOutput;
use baton_attempt::unit::{Assembly, AttemptDone, TreeEnd, assemble};
use baton_model::{Candidate, EventKind, Outcome};

use super::best_of::{Ended, Gathering, Verdict, decide};
use super::ending::Record;
use super::{Dispatcher, Turn};

/// The recorded attempt number of candidate `k` (from 1) of the scheduler's attempt
/// `launch` of a task with `n` candidates.
pub(crate) fn recorded_attempt(launch: u32, n: u32, k: u32) -> u32 {
    (launch - 1) * n + k
}

impl Dispatcher<'_> {
    /// Starts the scheduler's attempt `launch` of best-of task `task`: its N candidates at
    /// once, once the run's budget can take all of them. Candidates that had ended in the
    /// round a crash cut short (`carried_candidates`) count as this round's, and only the
    /// others run. Returns `false` if none started because the budget cannot cover them
    /// beside the agents running now: the task waits for one of them to end (the caller
    /// declines the launch).
    pub(super) fn launch_candidates(&mut self, task: u32, launch: u32, turn: &mut Turn) -> bool {
        let carried = self.carried_candidates.remove(&task).unwrap_or_default();
        let kept: Vec<Ended> = carried
            .iter()
            .filter_map(|&attempt| self.recorded_candidate(task, attempt))
            .collect();
        let spec = self.graph.task(task);
        let n = spec.candidate_count();
        let to_run = n - kept.len() as u32;
        let refused = if !self.workspaces.active() {
            Some(Outcome::LaunchFailed {
                error: "a best-of task's candidates each need a worktree of their own: run \
                        it in a git repository with a commit"
                    .to_owned(),
            })
        } else {
            let each = spec.expected_usd();
            match self.shared.meter.can_start_many(to_run.max(1), each) {
                Ok(()) => None,
                Err(_) if self.shared.meter.running() > 0 => {
                    self.carried_candidates.insert(task, carried);
                    return false;
                }
                Err(limit) => Some(Outcome::OverBudget {
                    limit,
                    scope: Some(baton_model::BudgetScope::Run),
                    spent_usd: None,
                    tokens: 0,
                }),
            }
        };
        if let Some(outcome) = refused {
            // None starts: one attempt, recorded as never started, says why.
            self.gathering
                .insert(task, Gathering::new(launch, 1, Vec::new()));
            self.never_started(task, recorded_attempt(launch, n, 1), outcome);
            return true;
        }
        let done: Vec<u32> = kept.iter().map(|e| e.candidate.candidate).collect();
        let round = Gathering::new(launch, n, kept);
        if to_run == 0 {
            // Every candidate had ended (the crash came before the pick): picked now.
            let (launch, ended) = round.into_ends();
            self.judge(task, launch, ended, turn);
            return true;
        }
        self.gathering.insert(task, round);
        // Noted before any starts, as `carry_out` notes the turn's other launches (candidates
        // run in this process, on workers' runs too): a driver killed before a candidate's
        // start is committed leaves a takeover what ran, and the candidate is not run again
        // under the same number.
        let starting: Vec<(u32, u32)> = (1..=n)
            .filter(|k| !done.contains(k))
            .map(|k| (k, recorded_attempt(launch, n, k)))
            .collect();
        let graph = std::sync::Arc::clone(&self.graph);
        let id = &graph.task(task).id;
        self.launch_log
            .note(starting.iter().map(|&(_, attempt)| (id, attempt)));
        let each = graph.task(task).expected_usd();
        for (k, attempt) in starting {
            self.shared.meter.start((task, attempt), each);
            let sched = &self.sched;
            let assembled = assemble(
                Assembly {
                    graph: &self.graph,
                    launcher: &mut self.launcher,
                    workspaces: &mut self.workspaces,
                    shared: &self.shared,
                    dropped: Vec::new(),
                    engine: k - 1,
                    candidate: Some(k),
                    ended: &|t| super::ended(sched, t),
                },
                task,
                attempt,
                true,
                None,
            );
            match assembled {
                Ok(unit) => self.start_unit(task, attempt, unit),
                Err(outcome) => self.never_started(task, attempt, outcome),
            }
        }
        true
    }

    /// Records a candidate's end (its task's attempt is gathering), and once the last of its
    /// attempt's candidates ended, picks the winner and ends the scheduler's attempt.
    pub(super) fn candidate_ended(&mut self, done: AttemptDone, turn: &mut Turn) {
        let (task, attempt) = (done.task, done.attempt);
        let spec = self.graph.task(task);
        let n = spec.candidate_count();
        let k = (attempt - 1) % n + 1;
        if done.set_up && k == 1 {
            self.workspaces.set_up(task);
        }
        if done.tree == TreeEnd::Unmade {
            self.workspaces.candidate_unmade(task, k);
        }
        self.warnings |= done.scope_warning;
        let choice = spec.candidates.get(k as usize - 1);
        let (mut lines, mut files) = (0, 0);
        if let Some(baton_model::WorkspaceCommit { evidence, .. }) = &done.committed {
            lines = evidence.lines_added + evidence.lines_removed;
            files = evidence.files.len() as u32;
        }
        let candidate = Candidate {
            candidate: k,
            attempt,
            engine: done
                .agent
                .as_ref()
                .map(|a| a.engine.clone())
                .or_else(|| choice.map(|c| c.engine.clone()))
                .unwrap_or_default(),
            model: done
                .agent
                .as_ref()
                .and_then(|a| a.model.clone())
                .or_else(|| choice.and_then(|c| c.model.clone())),
            passed: done.outcome.is_success(),
            warnings: done.review_warnings,
            lines,
            files,
            branch: self
                .workspaces
                .active()
                .then(|| self.workspaces.candidate_branch(&self.graph, task, k)),
            outcome: match done.outcome.is_success() {
                true => "succeeded".to_owned(),
                false => done.outcome.to_string(),
            },
        };
        self.record_finished(
            task,
            attempt,
            &done.outcome,
            Record {
                duration: done.duration,
                agent: done.agent,
                containment: done.containment,
                committed: done.committed,
                checks: done.checks,
            },
        );
        self.record_output(
            task,
            attempt,
            &done.output,
            done.output_bytes,
            &done.stderr_tail,
        );
        let Some(round) = self.gathering.get_mut(&task) else {
            return;
        };
        let whole = round.add(Ended {
            candidate,
            outcome: done.outcome,
            output: done.output,
            stderr_tail: done.stderr_tail,
            head: done.tree.head().map(str::to_owned),
            changed: done.changed,
            review_warnings: done.review_warnings,
        });
        if !whole {
            return;
        }
        if let Some(round) = self.gathering.remove(&task) {
            let (launch, ended) = round.into_ends();
            self.judge(task, launch, ended, turn);
        }
    }

    /// Candidate `attempt` of `task` as it was recorded when it ended, before a crash cut its
    /// round short: what the pick needs of it. `None` if its end cannot be read back (it then
    /// runs again).
    fn recorded_candidate(&self, task: u32, attempt: u32) -> Option<Ended> {
        use baton_model::{EventName, ReviewVerdict};
        let spec = self.graph.task(task);
        let n = spec.candidate_count();
        let k = (attempt - 1) % n + 1;
        let record = self
            .store
            .attempts(&self.run_id, &spec.id)
            .ok()?
            .into_iter()
            .find(|a| a.attempt == attempt)?;
        let outcome = record.outcome?;
        let of_it = |kind| {
            self.store
                .events_of_kind(&self.run_id, kind)
                .unwrap_or_default()
                .into_iter()
                .filter(|e| e.kind.task() == Some(&spec.id))
        };
        let committed = of_it(EventName::WorkspaceCommitted).find_map(|e| match e.kind {
            EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
                attempt: a,
                commit,
                evidence,
                ..
            }) if a == attempt => Some((commit, evidence)),
            _ => None,
        });
        let warnings = of_it(EventName::Reviewed).any(|e| {
            matches!(&e.kind, EventKind::Reviewed { attempt: a, review, .. }
                if *a == attempt && review.verdict == ReviewVerdict::VerifiedWithWarnings)
        });
        let (head, evidence) = committed.unzip();
        let evidence = evidence.unwrap_or_default();
        let agent = record.agent.as_ref();
        let choice = spec.candidates.get(k as usize - 1);
        let candidate = Candidate {
            candidate: k,
            attempt,
            engine: agent
                .map(|a| a.engine.clone())
                .or_else(|| choice.map(|c| c.engine.clone()))
                .unwrap_or_default(),
            model: agent
                .and_then(|a| a.model.clone())
                .or_else(|| choice.and_then(|c| c.model.clone())),
            passed: outcome.is_success(),
            warnings,
            lines: evidence.lines_added + evidence.lines_removed,
            files: evidence.files.len() as u32,
            branch: self
                .workspaces
                .active()
                .then(|| self.workspaces.candidate_branch(&self.graph, task, k)),
            outcome: match outcome.is_success() {
                true => "succeeded".to_owned(),
                false => outcome.to_string(),
            },
        };
        Some(Ended {
            candidate,
            outcome,
            output: HeldOutput {
                text: record.output.unwrap_or_default(),
                json: record
                    .output_json
                    .as_deref()
                    .and_then(|j| serde_json::from_str(j).ok()),
                files_changed: Vec::new(),
            },
            stderr_tail: record.stderr_tail.unwrap_or_default(),
            head: head.flatten(),
            changed: Some(evidence.paths().map(str::to_owned).collect()),
            review_warnings: warnings,
        })
    }

    /// All of the scheduler's attempt `launch` of `task` ended: the winner's work becomes
    /// the task's, and its end the attempt's.
    fn judge(&mut self, task: u32, launch: u32, ended: Vec<Ended>, turn: &mut Turn) {
        let Some(Verdict {
            candidates,
            winner,
            why,
            chosen,
        }) = decide(ended)
        else {
            return;
        };
        self.ledger.push(EventKind::Picked {
            task: self.graph.task(task).id.clone(),
            candidates,
            winner,
            why,
        });
        let head = winner.and_then(|w| {
            let graph = std::sync::Arc::clone(&self.graph);
            self.workspaces.pick(&graph, task, w)
        });
        if let Some(changed) = chosen.changed {
            self.workspaces.changed(task, changed);
        }
        self.warnings |= chosen.review_warnings;
        if let Some(head) = head.or(chosen.head).filter(|_| winner.is_some()) {
            self.workspaces.succeeded(task, head, false);
        }
        let ending = super::ending::Ending {
            outcome: chosen.outcome,
            output: chosen.output,
            stderr_tail: chosen.stderr_tail,
        };
        self.concluded(task, launch, ending, turn);
    }
}
