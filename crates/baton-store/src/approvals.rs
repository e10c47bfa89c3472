//! Decisions about tasks that wait for a person: written by `baton approve` / `baton reject`
//! from any process, read by the one driving the run.

use rusqlite::{OptionalExtension, params};

use baton_model::{RunId, TaskId};

use crate::{SqliteStore, StoreError};

/// A person's decision about one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub task: TaskId,
    pub approved: bool,
    pub reason: Option<String>,
    pub at_ms: i64,
}

impl SqliteStore {
    /// Records a decision. A task is decided once: a second decision is refused with the
    /// first one's.
    pub(crate) fn record_decision(
        &self,
        run: &RunId,
        task: &TaskId,
        approved: bool,
        reason: Option<&str>,
        at_ms: i64,
    ) -> Result<Result<(), Decision>, StoreError> {
        self.write(|tx| {
            let earlier = tx
                .prepare_cached(
                    "SELECT approved, reason, at_ms FROM approvals WHERE run_id = ?1 AND task_id = ?2",
                )?
                .query_row(params![run.as_str(), task.as_str()], |row| {
                    Ok(Decision {
                        task: task.clone(),
                        approved: row.get::<_, i64>(0)? == 1,
                        reason: row.get(1)?,
                        at_ms: row.get(2)?,
                    })
                })
                .optional()?;
            if let Some(earlier) = earlier {
                return Ok(Err(earlier));
            }
            tx.prepare_cached(
                "INSERT INTO approvals (run_id, task_id, approved, reason, at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                run.as_str(),
                task.as_str(),
                i64::from(approved),
                reason,
                at_ms
            ])?;
            Ok(Ok(()))
        })
    }

    /// Every decision about the run's tasks, oldest first.
    pub(crate) fn read_decisions(&self, run: &RunId) -> Result<Vec<Decision>, StoreError> {
        self.read(|tx| {
            let mut statement = tx.prepare_cached(
                "SELECT task_id, approved, reason, at_ms FROM approvals \
                 WHERE run_id = ?1 ORDER BY at_ms, task_id",
            )?;
            let rows = statement.query_map([run.as_str()], |row| {
                Ok(Decision {
                    task: crate::decode::task_id(row, 0)?,
                    approved: row.get::<_, i64>(1)? == 1,
                    reason: row.get(2)?,
                    at_ms: row.get(3)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }
}
