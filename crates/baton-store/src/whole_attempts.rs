//! Attempts started and ended in the same commit (a short task's: the most a run records),
//! inserted [`PER_INSERT`] to a statement. Each one's task row is updated first, by a statement
//! that checks what inserting the attempt needs (the task is the run's, its latest attempt an
//! earlier one), so the rows wait here only until the commit's next statement of another kind:
//! nothing reads an attempt's row before then. One statement per attempt, with its twenty
//! values, was a fifth of recording a 100,000-task run.

use baton_model::{RunId, TaskId};
use rusqlite::ToSql;

use crate::StoreError;
use crate::statements::{Sql, Statements};

/// Attempts inserted by one statement.
pub(crate) const PER_INSERT: usize = 32;

/// One attempt's row, its columns in the order of `Sql::AttemptRan`.
pub(crate) struct AttemptRow<'e> {
    pub(crate) run: &'e RunId,
    pub(crate) task: &'e TaskId,
    /// `run` and `task` as bound.
    pub(crate) run_id: &'e str,
    pub(crate) task_id: &'e str,
    pub(crate) task_idx: i64,
    pub(crate) attempt: u32,
    pub(crate) started_at_ms: i64,
    pub(crate) pid: Option<u32>,
    pub(crate) ended_at_ms: i64,
    pub(crate) outcome_kind: &'static str,
    pub(crate) outcome_json: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) duration_ms: u64,
    pub(crate) output: Option<&'e String>,
    pub(crate) output_bytes: Option<u64>,
    pub(crate) output_json: Option<&'e String>,
    pub(crate) stderr_tail: Option<&'e String>,
    pub(crate) log_path: Option<&'e String>,
    pub(crate) tokens: Option<i64>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) agent_json: Option<String>,
    pub(crate) containment: Option<&'static str>,
}

impl AttemptRow<'_> {
    /// Its values but the run's (`?1`, bound once a statement).
    fn values(&self) -> [&dyn ToSql; 19] {
        [
            &self.task_idx,
            &self.task_id,
            &self.attempt,
            &self.started_at_ms,
            &self.pid,
            &self.ended_at_ms,
            &self.outcome_kind,
            &self.outcome_json,
            &self.exit_code,
            &self.duration_ms,
            &self.output,
            &self.output_bytes,
            &self.output_json,
            &self.stderr_tail,
            &self.log_path,
            &self.tokens,
            &self.cost_usd,
            &self.agent_json,
            &self.containment,
        ]
    }
}

/// The commit's attempts not inserted yet.
#[derive(Default)]
pub(crate) struct WholeAttempts<'e> {
    rows: Vec<AttemptRow<'e>>,
}

impl<'e> WholeAttempts<'e> {
    /// Adds `row`, whose task's row is updated already; inserts what waits once there are
    /// [`PER_INSERT`].
    pub(crate) fn push(
        &mut self,
        statements: &mut Statements<'_>,
        row: AttemptRow<'e>,
    ) -> Result<(), StoreError> {
        self.rows.push(row);
        if self.rows.len() == PER_INSERT {
            self.insert(statements)?;
        }
        Ok(())
    }

    /// Inserts every row waiting: before any other statement of the commit runs.
    pub(crate) fn insert(&mut self, statements: &mut Statements<'_>) -> Result<(), StoreError> {
        if self.rows.len() == PER_INSERT {
            // A commit's attempts are all of its one run.
            let run_id = self.rows[0].run_id;
            let values: Vec<&dyn ToSql> = std::iter::once(&run_id as &dyn ToSql)
                .chain(self.rows.iter().flat_map(|row| row.values()))
                .collect();
            match statements.get(Sql::AttemptsRan)?.execute(values.as_slice()) {
                // One of them is there already: the statement inserted none, and which one it
                // is is found by inserting them one at a time.
                Err(err) if is_constraint(&err) => {}
                other => {
                    other?;
                    self.rows.clear();
                    return Ok(());
                }
            }
        }
        for row in self.rows.drain(..) {
            let values: Vec<&dyn ToSql> = std::iter::once(&row.run_id as &dyn ToSql)
                .chain(row.values())
                .collect();
            match statements.get(Sql::AttemptRan)?.execute(values.as_slice()) {
                Err(err) if is_constraint(&err) => {
                    return Err(StoreError::AttemptExists {
                        run: row.run.clone(),
                        task: row.task.clone(),
                        attempt: row.attempt,
                    });
                }
                other => other?,
            };
        }
        Ok(())
    }
}

fn is_constraint(err: &rusqlite::Error) -> bool {
    err.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
}
