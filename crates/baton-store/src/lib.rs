//! The durable record of runs, the source of truth of everything baton did: SQLite in WAL mode
//! on one machine ([`SqliteStore`]), PostgreSQL when many machines share runs ([`PgStore`],
//! which also holds the work queue `baton worker`s claim from, [`WorkQueue`]). Both stand behind
//! one seam, [`RunLog`] and [`RunReader`] (`seam.rs`), and pass one conformance suite; the
//! queue has cases of its own. Nothing outside this crate names a backend but the place that
//! opens one.
//!
//! The append-only event log is the record; the `runs`, `tasks` and `attempts` tables are its
//! projections, updated in the same transaction as the events they follow from, so that a reader
//! never sees one without the other and a crash never leaves a half-applied turn
//! ([`RunReader::check_consistency`] proves it after the fact). The dispatcher writes once per
//! turn with [`RunLog::record`], fenced by its lease; readers in other processes open their own store with
//! [`SqliteStore::open_readonly`] and neither block it nor wait for it.
//!
//! Durability: see [`Durability`]. By default a committed turn survives the process being killed;
//! `BATON_SYNC=full` makes it survive power loss as well.

mod approvals;
mod checkpoint;
mod consistency;
mod decode;
mod driver;
mod durability;
mod error;
mod event_batches;
mod fold;
mod migrate;
mod packing;
mod pg;
mod private_fs;
mod project;
mod queue;
mod read;
mod records;
mod seam;
mod statements;
mod store;
mod task_index;
mod whole_attempts;
mod write;

pub use approvals::Decision;
pub use driver::{Claim, LEASE_TERM, Lease, Liveness};
pub use durability::Durability;
pub use error::{DriverError, StoreError};
pub use fold::{fold, initial_view};
pub use migrate::SCHEMA_VERSION;
pub use pg::{LOG_PIECE, PgStore, describe_server};
pub use queue::{
    Arrivals, AttemptEnd, AttemptKey, ClaimedAttempt, Coordinated, News, QueueStore, QueuedAttempt,
    Renewal, Wake, Wakeups, WorkQueue, WorkerRecord,
};
pub use records::{
    AttemptOutput, AttemptRecord, Driver, GraphJson, NewRun, RunRecord, RunSummary, StoredLog,
    TaskRecord,
};
pub use seam::{RunLog, RunReader, Store};
pub use store::SqliteStore;
