//! The run's commits, made on a thread of their own.
//!
//! A commit costs the thread that makes it ~20 µs per task recorded (SQLite's B-trees, the WAL
//! frames, their checksums and writes), and the dispatcher's thread is the one on the path from
//! one task's end to the next one's start: every microsecond it spends is a microsecond a slot
//! stays empty. So the dispatcher hands each batch to this thread, which has a connection of
//! its own (and the store's upkeep, [`baton_store::RunLog::maintain_in_background`], on it), and goes
//! on launching what does not depend on the batch. A launch that needs a predecessor's end
//! still waits until the batch holding it is acknowledged: a completion is durable before any
//! dependent starts.

use std::sync::mpsc;
use std::thread::JoinHandle;

use baton_model::{Event, RunId};
use baton_store::{AttemptOutput, Lease, Store, StoreError};
use tokio::sync::mpsc as async_mpsc;

/// Whether this build was asked to acknowledge batches without committing them: the floor
/// of `docs/PERFORMANCE.md` ("what recording costs"), measured by a build with the
/// `measure-floor` feature and `BATON_MEASURE_SKIP_COMMITS=1`. Never in a normal build.
#[cfg(feature = "measure-floor")]
pub(crate) fn skips_commits() -> bool {
    static SKIP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SKIP.get_or_init(|| std::env::var_os("BATON_MEASURE_SKIP_COMMITS").is_some())
}

/// A normal build commits every batch.
#[cfg(not(feature = "measure-floor"))]
pub(crate) const fn skips_commits() -> bool {
    false
}

/// Batches go out in order and are acknowledged in the same order.
pub(crate) struct Recorder {
    batches: Option<mpsc::Sender<Batch>>,
    acks: async_mpsc::UnboundedReceiver<Ack>,
    /// Says once that the run was lost (claimed by another process, or its database gone),
    /// found by the heartbeat.
    lost: Option<tokio::sync::oneshot::Receiver<StoreError>>,
    thread: Option<JoinHandle<()>>,
    /// The number of the last batch sent (batches count from 1).
    sent: u64,
    /// The number of the last batch acknowledged.
    acked: u64,
}

struct Batch {
    id: u64,
    events: Vec<Event>,
    outputs: Vec<AttemptOutput>,
}

/// What the recorder has to say.
pub(crate) enum Signal {
    Ack(Ack),
    /// The heartbeat found the run lost: claimed by another process, or its database gone.
    Lost(StoreError),
}

/// The heartbeat's word that the run was lost, once; then never again.
async fn lost_word(lost: &mut Option<tokio::sync::oneshot::Receiver<StoreError>>) -> StoreError {
    let Some(receiver) = lost else {
        return std::future::pending().await;
    };
    let said = receiver.await;
    *lost = None;
    match said {
        Ok(err) => err,
        // The thread ended without a word: what was not recorded, the acks say.
        Err(_) => std::future::pending().await,
    }
}

/// A batch committed (or not): its events, and the sequence numbers they were given.
pub(crate) struct Ack {
    pub(crate) id: u64,
    pub(crate) events: Vec<Event>,
    pub(crate) seqs: Result<Vec<u64>, StoreError>,
}

/// Records `batch`. While the store is out of reach (a server restarting, a connection
/// dropped), the batch is sent again, for up to `term` (after which the lease has lapsed and
/// the run is another driver's to take): first asking where the run's log ends, since a commit
/// whose answer was lost may have landed. Only the lease holder appends events to its run, so
/// a log `batch.events.len()` longer than before is this batch, and one as long as before is
/// not. The run goes on where it was instead of stopping, and nothing runs twice for it.
fn commit(
    store: &dyn Store,
    run: &RunId,
    lease: Lease,
    batch: &Batch,
    last: &mut Option<u64>,
    term: std::time::Duration,
) -> Result<Vec<u64>, StoreError> {
    let mut backoff = crate::backoff::Backoff::within(term);
    let mut result = store.record(run, lease, &batch.events, &batch.outputs);
    while let Err(err) = &result {
        let Some(pause) = backoff.next_pause().filter(|_| err.is_unreachable()) else {
            break;
        };
        std::thread::sleep(pause);
        let n = batch.events.len() as u64;
        match (store.last_seq(run), *last) {
            // Landed: its events are the last `n`.
            (Ok(now), Some(before)) if n > 0 && now == before + n => {
                result = Ok((before + 1..=now).collect());
            }
            // Not landed (or only outputs, which land the same twice): sent again.
            (Ok(now), Some(before)) if now == before => {
                result = store.record(run, lease, &batch.events, &batch.outputs);
            }
            // Still out of reach: waited for.
            (Err(again), _) if again.is_unreachable() => {}
            // Anything else cannot be told apart: the failure stands.
            _ => break,
        }
    }
    if let Ok(seqs) = &result
        && let Some(&end) = seqs.last()
    {
        *last = Some(end);
    }
    result
}

impl Recorder {
    /// Starts the thread, with a connection of its own to `store`, committing as the holder
    /// of `lease`, which it renews for `term` at a time while the run is driven (every third
    /// of it; [`baton_store::LEASE_TERM`] unless a worker's `--lease` says otherwise).
    pub(crate) fn start(
        store: &dyn Store,
        run: RunId,
        lease: Lease,
        term: std::time::Duration,
    ) -> Result<Self, StoreError> {
        let own = store.another()?;
        let (batches, received) = mpsc::channel::<Batch>();
        let (acknowledge, acks) = async_mpsc::unbounded_channel();
        let (lost_tx, lost) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("baton-recorder".into())
            .spawn(move || {
                // The long commits (SQLite copying the WAL back) go to yet another thread.
                own.maintain_in_background();
                let mut failed = false;
                let mut lease = lease;
                // The last event recorded for the run: how a turn sent again after the store
                // went out of reach is known to have landed or not.
                let mut last = own.last_seq(&run).ok();
                let mut lost_tx = Some(lost_tx);
                // The heartbeat keeps to the clock whatever the batches do: a run that commits
                // all the time renews as one that is idle.
                let renew_every = term / 3;
                let mut next_renewal = std::time::Instant::now() + renew_every;
                loop {
                    let now = std::time::Instant::now();
                    if now >= next_renewal {
                        next_renewal = now + renew_every;
                        match own.renew(&run, lease, baton_attempt::stamp::now_ms(), term) {
                            Ok(renewed) => lease = renewed,
                            // Another process holds the run now: the dispatcher stops at once,
                            // even if it has nothing to commit for a long while.
                            Err(
                                err @ (StoreError::LeaseLost { .. } | StoreError::Vanished { .. }),
                            ) => {
                                failed = true;
                                if let Some(tx) = lost_tx.take() {
                                    let _ = tx.send(err);
                                }
                            }
                            // Busy or the like: the next renewal may go through.
                            Err(_) => {}
                        }
                    }
                    let batch =
                        match received.recv_timeout(next_renewal.saturating_duration_since(now)) {
                            Ok(batch) => batch,
                            Err(mpsc::RecvTimeoutError::Timeout) => continue,
                            Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        };
                    // After a failure nothing more is committed: a later batch may hold the
                    // end of an attempt whose start was in the one that failed.
                    let seqs = if skips_commits() {
                        Ok((1..=batch.events.len() as u64).collect())
                    } else if failed {
                        Err(StoreError::Recorder(std::io::Error::other(
                            "not recorded: an earlier commit of the run failed",
                        )))
                    } else {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            commit(own.as_ref(), &run, lease, &batch, &mut last, term)
                        }))
                        .unwrap_or_else(|_| {
                            Err(StoreError::Recorder(std::io::Error::other(
                                "the commit panicked",
                            )))
                        })
                    };
                    failed |= seqs.is_err();
                    let ack = Ack {
                        id: batch.id,
                        events: batch.events,
                        seqs,
                    };
                    if acknowledge.send(ack).is_err() {
                        break;
                    }
                }
            })
            .map_err(StoreError::Recorder)?;
        Ok(Self {
            batches: Some(batches),
            acks,
            lost: Some(lost),
            thread: Some(thread),
            sent: 0,
            acked: 0,
        })
    }

    /// The next acknowledgement (while a batch is in flight), or the heartbeat's word that
    /// the run was lost (once). Cancel-safe.
    pub(crate) async fn signal(&mut self) -> Signal {
        let in_flight = self.in_flight();
        let (acks, lost) = (&mut self.acks, &mut self.lost);
        let got = tokio::select! {
            ack = acks.recv(), if in_flight => Ok(ack),
            err = lost_word(lost) => Err(err),
        };
        match got {
            Ok(ack) => Signal::Ack(self.received(ack)),
            Err(err) => Signal::Lost(err),
        }
    }

    /// Hands batch `id` (numbered by the journal, in order) to the thread.
    pub(crate) fn send(&mut self, id: u64, events: Vec<Event>, outputs: Vec<AttemptOutput>) {
        debug_assert!(id > self.sent, "batches are sent in order");
        self.sent = id;
        if let Some(batches) = &self.batches {
            // A thread that is gone is noticed by `ack`.
            let _ = batches.send(Batch {
                id,
                events,
                outputs,
            });
        }
    }

    /// Whether a batch sent is not acknowledged yet.
    pub(crate) fn in_flight(&self) -> bool {
        self.batches_in_flight() > 0
    }

    /// How many batches sent are not acknowledged yet.
    pub(crate) fn batches_in_flight(&self) -> u64 {
        self.sent - self.acked
    }

    /// The next acknowledgement. Call only while [`Recorder::in_flight`]. Cancel-safe.
    pub(crate) async fn ack(&mut self) -> Ack {
        let ack = self.acks.recv().await;
        self.received(ack)
    }

    /// The next acknowledgement if it has come.
    pub(crate) fn try_ack(&mut self) -> Option<Ack> {
        if !self.in_flight() {
            return None;
        }
        match self.acks.try_recv() {
            Ok(ack) => Some(self.received(Some(ack))),
            Err(async_mpsc::error::TryRecvError::Empty) => None,
            Err(async_mpsc::error::TryRecvError::Disconnected) => Some(self.received(None)),
        }
    }

    fn received(&mut self, ack: Option<Ack>) -> Ack {
        let ack = ack.unwrap_or_else(|| Ack {
            // The thread ended (it panicked): no batch in flight is recorded.
            id: self.sent,
            events: Vec::new(),
            seqs: Err(StoreError::Recorder(std::io::Error::other(
                "it stopped before the run ended",
            ))),
        });
        self.acked = ack.id;
        ack
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Closing the channel ends the thread once it has committed what it was sent.
        self.batches = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_model::{EventKind, TaskId, TaskState};
    use baton_store::{LEASE_TERM, Liveness, NewRun, RunLog, RunReader, SqliteStore};

    use super::*;

    fn event(kind: EventKind) -> Event {
        Event {
            seq: 0,
            at_ms: 1,
            kind,
        }
    }

    /// A store holding run `r1` of one task `a`, and the lease of this process on it.
    fn held_run(dir: &std::path::Path) -> (SqliteStore, RunId, Lease) {
        let store = SqliteStore::open(&dir.join("baton.db")).unwrap();
        let run = RunId::new("r1").unwrap();
        store
            .create_run(&NewRun {
                id: run.clone(),
                name: "r".into(),
                graph_path: "g.toml".into(),
                graph: &"{}",
                concurrency: 1,
                started_at_ms: 0,
                tasks: vec![(TaskId::new("a").unwrap(), 0)],
            })
            .unwrap();
        let claim = store
            .claim(&run, &crate::driver::me(), 0, LEASE_TERM, &|_| {
                Liveness::Dead
            })
            .unwrap();
        (store, run, claim.lease)
    }

    #[tokio::test]
    async fn after_a_failed_commit_nothing_more_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (store, run, lease) = held_run(dir.path());
        let mut recorder = Recorder::start(&store, run.clone(), lease, LEASE_TERM).unwrap();
        let unknown = EventKind::TaskFinished {
            task: TaskId::new("nope").unwrap(),
            state: TaskState::Succeeded,
            reason: None,
        };
        let fine = EventKind::TaskWaiting {
            task: TaskId::new("a").unwrap(),
        };
        recorder.send(1, vec![event(unknown)], Vec::new());
        recorder.send(2, vec![event(fine)], Vec::new());
        let first = recorder.ack().await;
        assert!(matches!(first.seqs, Err(StoreError::UnknownTask { .. })));
        let second = recorder.ack().await;
        assert_eq!(second.id, 2);
        assert!(second.seqs.is_err(), "committed after a failure");
        assert_eq!(second.events.len(), 1, "sent back to be reported");
        assert!(!recorder.in_flight());
        drop(recorder);
        assert!(store.events(&run, 0, 10).unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_driver_whose_run_was_taken_over_records_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let (store, run, lease) = held_run(dir.path());
        let mut recorder = Recorder::start(&store, run.clone(), lease, LEASE_TERM).unwrap();
        let waiting = || {
            event(EventKind::TaskWaiting {
                task: TaskId::new("a").unwrap(),
            })
        };
        recorder.send(1, vec![waiting()], Vec::new());
        assert_eq!(recorder.ack().await.seqs.unwrap(), [1]);
        // Another process claims the run: this one's lease is judged lapsed.
        let other = baton_store::Driver {
            pid: 1,
            start_time: 1,
            host: "elsewhere".into(),
        };
        let taken = store
            .claim(&run, &other, i64::MAX / 2, LEASE_TERM, &|_| {
                Liveness::Unknown
            })
            .unwrap();
        assert!(taken.lease.token > lease.token);
        recorder.send(2, vec![waiting()], Vec::new());
        let refused = recorder.ack().await;
        assert!(
            matches!(refused.seqs, Err(StoreError::LeaseLost { .. })),
            "{:?}",
            refused.seqs
        );
        drop(recorder);
        assert_eq!(store.events(&run, 0, 10).unwrap().len(), 1);
    }

    #[tokio::test]
    async fn the_lease_is_renewed_while_the_run_is_driven_and_lapses_when_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (store, run, _) = held_run(dir.path());
        let term = std::time::Duration::from_secs(2);
        let now = baton_attempt::stamp::now_ms;
        let me = crate::driver::me();
        let lease = store
            .claim(&run, &me, now(), term, &|_| Liveness::Alive)
            .unwrap()
            .lease;
        let mut recorder = Recorder::start(&store, run.clone(), lease, term).unwrap();
        let other = baton_store::Driver {
            pid: 1,
            start_time: 1,
            host: "elsewhere".into(),
        };
        // Seen from another host, the driver is a lease: past its first term it still holds,
        // while batches come all the time (the heartbeat keeps to the clock, not to the
        // lulls between batches).
        let until = std::time::Instant::now() + term + term / 2;
        let mut id = 0;
        while std::time::Instant::now() < until {
            id += 1;
            let waiting = event(EventKind::TaskWaiting {
                task: TaskId::new("a").unwrap(),
            });
            recorder.send(id, vec![waiting], Vec::new());
            assert!(recorder.ack().await.seqs.is_ok());
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let refused = store.claim(&run, &other, now(), term, &|_| Liveness::Unknown);
        assert!(
            matches!(refused, Err(StoreError::RunHeld { .. })),
            "{refused:?}"
        );
        // No heartbeat once the recorder is gone: the lease lapses.
        drop(recorder);
        std::thread::sleep(term + term / 2);
        let taken = store
            .claim(&run, &other, now(), term, &|_| Liveness::Unknown)
            .unwrap();
        assert_eq!(taken.replaced, Some(me));
    }

    #[tokio::test]
    async fn the_heartbeat_says_at_once_when_another_process_took_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let (store, run, _) = held_run(dir.path());
        let term = std::time::Duration::from_millis(900);
        let me = crate::driver::me();
        let lease = store
            .claim(&run, &me, baton_attempt::stamp::now_ms(), term, &|_| {
                Liveness::Alive
            })
            .unwrap()
            .lease;
        let mut recorder = Recorder::start(&store, run.clone(), lease, term).unwrap();
        // Taken over (this driver judged dead) while nothing is being committed.
        let other = baton_store::Driver {
            pid: 1,
            start_time: 1,
            host: "elsewhere".into(),
        };
        store
            .claim(&run, &other, baton_attempt::stamp::now_ms(), term, &|_| {
                Liveness::Dead
            })
            .unwrap();
        let said = tokio::time::timeout(std::time::Duration::from_secs(10), recorder.signal())
            .await
            .expect("the heartbeat said nothing");
        assert!(
            matches!(said, Signal::Lost(StoreError::LeaseLost { .. })),
            "{:?}",
            match said {
                Signal::Lost(err) => err.to_string(),
                Signal::Ack(_) => "an ack".into(),
            }
        );
    }
}
