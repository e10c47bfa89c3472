//! Which process drives a run, and deleting runs no process drives.
//!
//! A run has at most one driver: the process that runs `baton run` or `baton resume` for it.
//! The claim is a row update inside an IMMEDIATE transaction, so two processes claiming at once
//! are serialized and the second sees the first. Whether a recorded driver is still alive is not
//! the store's to judge (it means looking at `/proc`, or asking another host): callers pass a
//! check, called inside the transaction so that the answer cannot go stale before it is used.

use baton_model::{RunId, RunState};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::{Driver, SqliteStore, StoreError};

impl SqliteStore {
    /// Makes `me` the driver of `run`, unless another driver is recorded and `is_alive` says it
    /// still runs. Returns the dead driver it replaced, if any (its attempts in flight were
    /// interrupted). Claiming a run `me` already holds succeeds.
    pub fn claim_driver(
        &self,
        run: &RunId,
        me: &Driver,
        is_alive: impl FnOnce(&Driver) -> bool,
    ) -> Result<Option<Driver>, StoreError> {
        self.write(|tx| {
            let (_, current) = status_and_driver(tx, run)?;
            let replaced = match current {
                Some(current) if current == *me => return Ok(None),
                Some(current) if is_alive(&current) => return Err(held(run, current)),
                other => other,
            };
            tx.prepare_cached(
                "UPDATE runs SET driver_pid = ?2, driver_start_time = ?3, driver_host = ?4 \
                 WHERE id = ?1",
            )?
            .execute(params![run.as_str(), me.pid, me.start_time, me.host])?;
            Ok(replaced)
        })
    }

    /// Gives up `run` if `me` holds it; returns whether it did. A driver that lost its claim to
    /// another process (because it was wrongly judged dead) cannot release the new one's.
    pub fn release_driver(&self, run: &RunId, me: &Driver) -> Result<bool, StoreError> {
        self.write(|tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE runs SET driver_pid = NULL, driver_start_time = NULL, \
                     driver_host = NULL \
                     WHERE id = ?1 AND driver_pid = ?2 AND driver_start_time = ?3 \
                     AND driver_host = ?4",
                )?
                .execute(params![run.as_str(), me.pid, me.start_time, me.host])?;
            Ok(changed > 0)
        })
    }

    /// Deletes a run with its tasks, attempts, events and graph (not its log files or worktrees,
    /// which are the caller's). Refuses a `running` run whose driver `is_alive`. Returns whether
    /// the run existed.
    pub fn delete_run(
        &self,
        run: &RunId,
        is_alive: impl FnOnce(&Driver) -> bool,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            let (status, driver) = match status_and_driver(tx, run) {
                Ok(found) => found,
                Err(StoreError::UnknownRun(_)) => return Ok(false),
                Err(err) => return Err(err),
            };
            if let Some(driver) =
                driver.filter(|driver| status == RunState::Running && is_alive(driver))
            {
                return Err(held(run, driver));
            }
            // `tasks`, `attempts` and `events` have no foreign key to cascade (see the version 3
            // migration); `run_graphs` and `task_counts` go with the run by theirs.
            for table in ["attempts", "tasks", "events", "approvals"] {
                tx.prepare_cached(&format!("DELETE FROM {table} WHERE run_id = ?1"))?
                    .execute([run.as_str()])?;
            }
            tx.prepare_cached("DELETE FROM runs WHERE id = ?1")?
                .execute([run.as_str()])?;
            Ok(true)
        })
    }
}

fn held(run: &RunId, driver: Driver) -> StoreError {
    StoreError::RunHeld {
        run: run.clone(),
        pid: driver.pid,
        start_time: driver.start_time,
        host: driver.host,
    }
}

fn status_and_driver(
    tx: &Transaction<'_>,
    run: &RunId,
) -> Result<(RunState, Option<Driver>), StoreError> {
    let found = tx
        .prepare_cached(&format!(
            "SELECT {} FROM runs WHERE id = ?1",
            crate::read::RUN_COLUMNS
        ))?
        .query_row([run.as_str()], crate::read::run_record)
        .optional()?;
    let record = found.ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
    Ok((record.status, record.driver))
}
