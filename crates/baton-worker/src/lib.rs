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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_attempt::RunConfig;
use baton_attempt::launch::Launcher;
use baton_attempt::workspace::Workspaces;
use baton_exec::StopLevel;
use baton_graph::Graph;
use baton_layout::RunDirs;
use baton_model::{RunId, TaskState};
use baton_runner::StopRequest;
use baton_store::{AttemptKey, QueueStore, Renewal, StoreError, Wake, WorkerRecord};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

mod attempt;
mod coordinate;
use attempt::{Delivered, TreeAfter, end};
mod outbox;
mod ship_logs;
pub mod watchdog;

use coordinate::{AsCoordinator, Coordinating, Coordination, take_runs};
use outbox::Outbox;

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
    stops: mpsc::UnboundedReceiver<StopRequest>,
    news: &mut dyn FnMut(WorkerNews),
) -> Result<(), StoreError> {
    let me = baton_runner::driver::me();
    let mut config = config;
    let marker = format!("{}:{}", me.pid, me.start_time);
    config.worker = Some(marker.clone());
    // Ends this worker's attempts if it stops renewing them (paused, stuck) or dies. Without
    // one (baton's own program cannot be found or started), the worker still works: its
    // attempts are ended when it wakes, as before.
    let watchdog = match std::env::current_exe()
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
        lease_ms: Some(options.lease.as_millis() as i64),
        heard_ms_ago: 0,
        running: Vec::new(),
    };
    store.heartbeat_worker(&record)?;
    news(WorkerNews::Started { id: id.clone() });
    let wake = store.listen(&[Wake::WorkQueued])?;
    let submitted = store.listen(&[Wake::RunSubmitted])?;
    let mut worker = Worker {
        outbox: Outbox::new(config.state_dir.join("worker").join(&id)),
        as_coordinator: AsCoordinator {
            config: config.clone(),
            lease: options.lease,
            worker: id.clone(),
        },
        store: Arc::clone(&store),
        options,
        config,
        id,
        record,
        watchdog,
        parts: HashMap::new(),
        held: HashMap::new(),
        units: JoinSet::new(),
        coordinating: HashMap::new(),
        refused: HashSet::new(),
        backlog: true,
        news,
    };
    worker.run(wake, submitted, stops).await;
    let _ = store.remove_worker(&worker.id);
    Ok(())
}

/// A worker at work: what the steps of its loop share.
struct Worker<'n> {
    store: Arc<dyn QueueStore>,
    options: WorkerOptions,
    config: RunConfig,
    id: String,
    /// What its heartbeat writes.
    record: WorkerRecord,
    watchdog: Option<watchdog::Watchdog>,
    /// Ends not yet taken by the store.
    outbox: Outbox,
    /// The runs it has worked on, by run.
    parts: HashMap<RunId, RunParts>,
    /// The attempts it holds.
    held: HashMap<AttemptKey, HeldAttempt>,
    /// Its running attempts, each ending with what became of its end and its worktree.
    units: JoinSet<(AttemptKey, Delivered, TreeAfter)>,
    /// The runs it coordinates.
    coordinating: HashMap<RunId, Coordinating>,
    as_coordinator: AsCoordinator,
    /// Runs this worker will not coordinate or work on (see `Coordination::Refused`,
    /// `Delivered::NotHere`): not looked at again.
    refused: HashSet<RunId>,
    /// More may be queued than it could take when it last claimed.
    backlog: bool,
    news: &'n mut dyn FnMut(WorkerNews),
}

impl Worker<'_> {
    /// The loop: claims, units' ends, heartbeats, sweeps and stop requests, until stopped and
    /// every attempt held has ended.
    async fn run(
        &mut self,
        mut wake: watch::Receiver<u64>,
        mut submitted: watch::Receiver<u64>,
        mut stops: mpsc::UnboundedReceiver<StopRequest>,
    ) {
        let mut heartbeat = tokio::time::interval(self.options.lease / 3);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sweep = tokio::time::interval(SWEEP);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (coordinated_tx, mut coordinated) = mpsc::unbounded_channel::<(RunId, Coordination)>();
        let mut stopping: Option<StopLevel> = None;
        // Whether to claim now: woken, polled, or a slot came free while work may be waiting.
        let mut look = true;
        // Whether to look for runs to coordinate: at start, when one is submitted, and at
        // each poll (a coordinator that died is found then).
        let mut look_for_runs = true;
        loop {
            if stopping.is_none() && look {
                look = false;
                self.claim();
            }
            if stopping.is_none() && look_for_runs {
                look_for_runs = false;
                if self.options.coordinate {
                    take_runs(
                        &self.store,
                        &self.as_coordinator,
                        &coordinated_tx,
                        &mut self.coordinating,
                        &self.refused,
                        self.news,
                    );
                }
            }
            if stopping.is_some() && self.held.is_empty() {
                // The runs this worker coordinates are left as they are, held by this
                // process's lease: once it has exited, another worker takes them over (at
                // once on this host, when the lease lapses elsewhere), as after a crash.
                for (_, (_, task)) in self.coordinating.drain() {
                    task.abort();
                }
                return;
            }
            tokio::select! {
                Some(joined) = self.units.join_next(), if !self.units.is_empty() => {
                    if let Ok((key, delivered, tree)) = joined {
                        self.ended(key, delivered, tree);
                        // A slot is free: worth a claim if work was left when the slots were
                        // full.
                        look |= self.backlog;
                    }
                }
                _ = heartbeat.tick() => self.heartbeat(),
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
                        (self.news)(WorkerNews::Swept { processes: killed });
                    }
                }
                _ = poll.tick() => {
                    look = true;
                    look_for_runs = true;
                }
                Some((run, how)) = coordinated.recv() => {
                    self.coordinating.remove(&run);
                    match how {
                        Coordination::Ended(state) => (self.news)(WorkerNews::Coordinated { run, state }),
                        Coordination::Refused(why) => self.refuse(run, why),
                    }
                    look = true;
                }
                request = stops.recv(), if stopping != Some(StopLevel::Immediate) => {
                    // The first request: no more work is taken; what runs finishes and is
                    // reported. Another (or a kill request): what runs is stopped and given
                    // back, to run again elsewhere (not counted against its task's retries).
                    let level = match (request, stopping) {
                        (Some(StopRequest::Kill), _) | (_, Some(_)) => StopLevel::Immediate,
                        _ => StopLevel::Graceful,
                    };
                    stopping = Some(level);
                    self.stop(level);
                }
            }
        }
    }

    /// Claims what its free slots can take, and starts it.
    fn claim(&mut self) {
        let free = self.options.slots.saturating_sub(self.held.len() as u32);
        if free == 0 {
            self.backlog = true;
            return;
        }
        let asked = Instant::now();
        let except: Vec<RunId> = self.refused.iter().cloned().collect();
        let claimed = self.store.claim_attempts(
            &self.id,
            &self.options.engines,
            &self.options.labels,
            free,
            self.options.lease.as_millis() as i64,
            &except,
        );
        match claimed {
            Ok(claimed) => {
                // More may be waiting than there were free slots.
                self.backlog = claimed.len() as u32 == free;
                for claim in claimed {
                    self.start(claim, asked + self.options.lease);
                }
            }
            Err(error) => (self.news)(WorkerNews::Problem(format!(
                "cannot claim work: {}",
                with_causes(&error)
            ))),
        }
    }

    /// An attempt's unit ended: `delivered` says what became of its end.
    fn ended(&mut self, key: AttemptKey, delivered: Delivered, tree: TreeAfter) {
        // This worker's own copy of the run's worktrees follows what the attempt did with the
        // task's (made it not, or pooled it).
        if let Some(run) = self.parts.get_mut(&key.run) {
            run.workspaces
                .attempt_ended(key.task, tree.set_up, &tree.end);
        }
        let Some(attempt) = self.held.remove(&key) else {
            return;
        };
        let (run, task, attempt_n) = (key.run.clone(), attempt.task, key.attempt);
        let news = &mut self.news;
        match delivered {
            Delivered::Taken { outcome } => news(WorkerNews::Ended {
                run,
                task,
                attempt: attempt_n,
                outcome,
            }),
            // Said when the heartbeat found it out, else now.
            Delivered::Refused if attempt.lost => {}
            Delivered::Refused => news(WorkerNews::Lost {
                run,
                task,
                attempt: attempt_n,
            }),
            // In the outbox: sent again at the next heartbeat.
            Delivered::Kept => {}
            Delivered::GivenBack => news(WorkerNews::GivenBack {
                run,
                task,
                attempt: attempt_n,
            }),
            // Said once, for the run; its attempts are not claimed here again.
            Delivered::NotHere { why } => self.refuse(run, why),
        }
    }

    /// `run` is not this worker's to work on or coordinate: said once, and not looked at
    /// again.
    fn refuse(&mut self, run: RunId, why: String) {
        if self.refused.insert(run.clone()) {
            (self.news)(WorkerNews::Refused { run, why });
        }
    }

    /// Every third of its lease: the worker says it lives, sends the ends its outbox holds,
    /// and renews the attempts it holds (stopping those it no longer holds, or those whose
    /// leases run out while the store is out of reach).
    fn heartbeat(&mut self) {
        if let Some(watchdog) = &mut self.watchdog {
            watchdog.ping();
        }
        let (store, id) = (&*self.store, self.id.as_str());
        let _ = store.heartbeat_worker(&self.record);
        for (key, result) in self.outbox.pending(|key| self.held.contains_key(key)) {
            if end(store, id, &key, &result).is_some() {
                self.outbox.remove(&key);
            }
        }
        let keys: Vec<AttemptKey> = self
            .held
            .iter()
            .filter(|(_, a)| !a.lost)
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return;
        }
        let asked = Instant::now();
        let lease = self.options.lease;
        match store.renew_attempts(id, &keys, lease.as_millis() as i64) {
            Ok(answers) => {
                for (key, renewal) in answers {
                    let Some(attempt) = self.held.get_mut(&key) else {
                        continue;
                    };
                    match renewal {
                        Renewal::Held { stop } => {
                            attempt.held_until = asked + lease;
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
                            (self.news)(WorkerNews::Lost {
                                run: key.run.clone(),
                                task: attempt.task.clone(),
                                attempt: key.attempt,
                            });
                        }
                    }
                }
            }
            Err(error) => {
                (self.news)(WorkerNews::Problem(format!(
                    "cannot renew the leases of this worker's attempts: {}",
                    with_causes(&error)
                )));
                stop_running_out(&mut self.held, Instant::now() + lease / 3, self.news);
            }
        }
    }

    /// Asked to stop: once what it holds has ended (`Graceful`), or at once, giving what it
    /// holds back (`Immediate`).
    fn stop(&mut self, level: StopLevel) {
        let held = self.held.len();
        if level == StopLevel::Immediate {
            for attempt in self.held.values() {
                attempt
                    .given_back
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                attempt.stop.send_replace(StopLevel::Immediate);
            }
        }
        (self.news)(WorkerNews::Stopping {
            now: level == StopLevel::Immediate,
            held,
        });
    }
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
