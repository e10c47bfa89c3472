//! The attempt unit: one attempt of one task, from its first process to its end, as one state
//! machine whose phases are [`Phase`]'s variants.
//!
//! ```text
//!        setup ─┐ (a new worktree's `setup`, when there is one)
//!               v
//! start ──> run ──> judge ──> commit ──> verify ──> done
//!            ^                             │ a check failed, fix rounds left
//!            └──────────── fix <───────────┘
//! ```
//!
//! A unit owns everything about its attempt: the spec of its process, the watcher of an
//! agent's stream, how its fix rounds are started, the worktree it commits to. It takes these
//! as values (handles to what the run shares — the meter, the redactor, the `out/` watch — are
//! values too), never references into the dispatcher: the dispatcher launches units and
//! applies the [`AttemptDone`] each returns, and a remote worker can run the same unit.
//! What must be recorded before the attempt ends (a failed check that sends the task into a
//! fix round) is sent on the progress channel as it happens.

mod assemble;
mod checks;
mod panic;
mod review;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_exec::{Attempt, AttemptReport, AttemptSpec, LineWatcher, StopLevel};
use baton_model::{
    AgentUsage, CheckResult, Containment, Event, EventKind, FailureClass, Outcome, TaskId,
};
use baton_redact::Redactor;
use tokio::sync::{mpsc, watch};

pub use assemble::{Assembly, assemble};
use baton_layout::{AttemptLog, RunDirs};
pub use checks::run_checks;
use panic::CatchPanic;
pub use review::{Acceptance, REVIEW_SCHEMA, REVIEW_SCHEMA_STRICT};

use crate::agent::{AgentWatch, judge};
use crate::budget::Meter;
use crate::launch::{Continue, HeldOutput, Recipe};
use crate::out_dir::OutDir;
use crate::workspace::{MakeTree, TreeWork};

/// What every unit of a run shares: handles, cheap to clone.
#[derive(Clone)]
pub struct Shared {
    pub run: baton_model::RunId,
    pub dirs: RunDirs,
    /// Where `$BATON_OUTPUT` files appear (watched).
    pub out_dir: Arc<Mutex<OutDir>>,
    pub redactor: Redactor,
    /// What agents spend, against the run's budget.
    pub meter: Meter,
    /// Stops every running process of the run.
    pub stop: watch::Receiver<StopLevel>,
    /// Events a unit records before it ends.
    pub progress: mpsc::UnboundedSender<Event>,
}

/// One attempt of one task, ready to start: what it keeps for its whole life, and the spec
/// and watcher of its first process.
pub struct AttemptUnit {
    unit: Unit,
    spec: AttemptSpec,
    watcher: Option<Box<dyn LineWatcher>>,
    /// The task's new worktree, made first.
    making: Option<MakeTree>,
}

/// How an attempt ended, everything the dispatcher records and applies. A worker sends it to
/// the run's coordinator as JSON (`baton_runner`'s queue).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct AttemptDone {
    pub task: u32,
    pub attempt: u32,
    pub outcome: Outcome,
    /// All its rounds together.
    pub duration: Duration,
    pub containment: Option<Containment>,
    /// Bytes its rounds wrote to log files.
    pub log_bytes: u64,
    /// What is handed to dependents.
    pub output: HeldOutput,
    /// All of stdout's size (for an agent: its final message's).
    pub output_bytes: u64,
    /// stderr's tail, with baton's own notes about the attempt after it.
    pub stderr_tail: String,
    /// What an agent did and spent, all rounds together.
    pub agent: Option<Box<AgentUsage>>,
    /// The last commit on its branch (`workspace-committed`), if it has a worktree.
    pub committed: Option<baton_model::WorkspaceCommit>,
    /// The paths its branch changed, when they could be read.
    pub changed: Option<Vec<String>>,
    /// It changed files outside its scope (under `scope_policy = "warn"`).
    pub scope_warning: bool,
    /// Its last checks, when they ran.
    pub checks: Option<Vec<CheckResult>>,
    /// The new worktree's `setup` ran to success.
    pub set_up: bool,
    /// What became of its worktree.
    #[serde(default)]
    pub tree: TreeEnd,
    /// The session the task's next attempt continues: this one was cut short by the
    /// machinery after the agent got somewhere.
    pub session: Option<Continue>,
    /// Its reviewer accepted its work with reservations: the run succeeds with warnings.
    pub review_warnings: bool,
    /// The worker that ran it stopped renewing its lease on it (its coordinator's to say:
    /// never on the wire from a worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_by: Option<String>,
}

impl AttemptDone {
    /// An attempt that never ran: its worktree or its command line could not be made.
    pub fn never_started(task: u32, attempt: u32, outcome: Outcome) -> Self {
        Self {
            task,
            attempt,
            outcome,
            duration: Duration::ZERO,
            containment: None,
            log_bytes: 0,
            output: HeldOutput::default(),
            output_bytes: 0,
            stderr_tail: String::new(),
            agent: None,
            committed: None,
            changed: None,
            scope_warning: false,
            checks: None,
            set_up: false,
            tree: TreeEnd::Kept,
            session: None,
            review_warnings: false,
            lost_by: None,
        }
    }
}

/// What became of an attempt's worktree: the last step of its lifecycle (made or reused →
/// set up → committed → this), told back by the unit and applied by one routine,
/// [`crate::workspace::Workspaces::attempt_ended`], on the coordinator and on a worker alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "end", rename_all = "kebab-case")]
pub enum TreeEnd {
    /// It stays as it is, for the task's next attempt to go on from (or there was none).
    #[default]
    Kept,
    /// Its new worktree could not be made: the task's next attempt starts again from what
    /// is there.
    Unmade,
    /// The attempt succeeded: its branch is at `head`, what its dependents start from, and
    /// its worktree went to the pool (`pooled`) or is left for the run to pool.
    Succeeded { head: String, pooled: bool },
}

impl TreeEnd {
    /// Where the task's branch is, when it succeeded.
    pub fn head(&self) -> Option<&str> {
        match self {
            Self::Succeeded { head, .. } => Some(head),
            Self::Kept | Self::Unmade => None,
        }
    }
}

/// A round of the attempt — its first process, or a fix round — as far as it has come.
struct Round {
    report: AttemptReport,
    output: HeldOutput,
    agent: Option<Box<AgentUsage>>,
    stderr_tail: String,
    committed: Option<baton_model::WorkspaceCommit>,
    head: Option<String>,
}

/// Where a unit is.
#[expect(
    clippy::large_enum_variant,
    reason = "a phase lives in the unit's future, itself on the heap; boxing the running \
              child would cost an allocation per attempt to save a copy or two"
)]
enum Phase {
    /// The task's new worktree is made first (on a blocking thread: see
    /// `crate::workspace::MakeTree`); then its `setup`, or its process.
    Make {
        making: MakeTree,
        spec: AttemptSpec,
        watcher: Option<Box<dyn LineWatcher>>,
    },
    /// A new worktree's `setup` runs first; then the task's process is started.
    Setup {
        spec: AttemptSpec,
        watcher: Option<Box<dyn LineWatcher>>,
    },
    /// The task's process (or a fix round's) runs.
    Run(Attempt),
    /// It ended: what it printed is read and, for an agent, judged.
    Judge {
        report: AttemptReport,
        watcher: Option<Box<dyn LineWatcher>>,
    },
    /// What it changed is committed on the task's branch.
    Commit(Round),
    /// The task's checks run on its work.
    Verify(Round),
    /// A check failed (or a planner's answer would not do) and a fix round is left: the task
    /// is told `message` and goes on.
    Fix {
        round: Round,
        message: String,
    },
    Done(AttemptDone),
}

/// A started unit: the pid of its process when it started one at once (recorded with the
/// attempt's start: the process group to end if the driver dies), and the rest of its life.
pub struct Started {
    pub pid: Option<u32>,
    pub rest: Running,
}

/// A unit running, to be driven to its end by [`Running::finish`].
pub struct Running {
    unit: Unit,
    phase: Phase,
}

/// What a unit keeps for its whole life.
struct Unit {
    task: u32,
    attempt: u32,
    id: TaskId,
    agent: bool,
    /// How its checks and fix rounds start, when it has checks.
    recipe: Option<Recipe>,
    /// The new worktree's `setup` commands, run before the task's process.
    setup: Vec<String>,
    /// The task's checks, and how many times a failed one goes back to the task.
    verify: Vec<String>,
    fix_attempts: u32,
    /// The worktree whose changes are committed after every round, if the task has one.
    tree: Option<TreeWork>,
    /// A planner's: the graph as it was at its launch, to check its answer against, and (asked
    /// again) the tasks its answer replaces.
    plan: Option<(Arc<baton_graph::Graph>, Vec<u32>)>,
    /// A task with `acceptance` criteria: what its reviewer is told.
    acceptance: Option<Acceptance>,
    /// A confined attempt's `$BATON_OUTPUT`, in a directory of its own.
    own_output: Option<std::path::PathBuf>,
    shared: Shared,
}

impl AttemptUnit {
    /// Starts the unit: its process is spawned now, unless a `setup` must run first.
    pub fn start(self) -> Started {
        let AttemptUnit {
            unit,
            spec,
            watcher,
            making,
        } = self;
        if let Some(making) = making {
            return Started {
                pid: None,
                rest: Running {
                    unit,
                    phase: Phase::Make {
                        making,
                        spec,
                        watcher,
                    },
                },
            };
        }
        if !unit.setup.is_empty() {
            return Started {
                pid: None,
                rest: Running {
                    unit,
                    phase: Phase::Setup { spec, watcher },
                },
            };
        }
        let child = Attempt::spawn_watched(spec, watcher);
        Started {
            pid: child.pid(),
            rest: Running {
                unit,
                phase: Phase::Run(child),
            },
        }
    }

    /// Whether a `setup` runs before its process.
    #[cfg(test)]
    fn sets_up(&self) -> bool {
        !self.unit.setup.is_empty()
    }

    /// Whether it commits to a worktree.
    #[cfg(test)]
    fn has_worktree(&self) -> bool {
        self.unit.tree.is_some()
    }
}

impl Running {
    /// [`Running::finish`], with a panic in baton's code (a bug) ending the attempt as the
    /// machinery's failure instead of losing track of it.
    pub async fn finish_caught(self, id: TaskId) -> AttemptDone {
        let (task, attempt) = (self.unit.task, self.unit.attempt);
        CatchPanic::new(self.finish())
            .await
            .unwrap_or_else(|panic| {
                let error = format!("baton's attempt of `{id}` failed: {panic}");
                AttemptDone::never_started(task, attempt, Outcome::SpawnFailed { error })
            })
    }

    /// Drives the unit through its phases to its end.
    pub async fn finish(self) -> AttemptDone {
        let Running {
            mut unit,
            mut phase,
        } = self;
        let mut progress = Progress::default();
        loop {
            phase = match phase {
                Phase::Done(mut done) => {
                    // Its work is on its branch: its worktree goes to the pool, from here
                    // rather than the dispatcher's thread (a checkout, a clean, a move).
                    if let TreeEnd::Succeeded { pooled, .. } = &mut done.tree
                        && let Some(tree) = unit.tree.clone()
                    {
                        *pooled = tokio::task::spawn_blocking(move || tree.hand_on())
                            .await
                            .unwrap_or(false);
                    }
                    return done;
                }
                phase => unit.step(phase, &mut progress).await,
            };
        }
    }
}

/// What a unit carries from phase to phase.
#[derive(Default)]
struct Progress {
    /// Fix rounds used.
    rounds: u32,
    /// The rounds before the one running: its duration and spend count in the attempt's.
    earlier: Option<(Duration, Option<Box<AgentUsage>>)>,
    log_bytes: u64,
    set_up: bool,
    session: Option<Continue>,
    changed: Option<Vec<String>>,
    scope_warning: bool,
    review_warnings: bool,
}

impl Unit {
    async fn step(&mut self, phase: Phase, progress: &mut Progress) -> Phase {
        match phase {
            Phase::Make {
                making,
                spec,
                watcher,
            } => self.make_tree(making, spec, watcher).await,
            Phase::Setup { spec, watcher } => self.set_up(spec, watcher, progress).await,
            Phase::Run(child) => {
                let (report, watcher) = child.wait_watched(self.shared.stop.clone()).await;
                if stopped_by_baton(&report) {
                    self.end_escapees().await;
                } else if baton_exec::is_subreaper()
                    && report.containment == Some(baton_model::Containment::ProcessGroup)
                {
                    // It simply exited, held by its process group only: what it left running
                    // that left the group was reparented to baton, and ends now.
                    self.end_adopted().await;
                }
                Phase::Judge { report, watcher }
            }
            Phase::Judge { report, watcher } => {
                Phase::Commit(self.judge(report, watcher, progress))
            }
            Phase::Commit(round) => Phase::Verify(self.commit(round, progress).await),
            Phase::Verify(round) => self.verify(round, progress).await,
            Phase::Fix { round, message } => self.fix(round, message, progress),
            Phase::Done(done) => Phase::Done(done),
        }
    }

    async fn make_tree(
        &mut self,
        making: MakeTree,
        spec: AttemptSpec,
        watcher: Option<Box<dyn LineWatcher>>,
    ) -> Phase {
        let made = tokio::task::spawn_blocking(move || making.make())
            .await
            .unwrap_or_else(|panic| {
                Err(Outcome::SpawnFailed {
                    error: format!("baton failed making the task's worktree: {panic}"),
                })
            });
        match made {
            Ok(start) => {
                if let Some(tree) = &mut self.tree {
                    tree.started_at(start);
                }
                if self.stopping() {
                    // Stopped while the worktree was made (a checkout can take seconds): its
                    // process is not started only to be ended.
                    Phase::Judge {
                        report: not_started(Outcome::Cancelled),
                        watcher: None,
                    }
                } else if self.setup.is_empty() {
                    Phase::Run(Attempt::spawn_watched(spec, watcher))
                } else {
                    Phase::Setup { spec, watcher }
                }
            }
            Err(outcome) => {
                // File names are a task's output too: a secret can be one.
                let outcome = match outcome {
                    Outcome::MergeConflict { incoming, files } => Outcome::MergeConflict {
                        incoming,
                        files: files.iter().map(|f| self.redact(f)).collect(),
                    },
                    Outcome::SpawnFailed { error } => Outcome::SpawnFailed {
                        error: self.redact(&error),
                    },
                    outcome => outcome,
                };
                let mut done = AttemptDone::never_started(self.task, self.attempt, outcome);
                done.tree = TreeEnd::Unmade;
                Phase::Done(done)
            }
        }
    }

    async fn set_up(
        &mut self,
        spec: AttemptSpec,
        watcher: Option<Box<dyn LineWatcher>>,
        progress: &mut Progress,
    ) -> Phase {
        let dirs = &self.shared.dirs;
        let checks = run_checks(
            &self.setup,
            &spec,
            |n| dirs.log(&self.id, self.attempt, AttemptLog::Setup(n as u32)),
            &self.shared.stop,
        )
        .await;
        if let Some(failed) = checks.iter().find(|c| !c.passed()) {
            // The machinery's failure, retried: and a new try of the setup with it.
            let error = format!(
                "setup `{}` failed ({}): {}",
                failed.command,
                failed.outcome,
                failed.output.trim()
            );
            // Judged and committed like an attempt that ran: what the setup changed is kept.
            let mut report = not_started(Outcome::SpawnFailed { error });
            report.duration = Duration::from_millis(checks.iter().map(|c| c.duration_ms).sum());
            return Phase::Judge {
                report,
                watcher: None,
            };
        }
        progress.set_up = true;
        Phase::Run(Attempt::spawn_watched(spec, watcher))
    }

    /// Reads what the round produced and, for an agent, judges it by what the agent said as
    /// well as how it exited.
    fn judge(
        &mut self,
        mut report: AttemptReport,
        watcher: Option<Box<dyn LineWatcher>>,
        progress: &mut Progress,
    ) -> Round {
        // Error texts can quote what a task printed or was given: they are redacted like its
        // output before they are recorded.
        if let Outcome::SpawnFailed { error } = &mut report.outcome {
            *error = self.redact(error);
        }
        progress.log_bytes += report.log_bytes;
        let (mut output, note) = crate::launch::collect_output(
            &self.shared.out_dir,
            &self.shared.dirs,
            &self.shared.redactor,
            (&self.id, self.attempt, self.own_output.as_deref()),
            &report,
        );
        let mut agent = None;
        if self.agent {
            // The agent's stream is the log; its final message is the task's output.
            let judged = self.judged(&report, watcher);
            // An attempt the machinery cut short leaves a session the next attempt continues.
            // Only if the agent got somewhere: a session whose first request failed holds
            // nothing worth continuing (and some CLIs keep no such session at all).
            progress.session = continued_session(&judged.outcome, &judged.usage);
            self.shared
                .meter
                .finish((self.task, self.attempt), &judged.usage);
            report.outcome = judged.outcome;
            output.text = judged.output;
            agent = Some(Box::new(judged.usage));
        }
        // Like `$(command)` in a shell: trailing newlines are not part of the value.
        output
            .text
            .truncate(output.text.trim_end_matches(['\n', '\r']).len());
        let mut stderr_tail = report.stderr.text.clone();
        let log_error = report
            .log_error
            .clone()
            .map(|e| format!("baton: log file: {e}"));
        for extra in [note, log_error].into_iter().flatten() {
            stderr_tail.push('\n');
            stderr_tail.push_str(&self.redact(&extra));
        }
        Round {
            report,
            output,
            agent,
            stderr_tail,
            committed: None,
            head: None,
        }
    }

    /// An agent's round, judged by how its process ended and what its stream said (redacted
    /// again once decoded); its spend is the meter's.
    fn judged(
        &self,
        report: &AttemptReport,
        watcher: Option<Box<dyn LineWatcher>>,
    ) -> crate::agent::Judged {
        let watch = watcher.and_then(|w| w.into_any().downcast::<AgentWatch>().ok());
        let (parsed, exceeded, plain_text) = match watch {
            Some(watch) => {
                let plain = watch.parser.plain_text();
                let exceeded = watch.exceeded.clone();
                let mut parsed = watch.finish();
                // The parser read the (redacted) lines as JSON: a secret written with escapes
                // (`\u0041`, `\/`) is whole again in the strings it decoded.
                let redactor = &self.shared.redactor;
                let texts = parsed.result.iter_mut().chain(&mut parsed.errors);
                let texts = texts.chain(&mut parsed.permission_denials);
                let texts = texts.chain(parsed.first_malformed.iter_mut());
                let texts = texts.chain(parsed.subtype.iter_mut());
                let texts = texts.chain(parsed.model.iter_mut());
                for text in texts.chain(parsed.session_id.iter_mut()) {
                    if let std::borrow::Cow::Owned(redacted) = redactor.redact_str(text) {
                        *text = redacted;
                    }
                }
                (parsed, exceeded, plain)
            }
            None => (Default::default(), None, false),
        };
        judge(report, parsed, exceeded, plain_text)
    }

    /// Commits what the round changed on the task's branch, with its evidence.
    async fn commit(&mut self, mut round: Round, progress: &mut Progress) -> Round {
        let Some(tree) = &self.tree else {
            return round;
        };
        // On a thread of its own: `git add --all` walks the whole worktree (a second or more
        // on a large repository), and every other attempt's output, timers and the live view
        // share this thread.
        let (tree, attempt, redactor) = (tree.clone(), self.attempt, self.shared.redactor.clone());
        let outcome = round.report.outcome.clone();
        let committed =
            tokio::task::spawn_blocking(move || tree.commit(attempt, &outcome, &redactor))
                .await
                .unwrap_or_else(|panic| {
                    Err(format!("the commit of the task's work failed: {panic}"))
                });
        match committed {
            Ok(committed) => {
                progress.scope_warning |= !committed.commit.scope_violations.is_empty();
                match committed.violates {
                    Some(files) if round.report.outcome.is_success() => {
                        round.report.outcome = Outcome::OutOfScope { files };
                    }
                    _ => round.head = Some(committed.head),
                }
                progress.changed = Some(committed.files_changed.clone());
                round.output.files_changed = committed.files_changed;
                round.committed = Some(committed.commit);
            }
            Err(error) => {
                // The work is not on the branch: dependents would not see it.
                let error = self.redact(&error);
                if round.report.outcome.is_success() {
                    round.report.outcome = Outcome::SpawnFailed { error };
                } else {
                    round.stderr_tail.push_str(&format!("\nbaton: {error}"));
                }
            }
        }
        round
    }

    /// Runs the task's checks on a round that succeeded; a failure goes back to the task
    /// while it has fix rounds left.
    async fn verify(&mut self, mut round: Round, progress: &mut Progress) -> Phase {
        // The attempt is the whole of its rounds.
        if let Some((duration, agent)) = progress.earlier.take() {
            round.report.duration += duration;
            round.agent = match (agent, round.agent) {
                (Some(before), Some(mut now)) => {
                    now.add_earlier(&before);
                    Some(now)
                }
                (before, now) => now.or(before),
            };
        }
        let checkable = round.report.outcome.is_success() && !self.stopping();
        if checkable && let Some((graph, dropped)) = &self.plan {
            let answer = match crate::planner::cut_answer(&round.report.stdout, &round.output.text)
            {
                Some(rejected) => Err(rejected),
                None => crate::planner::check_answer(graph, self.task, &round.output.text, dropped),
            };
            match answer {
                // Its dependents are handed the plan itself, not the words around it.
                Ok(plan) => round.output.text = plan,
                Err(rejected) => {
                    if progress.rounds < self.fix_attempts && self.recipe.is_some() {
                        let message = crate::planner::fix_message(
                            &rejected,
                            progress.rounds + 1,
                            self.fix_attempts,
                        );
                        return Phase::Fix { round, message };
                    }
                    round.report.outcome = Outcome::InvalidPlan {
                        problems: rejected.problems,
                    };
                    round.output.text = rejected.errors;
                    return Phase::Done(self.done(round, None, progress));
                }
            }
        }
        let Some(recipe) = self
            .recipe
            .as_ref()
            .filter(|_| checkable && !self.verify.is_empty())
        else {
            if checkable && self.acceptance.is_some() {
                return self.review(round, None, progress).await;
            }
            return Phase::Done(self.done(round, None, progress));
        };
        let dirs = &self.shared.dirs;
        let checks = run_checks(
            &self.verify,
            recipe.check_spec(),
            |n| dirs.log(&self.id, self.attempt, AttemptLog::Check(n as u32)),
            &self.shared.stop,
        )
        .await;
        let failed = checks.iter().find(|c| !c.passed()).cloned();
        match failed {
            Some(failed)
                if failed.outcome != Outcome::Cancelled
                    && progress.rounds < self.fix_attempts
                    && !self.stopping() =>
            {
                // Recorded now: the round it starts may take long.
                let _ = self
                    .shared
                    .progress
                    .send(crate::stamp::event(EventKind::Checked {
                        task: Some(self.id.clone()),
                        attempt: Some(self.attempt),
                        checks,
                        blamed: None,
                    }));
                let message = checks::fix_message(&failed, progress.rounds + 1, self.fix_attempts);
                Phase::Fix { round, message }
            }
            None if self.acceptance.is_some() && !self.stopping() => {
                self.review(round, Some(checks), progress).await
            }
            _ => Phase::Done(self.done(round, Some(checks), progress)),
        }
    }

    /// Starts a fix round: the task is told which check failed and what it printed, in the
    /// same agent session where the engine can continue one.
    fn fix(&mut self, round: Round, message: String, progress: &mut Progress) -> Phase {
        progress.rounds += 1;
        let number = progress.rounds;
        let fix = Continue {
            session: round.agent.as_ref().and_then(|a| a.session_id.clone()),
            engine: round.agent.as_ref().map(|a| a.engine.clone()),
            message,
            fix: Some(number),
        };
        let log = self
            .shared
            .dirs
            .log(&self.id, self.attempt, AttemptLog::Fix(number));
        let recipe = self
            .recipe
            .as_ref()
            .expect("a unit with checks has a recipe");
        match recipe.fix_round(&fix, log) {
            Ok((spec, watcher)) => {
                progress.earlier = Some((round.report.duration, round.agent));
                Phase::Run(Attempt::spawn_watched(spec, watcher))
            }
            Err(error) => {
                let text = self.redact(&error.to_string());
                let mut round = round;
                round.report.outcome = error.outcome(text);
                Phase::Done(self.done(round, None, progress))
            }
        }
    }

    /// The attempt's end: its last checks' verdict is its outcome.
    fn done(
        &self,
        round: Round,
        checks: Option<Vec<CheckResult>>,
        progress: &mut Progress,
    ) -> AttemptDone {
        let Round {
            mut report,
            output,
            agent,
            stderr_tail,
            committed,
            head,
        } = round;
        if let Some(failed) = checks.iter().flatten().find(|c| !c.passed()) {
            report.outcome = match failed.outcome {
                // Stopped with the run: the attempt was cancelled, not found wanting.
                Outcome::Cancelled => Outcome::Cancelled,
                ref outcome => Outcome::VerifyFailed {
                    command: failed.command.clone(),
                    detail: outcome.to_string(),
                },
            };
        }
        AttemptDone {
            task: self.task,
            attempt: self.attempt,
            // An agent's output is its final message, not the stream it printed.
            output_bytes: if self.agent {
                output.text.len() as u64
            } else {
                report.stdout.total_bytes
            },
            tree: match head.filter(|_| report.outcome.is_success()) {
                Some(head) => TreeEnd::Succeeded {
                    head,
                    pooled: false,
                },
                None => TreeEnd::Kept,
            },
            outcome: report.outcome,
            duration: report.duration,
            containment: report.containment,
            log_bytes: progress.log_bytes,
            output,
            stderr_tail,
            agent,
            committed,
            changed: progress.changed.take(),
            scope_warning: progress.scope_warning,
            checks,
            set_up: progress.set_up,
            session: progress.session.take(),
            review_warnings: progress.review_warnings,
            lost_by: None,
        }
    }

    fn redact(&self, text: &str) -> String {
        self.shared.redactor.redact_str(text).into_owned()
    }

    /// Ends what of the attempt left its process group and outlived its kill (a `setsid`
    /// daemon, a double fork), off the runtime's thread: a scan of /proc.
    async fn end_escapees(&self) {
        let (run, id, attempt) = (self.shared.run.clone(), self.id.clone(), self.attempt);
        let _ = tokio::task::spawn_blocking(move || {
            crate::leftovers::kill_attempt(&run, id.as_str(), attempt)
        })
        .await;
    }

    /// Ends what of the attempt was orphaned and reparented to baton (a subreaper where no
    /// cgroup holds attempts): looked for among baton's own children, inline (one small read
    /// and one per child), and, if there is any, killed and reaped off the runtime's thread.
    async fn end_adopted(&self) {
        let adopted = crate::leftovers::adopted(&self.shared.run, self.id.as_str(), self.attempt);
        if adopted.is_empty() {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || adopted.end()).await;
    }

    /// Whether the run is stopping: no new phase starts.
    fn stopping(&self) -> bool {
        *self.shared.stop.borrow() != StopLevel::Run
    }
}

/// Whether baton ended the attempt's process group itself (its time ran out, it was stopped,
/// it leaked or lingered): what escaped the group may live on.
fn stopped_by_baton(report: &AttemptReport) -> bool {
    report.reaped_after_result
        || report.stopped_by_watcher
        || matches!(
            report.outcome,
            Outcome::TimedOut
                | Outcome::Cancelled
                | Outcome::Leaked { .. }
                | Outcome::IdleTimeout { .. }
        )
}

/// The report of a process that never ran.
fn not_started(outcome: Outcome) -> AttemptReport {
    AttemptReport {
        outcome,
        duration: Duration::ZERO,
        stdout: Default::default(),
        stderr: Default::default(),
        log_bytes: 0,
        log_error: None,
        reaped_after_result: false,
        stopped_by_watcher: false,
        containment: None,
    }
}

/// The session the next attempt continues after `outcome`: one the machinery cut short after
/// the agent got somewhere.
pub fn continued_session(outcome: &Outcome, usage: &AgentUsage) -> Option<Continue> {
    let progressed = usage.output_tokens > 0 || usage.tool_calls > 0;
    let session = usage.session_id.as_ref()?;
    (progressed && outcome.failure_class() == Some(FailureClass::Infrastructure)).then(|| {
        Continue {
            session: Some(session.clone()),
            engine: Some(usage.engine.clone()),
            message: cut_short(outcome),
            fix: None,
        }
    })
}

/// What an agent cut short by the machinery is told when its session goes on.
fn cut_short(outcome: &Outcome) -> String {
    format!(
        "Your previous attempt at this task was cut short ({outcome}). Continue where you left \
         off and finish the task."
    )
}
