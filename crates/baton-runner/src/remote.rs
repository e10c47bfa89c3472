//! Attempts run by workers (`baton worker`): the coordinator's side of the work queue.
//!
//! A run coordinated by a worker keeps its one scheduler and its one dispatcher; only where
//! an attempt runs changes. Instead of starting an attempt unit itself, the dispatcher queues
//! the attempt's [`Work`] (what the unit is assembled from that only the coordinator knows)
//! in PostgreSQL; a worker claims it, assembles the same unit from the run's recorded graph
//! and runs it (`baton-worker`), and writes the unit's [`AttemptDone`] back. A thread of the
//! coordinator's ([`Queue`]'s poller) takes those ends, and the attempts whose worker stopped
//! renewing its lease, and hands them to the dispatcher as if a local unit had ended: what
//! the dispatcher records and applies does not know where the attempt ran.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use baton_attempt::budget::Meter;
use baton_attempt::unit::AttemptDone;
use baton_attempt::work::Work;
use baton_exec::StopLevel;
use baton_model::{Event, Outcome, RunId};
use baton_store::{Arrivals, AttemptEnd, QueuedAttempt, StoreError, Wake, WorkQueue};
use tokio::sync::{mpsc, watch};

/// What in `graph` workers cannot do as it asks, one problem a task (`baton run --detach`
/// refuses the graph): a best-of task's candidates run in the coordinating worker's process,
/// on whichever worker coordinates, so its `runs_on` labels could not be honoured.
pub fn check_on_workers(graph: &baton_graph::Graph) -> Vec<String> {
    graph
        .tasks()
        .iter()
        .filter(|t| t.candidate_count() > 1 && !t.runs_on.is_empty())
        .map(|t| {
            format!(
                "task `{}` is best-of ({} candidates) and says runs_on = [{}], but a best-of \
                 task's candidates run on the worker that coordinates the run, whichever that \
                 is",
                t.id,
                t.candidate_count(),
                t.runs_on
                    .iter()
                    .map(|l| format!("\"{l}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect()
}

/// How often the poller looks at the queue when no notification woke it.
const POLL: Duration = Duration::from_millis(500);

/// Queues `batch`, sent again while the store is out of reach (a server restarting, a
/// connection dropped) for up to the lease's `term`: queuing is idempotent (a row already
/// there is left as it is), so a batch whose answer was lost is not queued twice.
fn enqueue(
    store: &dyn WorkQueue,
    run: &RunId,
    token: u64,
    batch: Vec<QueuedAttempt>,
    term: Duration,
) -> Result<(), StoreError> {
    let mut backoff = crate::backoff::Backoff::within(term);
    loop {
        match store.enqueue(run, token, batch.clone()) {
            Err(err) if err.is_unreachable() => match backoff.next_pause() {
                Some(pause) => std::thread::sleep(pause),
                None => return Err(err),
            },
            done => return done,
        }
    }
}

/// The coordinator's end of the queue for one run.
pub(crate) struct Queue {
    /// Attempts decided this turn, queued together.
    pending: Vec<QueuedAttempt>,
    /// To the thread that queues them: the dispatcher never waits on the database to start
    /// an attempt.
    orders: Option<std::sync::mpsc::Sender<Vec<QueuedAttempt>>>,
    queuer: Option<std::thread::JoinHandle<()>>,
    /// Ended attempts, from the poller.
    ends: mpsc::UnboundedReceiver<AttemptDone>,
    /// Attempts queued whose end the dispatcher has not had yet.
    outstanding: std::collections::HashSet<(u32, u32)>,
    quit: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
}

impl Queue {
    /// Starts the poller of `run`'s queue: ends go to the dispatcher through the returned
    /// queue, what running attempts record goes into `progress`, and a stop of the run
    /// (`stop`) reaches the workers.
    pub(crate) fn start(
        on: crate::drive::OnWorkers<'_>,
        run: RunId,
        token: u64,
        progress: mpsc::UnboundedSender<Event>,
        stop: watch::Receiver<StopLevel>,
        meter: Meter,
    ) -> Result<Self, StoreError> {
        let term = on.term;
        let store = on.queue.reconnect()?;
        let poll_store = store.reconnect()?;
        let mut listener = store.listener(&[Wake::AttemptEnded])?;
        let (tx, ends) = mpsc::unbounded_channel();
        let quit = Arc::new(AtomicBool::new(false));
        let (orders, queuer) = spawn_queuer(store, run.clone(), token, term, tx.clone())?;
        let poller = Poller {
            store: poll_store,
            run,
            token,
            progress,
            stop,
            meter,
            ends: tx,
            quit: Arc::clone(&quit),
        };
        let poller = std::thread::Builder::new()
            .name("baton-queue".to_owned())
            .spawn(move || poller.run(listener.as_mut()))
            .map_err(StoreError::Recorder)?;
        Ok(Self {
            pending: Vec::new(),
            outstanding: std::collections::HashSet::new(),
            orders: Some(orders),
            queuer: Some(queuer),
            ends,
            quit,
            poller: Some(poller),
        })
    }

    /// Attempt `attempt` of `task` was queued by an earlier coordinator, and this one adopted
    /// it: its end is awaited as if queued here.
    pub(crate) fn adopted(&mut self, task: u32, attempt: u32) {
        self.outstanding.insert((task, attempt));
    }

    /// Adds attempt `attempt` of `task` to this turn's queueing.
    pub(crate) fn push(
        &mut self,
        task: u32,
        attempt: u32,
        engine: String,
        labels: Vec<String>,
        work: &Work,
    ) {
        self.outstanding.insert((task, attempt));
        self.pending.push(QueuedAttempt {
            task,
            attempt,
            engine,
            labels,
            work: serde_json::to_string(work).expect("work serialises"),
        });
    }

    /// Queues this turn's attempts, in one transaction, on the queue's own thread.
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        if let Some(orders) = &self.orders {
            let _ = orders.send(pending);
        }
    }

    /// The next attempt that ended on a worker.
    pub(crate) async fn next(&mut self) -> Option<AttemptDone> {
        let done = self.ends.recv().await?;
        self.outstanding.remove(&(done.task, done.attempt));
        Some(done)
    }

    pub(crate) fn try_next(&mut self) -> Option<AttemptDone> {
        let done = self.ends.try_recv().ok()?;
        self.outstanding.remove(&(done.task, done.attempt));
        Some(done)
    }

    /// Every attempt queued whose end has not come, ended interrupted now: after the run was
    /// lost (another coordinator took it over) or its store failed for good, those ends
    /// would never reach this coordinator, and they are no longer its to wait for (the
    /// workers learn at their next renewal; the next coordinator runs them again).
    pub(crate) fn abandon(&mut self) -> Vec<AttemptDone> {
        self.pending.clear();
        self.outstanding
            .drain()
            .map(|(task, attempt)| {
                let mut done = AttemptDone::never_started(task, attempt, Outcome::Interrupted);
                done.stderr_tail = "[baton] this coordinator lost the run (or its store): the \
                                    attempt is left to the run's next coordinator\n"
                    .to_owned();
                done
            })
            .collect()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        drop(self.orders.take());
        if let Some(queuer) = self.queuer.take() {
            let _ = queuer.join();
        }
        self.quit.store(true, Ordering::Relaxed);
        if let Some(poller) = self.poller.take() {
            let _ = poller.join();
        }
    }
}

/// What the poller has taken, so that what the store gives again is handed over once: news
/// stay in the store until the next take says the poller has them, ends until the
/// dispatcher's record of them commits (see [`WorkQueue::take_arrivals`]).
#[derive(Default)]
struct Taker {
    /// News handed over, to be forgotten by the store at the next take (again, if that take's
    /// answer was lost: forgetting twice is harmless).
    have: Vec<i64>,
    /// Ends handed over and still in the store (not recorded yet).
    handed: std::collections::HashSet<(u32, u32)>,
}

impl Taker {
    /// What is new in `arrived`: the news and the ends not handed over before.
    fn sort(&mut self, arrived: Arrivals) -> (Vec<String>, Vec<AttemptEnd>) {
        // The take that answered forgot what `have` held.
        self.have = arrived.news.iter().map(|news| news.id).collect();
        let news = arrived.news.into_iter().map(|news| news.event).collect();
        let key = |end: &AttemptEnd| match end {
            AttemptEnd::Ended { task, attempt, .. } | AttemptEnd::Lapsed { task, attempt, .. } => {
                (*task, *attempt)
            }
        };
        // An end no longer in the store was recorded: it will not come again.
        let present: std::collections::HashSet<(u32, u32)> = arrived.ends.iter().map(key).collect();
        self.handed.retain(|handed| present.contains(handed));
        let ends = arrived
            .ends
            .into_iter()
            .filter(|end| self.handed.insert(key(end)))
            .collect();
        (news, ends)
    }
}

/// A worker's end, as it wrote it. One that cannot be read fails the attempt as one that
/// could not be launched, saying what was wrong with it (workers of another version of baton
/// write what this one cannot read: running it again would not help).
fn ended_remotely(task: u32, attempt: u32, result: &str) -> AttemptDone {
    let wrong = match serde_json::from_str::<AttemptDone>(result) {
        Ok(done) if done.task == task && done.attempt == attempt => return done,
        Ok(done) => format!(
            "it is about attempt {} of task #{}",
            done.attempt, done.task
        ),
        Err(error) => error.to_string(),
    };
    AttemptDone::never_started(
        task,
        attempt,
        Outcome::LaunchFailed {
            error: format!(
                "the worker's report of this attempt cannot be read ({wrong}): is every worker \
                 the same version of baton as the coordinator?"
            ),
        },
    )
}

/// The thread that queues the dispatcher's launches for workers, a batch at a time (fenced by
/// the run's lease `token`). A batch that cannot be queued (the run was taken over, or the
/// store failed) ends cancelled, as launches after a store failure do: the next commit tells
/// the dispatcher which. Ends when the queue is dropped (its sender with it).
fn spawn_queuer(
    store: Box<dyn baton_store::QueueStore>,
    run: RunId,
    token: u64,
    term: std::time::Duration,
    ends: mpsc::UnboundedSender<AttemptDone>,
) -> Result<
    (
        std::sync::mpsc::Sender<Vec<QueuedAttempt>>,
        std::thread::JoinHandle<()>,
    ),
    StoreError,
> {
    let (orders, inbox) = std::sync::mpsc::channel::<Vec<QueuedAttempt>>();
    let queuer = std::thread::Builder::new()
        .name("baton-enqueue".to_owned())
        .spawn(move || {
            while let Ok(mut batch) = inbox.recv() {
                while let Ok(more) = inbox.try_recv() {
                    batch.extend(more);
                }
                let keys: Vec<(u32, u32)> = batch.iter().map(|a| (a.task, a.attempt)).collect();
                if enqueue(store.as_ref(), &run, token, batch, term).is_err() {
                    for (task, attempt) in keys {
                        let _ = ends.send(AttemptDone::never_started(
                            task,
                            attempt,
                            Outcome::Cancelled,
                        ));
                    }
                }
            }
        })
        .map_err(StoreError::Recorder)?;
    Ok((orders, queuer))
}

/// The thread that watches a run's queue: it passes a stop of the run on to the workers, and
/// hands the dispatcher what workers said of running attempts (their news) and their ends.
struct Poller {
    store: Box<dyn baton_store::QueueStore>,
    run: RunId,
    token: u64,
    progress: mpsc::UnboundedSender<Event>,
    stop: watch::Receiver<StopLevel>,
    meter: Meter,
    ends: mpsc::UnboundedSender<AttemptDone>,
    quit: Arc<AtomicBool>,
}

impl Poller {
    fn run(self, listener: &mut dyn baton_store::Wakeups) {
        let mut taker = Taker::default();
        let mut stopped = StopLevel::Run;
        while !self.quit.load(Ordering::Relaxed) {
            self.pass_on_stop(&mut stopped);
            if !self.take(&mut taker) {
                return;
            }
            // Woken by a worker's end, or by the clock.
            let _ = listener.wait(POLL);
        }
    }

    /// A stop of the run reaches the workers; what no worker took never started: it ends here,
    /// cancelled. Tried again at the next poll if the store did not answer.
    fn pass_on_stop(&self, stopped: &mut StopLevel) {
        let level = *self.stop.borrow();
        if level == *stopped {
            return;
        }
        let code = match level {
            StopLevel::Run => 0,
            StopLevel::Graceful => 1,
            StopLevel::Immediate => 2,
        };
        match self.store.stop_attempts(&self.run, self.token, code) {
            Ok(unclaimed) => {
                *stopped = level;
                for (task, attempt) in unclaimed {
                    let _ = self.ends.send(AttemptDone::never_started(
                        task,
                        attempt,
                        Outcome::Cancelled,
                    ));
                }
            }
            // Another coordinator's now: its queue is not this one's to stop (the recorder's
            // heartbeat tells the dispatcher).
            Err(StoreError::LeaseLost { .. } | StoreError::UnknownRun(_)) => *stopped = level,
            Err(_) => {}
        }
    }

    /// Takes what arrived: a running attempt's news before its end. Whether the dispatcher is
    /// still there to take ends.
    fn take(&self, taker: &mut Taker) -> bool {
        let Ok(arrived) = self.store.take_arrivals(&self.run, self.token, &taker.have) else {
            return true;
        };
        let (news, ends) = taker.sort(arrived);
        for event in news {
            if let Ok(event) = serde_json::from_str::<Event>(&event) {
                let _ = self.progress.send(event);
            }
        }
        for end in ends {
            let done = match end {
                AttemptEnd::Ended {
                    task,
                    attempt,
                    result,
                } => ended_remotely(task, attempt, &result),
                AttemptEnd::Lapsed {
                    task,
                    attempt,
                    worker,
                } => lapsed(task, attempt, &worker),
            };
            if let Some(agent) = &done.agent {
                self.meter.finish((done.task, done.attempt), agent);
            }
            if self.ends.send(done).is_err() {
                return false;
            }
        }
        true
    }
}

/// An attempt whose worker stopped renewing its lease: interrupted (run again at once, not
/// counted against its retries), with why in its stderr.
fn lapsed(task: u32, attempt: u32, worker: &str) -> AttemptDone {
    let mut done = AttemptDone::never_started(task, attempt, Outcome::Interrupted);
    done.lost_by = Some(worker.to_owned());
    done.stderr_tail = format!(
        "[baton] worker {worker} stopped renewing its lease on this attempt (it died, lost its \
         connection or was paused): the attempt is over, and runs again elsewhere\n"
    );
    done
}
