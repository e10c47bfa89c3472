//! The work queue of runs driven by workers: what a coordinator puts in, what workers claim,
//! renew and end, fenced so that an attempt's end is recorded once, by the worker that holds
//! it, and never after its lease lapsed. [`WorkQueue`] is its API; PostgreSQL's store is the
//! backend that has one (`pg/queue.rs`), and `tests/store/queue.rs` holds the cases any
//! backend must pass. One machine needs no queue: SQLite has none.
//!
//! The queue does not know what an attempt's work or result is: both are the runner's JSON,
//! carried as text. What it guarantees is who may write what, and when:
//! - only the coordinator holding the run's lease queues attempts ([`WorkQueue::enqueue`]: the
//!   lease token is checked where the rows go in);
//! - a queued attempt is claimed by one worker ([`WorkQueue::claim_attempts`]: claims never
//!   wait on each other), which holds it while it renews its lease;
//! - its end is written only by that worker, only while it still holds it
//!   ([`WorkQueue::end_attempt`]): once the lease lapsed the late end changes nothing (the
//!   coordinator takes the attempt as interrupted), and the worker learns so from the answer
//!   (and from its next renewal);
//! - only the coordinator holding the run's lease takes what arrived and stops attempts
//!   ([`WorkQueue::take_arrivals`], [`WorkQueue::stop_attempts`]): one that was taken over
//!   and wakes cannot take the ends its successor waits for, nor empty its queue;
//! - an end leaves the queue in the transaction that records it in the run's log (a row
//!   taken but not recorded is still there for the next take, or the next coordinator): an
//!   answer lost on the way, or a coordinator that dies between the two, loses no end.

use std::time::Duration;

use baton_model::RunId;

use crate::{NewRun, Store, StoreError};

/// What wakes a worker or a coordinator before its next poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Attempts were queued (workers claim).
    WorkQueued,
    /// An attempt ended (its coordinator takes it).
    AttemptEnded,
    /// A run was submitted (workers look for runs to coordinate).
    RunSubmitted,
}

/// A listening connection: [`WorkQueue::listener`].
pub trait Wakeups: Send {
    /// Waits up to `timeout` for a wake, then takes every other one already there. Whether
    /// one came. A connection the server closed is replaced, and the wait says to look (what
    /// was sent meanwhile is lost); an error, after `timeout`, while the server cannot be
    /// reached (callers poll on).
    fn wait(&mut self, timeout: Duration) -> Result<bool, StoreError>;
}

/// A store with a work queue: what a worker, and a coordinator of workers, hold.
pub trait QueueStore: Store + WorkQueue {}

impl<T: Store + WorkQueue> QueueStore for T {}

/// A run that may need a coordinator, as [`PgStore::runs_to_coordinate`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinated {
    pub run: RunId,
    /// Submitted and never started.
    pub queued: bool,
    /// The process that drives it, if one is recorded.
    pub driver: Option<crate::Driver>,
    /// Its lease has lapsed (or it has none).
    pub lapsed: bool,
}

/// An attempt a coordinator queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedAttempt {
    pub task: u32,
    pub attempt: u32,
    /// The engine it runs on (`shell`, `claude`, …): a worker takes only what it offers.
    pub engine: String,
    /// Labels the worker must have (`runs_on`).
    pub labels: Vec<String>,
    /// What the worker needs to run it.
    pub work: String,
}

/// An attempt a worker claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedAttempt {
    pub run: RunId,
    pub task: u32,
    pub attempt: u32,
    pub work: String,
}

/// One attempt of a run, as the queue names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttemptKey {
    pub run: RunId,
    pub task: u32,
    pub attempt: u32,
}

/// What a coordinator learns of its queued attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    /// Its worker wrote its end.
    Ended {
        task: u32,
        attempt: u32,
        result: String,
    },
    /// Its worker's lease lapsed: the worker is dead, cut off or paused, and the attempt is
    /// over as far as the run is concerned.
    Lapsed {
        task: u32,
        attempt: u32,
        worker: String,
    },
}

/// What a coordinator takes from its run's workers at once ([`WorkQueue::take_arrivals`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Arrivals {
    /// What running attempts recorded, oldest first.
    pub news: Vec<News>,
    /// Attempts that ended or whose lease lapsed, and whose end is not recorded yet: the
    /// same end comes again at every take until it is.
    pub ends: Vec<AttemptEnd>,
}

/// What a running attempt recorded (the runner's JSON event), numbered so that the
/// coordinator can say it has it ([`WorkQueue::take_arrivals`]'s `have`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct News {
    pub id: i64,
    pub event: String,
}

/// What a renewal says of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Still this worker's; the coordinator asks it to stop (0 run on, 1 gracefully, 2 now).
    Held { stop: i16 },
    /// No longer this worker's: its lease lapsed, or the run was taken over. Its processes
    /// must stop and its end is not recorded.
    Lost,
}

/// A worker as it registered, with its last heartbeat and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRecord {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub slots: u32,
    pub engines: Vec<String>,
    pub labels: Vec<String>,
    pub started_at_ms: i64,
    pub heartbeat_at_ms: i64,
    /// How long its claims hold without a renewal (`None`: a worker of an older build).
    pub lease_ms: Option<i64>,
    /// How long ago it was last heard from, on the server's clock (read only: ignored when
    /// the record is written).
    pub heard_ms_ago: i64,
    /// The attempts it holds now.
    pub running: Vec<AttemptKey>,
}

impl WorkerRecord {
    /// Whether it has not been heard from for longer than its lease: its claims lapsed, and
    /// its attempts run again elsewhere (it died, was cut off, or is paused).
    pub fn silent_past_its_lease(&self) -> bool {
        self.lease_ms.is_some_and(|lease| self.heard_ms_ago > lease)
    }
}

/// The work queue (see the module's documentation).
pub trait WorkQueue: Send + Sync {
    /// Where the queue is, for messages (a server named without its password).
    fn server(&self) -> String;

    /// Another connection to the same store, for a thread of its own.
    fn reconnect(&self) -> Result<Box<dyn QueueStore>, StoreError>;

    /// A connection of its own that waits for `wakes`.
    fn listener(&self, wakes: &[Wake]) -> Result<Box<dyn Wakeups>, StoreError>;

    /// [`WorkQueue::listener`] on a thread of its own, for async code: each wake bumps the
    /// returned watch's counter. It ends when the receiver is dropped; a server that went away
    /// is waited for.
    fn listen(&self, wakes: &[Wake]) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        let mut listener = self.listener(wakes)?;
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        std::thread::Builder::new()
            .name("baton-listen".to_owned())
            .spawn(move || {
                let mut count = 0u64;
                while !tx.is_closed() {
                    // A server that is down makes the wait take its time: tried again.
                    if let Ok(true) = listener.wait(Duration::from_secs(1)) {
                        count += 1;
                        if tx.send(count).is_err() {
                            return;
                        }
                    }
                }
            })
            .map_err(StoreError::Recorder)?;
        Ok(rx)
    }

    /// Ships `bytes` of log `file` of `run` at `offset` (≤ [`crate::LOG_PIECE`] of them): what
    /// was stored at or past `offset` is replaced, and the file is `offset + bytes.len()` long,
    /// last changed at `modified_ms`.
    fn ship_log(
        &self,
        run: &RunId,
        file: &str,
        offset: u64,
        bytes: Vec<u8>,
        modified_ms: i64,
    ) -> Result<(), StoreError>;

    /// Records a run for a worker to drive (`baton run --detach`): `queued`, no driver, and a
    /// `NOTIFY` that wakes idle workers.
    fn submit_run(&self, run: &NewRun) -> Result<(), StoreError>;

    /// Runs a worker could coordinate: queued ones, oldest first, then running ones, with
    /// who drives them and until when their lease holds (the caller judges whether that
    /// driver lives; claiming the run says for sure).
    fn runs_to_coordinate(&self) -> Result<Vec<Coordinated>, StoreError>;

    /// Queues `attempts` of `run` for workers, if `token` is still the run's lease; wakes the
    /// workers that listen. One statement (one round trip): the fence, the rows and the
    /// notification together.
    fn enqueue(
        &self,
        run: &RunId,
        token: u64,
        attempts: Vec<QueuedAttempt>,
    ) -> Result<(), StoreError>;

    /// What arrived from `run`'s workers, for the coordinator holding lease `token` (else
    /// [`StoreError::LeaseLost`], and nothing is taken): what their running attempts recorded
    /// (news, oldest first) and not in `have`, then what ended and is not recorded yet — ends
    /// the workers wrote, and attempts whose worker's lease lapsed (a lapsed lease cannot be
    /// renewed nor its attempt ended: the late end is refused).
    ///
    /// `have` are news the caller took before and holds: they leave the store now. News are
    /// forgotten only once the caller says it has them, and ends only once they are recorded
    /// ([`crate::RunLog::record`] of their `attempt-finished`), so an answer lost on the way
    /// loses nothing: the caller asks again with the same `have`.
    ///
    /// One statement, so one snapshot: a worker records an attempt's news before its end, and
    /// whatever news of an attempt committed before its end is seen with it (taken apart, news
    /// committed between the two could come after the end it belongs before).
    fn take_arrivals(&self, run: &RunId, token: u64, have: &[i64]) -> Result<Arrivals, StoreError>;

    /// Asks `run`'s coordinator to cancel it (`baton cancel` of a run a worker drives).
    /// Whether the run is running (else there is nothing to ask).
    fn request_cancel(&self, run: &RunId) -> Result<bool, StoreError>;

    /// Stops `run`'s queued attempts, for the coordinator holding lease `token` (else
    /// [`StoreError::LeaseLost`], and nothing changes): those no worker claimed yet leave the
    /// queue (returned: they never started), claimed ones are asked to stop (`level` 1:
    /// gracefully, 2: now) at their worker's next renewal.
    fn stop_attempts(
        &self,
        run: &RunId,
        token: u64,
        level: i16,
    ) -> Result<Vec<(u32, u32)>, StoreError>;

    /// What coordinators before `token` queued for `run`, for the coordinator holding lease
    /// `token` (else [`StoreError::LeaseLost`]) taking the run over: the attempts in `keep`
    /// become its own (adopted: queued ones wait on, claimed ones run on on their workers,
    /// ended ones are taken at its next [`WorkQueue::take_arrivals`]), and are returned if
    /// found; the rest leave the queue, and their workers learn at their next renewal that
    /// they are no longer theirs.
    fn adopt_queued(
        &self,
        run: &RunId,
        token: u64,
        keep: &[(u32, u32)],
    ) -> Result<Vec<(u32, u32)>, StoreError>;

    /// Claims up to `n` queued attempts for `worker`: ones whose engine it offers (any, if
    /// `engines` is empty) and whose labels it has, of runs not in `except` (runs it will not
    /// work on: submitted from another repository), oldest first, held for `lease_ms`.
    fn claim_attempts(
        &self,
        worker: &str,
        engines: &[String],
        labels: &[String],
        n: u32,
        lease_ms: i64,
        except: &[RunId],
    ) -> Result<Vec<ClaimedAttempt>, StoreError>;

    /// Extends `worker`'s leases on `held` by `lease_ms`, and says of each whether it is still
    /// the worker's (and whether its coordinator asks it to stop).
    fn renew_attempts(
        &self,
        worker: &str,
        held: &[AttemptKey],
        lease_ms: i64,
    ) -> Result<Vec<(AttemptKey, Renewal)>, StoreError>;

    /// Writes how `worker`'s attempt ended, if it still holds it (claimed by it, lease not
    /// lapsed); wakes the run's coordinator. Returns whether it was taken: `false` means the
    /// attempt is no longer the worker's, and its end is dropped.
    fn end_attempt(&self, worker: &str, key: &AttemptKey, result: &str)
    -> Result<bool, StoreError>;

    /// Gives an attempt `worker` holds back (a worker stopping at once): its lease is made to
    /// have lapsed now, so that its coordinator takes it as interrupted at its next look and
    /// it runs again elsewhere. Whether the worker still held it.
    fn give_back(&self, worker: &str, key: &AttemptKey) -> Result<bool, StoreError>;

    /// Records `event` (the runner's JSON) for `run`'s coordinator, if `worker` still holds
    /// the attempt it is about.
    fn add_news(&self, worker: &str, key: &AttemptKey, event: &str) -> Result<bool, StoreError>;

    /// Registers a worker (or renews its heartbeat, with the same record).
    fn heartbeat_worker(&self, worker: &WorkerRecord) -> Result<(), StoreError>;

    /// A worker leaving: its record goes (what it held was ended or given back first).
    fn remove_worker(&self, id: &str) -> Result<(), StoreError>;

    /// Workers heard from within `within_ms`, newest first, with what each holds; older
    /// records (workers that died without a word) are removed.
    fn workers(&self, within_ms: i64) -> Result<Vec<WorkerRecord>, StoreError>;
}
