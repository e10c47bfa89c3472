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
    pub(crate) fn another_connection(&self) -> Result<Self, StoreError> {
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
