//! `baton worker`: claims attempts from the PostgreSQL work queue and runs them with the same
//! attempt unit a local run uses; coordinates runs no live process coordinates.
//!
//! A worker is a loop over four things, none of which waits on another:
//! - **claims**: while it has free slots, it takes queued attempts whose engine it offers and
//!   whose labels it has (`FOR UPDATE SKIP LOCKED`), woken by `NOTIFY`, polling as the
//!   backstop;
//! - **units**: each claimed attempt is assembled from the run's recorded graph and store (what
//!   its predecessors handed on, their branches) and the [`Work`] its coordinator queued, and
//!   runs as a unit of its own; what it records before it ends goes to the coordinator through
//!   the store, fenced by the worker's claim;
//! - **heartbeat**: every third of its lease it renews every attempt it holds; an attempt it no
//!   longer holds (its lease lapsed while the worker was paused or cut off, or the run was taken
//!   over) is stopped at once, and its end is not written;
//! - **ends**: an attempt's end goes to an outbox file first, then to the store, and is retried
//!   until the store takes it or says the attempt is no longer this worker's: a dropped
//!   connection does not lose a completion.
//!
//! Coordinating is the same takeover `baton resume` does, run by whichever worker claims the
//! run's lease first (`baton_runner::coordinate`); the coordinator queues attempts like any
//! other coordinator, and runs its share of them as a worker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_attempt::RunConfig;
use baton_attempt::budget::Meter;
use baton_attempt::launch::Launcher;
use baton_attempt::unit::{Assembly, AttemptDone, Shared, TreeEnd, assemble};
use baton_attempt::work::Work;
use baton_attempt::workspace::{Publisher, Workspaces};
use baton_exec::StopLevel;
use baton_graph::Graph;
use baton_layout::RunDirs;
use baton_model::{Event, RunId, TaskState};
use baton_runner::StopRequest;
use baton_store::{
    AttemptKey, ClaimedAttempt, QueueStore, Renewal, StoreError, Wake, WorkerRecord,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

mod coordinate;
mod outbox;
mod ship_logs;
pub mod watchdog;

use coordinate::{AsCoordinator, Coordinating, Coordination, take_runs};
use outbox::Outbox;
use ship_logs::LogShipper;

/// How often a worker looks for work when no notification woke it.
const POLL: Duration = Duration::from_secs(1);

/// How often a worker looks for processes a worker that died on its host left running.
const SWEEP: Duration = Duration::from_secs(3);

/// How often a running attempt's new log bytes go to the store (`baton logs --follow` from
/// another machine is this far behind).
const SHIP_LOGS: Duration = Duration::from_secs(1);

/// What a worker offers.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Attempts it runs at once.
    pub slots: u32,
    /// Engines it runs (`shell`, `claude`, …); empty: any.
    pub engines: Vec<String>,
    /// Labels it has: it takes only tasks whose `runs_on` it covers.
    pub labels: Vec<String>,
    /// How long a claim holds without a renewal.
    pub lease: Duration,
    /// Whether it coordinates runs too (else it only runs attempts).
    pub coordinate: bool,
}

/// What a worker tells the person who started it, a line each.
#[derive(Debug, Clone)]
pub enum WorkerNews {
    Started {
        id: String,
    },
    Claimed {
        run: RunId,
        task: String,
        attempt: u32,
    },
    Ended {
        run: RunId,
        task: String,
        attempt: u32,
        outcome: String,
    },
    /// Its claim lapsed or the run was taken over: its processes were stopped, its end dropped.
    Lost {
        run: RunId,
        task: String,
        attempt: u32,
    },
    Coordinating {
        run: RunId,
    },
    Coordinated {
        run: RunId,
        state: String,
    },
    /// A run it will not coordinate, and why (submitted from another repository): said once,
    /// the run left to other workers.
    Refused {
        run: RunId,
        why: String,
    },
    /// Asked to stop: at once (what it runs is given back), or once what it runs has ended.
    Stopping {
        now: bool,
        held: usize,
    },
    /// Stopped at once: the attempt was given back, to run again elsewhere.
    GivenBack {
        run: RunId,
        task: String,
        attempt: u32,
    },
    /// It stopped what a worker that died on this host had left running.
    Swept {
        processes: usize,
    },
    Problem(String),
}

/// One run's parts on this worker, made at its first claimed attempt.
struct RunParts {
    graph: Arc<Graph>,
    launcher: Launcher,
    workspaces: Workspaces,
    dirs: RunDirs,
    /// How the tasks this worker's attempts needed ended, as the store said: a worker has
    /// no scheduler to ask.
    ended: HashMap<u32, TaskState>,
}

/// An attempt this worker holds.
struct HeldAttempt {
    task: String,
    stop: watch::Sender<StopLevel>,
    /// No longer this worker's: its end is not written.
    lost: bool,
    /// Stopped because the worker stops at once: given back, to run again elsewhere, instead
    /// of ending as cancelled.
    given_back: Arc<std::sync::atomic::AtomicBool>,
    /// When its lease runs out as far as this worker knows (counted from before it asked for
    /// the claim or the renewal that set it): past it, the run's coordinator may take the
    /// attempt as interrupted and run it again.
    held_until: Instant,
}

/// Runs until stopped (`stops`): a stop request ends every attempt held (gracefully, or at
/// once on a second request) and writes their ends, then leaves.
pub async fn work(
    store: Arc<dyn QueueStore>,
    options: WorkerOptions,
    config: RunConfig,
    mut stops: mpsc::UnboundedReceiver<StopRequest>,
    news: &mut dyn FnMut(WorkerNews),
) -> Result<(), StoreError> {
    let me = baton_runner::driver::me();
    let mut config = config;
    let marker = format!("{}:{}", me.pid, me.start_time);
    config.worker = Some(marker.clone());
    // Ends this worker's attempts if it stops renewing them (paused, stuck) or dies. Without
    // one (baton's own program cannot be found or started), the worker still works: its
    // attempts are ended when it wakes, as before.
    let mut watchdog = match std::env::current_exe()
        .and_then(|program| watchdog::Watchdog::start(&program, &marker, options.lease))
    {
        Ok(watchdog) => Some(watchdog),
        Err(error) => {
            news(WorkerNews::Problem(format!(
                "cannot start its watchdog ({error}): attempts of this worker paused past their \
                 lease run on until it wakes"
            )));
            None
        }
    };
    let id = format!(
        "{}-{}-{:x}",
        me.host,
        me.pid,
        baton_attempt::stamp::now_ms() as u64 & 0xff_ffff
    );
    let record = WorkerRecord {
        id: id.clone(),
        host: me.host.clone(),
        pid: me.pid,
        slots: options.slots,
        engines: options.engines.clone(),
        labels: options.labels.clone(),
        started_at_ms: baton_attempt::stamp::now_ms(),
        heartbeat_at_ms: 0,
        running: Vec::new(),
    };
    store.heartbeat_worker(&record)?;
    news(WorkerNews::Started { id: id.clone() });
    let outbox = Outbox::new(config.state_dir.join("worker").join(&id));
    let mut wake = store.listen(&[Wake::WorkQueued])?;
    let mut submitted = store.listen(&[Wake::RunSubmitted])?;
    let lease_ms = options.lease.as_millis() as i64;
    let mut heartbeat = tokio::time::interval(options.lease / 3);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sweep = tokio::time::interval(SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut parts: HashMap<RunId, RunParts> = HashMap::new();
    let mut held: HashMap<AttemptKey, HeldAttempt> = HashMap::new();
    let mut units: JoinSet<(AttemptKey, Delivered, TreeAfter)> = JoinSet::new();
    let mut coordinating: HashMap<RunId, Coordinating> = HashMap::new();
    let (coordinated_tx, mut coordinated) = mpsc::unbounded_channel::<(RunId, Coordination)>();
    // Runs this worker will not coordinate (see `Coordination::Refused`): not looked at again.
    let mut refused: std::collections::HashSet<RunId> = std::collections::HashSet::new();
    let as_coordinator = AsCoordinator {
        config: config.clone(),
        lease: options.lease,
        worker: id.clone(),
    };
    let mut stopping: Option<StopLevel> = None;
    // Whether to claim now: woken, polled, or a slot came free while work may be waiting.
    let mut look = true;
    // More may be queued than this worker could take when it last claimed.
    let mut backlog = true;
    // Whether to look for runs to coordinate: at start, when one is submitted, and at each
    // poll (a coordinator that died is found then).
    let mut look_for_runs = true;
    loop {
        if stopping.is_none() && look {
            look = false;
            let free = options.slots.saturating_sub(held.len() as u32);
            if free == 0 {
                backlog = true;
            } else {
                let asked = Instant::now();
                let except: Vec<RunId> = refused.iter().cloned().collect();
                match store.claim_attempts(
                    &id,
                    &options.engines,
                    &options.labels,
                    free,
                    lease_ms,
                    &except,
                ) {
                    Ok(claimed) => {
                        // More may be waiting than there were free slots.
                        backlog = claimed.len() as u32 == free;
                        for claim in claimed {
                            start(
                                &store,
                                &id,
                                &config,
                                &outbox,
                                claim,
                                asked + options.lease,
                                &mut parts,
                                &mut held,
                                &mut units,
                                news,
                            );
                        }
                    }
                    Err(error) => news(WorkerNews::Problem(format!(
                        "cannot claim work: {}",
                        with_causes(&error)
                    ))),
                }
            }
        }
        if stopping.is_none() && look_for_runs {
            look_for_runs = false;
            if options.coordinate {
                take_runs(
                    &store,
                    &as_coordinator,
                    &coordinated_tx,
                    &mut coordinating,
                    &refused,
                    news,
                );
            }
        }
        if stopping.is_some() && held.is_empty() {
            // The runs this worker coordinates are left as they are, held by this process's
            // lease: once it has exited, another worker takes them over (at once on this
            // host, when the lease lapses elsewhere), as after a crash.
            for (_, (_, task)) in coordinating.drain() {
                task.abort();
            }
            break;
        }
        tokio::select! {
            Some(joined) = units.join_next(), if !units.is_empty() => {
                if let Ok((key, delivered, tree)) = joined {
                    // This worker's own copy of the run's worktrees follows what the attempt
                    // did with the task's (made it not, or pooled it).
                    if let Some(run) = parts.get_mut(&key.run) {
                        run.workspaces.attempt_ended(key.task, tree.set_up, &tree.end);
                    }
                    let Some(attempt) = held.remove(&key) else { continue };
                    let (run, task, n) = (key.run.clone(), attempt.task, key.attempt);
                    match delivered {
                        Delivered::Taken { outcome } => news(WorkerNews::Ended { run, task, attempt: n, outcome }),
                        // Said when the heartbeat found it out, else now.
                        Delivered::Refused if attempt.lost => {}
                        Delivered::Refused => news(WorkerNews::Lost { run, task, attempt: n }),
                        // In the outbox: sent again at the next heartbeat.
                        Delivered::Kept => {}
                        Delivered::GivenBack => news(WorkerNews::GivenBack { run, task, attempt: n }),
                        // Said once, for the run; its attempts are not claimed here again.
                        Delivered::NotHere { why } => {
                            if refused.insert(run.clone()) {
                                news(WorkerNews::Refused { run, why });
                            }
                        }
                    }
                    // A slot is free: worth a claim if work was left when the slots were full.
                    look |= backlog;
                }
            }
            _ = heartbeat.tick() => {
                if let Some(watchdog) = &mut watchdog {
                    watchdog.ping();
                }
                let _ = store.heartbeat_worker(&record);
                for (key, result) in outbox.pending(|key| held.contains_key(key)) {
                    if end(&*store, &id, &key, &result).is_some() {
                        outbox.remove(&key);
                    }
                }
                let keys: Vec<AttemptKey> = held.iter().filter(|(_, a)| !a.lost).map(|(k, _)| k.clone()).collect();
                if keys.is_empty() {
                    continue;
                }
                let asked = Instant::now();
                match store.renew_attempts(&id, &keys, lease_ms) {
                    Ok(answers) => for (key, renewal) in answers {
                        let Some(attempt) = held.get_mut(&key) else { continue };
                        match renewal {
                            Renewal::Held { stop } => {
                                attempt.held_until = asked + options.lease;
                                let level = match stop {
                                    0 => StopLevel::Run,
                                    1 => StopLevel::Graceful,
                                    _ => StopLevel::Immediate,
                                };
                                if level != StopLevel::Run {
                                    attempt.stop.send_replace(level);
                                }
                            }
                            Renewal::Lost => {
                                attempt.lost = true;
                                attempt.stop.send_replace(StopLevel::Immediate);
                                news(WorkerNews::Lost { run: key.run.clone(), task: attempt.task.clone(), attempt: key.attempt });
                            }
                        }
                    },
                    Err(error) => {
                        news(WorkerNews::Problem(format!("cannot renew the leases of this worker's attempts: {}", with_causes(&error))));
                        stop_running_out(&mut held, Instant::now() + options.lease / 3, news);
                    }
                }
            }
            Ok(()) = wake.changed() => look = true,
            Ok(()) = submitted.changed() => look_for_runs = true,
            _ = sweep.tick() => {
                let killed = baton_attempt::leftovers::kill_dead_workers_leftovers(|pid, start_time| {
                    baton_runner::driver::is_alive(&baton_store::Driver {
                        pid,
                        start_time,
                        host: baton_attempt::procs::hostname(),
                    })
                });
                if killed > 0 {
                    news(WorkerNews::Swept { processes: killed });
                }
            }
            _ = poll.tick() => {
                look = true;
                look_for_runs = true;
            }
            Some((run, how)) = coordinated.recv() => {
                coordinating.remove(&run);
                match how {
                    Coordination::Ended(state) => news(WorkerNews::Coordinated { run, state }),
                    Coordination::Refused(why) => {
                        if refused.insert(run.clone()) {
                            news(WorkerNews::Refused { run, why });
                        }
                    }
                }
                look = true;
            }
            request = stops.recv(), if stopping != Some(StopLevel::Immediate) => {
                // The first request: no more work is taken; what runs finishes and is
                // reported. Another (or a kill request): what runs is stopped and given back,
                // to run again elsewhere (not counted against its task's retries).
                let level = match (request, stopping) {
                    (Some(StopRequest::Kill), _) | (_, Some(_)) => StopLevel::Immediate,
                    _ => StopLevel::Graceful,
                };
                stopping = Some(level);
                match level {
                    StopLevel::Immediate => {
                        for attempt in held.values() {
                            attempt.given_back.store(true, std::sync::atomic::Ordering::Relaxed);
                            attempt.stop.send_replace(StopLevel::Immediate);
                        }
                        news(WorkerNews::Stopping { now: true, held: held.len() });
                    }
                    _ => news(WorkerNews::Stopping { now: false, held: held.len() }),
                }
            }
        }
    }
    let _ = store.remove_worker(&id);
    Ok(())
}

/// While the store is out of reach: the attempts whose leases run out before `next` (the next
/// renewal) are stopped now and their ends dropped, before their coordinator, seeing the
/// leases lapse, runs them again elsewhere.
fn stop_running_out(
    held: &mut HashMap<AttemptKey, HeldAttempt>,
    next: Instant,
    news: &mut dyn FnMut(WorkerNews),
) {
    let running_out = |a: &HeldAttempt| !a.lost && a.held_until <= next;
    match held.values().filter(|a| running_out(a)).count() {
        0 => return,
        1 => news(WorkerNews::Problem(
            "the store is out of reach: stopped 1 attempt whose lease runs out before the next renewal; it runs again elsewhere".to_owned(),
        )),
        n => news(WorkerNews::Problem(format!(
            "the store is out of reach: stopped {n} attempts whose leases run out before the next renewal; they run again elsewhere"
        ))),
    }
    for (key, attempt) in held.iter_mut() {
        if !running_out(attempt) {
            continue;
        }
        attempt.lost = true;
        attempt.stop.send_replace(StopLevel::Immediate);
        news(WorkerNews::Lost {
            run: key.run.clone(),
            task: attempt.task.clone(),
            attempt: key.attempt,
        });
    }
}

/// Writes an attempt's end: `Some(true)` taken, `Some(false)` no longer this worker's,
/// `None` the store could not be reached (try again).
fn end(store: &dyn QueueStore, worker: &str, key: &AttemptKey, result: &str) -> Option<bool> {
    store.end_attempt(worker, key, result).ok()
}

/// What became of an attempt's end.
enum Delivered {
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

/// Assembles and starts a claimed attempt; one that cannot start ends at once, as locally.
#[allow(clippy::too_many_arguments)]
fn start(
    store: &Arc<dyn QueueStore>,
    worker: &str,
    config: &RunConfig,
    outbox: &Outbox,
    claim: ClaimedAttempt,
    held_until: Instant,
    parts: &mut HashMap<RunId, RunParts>,
    held: &mut HashMap<AttemptKey, HeldAttempt>,
    units: &mut JoinSet<(AttemptKey, Delivered, TreeAfter)>,
    news: &mut dyn FnMut(WorkerNews),
) {
    let key = AttemptKey {
        run: claim.run.clone(),
        task: claim.task,
        attempt: claim.attempt,
    };
    let (stop, stop_rx) = watch::channel(StopLevel::Run);
    let (progress, mut progress_rx) = mpsc::unbounded_channel::<Event>();
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
    let given_back = Arc::new(std::sync::atomic::AtomicBool::new(false));
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
    let (store, worker, outbox) = (Arc::clone(store), worker.to_owned(), outbox.clone());
    units.spawn(async move {
        let mut shipper = None;
        let mut publisher = None;
        let mut give_back = false;
        let mut not_here = None;
        let done = match prepared {
            Ok((id, mut logs, publishing, Ok(unit))) => {
                publisher = publishing;
                let running = unit.start().rest;
                let mut finishing = std::pin::pin!(running.finish_caught(id));
                let mut ship = tokio::time::interval(SHIP_LOGS);
                let done = loop {
                    tokio::select! {
                        Some(event) = progress_rx.recv() => tell(&*store, &worker, &key, &event),
                        _ = ship.tick() => logs.ship(&*store),
                        done = &mut finishing => break done,
                    }
                };
                shipper = Some(logs);
                done
            }
            Ok((.., Err(outcome))) => AttemptDone::never_started(key.task, key.attempt, outcome),
            // The store did not answer: given back below, to run again once it does.
            Err(Unprepared {
                out_of_reach: true, ..
            }) => {
                give_back = true;
                AttemptDone::never_started(key.task, key.attempt, baton_model::Outcome::Cancelled)
            }
            // Not a run this worker can work on: given back, for a worker that can.
            Err(Unprepared {
                not_here: true,
                why,
                ..
            }) => {
                give_back = true;
                not_here = Some(why);
                AttemptDone::never_started(key.task, key.attempt, baton_model::Outcome::Cancelled)
            }
            // The run's parts could not be had here (its graph, its branches): the
            // machinery's failure, retried like one.
            Err(Unprepared { why, .. }) => AttemptDone::never_started(
                key.task,
                key.attempt,
                baton_model::Outcome::SpawnFailed { error: why },
            ),
        };
        // What it said and wrote before it ended goes before its end.
        while let Ok(event) = progress_rx.try_recv() {
            tell(&*store, &worker, &key, &event);
        }
        if let Some(mut logs) = shipper {
            logs.ship(&*store);
        }
        let tree = TreeAfter {
            set_up: done.set_up,
            end: done.tree.clone(),
        };
        let given_back = give_back || given_back.load(std::sync::atomic::Ordering::Relaxed);
        let delivered = match deliver(
            &*store,
            &worker,
            &outbox,
            publisher.as_ref(),
            &key,
            done,
            given_back,
        ) {
            Delivered::GivenBack if let Some(why) = not_here => Delivered::NotHere { why },
            delivered => delivered,
        };
        (key, delivered, tree)
    });
}

/// What an attempt did with its task's worktree, for the worker's own copy of the run's.
struct TreeAfter {
    set_up: bool,
    end: TreeEnd,
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

/// `error` and what caused it, down to the first cause: "the PostgreSQL database failed"
/// alone does not say that the server closed the connection.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut words = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        words.push_str(": ");
        words.push_str(&next.to_string());
        cause = next.source();
    }
    words
}
