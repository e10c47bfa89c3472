//! Which process drives a run, and deleting runs no process drives.
//!
//! A run has at most one driver: the process that runs `baton run` or `baton resume` for it.
//! Its claim is a *lease*: it lapses at `lease_expires_at_ms` unless the driver renews it
//! (a heartbeat, every third of [`LEASE_TERM`]), and every claim gives the run a new, larger
//! `lease_token` that fences the holder's commits: a driver whose run was claimed by another
//! process since cannot record anything more about it ([`StoreError::LeaseLost`]).
//!
//! Whether a recorded driver is still alive is not the store's to judge from a lease alone: on
//! the driver's own host, a process that is gone is known to be gone at once (no need to wait
//! for its lease to lapse), and one that lives is known to live (a laptop that slept past the
//! lease still holds its run). Callers pass that check ([`Liveness`]), called inside the claim's
//! transaction so that the answer cannot go stale before it is used; the lease decides only
//! where the check cannot see ([`Liveness::Unknown`]: another host).

use std::time::Duration;

use baton_model::{RunId, RunState};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::{Driver, SqliteStore, StoreError};

/// How long a claim holds without a renewal.
pub const LEASE_TERM: Duration = Duration::from_secs(30);

/// A run held by this process: what fences its writes, and until when it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Grows with every claim of the run: the newer holder's is larger.
    pub token: u64,
    pub expires_at_ms: i64,
}

/// What a caller can tell of a recorded driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Its process runs (checked on its host).
    Alive,
    /// Its process is gone.
    Dead,
    /// It cannot be seen from here: its lease decides.
    Unknown,
}

impl Liveness {
    /// Whether a driver seen so keeps its run from another process, its lease having `lapsed`
    /// or not: the rule every claim applies ([`refuses`]), and what a worker looking for runs
    /// to take over asks first.
    pub fn holds(self, lapsed: bool) -> bool {
        match self {
            Liveness::Alive => true,
            Liveness::Unknown => !lapsed,
            Liveness::Dead => false,
        }
    }
}

/// A successful claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub lease: Lease,
    /// The driver it replaced, if one was recorded (its attempts in flight were interrupted).
    pub replaced: Option<Driver>,
}

impl SqliteStore {
    /// Makes `me` the driver of `run` until `now_ms + term` (renewable), unless another driver
    /// holds it: one that `liveness` says is alive, or one it cannot see whose lease has not
    /// lapsed. Claiming a run `me` already holds renews its lease.
    pub(crate) fn claim_driver(
        &self,
        run: &RunId,
        me: &Driver,
        now_ms: i64,
        term: Duration,
        liveness: impl FnOnce(&Driver) -> Liveness,
    ) -> Result<Claim, StoreError> {
        let expires_at_ms = now_ms.saturating_add(term.as_millis() as i64);
        self.write(|tx| {
            let held = holder(tx, run)?;
            if held.driver.as_ref() == Some(me) {
                renew(tx, run, held.token, expires_at_ms)?;
                return Ok(Claim {
                    lease: Lease {
                        token: held.token,
                        expires_at_ms,
                    },
                    replaced: None,
                });
            }
            refuses(
                run,
                held.driver.clone(),
                held.expires_at_ms,
                now_ms,
                liveness,
            )?;
            let token = held.token + 1;
            tx.prepare_cached(
                "UPDATE runs SET driver_pid = ?2, driver_start_time = ?3, driver_host = ?4, \
                 lease_token = ?5, lease_expires_at_ms = ?6 WHERE id = ?1",
            )?
            .execute(params![
                run.as_str(),
                me.pid,
                me.start_time,
                me.host,
                token,
                expires_at_ms
            ])?;
            Ok(Claim {
                lease: Lease {
                    token,
                    expires_at_ms,
                },
                replaced: held.driver,
            })
        })
    }

    /// Extends `lease` on `run` to `now_ms + term`: the heartbeat of a live driver. Fails with
    /// [`StoreError::LeaseLost`] once another process has claimed the run.
    pub(crate) fn renew_lease(
        &self,
        run: &RunId,
        lease: Lease,
        now_ms: i64,
        term: Duration,
    ) -> Result<Lease, StoreError> {
        let expires_at_ms = now_ms.saturating_add(term.as_millis() as i64);
        self.check_present()?;
        self.write(|tx| renew(tx, run, lease.token, expires_at_ms))?;
        Ok(Lease {
            token: lease.token,
            expires_at_ms,
        })
    }

    /// Gives up `run` if `lease` still holds it; returns whether it did. A driver that lost its
    /// run to another process cannot release the new holder's claim.
    pub(crate) fn release_driver(&self, run: &RunId, lease: Lease) -> Result<bool, StoreError> {
        self.write(|tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE runs SET driver_pid = NULL, driver_start_time = NULL, \
                     driver_host = NULL, lease_expires_at_ms = NULL \
                     WHERE id = ?1 AND lease_token = ?2 AND driver_pid IS NOT NULL",
                )?
                .execute(params![run.as_str(), lease.token])?;
            Ok(changed > 0)
        })
    }

    /// Deletes a run with its tasks, attempts, events and graph (not its log files or worktrees,
    /// which are the caller's). Refuses a `running` run whose driver `liveness` says is alive
    /// (or cannot see, while its lease holds). Returns whether the run existed.
    pub(crate) fn remove_run(
        &self,
        run: &RunId,
        now_ms: i64,
        liveness: impl FnOnce(&Driver) -> Liveness,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            let held = match holder(tx, run) {
                Ok(found) => found,
                Err(StoreError::UnknownRun(_)) => return Ok(false),
                Err(err) => return Err(err),
            };
            if held.status == RunState::Running {
                refuses(
                    run,
                    held.driver.clone(),
                    held.expires_at_ms,
                    now_ms,
                    liveness,
                )?;
            }
            // `tasks`, `attempts` and `events` have no foreign key to cascade (see the version 3
            // migration), nor has `event_batches`; `run_graph_parts` and `task_counts` go with
            // the run by theirs.
            for table in ["attempts", "tasks", "events", "event_batches", "approvals"] {
                tx.prepare_cached(&format!("DELETE FROM {table} WHERE run_id = ?1"))?
                    .execute([run.as_str()])?;
            }
            tx.prepare_cached("DELETE FROM runs WHERE id = ?1")?
                .execute([run.as_str()])?;
            Ok(true)
        })
        .inspect(|&removed| {
            // A run made again under this id has other tasks.
            if removed {
                self.task_rows
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .forget();
            }
        })
    }
}

/// Whether the recorded `driver` keeps the run from another process: one that `liveness` says
/// lives, or one it cannot see whose lease (until `expires_at_ms`) has not lapsed. The rule of
/// every backend.
pub(crate) fn refuses(
    run: &RunId,
    driver: Option<Driver>,
    expires_at_ms: Option<i64>,
    now_ms: i64,
    liveness: impl FnOnce(&Driver) -> Liveness,
) -> Result<(), StoreError> {
    let Some(current) = driver else {
        return Ok(());
    };
    let lapsed = expires_at_ms.is_some_and(|at| at <= now_ms);
    if liveness(&current).holds(lapsed) {
        return Err(held_by(run, current));
    }
    Ok(())
}

/// Extends the lease of `token` on `run`, or says it is lost.
fn renew(
    tx: &Transaction<'_>,
    run: &RunId,
    token: u64,
    expires_at_ms: i64,
) -> Result<(), StoreError> {
    let changed = tx
        .prepare_cached(
            "UPDATE runs SET lease_expires_at_ms = ?3 \
             WHERE id = ?1 AND lease_token = ?2 AND driver_pid IS NOT NULL",
        )?
        .execute(params![run.as_str(), token, expires_at_ms])?;
    if changed == 0 {
        return Err(StoreError::LeaseLost { run: run.clone() });
    }
    Ok(())
}

/// Whether `token` is the run's current lease: checked inside every fenced commit.
pub(crate) fn check_token(tx: &Transaction<'_>, run: &RunId, token: u64) -> Result<(), StoreError> {
    let current: Option<u64> = tx
        .prepare_cached("SELECT lease_token FROM runs WHERE id = ?1")?
        .query_row([run.as_str()], |row| row.get(0))
        .optional()?;
    match current {
        None => Err(StoreError::UnknownRun(run.clone())),
        Some(current) if current == token => Ok(()),
        Some(_) => Err(StoreError::LeaseLost { run: run.clone() }),
    }
}

pub(crate) fn held_by(run: &RunId, driver: Driver) -> StoreError {
    StoreError::RunHeld {
        run: run.clone(),
        pid: driver.pid,
        start_time: driver.start_time,
        host: driver.host,
    }
}

/// Who holds a run, and until when.
struct Holder {
    status: RunState,
    driver: Option<Driver>,
    token: u64,
    expires_at_ms: Option<i64>,
}

fn holder(tx: &Transaction<'_>, run: &RunId) -> Result<Holder, StoreError> {
    let found = tx
        .prepare_cached(&format!(
            "SELECT {}, lease_token, lease_expires_at_ms FROM runs WHERE id = ?1",
            crate::read::RUN_COLUMNS
        ))?
        .query_row([run.as_str()], |row| {
            let record = crate::read::run_record(row)?;
            let columns = crate::read::RUN_COLUMNS.split(',').count();
            Ok((record, row.get(columns)?, row.get(columns + 1)?))
        })
        .optional()?;
    let (record, token, expires_at_ms) =
        found.ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
    Ok(Holder {
        status: record.status,
        driver: record.driver,
        token,
        expires_at_ms,
    })
}
