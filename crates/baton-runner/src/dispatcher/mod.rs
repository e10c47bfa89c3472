//! The dispatcher: the authoritative state of one run in progress. It schedules (feeds the
//! scheduler and carries out its actions), launches attempt units, applies what they return,
//! and talks to the recorder and the reporter. Everything about one attempt — its worktree's
//! setup, its process, the agent's verdict, its commit, its checks and fix rounds — is the
//! attempt unit's (`baton_attempt::unit`); the run's end is the consolidation's
//! (`crate::consolidate`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use baton_attempt::RunConfig;
use baton_attempt::budget::Meter;
use baton_attempt::launch::{Continue, HeldOutput, Launcher};
use baton_attempt::unit::{Assembly, AttemptDone, AttemptUnit, Shared, assemble};
use baton_attempt::workspace::Workspaces;
use baton_exec::StopLevel;
use baton_graph::{Action as TaskAction, Graph};
use baton_model::{Event, EventKind, Outcome, RunId, RunState, TaskState};
use baton_report::Reporter;
use baton_scheduler::{Action, Cause, Input, Scheduler, StopCause};
use baton_store::{Store, StoreError};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::approvals::{APPROVAL_POLL, Approvals};
use crate::consolidate::Consolidation;
use crate::drive::StopRequest;
use crate::journal::MAX_BATCH_EVENTS;
use crate::launch_log::LaunchLog;
use crate::ledger::Ledger;
use crate::reasons::{finish_reason, stop_reason};
use crate::recorder::Recorder;
use crate::takeover::Restored;

mod best_of;
mod cancels;
mod candidates;
mod ending;
use ending::Record;
mod queued;
use cancels::CancelWatch;
use plan::plan_of;
pub(crate) use plan::{Ready, scheduler_of};
use queued::next_remote;
mod growth;
mod plan;

/// Most events one turn produces. No-op tasks finish inside a turn, so a graph of them would
/// otherwise be one giant batch held in memory; past this, the rest of the inputs are carried
/// into the next turn.
const MAX_TURN_EVENTS: usize = MAX_BATCH_EVENTS;

/// Most batches handed to the recorder and not yet committed.
const MAX_BATCHES_IN_FLIGHT: u64 = 2;

pub(crate) struct Dispatcher<'a> {
    /// The run's graph as it is now: planners' answers grow it (`Dispatcher::expand`).
    graph: Arc<Graph>,
    store: &'a dyn Store,
    run_id: RunId,
    sched: Scheduler,
    launcher: Launcher,
    /// The running attempt units.
    units: JoinSet<AttemptDone>,
    /// What the units share; its progress sender is how they record events before they end.
    shared: Shared,
    progress: mpsc::UnboundedReceiver<Event>,
    /// Inputs carried into the next turn.
    carried: VecDeque<Input>,
    stop_tx: watch::Sender<StopLevel>,
    /// Retry timers, earliest first.
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// What is decided, on its way into the store.
    ledger: Ledger,
    /// Per task, how its latest attempt ended: what its reason says.
    last_outcome: Vec<Option<Outcome>>,
    /// Per task whose latest attempt failed, the end of what it said: what a planner asked
    /// again is told.
    last_words: HashMap<u32, String>,
    /// Bytes written to log files by this process's attempts.
    log_bytes: u64,
    /// Per task, the agent session its next attempt continues.
    sessions: HashMap<u32, Continue>,
    /// The tasks' worktrees and the run's result branch.
    workspaces: Workspaces,
    /// A task changed files outside its scope (under `warn`): the run succeeds with warnings.
    warnings: bool,
    approvals: Approvals,
    /// Best-of tasks whose candidates are running.
    gathering: HashMap<u32, best_of::Gathering>,
    /// Best-of candidates (recorded attempts, by task) that ended before a takeover in a round
    /// it cut short: the task's next round counts them (see `Restored::carried`).
    carried_candidates: HashMap<u32, Vec<u32>>,
    /// Where attempts run when workers run them (`baton worker`); `None`: here.
    queue: Option<crate::remote::Queue>,
    /// The attempts launched, noted before they start (for a takeover after a crash).
    launch_log: LaunchLog,
    /// The agent task whose reservation did not fit when the budget stopped the run: what
    /// the stop's reason names.
    unfit: Option<u32>,
}

/// What one turn has to work through.
#[derive(Default)]
struct Turn {
    inputs: VecDeque<Input>,
    launches: Vec<(u32, u32)>,
}

impl<'a> Dispatcher<'a> {
    pub(crate) fn new(
        graph: Arc<Graph>,
        store: &'a dyn Store,
        held: Ready,
        config: &RunConfig,
        recorder: Recorder,
    ) -> Self {
        let Ready {
            run_id,
            dirs,
            workspaces,
            sched,
        } = held;
        let (stop_tx, stop) = watch::channel(StopLevel::Run);
        let (progress_tx, progress) = mpsc::unbounded_channel();
        let launcher = Launcher::new(Arc::clone(&graph), run_id.clone(), dirs.clone(), config);
        let launch_log = LaunchLog::open(&dirs);
        let shared = Shared {
            run: run_id.clone(),
            dirs,
            out_dir: launcher.out_dir(),
            redactor: launcher.redactor().clone(),
            meter: Meter::new(graph.run_settings().budget.clone()),
            stop,
            progress: progress_tx,
        };
        Self {
            store,
            sched,
            launcher,
            run_id,
            units: JoinSet::new(),
            shared,
            progress,
            carried: VecDeque::new(),
            stop_tx,
            timers: BinaryHeap::new(),
            ledger: Ledger::new(graph.len(), recorder),
            last_outcome: vec![None; graph.len()],
            last_words: HashMap::new(),
            graph,
            log_bytes: 0,
            sessions: HashMap::new(),
            workspaces,
            warnings: false,
            gathering: HashMap::new(),
            carried_candidates: HashMap::new(),
            approvals: Approvals::default(),
            queue: None,
            launch_log,
            unfit: None,
        }
    }

    /// What agents spend, against the run's budget.
    pub(crate) fn meter(&self) -> &Meter {
        &self.shared.meter
    }

    /// Starts from a recorded run's state (or, for a new run, just records its start).
    pub(crate) fn restore(&mut self, restored: Restored) {
        self.warnings |= restored.warnings;
        for event in restored.opening {
            self.ledger.push_event(event);
        }
        for (task, state, attempts) in restored.terminal {
            self.sched.restore(task, state, attempts);
            self.launcher.restored(task);
            if state == TaskState::Succeeded {
                self.workspaces.restored_success(&self.graph, task);
            }
        }
        for (task, output) in restored.outputs {
            self.launcher.hold_output(task, output);
        }
        for (task, attempt) in restored.running {
            self.adopt(task, attempt, restored.charge_retries);
        }
        for (task, attempt) in restored.carried {
            self.carried_candidates
                .entry(task)
                .or_default()
                .push(attempt);
        }
        for (task, used) in restored.again {
            // A best-of task's attempts are its candidates: the scheduler counts launches.
            let used = used.div_ceil(self.graph.task(task).candidate_count());
            self.sched
                .continue_after(task, used, restored.charge_retries);
            // A run taken over goes on with the engine its attempts left each task on; a
            // retry starts each chain again from the task's own engine.
            if restored.recall_engines && self.graph.task(task).has_fallback() {
                let attempts = self.store.attempts(&self.run_id, &self.graph.task(task).id);
                let attempts = attempts.unwrap_or_default();
                let history = attempts
                    .iter()
                    .filter_map(|a| Some((a.attempt, a.outcome.as_ref()?)));
                self.sched.recall_engine(task, history);
            }
        }
    }

    /// A run taken over has a past: what its agents spent counts against its budget, and a
    /// task whose last attempt the machinery cut short continues that attempt's session.
    pub(crate) fn recall_agents(&mut self, store: &dyn Store) -> Result<(), StoreError> {
        self.sessions =
            crate::takeover::recall_agents(store, &self.graph, &self.run_id, &self.shared.meter)?;
        Ok(())
    }

    /// What is left once the run is over: worktrees of a run finished for good (the branches
    /// hold the work; a run that can still go on, or that a person must look at, keeps
    /// them), the scratch files, and the count of log bytes. `fatal`: the store failure that
    /// stopped this process driving the run; `state`: what the run finished as.
    fn clean_up(&self, fatal: Option<&StoreError>, state: RunState) {
        if fatal.is_some() {
            // The run is not over, only this process's part in it: another process drives it
            // now (or will, taking it over), and its worktrees and scratch (the takeover's
            // launch log, the handoffs of attempts that run on this host) are in use.
            self.launcher.dirs().add_log_bytes(self.log_bytes);
            return;
        }
        if !matches!(
            state,
            RunState::Waiting | RunState::Cancelled | RunState::Interrupted | RunState::NeedsHuman
        ) {
            self.workspaces.remove_worktrees();
        }
        self.launcher.dirs().remove_scratch();
        self.launcher.dirs().add_log_bytes(self.log_bytes);
    }

    /// The loop. Never bails out early: whatever fails, running attempts are ended and the run
    /// is brought to a finish, and what it leaves is cleaned up ([`Self::clean_up`]). Returns
    /// the first store failure, if any.
    pub(crate) async fn drive(
        &mut self,
        reporter: &mut dyn Reporter,
        mut stops: mpsc::UnboundedReceiver<StopRequest>,
    ) -> Option<StoreError> {
        let mut turn = Turn::default();
        turn.inputs.push_back(Input::Start);
        let mut cancels = CancelWatch::new(self.store);
        let mut stops_open = true;
        loop {
            let finished = self.process(&mut turn);
            if finished {
                debug_assert!(
                    turn.launches.is_empty() && !self.ledger.any_deferred(),
                    "a run with a launch pending is not finished"
                );
                // What led here is recorded before the run's checks, which may take long.
                self.ledger.settle(reporter).await;
                let state = self.finish(&mut stops, stops_open, &mut cancels).await;
                self.ledger.settle(reporter).await;
                let failure = self.ledger.failure();
                self.clean_up(failure.as_ref(), state);
                return failure;
            }
            // A launch waits for a commit only if it needs a task whose end is not recorded:
            // the batch that holds it goes now, and the launch waits until it is recorded.
            let needs_gathered = turn.launches.iter().any(|&(task, _)| {
                self.ledger
                    .journal()
                    .any_gathered(&self.graph.task(task).needs)
            });
            let needs_gathered = needs_gathered && !crate::recorder::skips_commits();
            if needs_gathered || self.ledger.journal().is_due(tokio::time::Instant::now()) {
                self.ledger.record();
            }
            // Tasks that finish faster than their ends are committed (no-op tasks) must not
            // pile up batches in memory: the dispatcher waits for the recorder instead.
            self.ledger.wait(MAX_BATCHES_IN_FLIGHT, reporter).await;
            self.defer_unrecorded(&mut turn);
            self.carry_out(&mut turn);
            turn = Turn {
                inputs: std::mem::take(&mut self.carried),
                ..Turn::default()
            };
            if self.ledger.failed() && self.sched.stop_cause().is_none() {
                turn.inputs.push_back(Input::Stop(StopCause::Cancelled));
            }
            // What workers run for a run this coordinator can no longer record is not waited
            // for: their ends would never come here.
            if self.ledger.failed()
                && let Some(queue) = self.queue.as_mut()
            {
                for done in queue.abandon() {
                    self.unit_done(Ok(done), &mut turn);
                }
            }
            if self.approvals.take_due() {
                self.apply_decisions(&mut turn);
            }
            if !turn.inputs.is_empty() {
                continue;
            }
            // Wait for something to happen, then take everything else that is ready too.
            let deadline = self.ledger.journal().deadline();
            tokio::select! {
                Some(event) = self.progress.recv() => {
                    self.heard_spend(&event);
                    self.ledger.push_event(event);
                }
                Some(joined) = self.units.join_next(), if !self.units.is_empty() => {
                    self.unit_done(joined, &mut turn);
                }
                Some(done) = next_remote(&mut self.queue) => self.unit_done(Ok(done), &mut turn),
                () = self.ledger.next(reporter) => {}
                _ = sleep_until_first(&self.timers), if !self.timers.is_empty() => {}
                request = stops.recv(), if stops_open => match request {
                    Some(request) => turn.inputs.push_back(stop_input(request)),
                    None => stops_open = false,
                },
                _ = sleep_until_opt(deadline), if deadline.is_some() => {}
                // Someone may have decided about a waiting task from another terminal.
                _ = tokio::time::sleep(APPROVAL_POLL), if self.sched.awaits_approval() => {
                    self.approvals.poll_soon();
                }
                // Or asked, from another machine, to cancel the run (a shared store only).
                () = cancels.requested(self.store, &self.run_id) => {
                    turn.inputs.push_back(stop_input(StopRequest::Cancel));
                }
            }
            if self.approvals.take_due() {
                self.apply_decisions(&mut turn);
            }
            // A unit's events come before its end (`unit_done` takes them first).
            while let Some(joined) = self.units.try_join_next() {
                self.unit_done(joined, &mut turn);
            }
            while let Some(done) = self.queue.as_mut().and_then(|q| q.try_next()) {
                self.unit_done(Ok(done), &mut turn);
            }
            self.ledger.take_acks(reporter);
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
    }

    /// Feeds the turn's inputs to the scheduler and turns its actions into events and
    /// launches. No-op tasks finish inside the turn. Returns whether the run is over.
    fn process(&mut self, turn: &mut Turn) -> bool {
        let mut finished = false;
        while let Some(input) = turn.inputs.pop_front() {
            if self.ledger.journal().len() >= MAX_TURN_EVENTS {
                turn.inputs.push_front(input);
                self.carried.extend(turn.inputs.drain(..));
                break;
            }
            let stop_before = self.sched.stop_cause();
            let actions = self.sched.handle(input);
            if let Some(cause) = self.sched.stop_cause().filter(|c| Some(*c) != stop_before) {
                let recorded = crate::reasons::recorded_cause(cause);
                let reason = match cause {
                    StopCause::BudgetSpent => match self.unfit.take() {
                        Some(task) if !self.shared.meter.exhausted() => format!(
                            "{}: `{}` {}",
                            stop_reason(StopCause::BudgetSpent),
                            self.graph.task(task).id,
                            self.shared
                                .meter
                                .describe_unfit(self.graph.task(task).expected_usd())
                        ),
                        _ => format!(
                            "{}: {}",
                            stop_reason(StopCause::BudgetSpent),
                            self.shared.meter.describe()
                        ),
                    },
                    cause => stop_reason(cause).to_owned(),
                };
                self.ledger.push(EventKind::RunStopping {
                    reason,
                    cause: Some(recorded),
                });
            }
            for action in actions {
                finished |= self.act(action, turn);
            }
        }
        finished
    }

    /// Carries out one of the scheduler's actions. Returns whether the run is over.
    fn act(&mut self, action: Action, turn: &mut Turn) -> bool {
        match action {
            Action::Launch { task, attempt } => {
                if self.graph.task(task).for_each.is_some() {
                    self.fan_out(task, attempt, turn);
                } else if matches!(self.graph.task(task).action, TaskAction::Noop) {
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
                self.ledger.push(EventKind::RetryScheduled {
                    task: self.graph.task(task).id.clone(),
                    attempt,
                    delay_ms: delay.as_millis() as u64,
                });
            }
            Action::Finished { task, state, cause } => self.task_finished(task, state, cause),
            Action::Replan { planner, failed } => {
                let task = self.graph.task(planner).id.clone();
                self.ledger.push(EventKind::Replanning {
                    task: task.clone(),
                    failed: self.graph.task(failed).id.clone(),
                });
                // It runs again: a takeover finds it to do, and the re-plan goes on.
                self.ledger.push(EventKind::TaskReset { task });
            }
            Action::AwaitApproval { task } => {
                self.ledger.push(EventKind::TaskWaiting {
                    task: self.graph.task(task).id.clone(),
                });
                self.approvals.wait();
            }
            // A spent budget stops no running attempt from here: each agent's watcher
            // sees the meter at its next line and stops it there, unless its answer is
            // in (paid for, so kept), and a shell command costs nothing. An attempt on
            // a worker is held to what was left when it was queued, blind to the rest
            // of the run's spending: the stop goes out to the workers.
            Action::StopRunning {
                cause: StopCause::BudgetSpent,
                ..
            } if self.queue.is_none() => {}
            Action::StopRunning { immediate, .. } => {
                let level = if immediate {
                    StopLevel::Immediate
                } else {
                    StopLevel::Graceful
                };
                self.stop_tx.send_replace(level);
            }
            // Consolidated (merged, checked) by the loop, which can wait for the run's
            // checks without blocking: see `Dispatcher::finish`.
            Action::RunFinished { .. } => return true,
        }
        false
    }

    fn task_finished(&mut self, task: u32, state: TaskState, cause: Cause) {
        self.launcher.task_finished(task, state);
        let rejection = self.approvals.finished(task);
        let reason = finish_reason(
            &self.graph,
            task,
            state,
            cause,
            self.last_outcome[task as usize].as_ref(),
            self.sched.attempts(task),
            |dep| self.sched.state(dep),
        )
        .map(|reason| match self.last_outcome[task as usize] {
            Some(Outcome::Exited { code: 127 })
                if state != TaskState::Succeeded
                    && self.workspaces.uses_tree(&self.graph, task) =>
            {
                crate::reasons::not_in_worktree(reason)
            }
            _ => reason,
        })
        .map(|reason| match (cause, rejection) {
            (Cause::Rejected, Some(why)) => format!("{reason}: {why}"),
            _ => reason,
        })
        .map(|reason| self.launcher.redact(&reason));
        self.ledger.push(EventKind::TaskFinished {
            task: self.graph.task(task).id.clone(),
            state,
            reason,
        });
    }

    fn finish_noop(&mut self, task: u32, attempt: u32, turn: &mut Turn) {
        self.started(task, attempt, None);
        let outcome = Outcome::Exited { code: 0 };
        self.record_finished(task, attempt, &outcome, Record::instant());
        self.ledger.mark_end(task);
        self.launcher.hold_output(task, HeldOutput::default());
        turn.inputs.push_back(Input::Finished {
            task,
            attempt,
            outcome,
        });
    }

    /// A unit ended. Units catch their own panics (a bug in baton ends the attempt as the
    /// machinery's failure): an error here is the runtime shutting down, with nothing left to
    /// apply it to.
    fn unit_done(&mut self, joined: Result<AttemptDone, tokio::task::JoinError>, turn: &mut Turn) {
        // What the unit sent before it ended is recorded before its end.
        while let Ok(event) = self.progress.try_recv() {
            self.ledger.push_event(event);
        }
        if let Ok(done) = joined {
            self.apply(done, turn);
        }
    }

    /// Sets aside the turn's launches that need a predecessor's end not recorded yet.
    fn defer_unrecorded(&mut self, turn: &mut Turn) {
        if crate::recorder::skips_commits() {
            return;
        }
        let graph = Arc::clone(&self.graph);
        self.ledger
            .defer(&mut turn.launches, |task| &graph.task(task).needs);
    }

    /// Launches whose predecessors' ends are recorded now (or never will be: the run stops,
    /// and `carry_out` reports them cancelled) join the turn; those decided before a stop are
    /// declined, never started.
    fn release_deferred(&mut self, turn: &mut Turn) {
        let (graph, stopping) = (Arc::clone(&self.graph), self.sched.stop_cause().is_some());
        let declined =
            self.ledger
                .release(&mut turn.launches, |task| &graph.task(task).needs, stopping);
        self.carried.extend(
            declined
                .into_iter()
                .map(|(task, attempt)| Input::Declined { task, attempt }),
        );
    }

    /// Starts the turn's launches. After a store failure nothing more is started: the
    /// launches are reported back as cancelled.
    fn carry_out(&mut self, turn: &mut Turn) {
        let mut go = Vec::with_capacity(turn.launches.len());
        for (task, attempt) in std::mem::take(&mut turn.launches) {
            if self.ledger.failed() {
                self.carried.push_back(Input::Finished {
                    task,
                    attempt,
                    outcome: Outcome::Cancelled,
                });
                continue;
            }
            let is_agent = self.launcher.is_agent(task);
            if is_agent && (self.sched.is_paused() || self.soft_pause()) {
                // Not started: it waits with the run.
                self.carried.push_back(Input::Declined { task, attempt });
                continue;
            }
            let expected = self.graph.task(task).expected_usd();
            if is_agent && !self.shared.meter.can_start(expected) {
                // The run's budget cannot cover another agent beside the running ones: it waits
                // for one of them to end. With none running, the budget is spent.
                self.carried.push_back(Input::Declined { task, attempt });
                if self.shared.meter.running() == 0 {
                    self.unfit = Some(task);
                    self.carried.push_back(Input::Stop(StopCause::BudgetSpent));
                }
                continue;
            }
            if self.graph.task(task).candidate_count() > 1 {
                // A best-of task's candidates are numbered apart, and each reserves its spend
                // as it starts: at once, so that the next launch in this turn counts them.
                if !self.launch_candidates(task, attempt, turn) {
                    self.carried.push_back(Input::Declined { task, attempt });
                }
                continue;
            }
            if is_agent {
                // Reserved from now: the next launch in this very turn counts it.
                self.shared.meter.start((task, attempt), expected);
            }
            go.push((task, attempt, is_agent));
        }
        // Noted before any starts: a driver killed before their starts are committed leaves
        // a takeover what ran. Not attempts queued for workers: the queue holds them (its
        // inserts fenced by the run's lease), and a takeover adopts what is there; noted here
        // too, one whose insert had not committed when the coordinator died was recorded as
        // run and interrupted, and its task ran as its next attempt.
        if self.queue.is_none() {
            let graph = &self.graph;
            self.launch_log.note(
                go.iter()
                    .map(|&(task, attempt, _)| (&graph.task(task).id, attempt)),
            );
        }
        for (task, attempt, is_agent) in go {
            self.launch(task, attempt, is_agent);
        }
        if let Some(queue) = self.queue.as_mut() {
            queue.flush();
        }
    }

    /// Starts attempt `attempt` of `task` as a unit of its own; one that cannot start (its
    /// worktree or command line cannot be made) is recorded as an attempt that ended at once.
    fn launch(&mut self, task: u32, attempt: u32, agent: bool) {
        if self.queue.is_some() {
            return self.queue_attempt(task, attempt, agent);
        }
        let (resume, dropped) = self.continuing(task);
        let sched = &self.sched;
        let assembled = assemble(
            Assembly {
                graph: &self.graph,
                launcher: &mut self.launcher,
                workspaces: &mut self.workspaces,
                shared: &self.shared,
                dropped,
                engine: sched.engine(task),
                candidate: None,
                ended: &|t| ended(sched, t),
            },
            task,
            attempt,
            agent,
            resume.as_ref(),
        );
        let unit = match assembled {
            Ok(unit) => unit,
            Err(outcome) => return self.never_started(task, attempt, outcome),
        };
        self.start_unit(task, attempt, unit);
    }

    /// Starts an assembled unit, records its start and hands it the rest of its life: the
    /// one way a unit starts here (an attempt, or one of a best-of task's candidates).
    pub(super) fn start_unit(&mut self, task: u32, attempt: u32, unit: AttemptUnit) {
        // A unit that sets a new worktree up first starts its process later: its pid is
        // then not known when its start is recorded.
        let started = unit.start();
        self.started(task, attempt, started.pid);
        let id = self.graph.task(task).id.clone();
        self.units.spawn(started.rest.finish_caught(id));
    }

    /// Records that attempt `attempt` of `task` started (as process `pid`, when one did and
    /// is known): the one place an `attempt-started` is written, however the attempt runs —
    /// a unit here, a candidate, a worker's, a no-op, a `for_each`, or one that never got
    /// going.
    pub(super) fn started(&mut self, task: u32, attempt: u32, pid: Option<u32>) {
        self.ledger.push(EventKind::AttemptStarted {
            task: self.graph.task(task).id.clone(),
            attempt,
            pid,
        });
    }

    /// What `task`'s next attempt continues (its session, or what it is told), and, for a
    /// planner asked again, the tasks of its plan its answer replaces: a planner asked again
    /// is told what came of its plan, in its session.
    fn continuing(&mut self, task: u32) -> (Option<baton_attempt::launch::Continue>, Vec<u32>) {
        let resume = self.sessions.remove(&task);
        if self.sched.replanning(task) {
            (Some(self.replan_message(task)), self.dropped(task))
        } else {
            (resume, Vec::new())
        }
    }

    /// Feeds the scheduler what people decided about the run's waiting tasks since last time.
    fn apply_decisions(&mut self, turn: &mut Turn) {
        let launcher = &self.launcher;
        let decided = self
            .approvals
            .read(self.store, &self.run_id, &self.graph, |r| {
                launcher.redact(r)
            });
        for (kind, input) in decided {
            self.ledger.push(kind);
            turn.inputs.push_back(input);
        }
    }

    /// The run is over: its result is consolidated and checked, and its end recorded. Stop
    /// requests that come meanwhile stop the run's checks (the run ends `cancelled`). Returns
    /// the state it finished in.
    async fn finish(
        &mut self,
        stops: &mut mpsc::UnboundedReceiver<StopRequest>,
        stops_open: bool,
        cancels: &mut CancelWatch,
    ) -> RunState {
        let mut ending = self.sched.ending();
        ending.scope_warnings = self.warnings;
        let scheduled = ending.state();
        // A run that waits or was cancelled goes on later or not at all: nothing to merge. One
        // that another process took over is that process's to merge.
        let merging = self.workspaces.active()
            && !self.ledger.lost_the_run()
            && !matches!(scheduled, RunState::Waiting | RunState::Cancelled);
        // Tasks that ran on workers elsewhere pushed their branches to the run's remote: the
        // result is merged from there, and goes back there.
        let remote = self
            .graph
            .run_settings()
            .remote
            .clone()
            .filter(|_| merging && self.queue.is_some());
        if let Some(remote) = &remote
            && let Err(error) = self.workspaces.fetch_all(remote)
        {
            self.ledger.push(EventKind::RunStopping {
                reason: error,
                cause: Some(baton_model::StopCause::Remote),
            });
        }
        if merging {
            let consolidation = Consolidation {
                graph: &self.graph,
                workspaces: &self.workspaces,
                launcher: &self.launcher,
                stop: self.stop_tx.subscribe(),
            };
            let succeeded = scheduled.is_success();
            let mut consolidate = std::pin::pin!(consolidation.run(succeeded));
            let mut stops_open = stops_open;
            let (merge, events) = loop {
                tokio::select! {
                    done = &mut consolidate => break done,
                    request = stops.recv(), if stops_open => match request {
                        Some(request) => {
                            ending.stopped_while_merging = true;
                            self.stop_tx.send_replace(match request {
                                StopRequest::Cancel => StopLevel::Graceful,
                                StopRequest::Kill => StopLevel::Immediate,
                            });
                        }
                        None => stops_open = false,
                    },
                    () = cancels.requested(self.store, &self.run_id) => {
                        ending.stopped_while_merging = true;
                        self.stop_tx.send_replace(StopLevel::Graceful);
                    }
                }
            };
            ending.merge = merge;
            for kind in events {
                self.ledger.push(kind);
            }
        }
        if let Some(remote) = &remote
            && let Err(error) = self.workspaces.publish_result(remote)
        {
            self.ledger.push(EventKind::RunStopping {
                reason: error,
                cause: Some(baton_model::StopCause::Remote),
            });
        }
        let state = ending.state();
        if state == RunState::Cancelled && scheduled != RunState::Cancelled {
            self.ledger.push(EventKind::RunStopping {
                reason: "cancelled while the run's checks ran".to_owned(),
                cause: Some(baton_model::StopCause::Cancelled),
            });
        }
        self.ledger.push(EventKind::RunFinished { state });
        state
    }

    /// Once the run's soft budget is reached, nothing more starts, what runs finishes, and the
    /// run ends `waiting` for a person to approve or raise the budget. Returns whether the run
    /// paused now.
    ///
    /// Called only while an attempt the scheduler counts as running is being launched or
    /// ended (its `Finished` or `Declined` not fed yet), so the pause cannot end the run here:
    /// that input ends it, if anything does.
    fn soft_pause(&mut self) -> bool {
        if self.sched.is_paused() {
            return false;
        }
        let Some(what) = self.shared.meter.soft_reached() else {
            return false;
        };
        // The scheduler pauses at once, not at the next turn: the rest of this turn's
        // launches, and ends, see the run paused.
        let actions = self.sched.handle(Input::Pause);
        debug_assert!(
            actions.is_empty(),
            "a pause while an attempt runs leads to nothing at once: {actions:?}"
        );
        self.ledger.push(EventKind::RunStopping {
            reason: format!(
                "{what}; the run waits for `baton approve {run}` or `baton resume {run} --raise-budget USD`",
                run = self.run_id
            ),
            cause: Some(baton_model::StopCause::SoftBudget),
        });
        true
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

/// How `task` ended, if it has, as the scheduler says.
pub(super) fn ended(sched: &Scheduler, task: u32) -> Option<TaskState> {
    Some(sched.state(task)).filter(|state| state.is_terminal())
}
