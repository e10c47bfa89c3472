use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_exec::{Attempt, AttemptReport, AttemptSpec, Captured, LineWatcher, StopLevel};
use baton_graph::{Action as TaskAction, Graph};
use baton_model::{CheckResult, Event, EventKind, Outcome, RunId, RunState, TaskState};
use baton_report::{Reporter, RunInfo, RunResult};
use baton_scheduler::{Action, Cause, Input, Plan, PlanTask, Scheduler, StopCause};
use baton_store::{AttemptOutput, NewRun, SqliteStore, StoreError};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::agent::{AgentWatch, judge};
use crate::budget::Meter;
use crate::config::AgentConfig;
use crate::journal::{Journal, MAX_BATCH_EVENTS};
use crate::launch::{Continue, HeldOutput, Launcher};
use crate::layout::RunDirs;
use crate::reasons::{finish_reason, stop_reason};
use crate::recorder::{Ack, Recorder};
use crate::takeover::{Restored, Takeover, TakeoverError, plan_takeover};
use crate::workspace::{Consolidated, Workspaces};
use crate::{build_result, kill_leftovers, new_run_id};

/// Most events one turn produces. No-op tasks finish inside a turn, so a graph of them would
/// otherwise be one giant batch held in memory; past this, the rest of the inputs are carried
/// into the next turn.
const MAX_TURN_EVENTS: usize = MAX_BATCH_EVENTS;

/// Where and how a run executes.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The repository root (or the directory baton runs in): tasks' `cwd` is relative to it.
    pub root: PathBuf,
    /// `.baton/`: logs and handoff files go under `runs/RUN/`.
    pub state_dir: PathBuf,
    /// Between TERM and KILL when an attempt times out or is cancelled.
    pub kill_grace: Duration,
    /// Seeds the backoff jitter.
    pub seed: u64,
    /// How agent engines are run, and what models cost.
    pub agents: AgentConfig,
}

/// A request from outside the run to stop it (Ctrl-C, SIGTERM, `baton cancel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// Stop launching; TERM running attempts, KILL them after the grace period.
    Cancel,
    /// KILL running attempts now.
    Kill,
}

/// Why a run could not be carried out to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot record the run in the store")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Takeover(#[from] TakeoverError),
    /// The run's git setup is unusable (its `base` does not exist).
    #[error("{0}")]
    Workspace(String),
    #[error("cannot create the run directory {path}")]
    RunDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The store failed mid-run: the run was stopped and running attempts were ended, but what
    /// happened after the failure may be missing from the record.
    #[error("the store failed during run {run}; the run was stopped")]
    StoreFailedMidRun {
        run: RunId,
        #[source]
        source: StoreError,
    },
}

/// Runs `graph` to its end and returns the recorded result.
pub async fn run(
    graph: Graph,
    store: &SqliteStore,
    reporter: &mut dyn Reporter,
    config: RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Result<RunResult, RunError> {
    let started_at_ms = now_ms();
    let run_id = new_run_id(started_at_ms);
    let dirs = RunDirs::new(&config.state_dir, &run_id);
    dirs.create().map_err(|source| RunError::RunDir {
        path: dirs.run.clone(),
        source,
    })?;
    store.create_run(&NewRun {
        id: run_id.clone(),
        name: graph.name().to_owned(),
        graph_path: graph.source().display().to_string(),
        graph_json: graph.to_stored_json(),
        concurrency: graph.run_settings().concurrency,
        started_at_ms,
        tasks: graph
            .tasks()
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i as u32))
            .collect(),
    })?;
    let driver = crate::driver::me();
    store.claim_driver(&run_id, &driver, |_| false)?;
    let opening = vec![Event {
        seq: 0,
        at_ms: started_at_ms,
        kind: EventKind::RunStarted {
            name: graph.name().to_owned(),
            tasks: graph.len() as u32,
            concurrency: graph.run_settings().concurrency,
        },
    }];
    let restored = Restored {
        opening,
        ..Restored::default()
    };
    let run_id = drive_run(
        &graph, store, run_id, dirs, &driver, restored, reporter, &config, stops,
    )
    .await?;
    drop(graph);
    report_result(store, &run_id, reporter)
}

/// Takes over a recorded run (see [`Takeover`]) and drives it to its end.
pub async fn resume(
    run_id: &RunId,
    how: Takeover,
    store: &SqliteStore,
    reporter: &mut dyn Reporter,
    config: RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Result<RunResult, RunError> {
    let record = store
        .run(run_id)?
        .ok_or_else(|| TakeoverError::UnknownRun(run_id.clone()))?;
    let graph_json = store
        .graph_json(run_id)?
        .ok_or_else(|| TakeoverError::UnknownRun(run_id.clone()))?;
    let graph = Graph::from_stored_json(&graph_json).map_err(|source| TakeoverError::Graph {
        run: run_id.clone(),
        source,
    })?;
    let driver = crate::driver::me();
    // Refuses while another live process drives the run, naming it.
    store.claim_driver(run_id, &driver, crate::driver::is_alive)?;
    let effective = match record.status {
        RunState::Running => RunState::Interrupted,
        state => state,
    };
    let restored = match plan_takeover(store, &graph, run_id, effective, &how) {
        Ok(restored) => restored,
        Err(err) => {
            let _ = store.release_driver(run_id, &driver);
            return Err(err);
        }
    };
    kill_leftovers(run_id, &restored.leftover_groups);
    let dirs = RunDirs::new(&config.state_dir, run_id);
    dirs.create().map_err(|source| RunError::RunDir {
        path: dirs.run.clone(),
        source,
    })?;
    let run_id = drive_run(
        &graph,
        store,
        run_id.clone(),
        dirs,
        &driver,
        restored,
        reporter,
        &config,
        stops,
    )
    .await?;
    drop(graph);
    report_result(store, &run_id, reporter)
}

/// The run's result, read back from the store (with the graph already gone: a 100,000-task
/// run would otherwise hold both at its peak), and told to the reporter.
fn report_result(
    store: &SqliteStore,
    run_id: &RunId,
    reporter: &mut dyn Reporter,
) -> Result<RunResult, RunError> {
    let result = build_result(store, run_id)?;
    reporter.run_finished(&result);
    Ok(result)
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site each for run and resume"
)]
async fn drive_run(
    graph: &Graph,
    store: &SqliteStore,
    run_id: RunId,
    dirs: RunDirs,
    driver: &baton_store::Driver,
    restored: Restored,
    reporter: &mut dyn Reporter,
    config: &RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Result<RunId, RunError> {
    reporter.run_started(&RunInfo {
        run_id: run_id.clone(),
        name: graph.name().to_owned(),
        tasks: graph.len() as u32,
        concurrency: graph.run_settings().concurrency,
        earlier: restored.terminal.len() as u32,
    });
    let workspaces = Workspaces::new(graph, &config.root, &config.state_dir, &run_id)
        .map_err(RunError::Workspace)?;
    // Commits are made on a thread of their own, off the path from one task's end to the next
    // one's start.
    let recorder = Recorder::start(store, run_id.clone())?;
    // The run's own handlers (Ctrl-C, SIGTERM, SIGHUP) are installed by now: the children
    // reset them before they exec.
    baton_exec::refresh_handled_signals();
    let mut dispatcher = Dispatcher::new(
        graph,
        store,
        run_id.clone(),
        dirs,
        config,
        workspaces,
        recorder,
    );
    if let Some(budget) = restored.budget.clone() {
        dispatcher.meter.set_limit(budget);
    }
    dispatcher.restore(restored);
    if graph
        .tasks()
        .iter()
        .any(|t| matches!(t.action, TaskAction::Agent { .. }))
    {
        dispatcher.recall_agents(store)?;
    }
    let fatal = dispatcher.drive(reporter, stops).await;
    if dispatcher.final_state.is_some_and(|state| {
        !matches!(
            state,
            RunState::Waiting | RunState::Cancelled | RunState::Interrupted | RunState::NeedsHuman
        )
    }) {
        // Finished for good: the branches hold the work; the worktrees go. A run that can
        // still go on (or that a person must look at) keeps them.
        dispatcher.workspaces.remove_worktrees();
    }
    dispatcher.launcher.dirs().remove_scratch();
    dispatcher
        .launcher
        .dirs()
        .add_log_bytes(dispatcher.log_bytes);
    // Its memory is reused for reading the result back; its recorder's thread is joined.
    drop(dispatcher);
    let _ = store.release_driver(&run_id, driver);
    if let Some(source) = fatal {
        return Err(RunError::StoreFailedMidRun {
            run: run_id,
            source,
        });
    }
    Ok(run_id)
}

/// Most batches handed to the recorder and not yet committed.
const MAX_BATCHES_IN_FLIGHT: u64 = 2;

/// The authoritative state of one run in progress.
struct Dispatcher<'a> {
    graph: &'a Graph,
    store: &'a SqliteStore,
    run_id: RunId,
    sched: Scheduler,
    launcher: Launcher<'a>,
    inflight: JoinSet<Ended>,
    /// Which attempt each supervising future belongs to.
    inflight_ids: HashMap<tokio::task::Id, (u32, u32)>,
    /// Inputs carried into the next turn.
    carried: VecDeque<Input>,
    stop_tx: watch::Sender<StopLevel>,
    /// Retry timers, earliest first.
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Events decided but not yet recorded.
    journal: Journal,
    /// Commits the journal's batches on a thread of its own.
    recorder: Recorder,
    /// Launches decided that wait for a predecessor's end to be recorded.
    deferred: Vec<(u32, u32)>,
    last_outcome: Vec<Option<Outcome>>,
    /// The first store failure. Once set, the run is stopped and nothing more is recorded.
    fatal: Option<StoreError>,
    /// Bytes written to log files by this process's attempts.
    log_bytes: u64,
    /// What agent attempts spend, against the run's budget.
    meter: Meter,
    /// Agent attempts spawned and not ended.
    agents_running: u32,
    /// The soft budget was reached: nothing more starts.
    paused: bool,
    /// Per task, the agent session its next attempt continues.
    sessions: HashMap<u32, Continue>,
    /// The tasks' worktrees and the run's result branch.
    workspaces: Workspaces,
    /// A task changed files outside its scope (under `warn`): the run succeeds with warnings.
    warnings: bool,
    /// The state the run finished in.
    final_state: Option<RunState>,
    /// Per task with `verify`, what its running attempt was started with: its checks run
    /// the same way, in the same place.
    check_specs: HashMap<u32, AttemptSpec>,
    /// Per task, an attempt waiting for its checks.
    checking: HashMap<u32, Pending>,
    /// Per task, the attempt so far while a fix round runs.
    fixing: HashMap<u32, Pending>,
    /// Per task, the fix rounds its current attempt used.
    fix_rounds: Vec<u32>,
    /// Tasks waiting for a person's approval.
    awaiting: std::collections::BTreeSet<u32>,
    /// Tasks whose decision was applied.
    decided: std::collections::BTreeSet<u32>,
    /// The reasons given with rejections, for the tasks' `task-finished`.
    rejections: HashMap<u32, Option<String>>,
    /// Read the decisions at the next chance.
    poll_due: bool,
    /// Per task, whether its running attempt began with its worktree's `setup`.
    setting_up: Vec<bool>,
}

/// An attempt that ended, and the watcher that followed its output.
enum Ended {
    /// An attempt, and the watcher that followed its output.
    Attempt(AttemptReport, Option<Box<dyn LineWatcher>>),
    /// The task's `verify` checks, after an attempt that succeeded.
    Checks(Vec<CheckResult>),
}

/// An attempt judged and waiting for its checks before it is recorded: a success is recorded
/// only once it is verified, so that a crash in between never records an unverified one.
struct Pending {
    report: AttemptReport,
    output: HeldOutput,
    agent: Option<Box<baton_model::AgentUsage>>,
    agent_ended: bool,
    stderr_tail: String,
    committed: Option<EventKind>,
    /// Where the task's branch is, to become its result if the checks pass.
    head: Option<String>,
}

/// What one turn has to work through.
#[derive(Default)]
struct Turn {
    inputs: VecDeque<Input>,
    launches: Vec<(u32, u32)>,
}

impl<'a> Dispatcher<'a> {
    fn new(
        graph: &'a Graph,
        store: &'a SqliteStore,
        run_id: RunId,
        dirs: RunDirs,
        config: &RunConfig,
        workspaces: Workspaces,
        recorder: Recorder,
    ) -> Self {
        let plan = Plan {
            tasks: graph
                .tasks()
                .iter()
                .enumerate()
                .map(|(i, t)| PlanTask {
                    needs: t.needs.clone(),
                    conflicts: graph.conflicts(i as u32).to_vec(),
                    retries: t.retries,
                    backoff: t.backoff,
                    needs_approval: t.approval,
                    retry_infrastructure_only: matches!(
                        &t.action,
                        TaskAction::Agent { settings, .. }
                            if settings.retry_on == baton_graph::RetryOn::Infrastructure
                    ),
                })
                .collect(),
            concurrency: graph.run_settings().concurrency,
            on_failure: graph.run_settings().on_failure,
        };
        let (stop_tx, _) = watch::channel(StopLevel::Run);
        Self {
            graph,
            store,
            sched: Scheduler::new(&plan, config.seed),
            launcher: Launcher::new(graph, run_id.clone(), dirs, config),
            run_id,
            inflight: JoinSet::new(),
            inflight_ids: HashMap::new(),
            carried: VecDeque::new(),
            stop_tx,
            timers: BinaryHeap::new(),
            journal: Journal::new(graph.len()),
            recorder,
            deferred: Vec::new(),
            last_outcome: vec![None; graph.len()],
            fatal: None,
            log_bytes: 0,
            meter: Meter::new(graph.run_settings().budget.clone()),
            agents_running: 0,
            paused: false,
            sessions: HashMap::new(),
            workspaces,
            warnings: false,
            final_state: None,
            check_specs: HashMap::new(),
            checking: HashMap::new(),
            fixing: HashMap::new(),
            fix_rounds: vec![0; graph.len()],
            awaiting: Default::default(),
            decided: Default::default(),
            rejections: HashMap::new(),
            poll_due: false,
            setting_up: vec![false; graph.len()],
        }
    }

    /// Starts from a recorded run's state (or, for a new run, just records its start).
    fn restore(&mut self, restored: Restored) {
        for event in restored.opening {
            self.journal.push(event);
        }
        for (task, state, attempts) in restored.terminal {
            self.sched.restore(task, state, attempts);
            self.launcher.restored(task, state);
            if state == TaskState::Succeeded {
                self.workspaces.restored_success(self.graph, task);
            }
        }
        for (task, output) in restored.outputs {
            self.launcher.hold_output(task, output);
        }
        for (task, used) in restored.again {
            self.sched
                .continue_after(task, used, restored.charge_retries);
        }
    }

    /// The loop. Never bails out early: whatever fails, running attempts are ended and the run
    /// is brought to a finish. Returns the first store failure, if any.
    async fn drive(
        &mut self,
        reporter: &mut dyn Reporter,
        mut stops: mpsc::UnboundedReceiver<StopRequest>,
    ) -> Option<StoreError> {
        let mut turn = Turn::default();
        turn.inputs.push_back(Input::Start);
        let mut stops_open = true;
        loop {
            let finished = self.process(&mut turn);
            if finished {
                debug_assert!(
                    turn.launches.is_empty() && self.deferred.is_empty(),
                    "a run with a launch pending is not finished"
                );
                // What led here is recorded before the run's checks, which may take long.
                self.settle(reporter).await;
                self.finish(&mut stops, stops_open).await;
                self.settle(reporter).await;
                break;
            }
            // A launch waits for a commit only if it needs a task whose end is not recorded:
            // the batch that holds it goes now, and the launch waits until it is recorded.
            let needs_gathered = turn
                .launches
                .iter()
                .any(|&(task, _)| self.journal.any_gathered(&self.graph.task(task).needs));
            if needs_gathered || self.journal.is_due(tokio::time::Instant::now()) {
                self.record();
            }
            // Tasks that finish faster than their ends are committed (no-op tasks) must not
            // pile up batches in memory: the dispatcher waits for the recorder instead.
            self.wait_for_recorder(MAX_BATCHES_IN_FLIGHT, reporter)
                .await;
            self.defer_unrecorded(&mut turn);
            self.carry_out(&mut turn);
            turn = Turn {
                inputs: std::mem::take(&mut self.carried),
                ..Turn::default()
            };
            if self.fatal.is_some() && self.sched.stop_cause().is_none() {
                turn.inputs.push_back(Input::Stop(StopCause::Cancelled));
            }
            if std::mem::take(&mut self.poll_due) {
                self.apply_decisions(&mut turn);
            }
            if !turn.inputs.is_empty() {
                continue;
            }
            // Wait for something to happen, then take everything else that is ready too.
            tokio::select! {
                Some(joined) = self.inflight.join_next_with_id(), if !self.inflight.is_empty() => {
                    self.attempt_done(joined, &mut turn);
                }
                ack = self.recorder.ack(), if self.recorder.in_flight() => {
                    self.acknowledged(ack, reporter);
                }
                _ = sleep_until_first(&self.timers), if !self.timers.is_empty() => {}
                request = stops.recv(), if stops_open => match request {
                    Some(request) => turn.inputs.push_back(stop_input(request)),
                    None => stops_open = false,
                },
                _ = sleep_until_opt(self.journal.deadline()), if !self.journal.is_empty() => {}
                // Someone may have decided about a waiting task from another terminal.
                _ = tokio::time::sleep(APPROVAL_POLL), if !self.awaiting.is_empty() => {
                    self.poll_due = true;
                }
            }
            if std::mem::take(&mut self.poll_due) {
                self.apply_decisions(&mut turn);
            }
            while let Some(joined) = self.inflight.try_join_next_with_id() {
                self.attempt_done(joined, &mut turn);
            }
            while let Some(ack) = self.recorder.try_ack() {
                self.acknowledged(ack, reporter);
            }
            self.release_deferred(&mut turn);
            while let Ok(request) = stops.try_recv() {
                turn.inputs.push_back(stop_input(request));
            }
            let now = Instant::now();
            while let Some(Reverse((at, task))) = self.timers.peek().copied() {
                if at > now {
                    break;
                }
                self.timers.pop();
                turn.inputs.push_back(Input::RetryDue { task });
            }
        }
        self.fatal.take()
    }

    /// Feeds the turn's inputs to the scheduler and turns its actions into events and
    /// launches. No-op tasks finish inside the turn. Returns whether the run is over.
    fn process(&mut self, turn: &mut Turn) -> bool {
        let mut finished = false;
        while let Some(input) = turn.inputs.pop_front() {
            if self.journal.len() >= MAX_TURN_EVENTS {
                turn.inputs.push_front(input);
                self.carried.extend(turn.inputs.drain(..));
                break;
            }
            let stop_before = self.sched.stop_cause();
            let actions = self.sched.handle(input);
            if let Some(cause) = self.sched.stop_cause().filter(|c| Some(*c) != stop_before) {
                let reason = match cause {
                    StopCause::BudgetSpent => format!("budget spent: {}", self.meter.describe()),
                    cause => stop_reason(cause).to_owned(),
                };
                self.journal.push(event(EventKind::RunStopping { reason }));
            }
            for action in actions {
                match action {
                    Action::Launch { task, attempt } => {
                        if matches!(self.graph.task(task).action, TaskAction::Noop) {
                            self.finish_noop(task, attempt, turn);
                        } else {
                            turn.launches.push((task, attempt));
                        }
                    }
                    Action::RetryLater {
                        task,
                        attempt,
                        delay,
                    } => {
                        self.timers.push(Reverse((Instant::now() + delay, task)));
                        self.journal.push(event(EventKind::RetryScheduled {
                            task: self.graph.task(task).id.clone(),
                            attempt,
                            delay_ms: delay.as_millis() as u64,
                        }));
                    }
                    Action::Finished { task, state, cause } => {
                        self.launcher.task_finished(task, state);
                        let reason = finish_reason(
                            self.graph,
                            task,
                            state,
                            cause,
                            self.last_outcome[task as usize].as_ref(),
                            self.sched.attempts(task),
                            |dep| self.sched.state(dep),
                        )
                        .map(|reason| match (cause, self.rejections.remove(&task)) {
                            (Cause::Rejected, Some(Some(why))) => format!("{reason}: {why}"),
                            _ => reason,
                        })
                        .map(|reason| self.launcher.redact(&reason));
                        self.awaiting.remove(&task);
                        self.journal.push(event(EventKind::TaskFinished {
                            task: self.graph.task(task).id.clone(),
                            state,
                            reason,
                        }));
                    }
                    Action::AwaitApproval { task } => {
                        self.journal.push(event(EventKind::TaskWaiting {
                            task: self.graph.task(task).id.clone(),
                        }));
                        self.awaiting.insert(task);
                        // A decision may have come before the task was ready.
                        self.poll_due = true;
                    }
                    Action::StopRunning { immediate, .. } => {
                        let level = if immediate {
                            StopLevel::Immediate
                        } else {
                            StopLevel::Graceful
                        };
                        self.stop_tx.send_replace(level);
                    }
                    Action::RunFinished { state } => {
                        // Consolidated (merged, checked) by the loop, which can wait for the
                        // run's checks without blocking: see `Dispatcher::finish`.
                        self.final_state = Some(state);
                        finished = true;
                    }
                }
            }
        }
        finished
    }

    fn finish_noop(&mut self, task: u32, attempt: u32, turn: &mut Turn) {
        let id = self.graph.task(task).id.clone();
        self.journal.push(event(EventKind::AttemptStarted {
            task: id.clone(),
            attempt,
            pid: None,
        }));
        let outcome = Outcome::Exited { code: 0 };
        self.journal.push(event(EventKind::AttemptFinished {
            task: id,
            attempt,
            outcome: outcome.clone(),
            duration_ms: 0,
            agent: None,
            containment: None,
        }));
        self.journal.mark_end(task);
        self.launcher.hold_output(task, HeldOutput::default());
        turn.inputs.push_back(Input::Finished {
            task,
            attempt,
            outcome,
        });
    }

    /// A finished attempt becomes an event, an output to store, and an input.
    fn attempt_done(
        &mut self,
        joined: Result<(tokio::task::Id, Ended), tokio::task::JoinError>,
        turn: &mut Turn,
    ) {
        let (id, ended) = match joined {
            Ok(done) => done,
            // The supervising future panicked (a bug in baton): record the attempt as an
            // infrastructure failure rather than lose track of it.
            Err(err) => (
                err.id(),
                Ended::Attempt(
                    failed_report(format!("baton's supervisor failed: {err}")),
                    None,
                ),
            ),
        };
        let Some((task, attempt)) = self.inflight_ids.remove(&id) else {
            return;
        };
        let (report, watcher) = match ended {
            Ended::Attempt(report, watcher) => {
                if std::mem::take(&mut self.setting_up[task as usize])
                    && !matches!(&report.outcome, Outcome::SpawnFailed { error } if error.starts_with(SETUP_FAILED))
                {
                    self.workspaces.set_up(task);
                }
                (report, watcher)
            }
            Ended::Checks(checks) => {
                if let Some(pending) = self.checking.remove(&task) {
                    self.checked(task, attempt, pending, checks, turn);
                }
                return;
            }
        };
        let id = self.graph.task(task).id.clone();
        // Error texts can quote what a task printed or was given: they are redacted like its
        // output before they are recorded.
        let mut report = report;
        if let Outcome::SpawnFailed { error } = &mut report.outcome {
            *error = self.launcher.redact(error);
        }
        self.log_bytes += report.log_bytes;
        let (mut output, note) = self.launcher.collect_output(task, attempt, &report);
        let mut agent = None;
        let agent_ended = self.launcher.is_agent(task);
        if agent_ended {
            self.agents_running = self.agents_running.saturating_sub(1);
            // The agent's stream is the log; its final message is the task's output, and
            // whether it succeeded is judged from what it said as well as how it exited.
            let watch = watcher.and_then(|w| w.into_any().downcast::<AgentWatch>().ok());
            let (parsed, exceeded, plain_text) = match watch {
                Some(watch) => {
                    let plain = watch.parser.plain_text();
                    (watch.parser.finish(), watch.exceeded, plain)
                }
                None => (Default::default(), None, false),
            };
            let judged = judge(&report, parsed, exceeded, plain_text);
            // An attempt the machinery cut short leaves a session the next attempt continues.
            // Only if the agent got somewhere: a session whose first request failed holds
            // nothing worth continuing (and some CLIs keep no such session at all).
            let progressed = judged.usage.output_tokens > 0 || judged.usage.tool_calls > 0;
            let session = match (&judged.outcome, &judged.usage.session_id) {
                (outcome, Some(session))
                    if progressed
                        && outcome.failure_class()
                            == Some(baton_model::FailureClass::Infrastructure) =>
                {
                    Some(Continue {
                        session: Some(session.clone()),
                        message: cut_short(outcome),
                        fix: None,
                    })
                }
                _ => None,
            };
            match session {
                Some(session) => self.sessions.insert(task, session),
                None => self.sessions.remove(&task),
            };
            self.meter.finish((task, attempt), &judged.usage);
            report.outcome = judged.outcome;
            output.text = judged.output;
            agent = Some(Box::new(judged.usage));
        }
        // Like `$(command)` in a shell: trailing newlines are not part of the value.
        output
            .text
            .truncate(output.text.trim_end_matches(['\n', '\r']).len());
        let mut stderr_tail = report.stderr.text.clone();
        for extra in [
            note,
            report
                .log_error
                .clone()
                .map(|e| format!("baton: log file: {e}")),
        ]
        .into_iter()
        .flatten()
        {
            stderr_tail.push('\n');
            stderr_tail.push_str(&self.launcher.redact(&extra));
        }
        let mut committed_event = None;
        let mut head = None;
        if let Some(committed) = self
            .workspaces
            .commit(self.graph, task, attempt, &report.outcome)
        {
            match committed {
                Ok(committed) => {
                    if let EventKind::WorkspaceCommitted {
                        scope_violations, ..
                    } = &committed.event
                    {
                        self.warnings |= !scope_violations.is_empty();
                    }
                    match committed.violates {
                        Some(files) if report.outcome.is_success() => {
                            report.outcome = Outcome::OutOfScope { files };
                        }
                        _ => head = Some(committed.head.clone()),
                    }
                    output.files_changed = committed.files_changed;
                    committed_event = Some(committed.event);
                }
                Err(error) => {
                    // The work is not on the branch: dependents would not see it.
                    let error = self.launcher.redact(&error);
                    if report.outcome.is_success() {
                        report.outcome = Outcome::SpawnFailed { error };
                    } else {
                        stderr_tail.push_str(&format!("\nbaton: {error}"));
                    }
                }
            }
        }
        let pending = Pending {
            report,
            output,
            agent,
            agent_ended,
            stderr_tail,
            committed: committed_event,
            head,
        };
        let mut pending = pending;
        if let Some(earlier) = self.fixing.remove(&task) {
            // A fix round ended: the attempt is the whole of it, all rounds together.
            pending.report.duration += earlier.report.duration;
            pending.agent = match (earlier.agent, pending.agent) {
                (Some(before), Some(mut now)) => {
                    now.add_earlier(&before);
                    Some(now)
                }
                (before, now) => now.or(before),
            };
        }
        let checks = &self.graph.task(task).verify;
        let spec = self.check_specs.remove(&task);
        match spec {
            Some(spec)
                if pending.report.outcome.is_success()
                    && !checks.is_empty()
                    && self.sched.stop_cause().is_none() =>
            {
                let logs = self.launcher.dirs().clone();
                let id = id.clone();
                let checks = checks.clone();
                let stop = self.stop_tx.subscribe();
                self.checking.insert(task, pending);
                let handle = self.inflight.spawn(async move {
                    Ended::Checks(
                        run_checks(
                            &checks,
                            spec,
                            |n| logs.step_log(&id, attempt, "check", n),
                            stop,
                        )
                        .await,
                    )
                });
                self.inflight_ids.insert(handle.id(), (task, attempt));
            }
            _ => self.finish_attempt(task, attempt, pending, None, turn),
        }
    }

    /// An attempt's checks ended: a failure goes back to the task to fix while it has fix
    /// rounds left; otherwise the attempt is recorded.
    fn checked(
        &mut self,
        task: u32,
        attempt: u32,
        pending: Pending,
        checks: Vec<CheckResult>,
        turn: &mut Turn,
    ) {
        let rounds = self.graph.task(task).fix_attempts;
        let failed = checks.iter().find(|c| !c.passed()).cloned();
        let Some(failed) = failed.filter(|f| {
            f.outcome != Outcome::Cancelled
                && self.fix_rounds[task as usize] < rounds
                && self.sched.stop_cause().is_none()
        }) else {
            self.finish_attempt(task, attempt, pending, Some(checks), turn);
            return;
        };
        self.fix_rounds[task as usize] += 1;
        let round = self.fix_rounds[task as usize];
        self.journal.push(event(EventKind::Checked {
            task: Some(self.graph.task(task).id.clone()),
            attempt: Some(attempt),
            checks,
            blamed: None,
        }));
        let fix = Continue {
            session: pending.agent.as_ref().and_then(|a| a.session_id.clone()),
            message: fix_message(&failed, round, rounds),
            fix: Some(round),
        };
        self.fixing.insert(task, pending);
        // Counted from here: however the round ends, its end counts it off.
        if self.launcher.is_agent(task) {
            self.agents_running += 1;
        }
        let workdir = match self.workspaces.prepare(self.graph, task) {
            Ok(dir) => dir,
            Err(outcome) => {
                self.end_at_once(task, attempt, outcome);
                return;
            }
        };
        let prepared =
            self.launcher
                .prepare(task, attempt, &self.meter, Some(&fix), workdir.as_deref());
        let (mut spec, watcher) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => {
                self.end_at_once(task, attempt, Outcome::SpawnFailed { error });
                return;
            }
        };
        // The fix round logs beside the attempt, not over it.
        spec.log_path = self
            .launcher
            .dirs()
            .fix_log(&self.graph.task(task).id, attempt, round);
        self.check_specs.insert(task, spec.clone());
        let child = Attempt::spawn_watched(spec, watcher);
        let stop = self.stop_tx.subscribe();
        let handle = self.inflight.spawn(async move {
            let (report, watcher) = child.wait_watched(stop).await;
            Ended::Attempt(report, watcher)
        });
        self.inflight_ids.insert(handle.id(), (task, attempt));
    }

    /// Records an attempt (and its checks) and tells the scheduler how it ended.
    fn finish_attempt(
        &mut self,
        task: u32,
        attempt: u32,
        pending: Pending,
        checks: Option<Vec<CheckResult>>,
        turn: &mut Turn,
    ) {
        let Pending {
            mut report,
            output,
            agent,
            agent_ended,
            stderr_tail,
            committed,
            head,
        } = pending;
        let id = self.graph.task(task).id.clone();
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
        if report.outcome.is_success()
            && let Some(head) = head
        {
            self.workspaces.succeeded(task, head);
        }
        self.journal.push(event(EventKind::AttemptFinished {
            task: id.clone(),
            attempt,
            outcome: report.outcome.clone(),
            duration_ms: report.duration.as_millis() as u64,
            agent,
            containment: report.containment,
        }));
        if let Some(committed) = committed {
            self.journal.push(event(committed));
        }
        if let Some(checks) = checks {
            self.journal.push(event(EventKind::Checked {
                task: Some(id.clone()),
                attempt: Some(attempt),
                checks,
                blamed: None,
            }));
        }
        self.journal.push_output(AttemptOutput {
            task: id,
            attempt,
            output: output.text.clone(),
            // An agent's output is its final message, not the stream it printed.
            output_bytes: if agent_ended {
                output.text.len() as u64
            } else {
                report.stdout.total_bytes
            },
            output_json: output.json.as_ref().map(ToString::to_string),
            stderr_tail,
            log_path: self.launcher.log_path(task, attempt).display().to_string(),
        });
        self.journal.mark_end(task);
        self.launcher.hold_output(task, output);
        self.last_outcome[task as usize] = Some(report.outcome.clone());
        turn.inputs.push_back(Input::Finished {
            task,
            attempt,
            outcome: report.outcome,
        });
        if agent_ended && self.meter.exhausted() {
            turn.inputs.push_back(Input::Stop(StopCause::BudgetSpent));
        } else if agent_ended && self.soft_pause() {
            turn.inputs.push_back(Input::Pause);
        }
    }

    /// Hands everything gathered to the recorder, to commit in one transaction; it is reported
    /// once it is (or, after a store failure, once the recorder sends it back unrecorded).
    fn record(&mut self) {
        if self.journal.is_empty() {
            return;
        }
        let (id, events, outputs) = self.journal.take();
        // After a store failure too: the recorder then sends them back unrecorded, in order
        // behind the batches still in flight, to be reported.
        self.recorder.send(id, events, outputs);
    }

    /// A batch committed (or failed): its ends are recorded, its events reported.
    fn acknowledged(&mut self, ack: Ack, reporter: &mut dyn Reporter) {
        let mut events = ack.events;
        match ack.seqs {
            Ok(seqs) => {
                for (event, seq) in events.iter_mut().zip(seqs) {
                    event.seq = seq;
                }
            }
            Err(err) => {
                // Keep going without a record: the loop stops the run so that nothing more
                // starts unrecorded, lets running attempts end, and the failure is reported at
                // the end.
                self.fatal.get_or_insert(err);
            }
        }
        self.journal.recorded(ack.id);
        reporter.events(&events);
    }

    /// Records everything gathered and waits until all of it is committed.
    async fn settle(&mut self, reporter: &mut dyn Reporter) {
        self.record();
        self.wait_for_recorder(0, reporter).await;
    }

    /// Takes the recorder's acknowledgements until at most `in_flight` batches are left.
    async fn wait_for_recorder(&mut self, in_flight: u64, reporter: &mut dyn Reporter) {
        while self.recorder.batches_in_flight() > in_flight {
            let ack = self.recorder.ack().await;
            self.acknowledged(ack, reporter);
        }
    }

    /// Sets aside the turn's launches that need a predecessor's end not recorded yet.
    fn defer_unrecorded(&mut self, turn: &mut Turn) {
        let (graph, journal) = (self.graph, &self.journal);
        let waits = |task: u32| journal.any_unrecorded(&graph.task(task).needs);
        if self.fatal.is_some() || !turn.launches.iter().any(|&(task, _)| waits(task)) {
            return;
        }
        let deferred = &mut self.deferred;
        turn.launches.retain(|&(task, attempt)| {
            let wait = waits(task);
            if wait {
                deferred.push((task, attempt));
            }
            !wait
        });
    }

    /// Launches whose predecessors' ends are recorded now (or never will be: the run stops,
    /// and `carry_out` reports them cancelled) join the turn.
    fn release_deferred(&mut self, turn: &mut Turn) {
        if self.deferred.is_empty() {
            return;
        }
        let (graph, journal, fatal) = (self.graph, &self.journal, self.fatal.is_some());
        let stopping = self.sched.stop_cause().is_some();
        let carried = &mut self.carried;
        self.deferred.retain(|&(task, attempt)| {
            let ready = fatal || stopping || !journal.any_unrecorded(&graph.task(task).needs);
            if ready && stopping && !fatal {
                // Launched before the stop, never started: not started now either.
                carried.push_back(Input::Declined { task, attempt });
            } else if ready {
                turn.launches.push((task, attempt));
            }
            !ready
        });
    }

    /// Spawns the turn's launches. After a store failure nothing more is spawned: the
    /// launches are reported back as cancelled.
    fn carry_out(&mut self, turn: &mut Turn) {
        for &(task, attempt) in &turn.launches {
            if self.fatal.is_some() {
                self.carried.push_back(Input::Finished {
                    task,
                    attempt,
                    outcome: Outcome::Cancelled,
                });
                continue;
            }
            let is_agent = self.launcher.is_agent(task);
            if is_agent && (self.paused || self.soft_pause()) {
                // Not started: it waits with the run.
                self.carried.push_back(Input::Declined { task, attempt });
                self.carried.push_back(Input::Pause);
                continue;
            }
            if is_agent && !self.meter.can_start() {
                // The run's budget cannot cover another agent beside the running ones: it waits
                // for one of them to end. With none running, the budget is spent.
                self.carried.push_back(Input::Declined { task, attempt });
                if self.agents_running == 0 {
                    self.carried.push_back(Input::Stop(StopCause::BudgetSpent));
                }
                continue;
            }
            if is_agent {
                self.agents_running += 1;
            }
            let workdir = match self.workspaces.prepare(self.graph, task) {
                Ok(dir) => dir,
                Err(outcome) => {
                    // Its worktree could not be made (its dependencies' changes conflict):
                    // recorded like an attempt that could not start.
                    self.journal.push(event(EventKind::AttemptStarted {
                        task: self.graph.task(task).id.clone(),
                        attempt,
                        pid: None,
                    }));
                    self.end_at_once(task, attempt, outcome);
                    continue;
                }
            };
            let resume = self.sessions.remove(&task);
            let (spec, watcher) = match self.launcher.prepare(
                task,
                attempt,
                &self.meter,
                resume.as_ref(),
                workdir.as_deref(),
            ) {
                Ok(prepared) => prepared,
                Err(error) => {
                    // Recorded like a process that could not be spawned.
                    self.journal.push(event(EventKind::AttemptStarted {
                        task: self.graph.task(task).id.clone(),
                        attempt,
                        pid: None,
                    }));
                    self.end_at_once(task, attempt, Outcome::SpawnFailed { error });
                    continue;
                }
            };
            self.fix_rounds[task as usize] = 0;
            if !self.graph.task(task).verify.is_empty() {
                // The checks run where the attempt ran, with what it was given.
                self.check_specs.insert(task, spec.clone());
            }
            let setup = &self.graph.task(task).setup;
            if !setup.is_empty() && self.workspaces.needs_setup(task) {
                // A new worktree is set up first (`npm ci`, …), in the same future, so that
                // the dispatcher never waits for it. The attempt's pid is then not known
                // when its start is recorded.
                self.journal.push(event(EventKind::AttemptStarted {
                    task: self.graph.task(task).id.clone(),
                    attempt,
                    pid: None,
                }));
                self.setting_up[task as usize] = true;
                let commands = setup.clone();
                let logs = self.launcher.dirs().clone();
                let id = self.graph.task(task).id.clone();
                let stop = self.stop_tx.subscribe();
                let handle = self.inflight.spawn(async move {
                    let checks = run_checks(
                        &commands,
                        spec.clone(),
                        |n| logs.step_log(&id, attempt, "setup", n),
                        stop.clone(),
                    )
                    .await;
                    if let Some(failed) = checks.iter().find(|c| !c.passed()) {
                        let mut report = failed_report(format!(
                            "{SETUP_FAILED}`{}` failed ({}): {}",
                            failed.command,
                            failed.outcome,
                            failed.output.trim()
                        ));
                        report.duration =
                            Duration::from_millis(checks.iter().map(|c| c.duration_ms).sum());
                        return Ended::Attempt(report, None);
                    }
                    let (report, watcher) = Attempt::spawn_watched(spec, watcher)
                        .wait_watched(stop)
                        .await;
                    Ended::Attempt(report, watcher)
                });
                self.inflight_ids.insert(handle.id(), (task, attempt));
                continue;
            }
            let child = Attempt::spawn_watched(spec, watcher);
            let pid = child.pid();
            self.journal.push(event(EventKind::AttemptStarted {
                task: self.graph.task(task).id.clone(),
                attempt,
                pid,
            }));
            // Put on the heap once: the attempt's future is several KiB, which spawning would
            // otherwise copy a few times over, for every attempt.
            let waiting = Box::pin(child.wait_watched(self.stop_tx.subscribe()));
            let handle = self.inflight.spawn(async move {
                let (report, watcher) = waiting.await;
                Ended::Attempt(report, watcher)
            });
            self.inflight_ids.insert(handle.id(), (task, attempt));
        }
    }
}

impl Dispatcher<'_> {
    /// Ends an attempt that never ran (its worktree or command line could not be made) as
    /// `outcome`, through the same path as one that did.
    fn end_at_once(&mut self, task: u32, attempt: u32, outcome: Outcome) {
        let mut report = failed_report(String::new());
        report.outcome = outcome;
        let handle = self
            .inflight
            .spawn(std::future::ready(Ended::Attempt(report, None)));
        self.inflight_ids.insert(handle.id(), (task, attempt));
    }

    /// Feeds the scheduler what people decided about the run's waiting tasks since last time.
    fn apply_decisions(&mut self, turn: &mut Turn) {
        let decisions = match self.store.decisions(&self.run_id) {
            Ok(decisions) => decisions,
            // Read again at the next poll.
            Err(_) => return,
        };
        for decision in decisions {
            let Some(task) = self.graph.index_of(decision.task.as_str()) else {
                continue;
            };
            if !self.decided.insert(task) {
                continue;
            }
            self.journal.push(event(EventKind::TaskDecided {
                task: decision.task.clone(),
                approved: decision.approved,
                reason: decision.reason.as_deref().map(|r| self.launcher.redact(r)),
            }));
            if decision.approved {
                turn.inputs.push_back(Input::Approved { task });
            } else {
                self.rejections.insert(task, decision.reason);
                turn.inputs.push_back(Input::Rejected { task });
            }
        }
    }

    /// At the end of a run that will not go on, merges what its tasks committed into the
    /// result branch; the run's state says how that went.
    /// The run is over: its result is consolidated and checked, and its end recorded. Stop
    /// requests that come meanwhile stop the run's checks (the run ends `cancelled`).
    async fn finish(&mut self, stops: &mut mpsc::UnboundedReceiver<StopRequest>, stops_open: bool) {
        let scheduled = self
            .final_state
            .expect("the scheduler said how the run ended");
        let mut stopped = false;
        // The checks are driven by `consolidate`, which holds `self`; stops reach them through
        // a second handle of the same channel.
        let stop_tx = self.stop_tx.clone();
        let state = {
            let mut consolidate = std::pin::pin!(self.consolidate(scheduled));
            let mut stops_open = stops_open;
            loop {
                tokio::select! {
                    state = &mut consolidate => break state,
                    request = stops.recv(), if stops_open => match request {
                        Some(request) => {
                            stopped = true;
                            let level = match request {
                                StopRequest::Cancel => StopLevel::Graceful,
                                StopRequest::Kill => StopLevel::Immediate,
                            };
                            stop_tx.send_replace(level);
                        }
                        None => stops_open = false,
                    },
                }
            }
        };
        let state = if stopped && state != scheduled {
            self.journal.push(event(EventKind::RunStopping {
                reason: "cancelled while the run's checks ran".to_owned(),
            }));
            RunState::Cancelled
        } else {
            state
        };
        self.final_state = Some(state);
        self.journal.push(event(EventKind::RunFinished { state }));
    }

    async fn consolidate(&mut self, state: RunState) -> RunState {
        if !self.workspaces.active() || matches!(state, RunState::Waiting | RunState::Cancelled) {
            return state;
        }
        let mut state = state;
        if state == RunState::Succeeded && self.warnings {
            state = RunState::SucceededWithWarnings;
        }
        let Some(consolidated) = self.workspaces.consolidate(self.graph) else {
            return state;
        };
        let merged = match consolidated {
            Consolidated::Merged {
                branch,
                commit,
                order,
            } => {
                let checks = &self.graph.run_settings().verify;
                if !checks.is_empty() && state.is_success() {
                    let results = self.check_result(&commit, checks, "verify").await;
                    let mut blamed = None;
                    if let Some(failed) = results.iter().find(|c| !c.passed()) {
                        state = RunState::Failed;
                        if !self.stopping() {
                            blamed = self.bisect(&commit, &order, &failed.command).await;
                        }
                    }
                    self.journal.push(event(EventKind::ResultMerged {
                        branch,
                        base: Some(self.workspaces.base().to_owned()),
                        commit: Some(commit),
                        conflict_task: None,
                        conflict_with: Vec::new(),
                        conflict_files: Vec::new(),
                        error: None,
                    }));
                    self.journal.push(event(EventKind::Checked {
                        task: None,
                        attempt: None,
                        checks: results,
                        blamed,
                    }));
                    return state;
                }
                EventKind::ResultMerged {
                    branch,
                    base: Some(self.workspaces.base().to_owned()),
                    commit: Some(commit),
                    conflict_task: None,
                    conflict_with: Vec::new(),
                    conflict_files: Vec::new(),
                    error: None,
                }
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
                EventKind::ResultMerged {
                    branch,
                    base: Some(self.workspaces.base().to_owned()),
                    commit: None,
                    conflict_task: Some(task),
                    conflict_with: with,
                    conflict_files: files,
                    error: None,
                }
            }
            Consolidated::Failed(error) => {
                if state.is_success() {
                    state = RunState::Failed;
                }
                EventKind::ResultMerged {
                    branch: String::new(),
                    base: Some(self.workspaces.base().to_owned()),
                    commit: None,
                    conflict_task: None,
                    conflict_with: Vec::new(),
                    conflict_files: Vec::new(),
                    error: Some(self.launcher.redact(&error)),
                }
            }
        };
        self.journal.push(event(merged));
        state
    }

    /// Which task's merge made `command` fail on the result: the first merge step at which it
    /// fails, found by bisecting the merge order as a merge queue does (each probe checks out
    /// one step and runs the command). `None` when the base fails already, or the history is
    /// not one step per task.
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
        *self.stop_tx.borrow() != StopLevel::Run
    }

    /// Runs the run's `verify` checks on the merged result, in a worktree of its own, one
    /// after another, stopping at the first that fails: supervised like any attempt (process
    /// group, bounded capture, redacted log under `kind`, stopped by Ctrl-C).
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
            baton_exec::Program::Shell(String::new()),
            checkout.path(),
            dirs.run_check_log(kind, 0),
        );
        spec.env = self.launcher.base_env();
        spec.inherit_env = false;
        spec.redactor = Some(self.launcher.redactor().clone());
        spec.kill_grace = self.launcher.kill_grace();
        run_checks(
            commands,
            spec,
            |n| dirs.run_check_log(kind, n),
            self.stop_tx.subscribe(),
        )
        .await
    }

    /// A run taken over has a past: what its agents spent counts against its budget, and a
    /// task whose last attempt the machinery cut short continues that attempt's session.
    fn recall_agents(&mut self, store: &SqliteStore) -> Result<(), StoreError> {
        let mut last: HashMap<u32, baton_store::AttemptRecord> = HashMap::new();
        for attempt in store.run_attempts(&self.run_id)? {
            let Some(task) = self.graph.index_of(attempt.task.as_str()) else {
                continue;
            };
            if let Some(usage) = &attempt.agent {
                self.meter.finish((task, attempt.attempt), usage);
            }
            if last.get(&task).is_none_or(|l| l.attempt < attempt.attempt) {
                last.insert(task, attempt);
            }
        }
        for (task, attempt) in last {
            if let (Some(outcome), Some(session)) = (
                &attempt.outcome,
                attempt.agent.as_ref().and_then(|a| a.session_id.clone()),
            ) && outcome.failure_class() == Some(baton_model::FailureClass::Infrastructure)
                && attempt
                    .agent
                    .as_ref()
                    .is_some_and(|a| a.output_tokens > 0 || a.tool_calls > 0)
            {
                self.sessions.insert(
                    task,
                    Continue {
                        session: Some(session),
                        message: cut_short(outcome),
                        fix: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Once the run's soft budget is reached, nothing more starts, what runs finishes, and the
    /// run ends `waiting` for a person to approve or raise the budget.
    /// Returns whether the run pauses now (the caller feeds [`Input::Pause`]).
    fn soft_pause(&mut self) -> bool {
        if self.paused {
            return false;
        }
        let Some(what) = self.meter.soft_reached() else {
            return false;
        };
        self.paused = true;
        self.journal.push(event(EventKind::RunStopping {
            reason: format!(
                "{what}; the run waits for `baton approve` or `baton resume --raise-budget`"
            ),
        }));
        true
    }
}

/// Runs a task's checks one after another in its workspace, stopping at the first that fails.
/// Each is a supervised process like an attempt (same environment, timeout, redaction), with
/// its own log beside the attempt's.
/// Runs `commands` one after another as `spec` with each command's log at `log(n)` (from 1),
/// stopping at the first that fails.
async fn run_checks(
    commands: &[String],
    spec: AttemptSpec,
    log: impl Fn(usize) -> PathBuf,
    stop: watch::Receiver<StopLevel>,
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        let mut check = spec.clone();
        check.program = baton_exec::Program::Shell(command.clone());
        check.stdin = None;
        check.idle_timeout = None;
        check.log_path = log(i + 1);
        let report = Attempt::spawn(check).wait(stop.clone()).await;
        let mut output = report.stdout.text.clone();
        if !report.stderr.text.is_empty() {
            output.push_str(&report.stderr.text);
        }
        let passed = report.outcome.is_success();
        results.push(CheckResult {
            command: command.clone(),
            outcome: report.outcome,
            duration_ms: report.duration.as_millis() as u64,
            output: tail(&output, CHECK_OUTPUT),
        });
        if !passed {
            break;
        }
    }
    results
}

/// What an agent cut short by the machinery is told when its session goes on.
fn cut_short(outcome: &Outcome) -> String {
    format!(
        "Your previous attempt at this task was cut short ({outcome}). Continue where you left \
         off and finish the task."
    )
}

/// What a task is told in a fix round: the check that failed and what it printed.
fn fix_message(check: &CheckResult, round: u32, of: u32) -> String {
    format!(
        "baton ran the task's checks on your work (fix round {round} of {of}) and this one \
         failed:\n\n$ {}\n{}\n\n{}\n\nFix the problem so that the check passes. Do not \
         change the check.",
        check.command, check.outcome, check.output
    )
}

/// How a failed `setup` starts its attempt's error: the machinery's failure, retried, and a
/// new try of the setup with it.
const SETUP_FAILED: &str = "setup ";

/// How often a run with tasks waiting for approval looks for decisions.
const APPROVAL_POLL: Duration = Duration::from_millis(250);

/// What is kept of a check's output: enough to see why it failed.
const CHECK_OUTPUT: usize = 4096;

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// The report of an attempt that never ran.
fn failed_report(error: String) -> AttemptReport {
    AttemptReport {
        outcome: Outcome::SpawnFailed { error },
        duration: Duration::ZERO,
        stdout: Captured::default(),
        stderr: Captured::default(),
        log_bytes: 0,
        log_error: None,
        reaped_after_result: false,
        stopped_by_watcher: false,
        containment: None,
    }
}

fn stop_input(request: StopRequest) -> Input {
    Input::Stop(match request {
        StopRequest::Cancel => StopCause::Cancelled,
        StopRequest::Kill => StopCause::Killed,
    })
}

async fn sleep_until_first(timers: &BinaryHeap<Reverse<(Instant, u32)>>) {
    if let Some(Reverse((at, _))) = timers.peek() {
        tokio::time::sleep_until((*at).into()).await;
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

fn event(kind: EventKind) -> Event {
    Event {
        seq: 0,
        at_ms: now_ms(),
        kind,
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
