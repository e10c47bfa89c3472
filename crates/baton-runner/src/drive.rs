//! Driving a run from its start (`baton run`) or from its record (`baton resume`, `baton
//! retry`) to its end: the run is created or claimed, its worktrees resolved, the dispatcher
//! driven, and the result read back from the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_attempt::RunConfig;
use baton_attempt::stamp::now_ms;
use baton_attempt::workspace::Workspaces;
use baton_graph::{Action as TaskAction, Graph};
use baton_layout::RunDirs;
use baton_model::{Event, EventKind, RunId, RunView};
use baton_report::{Reporter, RunInfo, RunResult};
use baton_store::{Lease, NewRun, Store, StoreError};
use baton_view::build_result;
use tokio::sync::mpsc;

use crate::dispatcher::{Dispatcher, Ready, scheduler_of};
use crate::launch_log::LaunchLog;
use crate::recorder::Recorder;
use crate::takeover::{Restored, Takeover, TakeoverError, plan_takeover};
use crate::{kill_leftovers, new_run_id};

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
    /// The run's git setup is unusable (its `base` does not exist). Found before the run is
    /// recorded: nothing is left to resume.
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
    /// A run submitted from another repository, without a `remote` to share its branches
    /// through: this process works elsewhere, and leaves it (see `check_origin`).
    #[error("run {run} is not for this worker: {why}")]
    Elsewhere { run: RunId, why: String },
    /// Another process claimed the run while this one drove it (this one's lease lapsed):
    /// this one stopped its own attempts and records nothing more; the run goes on there.
    #[error(
        "lost run {run}: another process took it over while this one could not renew its \
         lease (it was paused, stuck or cut off from the store); this one stopped acting for \
         it, and the run goes on there"
    )]
    TakenOver { run: RunId },
}

/// Runs `graph` to its end and returns the recorded result.
pub async fn run(
    graph: Graph,
    store: &dyn Store,
    reporter: &mut dyn Reporter,
    config: RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Result<RunResult, RunError> {
    let started_at_ms = now_ms();
    let run_id = new_run_id(started_at_ms);
    let dirs = RunDirs::new(&config.state_dir, &run_id);
    dirs.create(&store.location())
        .map_err(|source| RunError::RunDir {
            path: dirs.run.clone(),
            source,
        })?;
    // Before the run is recorded: a base that does not exist is bad input, not a run that
    // stopped half way and could be resumed.
    let workspaces = match Workspaces::new(&graph, &config.root, &config.state_dir, &run_id) {
        Ok(workspaces) => workspaces,
        Err(error) => {
            dirs.remove();
            return Err(RunError::Workspace(error));
        }
    };
    // The scheduler is made while the run's record is written: both read the graph, and a
    // 100,000-task graph's record takes the store 0.1 s.
    let (created, sched) = std::thread::scope(|scope| {
        let making = std::thread::Builder::new()
            .name("scheduler".into())
            .spawn_scoped(scope, || scheduler_of(&graph, config.seed));
        let created = store.create_run(&new_run(&Stored(&graph), &run_id, started_at_ms));
        let sched = match making {
            Ok(making) => making
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => scheduler_of(&graph, config.seed),
        };
        (created, sched)
    });
    created?;
    let lease = crate::driver::claim(store, &run_id)?.lease;
    let restored = Restored {
        opening: vec![run_started(&graph, started_at_ms)],
        ..Restored::default()
    };
    let held = Held {
        store,
        lease,
        ready: Ready {
            run_id,
            dirs,
            workspaces,
            sched,
        },
    };
    drive_run(graph, held, restored, reporter, &config, stops, None).await
}

/// The event a run's log opens with, at `at_ms`.
fn run_started(graph: &Graph, at_ms: i64) -> Event {
    Event {
        seq: 0,
        at_ms,
        kind: EventKind::RunStarted {
            name: graph.name().to_owned(),
            tasks: graph.len() as u32,
            concurrency: graph.run_settings().concurrency,
        },
    }
}

/// A run driven for workers: where its attempts are queued, and the term of the coordinator's
/// lease on it (the worker's `--lease`).
#[derive(Clone, Copy)]
pub struct OnWorkers<'a> {
    pub queue: &'a dyn baton_store::WorkQueue,
    pub term: Duration,
    /// The worker coordinating (its id): a takeover is recorded as its.
    pub worker: &'a str,
}

/// The graph as the store keeps it: written out where it goes.
struct Stored<'g>(&'g Graph);

impl std::fmt::Debug for Stored<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Stored").field(&self.0.name()).finish()
    }
}

impl baton_store::GraphJson for Stored<'_> {
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.0.write_stored_json(out)
    }
}

/// The run's record as it is created.
fn new_run<'g>(stored: &'g Stored<'g>, run_id: &RunId, started_at_ms: i64) -> NewRun<'g> {
    let graph = stored.0;
    NewRun {
        id: run_id.clone(),
        name: graph.name().to_owned(),
        graph_path: graph.source().display().to_string(),
        graph: stored,
        concurrency: graph.run_settings().concurrency,
        started_at_ms,
        tasks: graph
            .tasks()
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i as u32))
            .collect(),
    }
}

/// Submits `graph` as a run for workers to drive (`baton run --detach`): recorded `queued`,
/// nothing started here. Its git base is resolved by the worker that starts it.
pub fn submit(graph: &Graph, store: &dyn baton_store::WorkQueue) -> Result<RunId, RunError> {
    let started_at_ms = now_ms();
    let run_id = new_run_id(started_at_ms);
    store.submit_run(&new_run(&Stored(graph), &run_id, started_at_ms))?;
    Ok(run_id)
}

/// Takes over a recorded run (see [`Takeover`]) and drives it to its end.
pub async fn resume(
    run_id: &RunId,
    how: Takeover,
    store: &dyn Store,
    reporter: &mut dyn Reporter,
    config: RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Result<RunResult, RunError> {
    let record = store
        .run(run_id)?
        .ok_or_else(|| TakeoverError::UnknownRun(run_id.clone()))?;
    let graph = match how.reload() {
        // The file read again, grown by what the run's planners added, as the recorded one is.
        Some(reload) => baton_view::grown(store, run_id, (*reload.graph).clone())
            .map_err(TakeoverError::from)?,
        None => baton_view::recorded_graph(store, run_id).map_err(TakeoverError::from)?,
    };
    // Refuses while another live process drives the run, naming it; but a run that has ended
    // is let go by its driver a moment later (it merges, cleans up, reads its result), and
    // `baton cancel RUN && baton retry RUN` must not fall into that moment.
    let lease = claim_once_let_go(store, run_id, record.status).await?.lease;
    let released = |err: RunError| {
        let _ = store.release(run_id, lease);
        err
    };
    // Claimed: whoever drove it before is gone.
    let effective = baton_model::observed(record.status, true);
    // What the dead driver may have left running, read before the takeover records anything.
    let unfinished = crate::takeover::unfinished(store, run_id)
        .map_err(RunError::Store)
        .map_err(released)?;
    let launched = LaunchLog::read(&RunDirs::new(&config.state_dir, run_id));
    let restored =
        plan_takeover(store, &graph, run_id, effective, &how, &launched, &[]).map_err(released)?;
    kill_leftovers(run_id, &unfinished);
    // The run's driver is gone and no worker runs its attempts: every lock is stale.
    let held = hold(store, run_id, lease, &graph, &config, Duration::ZERO).map_err(released)?;
    drive_run(graph, held, restored, reporter, &config, stops, None).await
}

/// A claimed run's directory and worktrees, made ready to drive it: a takeover's, whose
/// predecessor may have died in the middle of a git command. Ref locks under the run's refs at
/// least `stale` old are removed (a live worker's git may hold a fresh one).
fn hold<'a>(
    store: &'a dyn Store,
    run_id: &RunId,
    lease: Lease,
    graph: &Graph,
    config: &RunConfig,
    stale: Duration,
) -> Result<Held<'a>, RunError> {
    let dirs = RunDirs::new(&config.state_dir, run_id);
    dirs.create(&store.location())
        .map_err(|source| RunError::RunDir {
            path: dirs.run.clone(),
            source,
        })?;
    let workspaces = Workspaces::new(graph, &config.root, &config.state_dir, run_id)
        .map_err(RunError::Workspace)?;
    workspaces.remove_stale_ref_locks(stale);
    Ok(Held {
        store,
        lease,
        ready: Ready {
            run_id: run_id.clone(),
            dirs,
            workspaces,
            sched: scheduler_of(graph, config.seed),
        },
    })
}

/// Coordinates a run for workers (`baton worker`): a submitted run is started, one whose
/// coordinator died is taken over as `baton resume` would; either way its attempts are queued
/// in `workers.queue` for workers to run. `Ok(None)`: there was nothing to coordinate (another
/// worker took the run first, or it has ended).
pub async fn coordinate(
    run_id: &RunId,
    store: &dyn Store,
    workers: OnWorkers<'_>,
    reporter: &mut dyn Reporter,
    config: RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Result<Option<RunResult>, RunError> {
    let graph = baton_view::recorded_graph(store, run_id).map_err(TakeoverError::from)?;
    crate::check_origin(&graph, &config.root).map_err(|why| RunError::Elsewhere {
        run: run_id.clone(),
        why,
    })?;
    let lease = match crate::driver::claim_among_workers(store, run_id, workers.term) {
        Ok(claim) => claim.lease,
        Err(StoreError::RunHeld { .. }) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let released = |err: RunError| {
        let _ = store.release(run_id, lease);
        err
    };
    // Read once it is ours: another worker may have started and even finished it meanwhile.
    let record = store
        .run(run_id)
        .map_err(RunError::Store)
        .map_err(released)?
        .ok_or_else(|| TakeoverError::UnknownRun(run_id.clone()))
        .map_err(RunError::from)
        .map_err(released)?;
    let restored = match record.status {
        baton_model::RunState::Queued => Restored {
            opening: vec![run_started(&graph, now_ms())],
            ..Restored::default()
        },
        baton_model::RunState::Running => {
            let mut unfinished = crate::takeover::unfinished(store, run_id)
                .map_err(RunError::Store)
                .map_err(released)?;
            // What still runs on live workers (or waits in the queue, or ended there and was
            // not recorded) is adopted, not run again beside itself; the rest of what the
            // earlier coordinator queued leaves the queue.
            let adopted = crate::takeover::adoptable(store, &graph, run_id)
                .and_then(|keep| workers.queue.adopt_queued(run_id, lease.token, &keep))
                .map_err(RunError::Store)
                .map_err(released)?;
            for &(task, attempt) in &adopted {
                unfinished.adopted(graph.task(task).id.as_str(), attempt);
            }
            let how = Takeover::Resume {
                charge_retries: false,
                budget: None,
                reload: None,
                by_worker: Some(workers.worker.to_owned()),
            };
            // What was queued is in the queue (adopted above); the log holds what a driver of
            // this run launched here itself (one driving it in its own process before).
            let launched = LaunchLog::read(&RunDirs::new(&config.state_dir, run_id));
            let restored = plan_takeover(
                store,
                &graph,
                run_id,
                baton_model::RunState::Interrupted,
                &how,
                &launched,
                &adopted,
            )
            .map_err(released)?;
            kill_leftovers(run_id, &unfinished);
            restored
        }
        _ => {
            let _ = store.release(run_id, lease);
            return Ok(None);
        }
    };
    let held =
        hold(store, run_id, lease, &graph, &config, WORKERS_GIT_AT_WORK).map_err(released)?;
    drive_run(
        graph,
        held,
        restored,
        reporter,
        &config,
        stops,
        Some(workers),
    )
    .await
    .map(Some)
}

/// A run this process holds, ready to be driven.
struct Held<'a> {
    store: &'a dyn Store,
    /// This process's claim on the run: it fences every commit.
    lease: Lease,
    /// The run, its directories, worktrees and scheduler.
    ready: Ready,
}

/// Drives the held run to its end, then reads its result back from the store (with the graph
/// already gone: a 100,000-task run would otherwise hold both at its peak) and tells the
/// reporter.
async fn drive_run(
    owned: Graph,
    held: Held<'_>,
    restored: Restored,
    reporter: &mut dyn Reporter,
    config: &RunConfig,
    stops: mpsc::UnboundedReceiver<StopRequest>,
    workers: Option<OnWorkers<'_>>,
) -> Result<RunResult, RunError> {
    let term = workers.map_or(baton_store::LEASE_TERM, |on| on.term);
    let owned = Arc::new(owned);
    let graph = &*owned;
    let Held {
        store,
        lease,
        ready,
    } = held;
    let run_id = ready.run_id.clone();
    let budget = restored
        .budget
        .clone()
        .unwrap_or_else(|| graph.run_settings().budget.clone());
    // The view starts from what the store holds: a run taken over shows what went before. A
    // new run has nothing recorded yet, and is not read back (100,000 rows of pending tasks).
    let fresh = || RunView::new(graph.tasks().iter().map(|t| t.id.clone()));
    let view = reporter
        .wants_view()
        .then(|| match store.last_seq(&run_id) {
            Ok(0) => fresh(),
            _ => baton_store::fold(store, &run_id).map_or_else(|_| fresh(), |(view, _)| view),
        });
    reporter.run_started(&RunInfo {
        run_id: run_id.clone(),
        name: graph.name().to_owned(),
        tasks: graph.len() as u32,
        concurrency: graph.run_settings().concurrency,
        earlier: restored.terminal.len() as u32,
        view,
        started_at_ms: store.run(&run_id).ok().flatten().map(|r| r.started_at_ms),
        budget_usd: budget.usd,
        budget_tokens: budget.tokens,
        agents: graph
            .tasks()
            .iter()
            .filter(|t| matches!(t.action, TaskAction::Agent { .. }))
            .map(|t| t.id.clone())
            .collect(),
        best_of: baton_view::best_of(graph),
        logs: Some(ready.dirs.logs.clone()),
    });
    // Commits are made on a thread of their own, off the path from one task's end to the next
    // one's start.
    let recorder = match Recorder::start(store, run_id.clone(), lease, term) {
        Ok(recorder) => recorder,
        Err(err) => {
            let _ = store.release(&run_id, lease);
            return Err(err.into());
        }
    };
    // The run's own handlers (Ctrl-C, SIGTERM, SIGHUP) are installed by now: the children
    // reset them before they exec.
    baton_exec::refresh_handled_signals();
    // Where no cgroup can hold an attempt, orphans come back to baton to be ended with it.
    if !baton_exec::cgroups_available() {
        baton_exec::become_subreaper();
    }
    let mut dispatcher = Dispatcher::new(Arc::clone(&owned), store, ready, config, recorder);
    if let Some(budget) = restored.budget.clone() {
        dispatcher.meter().set_limit(budget);
    }
    if let Some(on) = workers
        && let Err(err) = dispatcher.run_on_workers(on, lease.token)
    {
        drop(dispatcher);
        let _ = store.release(&run_id, lease);
        return Err(err);
    }
    dispatcher.restore(restored);
    let has_agents = graph
        .tasks()
        .iter()
        .any(|t| matches!(t.action, TaskAction::Agent { .. }));
    if has_agents && let Err(err) = dispatcher.recall_agents(store) {
        let _ = store.release(&run_id, lease);
        return Err(err.into());
    }
    let fatal = dispatcher.drive(reporter, stops).await;
    // Its memory is reused for reading the result back; its recorder's thread is joined.
    drop(dispatcher);
    if fatal.is_some() {
        // The store failed (a server that restarted, a connection cut): the run is let go as
        // soon as the store answers again, so that it is taken over rather than held by a
        // process that no longer drives it.
        release_when_back(store, &run_id, lease, term).await;
    } else {
        let _ = store.release(&run_id, lease);
    }
    match fatal {
        Some(StoreError::LeaseLost { .. }) => return Err(RunError::TakenOver { run: run_id }),
        Some(source) => {
            return Err(RunError::StoreFailedMidRun {
                run: run_id,
                source,
            });
        }
        None => {}
    }
    drop(owned);
    let result = build_result(store, &run_id, &config.state_dir)?;
    reporter.run_finished(&result);
    Ok(result)
}

/// Releases `run` after a store failure, trying again while the store does not answer, for
/// up to the lease's `term` (after which the lease has lapsed anyway).
async fn release_when_back(
    store: &dyn Store,
    run: &RunId,
    lease: baton_store::Lease,
    term: Duration,
) {
    let mut backoff = crate::backoff::Backoff::within(term);
    while store.release(run, lease).is_err() {
        let Some(pause) = backoff.next_pause() else {
            return;
        };
        tokio::time::sleep(pause).await;
    }
}

/// How old a ref lock must be before a worker taking a run over removes it: live workers of
/// the run may be updating its refs in the same repository (git holds a ref's lock for
/// milliseconds).
const WORKERS_GIT_AT_WORK: Duration = Duration::from_secs(5);

/// How long a takeover of a run that has ended waits for its driver to let go of it.
const LET_GO_WITHIN: Duration = Duration::from_secs(15);

/// Claims `run` for this process. A run recorded as ended (`status`) whose driver still holds
/// it is waited for, up to [`LET_GO_WITHIN`]: its driver is finishing up, and lets go. The
/// wait is the runtime's, not the thread's: nothing on the runtime is held up by it.
async fn claim_once_let_go(
    store: &dyn Store,
    run: &RunId,
    status: baton_model::RunState,
) -> Result<baton_store::Claim, StoreError> {
    let ended = !matches!(
        status,
        baton_model::RunState::Running | baton_model::RunState::Queued
    );
    let deadline = std::time::Instant::now() + LET_GO_WITHIN;
    loop {
        match crate::driver::claim(store, run) {
            Err(StoreError::RunHeld { .. }) if ended && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            claimed => return claimed,
        }
    }
}
