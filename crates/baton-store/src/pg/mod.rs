//! PostgreSQL behind the same seam as SQLite ([`RunLog`], [`RunReader`]), for a team's runs in
//! one shared database: `--store postgres://…`. It passes the same conformance suite.
//!
//! The connection lives on a thread of its own, and every call is a job sent to it: the
//! `postgres` client drives an async runtime of its own and may not be called from inside
//! another (baton's dispatcher is async), while a job is only a blocking wait on a channel,
//! as a SQLite call is.
//!
//! Each write is one transaction that first locks the run's row (`SELECT … FOR UPDATE`): the
//! claim, the fence check of a turn and the numbering of its events are decided under that
//! lock, so two processes writing about one run are serialised exactly as SQLite's single
//! writer serialises them, while different runs go on at once.

mod conn;
mod logs;
mod queue;
mod read;
mod write;

use std::sync::Arc;

use crate::StoreError;

pub use conn::describe_server;
pub use logs::LOG_PIECE;

/// The schema versions this baton knows, in order; the last is current.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (1, "v1", include_str!("v1.sql")),
    (2, "work queue", include_str!("v2.sql")),
    (3, "shipped logs", include_str!("v3.sql")),
    (4, "cancel requests", include_str!("v4.sql")),
    (5, "stop cause", include_str!("v5.sql")),
    (6, "worker lease", include_str!("v6.sql")),
];

/// A PostgreSQL store: one connection, on its own thread.
#[derive(Clone)]
pub struct PgStore {
    conn: Arc<conn::Conn>,
    url: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("server", &describe_server(&self.url))
            .finish()
    }
}

impl PgStore {
    /// How far the server's clock is ahead of this machine's, in milliseconds (negative:
    /// behind), measured once: the server's now against the middle of the round trip that
    /// asked for it. What `baton_model::follow_clock` takes, so that every machine of a run
    /// stamps its times on the server's clock, as leases are already measured.
    pub fn clock_offset_ms(&self) -> Result<i64, StoreError> {
        // The local clock as it is, whatever this process follows already.
        let local = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        };
        let before = local();
        let server: i64 = self
            .conn
            .call(|client| Ok(client.query_one("SELECT baton_now_ms()", &[])?.get(0)))?;
        let after = local();
        Ok(server - (before + after) / 2)
    }

    /// Connects to `url` (`postgres://user@host:port/db`) and brings its schema to this baton's
    /// version (in a transaction, under an advisory lock, so that two processes starting at
    /// once migrate it once). A schema newer than this baton knows is refused, named.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let conn = conn::Conn::connect(url)?;
        let store = Self {
            conn: Arc::new(conn),
            url: url.to_owned(),
        };
        store.migrate()?;
        Ok(store)
    }

    /// Another connection to the same database.
    pub(crate) fn reconnect_pg(&self) -> Result<Self, StoreError> {
        Ok(Self {
            conn: Arc::new(conn::Conn::connect(&self.url)?),
            url: self.url.clone(),
        })
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let server = describe_server(&self.url);
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            // One migrating process at a time, whatever database it is.
            tx.execute("SELECT pg_advisory_xact_lock(7302611001)", &[])?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS baton_schema (version INTEGER NOT NULL, name TEXT NOT NULL)",
            )?;
            let found: Option<i32> = tx
                .query_opt("SELECT MAX(version) FROM baton_schema", &[])?
                .and_then(|row| row.get(0));
            let found = found.unwrap_or(0) as u32;
            let known = MIGRATIONS.last().map_or(0, |m| m.0);
            if found > known {
                return Err(StoreError::SchemaTooNew {
                    path: server.clone().into(),
                    found,
                    known,
                });
            }
            for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > found) {
                tx.batch_execute(sql).map_err(|source| StoreError::PgMigrate {
                    server: server.clone(),
                    version: *version,
                    name,
                    source: source.into(),
                })?;
                tx.execute(
                    "INSERT INTO baton_schema (version, name) VALUES ($1, $2)",
                    &[&(*version as i32), name],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }
}

use std::time::Duration;

use baton_model::{Event, RunId, TaskId};

use crate::seam::{RunLog, RunReader, Store};
use crate::{
    AttemptOutput, AttemptRecord, Claim, Decision, Driver, Lease, Liveness, NewRun, RunRecord,
    RunSummary, TaskRecord,
};

impl RunLog for PgStore {
    fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.create_run_pg(run)
    }

    fn claim(
        &self,
        run: &RunId,
        me: &Driver,
        now_ms: i64,
        term: Duration,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<Claim, StoreError> {
        self.claim_pg(run, me, now_ms, term, liveness)
    }

    fn renew(
        &self,
        run: &RunId,
        lease: Lease,
        now_ms: i64,
        term: Duration,
    ) -> Result<Lease, StoreError> {
        self.renew_pg(run, lease, now_ms, term)
    }

    fn release(&self, run: &RunId, lease: Lease) -> Result<bool, StoreError> {
        self.release_pg(run, lease)
    }

    fn record(
        &self,
        run: &RunId,
        lease: Lease,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError> {
        self.record_pg(run, Some(lease.token), events, outputs)
    }

    fn decide(
        &self,
        run: &RunId,
        task: &TaskId,
        approved: bool,
        reason: Option<&str>,
        at_ms: i64,
    ) -> Result<Result<(), Decision>, StoreError> {
        self.decide_pg(run, task, approved, reason, at_ms)
    }

    fn delete_run(
        &self,
        run: &RunId,
        now_ms: i64,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<bool, StoreError> {
        self.delete_run_pg(run, now_ms, liveness)
    }

    fn another(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(self.reconnect_pg()?))
    }
}

impl RunReader for PgStore {
    fn location(&self) -> String {
        describe_server(&self.url)
    }

    fn carries_cancel_requests(&self) -> bool {
        true
    }

    fn cancel_requested(&self, run: &RunId) -> Result<bool, StoreError> {
        self.cancel_requested_pg(run)
    }

    fn runs(&self, limit: u32) -> Result<Vec<RunSummary>, StoreError> {
        self.runs_pg(limit)
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.run_pg(run)
    }

    fn latest_run(&self) -> Result<Option<RunRecord>, StoreError> {
        self.latest_run_pg()
    }

    fn tasks(&self, run: &RunId) -> Result<Vec<TaskRecord>, StoreError> {
        self.tasks_pg(run)
    }

    fn attempts(&self, run: &RunId, task: &TaskId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts_where(run, Some(task), false)
    }

    fn run_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts_where(run, None, false)
    }

    fn each_attempt(
        &self,
        run: &RunId,
        f: &mut dyn FnMut(AttemptRecord),
    ) -> Result<(), StoreError> {
        for attempt in self.attempts_where(run, None, false)? {
            f(attempt);
        }
        Ok(())
    }

    fn open_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts_where(run, None, true)
    }

    fn events(&self, run: &RunId, after_seq: u64, limit: u32) -> Result<Vec<Event>, StoreError> {
        self.events_pg(run, after_seq, limit)
    }

    fn events_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Vec<Event>, StoreError> {
        self.events_of_kind_pg(run, kind, false)
    }

    fn last_event_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Option<Event>, StoreError> {
        Ok(self.events_of_kind_pg(run, kind, true)?.pop())
    }

    fn last_seq(&self, run: &RunId) -> Result<u64, StoreError> {
        self.last_seq_pg(run)
    }

    fn run_spend(&self, run: &RunId) -> Result<(Option<u64>, Option<f64>), StoreError> {
        self.run_spend_pg(run)
    }

    fn graph_json(&self, run: &RunId) -> Result<Option<String>, StoreError> {
        self.graph_json_pg(run)
    }

    fn decisions(&self, run: &RunId) -> Result<Vec<Decision>, StoreError> {
        self.decisions_pg(run)
    }

    fn check_consistency(&self, run: &RunId) -> Result<Vec<String>, StoreError> {
        self.check_consistency_pg(run)
    }

    fn log_files(&self, run: &RunId, prefix: &str) -> Result<Vec<crate::StoredLog>, StoreError> {
        self.log_files_pg(run, prefix)
    }

    fn log_bytes(&self, run: &RunId, file: &str, from: u64) -> Result<Vec<u8>, StoreError> {
        self.log_bytes_pg(run, file, from)
    }
}
