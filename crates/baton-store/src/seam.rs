//! The store as the rest of baton sees it: what a driver writes ([`RunLog`]) and what readers
//! query ([`RunReader`]), in the domain's words, not SQL. SQLite and PostgreSQL both stand
//! behind them and pass the same conformance suite (`tests/store/conformance.rs`). The work
//! queue (`baton worker`) is PostgreSQL's alone, behind a trait of its own
//! ([`crate::WorkQueue`], with its own conformance cases in `tests/store/queue.rs`): the
//! coordinator and the worker see `&dyn WorkQueue` (or [`crate::QueueStore`], both); only the
//! CLI's `records.rs`, which opens a store, names a backend.
//!
//! The traits are object safe: a run is driven through `&dyn Store`, so the backend is chosen
//! at run time (`--store`), and the dispatcher's code is compiled once.

use std::time::Duration;

use baton_model::{Event, RunId, TaskId};

use crate::{
    AttemptOutput, AttemptRecord, Claim, Decision, Driver, Lease, Liveness, NewRun, RunRecord,
    RunSummary, SqliteStore, StoreError, StoredLog, TaskRecord,
};

/// What a run's driver (and a person deciding about it) writes.
pub trait RunLog: Send + Sync {
    /// Records a new run: its row, its graph, one `pending` row per task.
    fn create_run(&self, run: &NewRun) -> Result<(), StoreError>;

    /// Makes `me` the run's driver (the rules: `SqliteStore`'s `claim_driver` in driver.rs).
    fn claim(
        &self,
        run: &RunId,
        me: &Driver,
        now_ms: i64,
        term: Duration,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<Claim, StoreError>;

    /// The driver's heartbeat: extends its lease, or says the run was taken over.
    fn renew(
        &self,
        run: &RunId,
        lease: Lease,
        now_ms: i64,
        term: Duration,
    ) -> Result<Lease, StoreError>;

    /// Gives the run up, if `lease` still holds it.
    fn release(&self, run: &RunId, lease: Lease) -> Result<bool, StoreError>;

    /// Records one turn of the run in one transaction, fenced by `lease`: nothing of it is
    /// recorded once another process has claimed the run. Returns the events' sequence
    /// numbers, in order.
    fn record(
        &self,
        run: &RunId,
        lease: Lease,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError>;

    /// A person's decision about a task waiting for approval; a second one is refused with the
    /// first.
    fn decide(
        &self,
        run: &RunId,
        task: &TaskId,
        approved: bool,
        reason: Option<&str>,
        at_ms: i64,
    ) -> Result<Result<(), Decision>, StoreError>;

    /// Removes a run no live driver holds; whether it existed.
    fn delete_run(
        &self,
        run: &RunId,
        now_ms: i64,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<bool, StoreError>;

    /// Another handle to the same store, for a thread of its own (a run's commits go on one
    /// while the dispatcher goes on); with [`RunLog::maintain_in_background`] started on it.
    fn another(&self) -> Result<Box<dyn Store>, StoreError>;

    /// Keeps the store in shape while a run is driven, off the committing thread (SQLite: the
    /// WAL copied back by a thread of its own). Optional to a backend.
    fn maintain_in_background(&self) {}
}

/// What readers (`status`, `logs`, `events`, the report, a resume) query. Readers never block
/// a driver and are never blocked by one.
pub trait RunReader: Send + Sync {
    /// Where the store is, for messages.
    fn location(&self) -> String;
    /// Up to `limit` runs, newest first, with their task counts and spend.
    fn runs(&self, limit: u32) -> Result<Vec<RunSummary>, StoreError>;
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError>;
    fn latest_run(&self) -> Result<Option<RunRecord>, StoreError>;
    /// The run's tasks, in graph order.
    fn tasks(&self, run: &RunId) -> Result<Vec<TaskRecord>, StoreError>;
    fn attempts(&self, run: &RunId, task: &TaskId) -> Result<Vec<AttemptRecord>, StoreError>;
    fn run_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError>;
    /// The run's attempts one at a time, none kept.
    fn each_attempt(&self, run: &RunId, f: &mut dyn FnMut(AttemptRecord))
    -> Result<(), StoreError>;
    /// Attempts started and never finished.
    fn open_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError>;
    /// Up to `limit` events with `seq > after_seq`, in order.
    fn events(&self, run: &RunId, after_seq: u64, limit: u32) -> Result<Vec<Event>, StoreError>;
    fn events_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Vec<Event>, StoreError>;
    fn last_event_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Option<Event>, StoreError>;
    fn last_seq(&self, run: &RunId) -> Result<u64, StoreError>;
    /// Tokens and dollars the run's agents used.
    fn run_spend(&self, run: &RunId) -> Result<(Option<u64>, Option<f64>), StoreError>;
    /// The graph the run was started with.
    fn graph_json(&self, run: &RunId) -> Result<Option<String>, StoreError>;
    /// Every decision about the run's tasks, oldest first.
    fn decisions(&self, run: &RunId) -> Result<Vec<Decision>, StoreError>;
    /// Every way the run's tables disagree with its event log; empty means consistent.
    fn check_consistency(&self, run: &RunId) -> Result<Vec<String>, StoreError>;

    /// Log files of `run` whose names start with `prefix` that workers shipped to the store,
    /// oldest change first. A store whose runs are driven on one machine keeps none: the logs
    /// are files beside it.
    fn log_files(&self, _run: &RunId, _prefix: &str) -> Result<Vec<StoredLog>, StoreError> {
        Ok(Vec::new())
    }

    /// The bytes of a shipped log file from offset `from` on.
    fn log_bytes(&self, _run: &RunId, _file: &str, _from: u64) -> Result<Vec<u8>, StoreError> {
        Ok(Vec::new())
    }

    /// Whether this store carries requests to cancel a run (`baton cancel` of a run driven
    /// on another machine, which no signal reaches): its driver then looks for them. A file
    /// on one machine does not: its runs' drivers are signalled.
    fn carries_cancel_requests(&self) -> bool {
        false
    }

    /// Whether someone asked, through the store, to cancel `run`.
    fn cancel_requested(&self, _run: &RunId) -> Result<bool, StoreError> {
        Ok(false)
    }
}

/// A store: both sides.
pub trait Store: RunLog + RunReader {}

impl<T: RunLog + RunReader> Store for T {}

impl RunLog for SqliteStore {
    fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.insert_run(run)
    }

    fn claim(
        &self,
        run: &RunId,
        me: &Driver,
        now_ms: i64,
        term: Duration,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<Claim, StoreError> {
        self.claim_driver(run, me, now_ms, term, liveness)
    }

    fn renew(
        &self,
        run: &RunId,
        lease: Lease,
        now_ms: i64,
        term: Duration,
    ) -> Result<Lease, StoreError> {
        self.renew_lease(run, lease, now_ms, term)
    }

    fn release(&self, run: &RunId, lease: Lease) -> Result<bool, StoreError> {
        self.release_driver(run, lease)
    }

    fn record(
        &self,
        run: &RunId,
        lease: Lease,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError> {
        self.commit_fenced(run, lease, events, outputs)
    }

    fn decide(
        &self,
        run: &RunId,
        task: &TaskId,
        approved: bool,
        reason: Option<&str>,
        at_ms: i64,
    ) -> Result<Result<(), Decision>, StoreError> {
        self.record_decision(run, task, approved, reason, at_ms)
    }

    fn delete_run(
        &self,
        run: &RunId,
        now_ms: i64,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<bool, StoreError> {
        self.remove_run(run, now_ms, liveness)
    }

    fn another(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(self.open_another()?))
    }

    fn maintain_in_background(&self) {
        self.checkpoint_in_background();
    }
}
