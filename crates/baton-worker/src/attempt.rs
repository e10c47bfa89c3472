//! One claimed attempt on a worker: the run's parts made or brought up to date for it, its
//! unit started, and its end delivered — to the run's remote (its branch), the outbox and the
//! store — from the unit's own task, never the worker's loop.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use baton_attempt::RunConfig;
use baton_attempt::budget::Meter;
use baton_attempt::launch::Launcher;
use baton_attempt::unit::{Assembly, AttemptDone, Shared, TreeEnd, assemble};
use baton_attempt::work::Work;
use baton_attempt::workspace::{Publisher, Workspaces};
use baton_exec::StopLevel;
use baton_layout::RunDirs;
use baton_model::{Event, Outcome, RunId, TaskState};
use baton_store::{AttemptKey, ClaimedAttempt, QueueStore};
use tokio::sync::{mpsc, watch};

use crate::outbox::Outbox;
use crate::ship_logs::LogShipper;
use crate::{HeldAttempt, RunParts, SHIP_LOGS, Worker, WorkerNews};

/// Writes an attempt's end: `Some(true)` taken, `Some(false)` no longer this worker's,
/// `None` the store could not be reached (try again).
pub(crate) fn end(
    store: &dyn QueueStore,
    worker: &str,
    key: &AttemptKey,
    result: &str,
) -> Option<bool> {
    store.end_attempt(worker, key, result).ok()
}

/// What became of an attempt's end.
pub(crate) enum Delivered {
    /// The store took it.
    Taken { outcome: String },
    /// The attempt is no longer this worker's: its end is dropped.
    Refused,
    /// The store could not be reached: the end waits in the outbox.
    Kept,
    /// The worker stopped at once: the attempt runs again elsewhere.
    GivenBack,
    /// The run is not one this worker can work on (`why`): the attempt was given back, to run
    /// on a worker that can, and the run's attempts are not claimed here again.
    NotHere { why: String },
}

/// Delivers an attempt's end from the thread that ran it (the worker's own loop never waits
/// on the store for it): a worktree task's result is pushed to the run's remote first (its
/// dependents, wherever they run, start from it; one that cannot be pushed is no result), the
/// end goes to the outbox, then to the store.
fn deliver(
    store: &dyn QueueStore,
    worker: &str,
    outbox: &Outbox,
    publisher: Option<&Publisher>,
    key: &AttemptKey,
    mut done: AttemptDone,
    given_back: bool,
) -> Delivered {
    if given_back {
        let _ = store.give_back(worker, key);
        return Delivered::GivenBack;
    }
    if let (Some(publisher), Some(head)) = (publisher, done.tree.head())
        && let Err(error) = publisher.publish(head)
    {
        // The machinery's failure (a remote out of reach), retried like one.
        done.outcome = baton_model::Outcome::SpawnFailed { error };
        done.tree = TreeEnd::Kept;
    }
    let outcome = done.outcome.to_string();
    let result = serde_json::to_string(&done).expect("an attempt's end serialises");
    outbox.put(key, &result);
    match end(store, worker, key, &result) {
        Some(true) => {
            outbox.remove(key);
            Delivered::Taken { outcome }
        }
        Some(false) => {
            outbox.remove(key);
            Delivered::Refused
        }
        None => Delivered::Kept,
    }
}

impl Worker<'_> {
    /// Assembles and starts a claimed attempt; one that cannot start ends at once, as
    /// locally.
    pub(crate) fn start(&mut self, claim: ClaimedAttempt, held_until: Instant) {
        let Worker {
            store,
            id: worker,
            config,
            outbox,
            parts,
            held,
            units,
            news,
            ..
        } = self;
        let key = AttemptKey {
            run: claim.run.clone(),
            task: claim.task,
            attempt: claim.attempt,
        };
        let (stop, stop_rx) = watch::channel(StopLevel::Run);
        let (progress, progress_rx) = mpsc::unbounded_channel::<Event>();
        let prepared = prepare(&**store, config, &claim, parts).map(|(work, run)| {
            let shared = Shared {
                run: claim.run.clone(),
                dirs: run.dirs.clone(),
                out_dir: run.launcher.out_dir(),
                redactor: run.launcher.redactor().clone(),
                meter: Meter::elsewhere(
                    run.graph.run_settings().budget.clone(),
                    claim.task,
                    work.run_spent,
                    work.task_spent,
                ),
                stop: stop_rx,
                progress,
            };
            let id = run.graph.task(claim.task).id.clone();
            let logs = LogShipper::new(
                &claim.run,
                run.dirs.logs.clone(),
                format!("{}.{}.", id.file_name(), claim.attempt),
            );
            let publisher = run.workspaces.publisher(&run.graph, claim.task);
            let assembled = assemble(
                Assembly {
                    graph: &run.graph,
                    launcher: &mut run.launcher,
                    workspaces: &mut run.workspaces,
                    shared: &shared,
                    dropped: work.dropped.clone(),
                    engine: work.engine,
                    candidate: None,
                    ended: &|t| run.ended.get(&t).copied(),
                },
                claim.task,
                claim.attempt,
                work.agent,
                work.resume.as_ref(),
            );
            (id, logs, publisher, assembled)
        });
        let task = match &prepared {
            Ok((id, ..)) => id.to_string(),
            Err(_) => format!("#{}", claim.task),
        };
        news(WorkerNews::Claimed {
            run: claim.run.clone(),
            task: task.clone(),
            attempt: claim.attempt,
        });
        let given_back = Arc::new(AtomicBool::new(false));
        held.insert(
            key.clone(),
            HeldAttempt {
                task,
                stop,
                lost: false,
                given_back: Arc::clone(&given_back),
                held_until,
            },
        );
        let running = Running {
            store: Arc::clone(store),
            worker: worker.to_owned(),
            outbox: outbox.clone(),
            key,
            given_back,
            progress: progress_rx,
        };
        units.spawn(running.run(prepared));
    }
}

/// A claimed attempt's unit, assembled (or why it could not be): its task id, what ships its
/// logs, what publishes its branch.
type Prepared = (
    baton_model::TaskId,
    LogShipper,
    Option<Publisher>,
    Result<baton_attempt::unit::AttemptUnit, Outcome>,
);

/// A claimed attempt on its way, on a task of its own: what it needs to run and to deliver
/// its end.
struct Running {
    store: Arc<dyn QueueStore>,
    worker: String,
    outbox: Outbox,
    key: AttemptKey,
    /// Set when the worker stops at once: the attempt is given back, not ended.
    given_back: Arc<AtomicBool>,
    /// What the unit records before it ends: told to the coordinator as it comes.
    progress: mpsc::UnboundedReceiver<Event>,
}

impl Running {
    /// Runs the attempt (or ends one that could not be prepared) and delivers its end.
    async fn run(
        mut self,
        prepared: Result<Prepared, Unprepared>,
    ) -> (AttemptKey, Delivered, TreeAfter) {
        let mut publisher = None;
        let mut give_back = false;
        let mut not_here = None;
        let (task, attempt) = (self.key.task, self.key.attempt);
        let done = match prepared {
            Ok((id, logs, publishing, Ok(unit))) => {
                publisher = publishing;
                self.run_unit(id, logs, unit).await
            }
            Ok((.., Err(outcome))) => AttemptDone::never_started(task, attempt, outcome),
            // The store did not answer: given back below, to run again once it does.
            Err(Unprepared {
                out_of_reach: true, ..
            }) => {
                give_back = true;
                AttemptDone::never_started(task, attempt, Outcome::Cancelled)
            }
            // Not a run this worker can work on: given back, for a worker that can.
            Err(Unprepared {
                not_here: true,
                why,
                ..
            }) => {
                give_back = true;
                not_here = Some(why);
                AttemptDone::never_started(task, attempt, Outcome::Cancelled)
            }
            // The run's parts could not be had here (its graph, its branches): the
            // machinery's failure, retried like one.
            Err(Unprepared { why, .. }) => {
                AttemptDone::never_started(task, attempt, Outcome::SpawnFailed { error: why })
            }
        };
        // What it said before it ended goes before its end.
        while let Ok(event) = self.progress.try_recv() {
            tell(&*self.store, &self.worker, &self.key, &event);
        }
        let tree = TreeAfter {
            set_up: done.set_up,
            end: done.tree.clone(),
        };
        let given_back = give_back || self.given_back.load(Ordering::Relaxed);
        let delivered = match deliver(
            &*self.store,
            &self.worker,
            &self.outbox,
            publisher.as_ref(),
            &self.key,
            done,
            given_back,
        ) {
            Delivered::GivenBack if let Some(why) = not_here => Delivered::NotHere { why },
            delivered => delivered,
        };
        (self.key, delivered, tree)
    }

    /// Runs the unit to its end, telling the coordinator what it records as it comes and
    /// shipping its logs to the store every [`SHIP_LOGS`] (and once more at the end).
    async fn run_unit(
        &mut self,
        id: baton_model::TaskId,
        mut logs: LogShipper,
        unit: baton_attempt::unit::AttemptUnit,
    ) -> AttemptDone {
        let running = unit.start().rest;
        let mut finishing = std::pin::pin!(running.finish_caught(id));
        let mut ship = tokio::time::interval(SHIP_LOGS);
        let done = loop {
            tokio::select! {
                Some(event) = self.progress.recv() => {
                    tell(&*self.store, &self.worker, &self.key, &event);
                }
                _ = ship.tick() => logs.ship(&*self.store),
                done = &mut finishing => break done,
            }
        };
        // What it wrote before it ended goes before its end.
        while let Ok(event) = self.progress.try_recv() {
            tell(&*self.store, &self.worker, &self.key, &event);
        }
        logs.ship(&*self.store);
        done
    }
}

/// What an attempt did with its task's worktree, for the worker's own copy of the run's.
pub(crate) struct TreeAfter {
    pub(crate) set_up: bool,
    pub(crate) end: TreeEnd,
}

/// Hands an event of a running attempt to its coordinator.
fn tell(store: &dyn QueueStore, worker: &str, key: &AttemptKey, event: &Event) {
    if let Ok(json) = serde_json::to_string(event) {
        let _ = store.add_news(worker, key, &json);
    }
}

/// Why a claimed attempt could not be prepared here.
struct Unprepared {
    why: String,
    /// The store was out of reach: the attempt is given back, to run again (here or
    /// elsewhere) once it answers, not failed.
    out_of_reach: bool,
    /// The run is not this worker's to work on (another repository's): given back, to run on
    /// a worker that can, not failed.
    not_here: bool,
}

impl From<String> for Unprepared {
    fn from(why: String) -> Self {
        Self {
            why,
            out_of_reach: false,
            not_here: false,
        }
    }
}

/// The run's parts for `claim`, made or brought up to date, and its work.
fn prepare<'p>(
    store: &dyn QueueStore,
    config: &RunConfig,
    claim: &ClaimedAttempt,
    parts: &'p mut HashMap<RunId, RunParts>,
) -> Result<(Work, &'p mut RunParts), Unprepared> {
    let work: Work = serde_json::from_str(&claim.work).map_err(|e| {
        format!("the coordinator's order for this attempt cannot be read ({e}): is every worker the same version of baton?")
    })?;
    let stale = parts
        .get(&claim.run)
        .is_none_or(|p| (p.graph.len() as u32) < work.graph_len);
    if stale {
        let graph = Arc::new(
            baton_view::recorded_graph(store, &claim.run).map_err(|e| Unprepared {
                out_of_reach: matches!(&e, baton_view::RecordedGraphError::Store(e) if e.is_unreachable()),
                not_here: false,
                why: format!("cannot read run {}'s graph: {e}", claim.run),
            })?,
        );
        match parts.get_mut(&claim.run) {
            Some(run) => {
                // What it says was lost is read back below, as for any need not held.
                let ended = &run.ended;
                run.launcher
                    .grow(Arc::clone(&graph), &|t| ended.get(&t).copied());
                run.workspaces.grow(graph.len());
                run.graph = graph;
            }
            None => {
                // A run from another repository, with no remote to share its branches: its
                // work would be where the submitter never sees it.
                baton_runner::check_origin(&graph, &config.root).map_err(|why| Unprepared {
                    why,
                    out_of_reach: false,
                    not_here: true,
                })?;
                let dirs = RunDirs::new(&config.state_dir, &claim.run);
                dirs.create(&store.location())
                    .map_err(|e| format!("cannot create {}: {e}", dirs.run.display()))?;
                let mut workspaces =
                    Workspaces::new(&graph, &config.root, &config.state_dir, &claim.run)?;
                if let Some(base) = &work.base {
                    workspaces.adopt_base(base);
                }
                let launcher =
                    Launcher::new(Arc::clone(&graph), claim.run.clone(), dirs.clone(), config);
                parts.insert(
                    claim.run.clone(),
                    RunParts {
                        graph,
                        launcher,
                        workspaces,
                        dirs,
                        ended: HashMap::new(),
                    },
                );
            }
        }
    }
    let run = parts.get_mut(&claim.run).expect("made above");
    let remote = run.graph.run_settings().remote.clone();
    // What its predecessors handed on, and where their branches are, from the store: they
    // may have run anywhere.
    let needs = run.graph.task(claim.task).needs.clone();
    if needs.iter().any(|&n| run.launcher.held(n).is_none()) {
        let records = store.tasks(&claim.run).map_err(|e| Unprepared {
            out_of_reach: e.is_unreachable(),
            not_here: false,
            why: format!("cannot read run {}'s tasks: {e}", claim.run),
        })?;
        for need in needs {
            if run.launcher.held(need).is_some() {
                continue;
            }
            let Some(record) = records.iter().find(|r| r.task == run.graph.task(need).id) else {
                continue;
            };
            run.launcher.restored(need);
            run.ended.insert(need, record.status);
            run.launcher
                .hold_output(need, baton_runner::recorded_output(record));
            if record.status == TaskState::Succeeded && remote.is_none() {
                run.workspaces.restored_success(&run.graph, need);
            }
        }
    }
    // Elsewhere, the needs' branches are on the run's remote.
    if let Some(remote) = &remote {
        run.workspaces.fetch_needs(&run.graph, claim.task, remote)?;
    }
    Ok((work, run))
}
