//! The statements a commit runs, each taken from the connection's cache once per commit rather
//! than once per event: a turn of a few tasks runs each of them several times, and every trip
//! through the cache hashes the statement's text twice (out of the cache, and back in).

use baton_model::{RunId, TaskId};
use rusqlite::{CachedStatement, Connection};

use crate::task_index::TaskIndex;

/// The task's output columns set from the attempt `?3`'s output (`?8`–`?11`) unless a later
/// attempt's output is there already; then the row: `run_id = ?1`, `idx = $idx` (a
/// placeholder), `task_id = ?2`.
macro_rules! task_output_of_attempt_3 {
    ($idx:literal) => {
        concat!(
            "output_attempt = IIF(COALESCE(output_attempt, 0) <= ?3, ?3, output_attempt), \
             output = IIF(COALESCE(output_attempt, 0) <= ?3, ?8, output), \
             output_bytes = IIF(COALESCE(output_attempt, 0) <= ?3, ?9, output_bytes), \
             output_json = IIF(COALESCE(output_attempt, 0) <= ?3, ?10, output_json), \
             stderr_tail = IIF(COALESCE(output_attempt, 0) <= ?3, ?11, stderr_tail) \
             WHERE run_id = ?1 AND idx = ",
            $idx,
            " AND +task_id = ?2"
        )
    };
}

/// One statement of a commit. [`Sql::text`] holds the SQL.
///
/// Those run for every task (its start, its end, its output) find the task's row by its
/// index, bound last (from [`crate::task_index::TaskIndex`]), and check its id; the others find
/// it by id. `AttemptRan` and `AttemptsRan` insert an index their task's update checked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sql {
    InsertEvent,
    /// [`crate::write::EVENTS_PER_INSERT`] events at once.
    InsertEvents,
    RunStarted,
    RunStopping,
    RunFinished,
    TaskReset,
    TaskWaiting,
    TaskStarted,
    InsertAttempt,
    AttemptFinished,
    AttemptFinishedWithOutput,
    TaskExitCode,
    TaskEndedWithOutput,
    RetryScheduled,
    TaskFinished,
    AttemptOutput,
    TaskOutput,
    TaskKnown,
    AttemptKnown,
    AttemptRan,
    AttemptsRan,
    TaskAdded,
    RunGrown,
    CountsForgotten,
    TasksCounted,
    TaskRan,
    TaskRanQuietly,
    TaskPicked,
}

impl Sql {
    const COUNT: usize = Self::TaskPicked as usize + 1;

    fn text(self) -> &'static str {
        match self {
            Self::InsertEvent => {
                "INSERT INTO events (run_id, seq, at_ms, kind, task_id, data_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            }
            Self::InsertEvents => &INSERT_EVENTS,
            Self::RunStarted => {
                "UPDATE runs SET status = ?2, ended_at_ms = NULL, stop_reason = NULL, \
                 stop_cause = NULL WHERE id = ?1"
            }
            Self::RunStopping => "UPDATE runs SET stop_reason = ?2, stop_cause = ?3 WHERE id = ?1",
            Self::TaskWaiting => "UPDATE tasks SET status = ?3 WHERE run_id = ?1 AND task_id = ?2",
            Self::TaskReset => {
                "UPDATE tasks SET status = ?3, reason = NULL, ended_at_ms = NULL, \
                 next_attempt = NULL, retry_at_ms = NULL \
                 WHERE run_id = ?1 AND task_id = ?2"
            }
            Self::RunFinished => "UPDATE runs SET status = ?2, ended_at_ms = ?3 WHERE id = ?1",
            Self::TaskStarted => {
                "UPDATE tasks SET status = ?3, attempts = MAX(attempts, ?4), \
                 started_at_ms = COALESCE(started_at_ms, ?5), ended_at_ms = NULL, \
                 reason = NULL, exit_code = NULL, next_attempt = NULL, retry_at_ms = NULL \
                 WHERE run_id = ?1 AND idx = ?6 AND +task_id = ?2"
            }
            // No row (the task is unknown) is inserted as none: the caller checks.
            // After `TaskStarted`: its `attempts` is this one's number unless a later attempt
            // started already (attempt numbers only grow: the number fences the attempt).
            Self::InsertAttempt => {
                "INSERT INTO attempts (run_id, task_idx, task_id, attempt, started_at_ms, pid) \
                 SELECT ?1, idx, ?2, ?3, ?4, ?5 FROM tasks \
                 WHERE run_id = ?1 AND idx = ?6 AND +task_id = ?2 AND attempts = ?3"
            }
            Self::AttemptFinished => {
                "UPDATE attempts SET ended_at_ms = ?4, outcome_kind = ?5, outcome_json = ?6, \
                 exit_code = ?7, duration_ms = ?8, tokens = ?9, cost_usd = ?10, agent_json = ?11, \
                 containment = ?12 \
                 WHERE run_id = ?1 AND task_idx = ?13 AND +task_id = ?2 \
                 AND attempt = ?3 AND ended_at_ms IS NULL"
            }
            Self::AttemptFinishedWithOutput => {
                "UPDATE attempts SET ended_at_ms = ?4, outcome_kind = ?5, outcome_json = ?6, \
                 exit_code = ?7, duration_ms = ?8, output = ?9, output_bytes = ?10, \
                 output_json = ?11, stderr_tail = ?12, log_path = ?13, tokens = ?14, \
                 cost_usd = ?15, agent_json = ?16, containment = ?17 \
                 WHERE run_id = ?1 AND task_idx = ?18 AND +task_id = ?2 \
                 AND attempt = ?3 AND ended_at_ms IS NULL"
            }
            Self::TaskExitCode => {
                "UPDATE tasks SET exit_code = ?4 \
                 WHERE run_id = ?1 AND idx = ?5 AND +task_id = ?2 AND attempts = ?3"
            }
            // `TaskExitCode`, `TaskOutput` and `TaskFinished` at once. Every expression reads
            // the row as it was, and none of the three writes a column another reads or
            // writes, so doing them together is doing them in turn. `output_attempt` is NULL
            // or at least 1, and `?3` at least 0.
            Self::TaskEndedWithOutput => {
                concat!(
                    "UPDATE tasks SET exit_code = IIF(attempts = ?3, ?4, exit_code), \
                     status = ?5, reason = ?6, ended_at_ms = ?7, \
                     next_attempt = NULL, retry_at_ms = NULL, ",
                    task_output_of_attempt_3!("?12")
                )
            }
            Self::RetryScheduled => {
                "UPDATE tasks SET status = ?3, next_attempt = ?4, retry_at_ms = ?5 \
                 WHERE run_id = ?1 AND task_id = ?2"
            }
            Self::TaskFinished => {
                "UPDATE tasks SET status = ?3, reason = ?4, ended_at_ms = ?5, \
                 next_attempt = NULL, retry_at_ms = NULL \
                 WHERE run_id = ?1 AND idx = ?6 AND +task_id = ?2"
            }
            Self::AttemptOutput => {
                "UPDATE attempts SET output = ?4, output_bytes = ?5, output_json = ?6, \
                 stderr_tail = ?7, log_path = ?8 \
                 WHERE run_id = ?1 AND task_idx = ?9 AND +task_id = ?2 AND attempt = ?3"
            }
            Self::TaskOutput => {
                "UPDATE tasks SET output_attempt = ?3, output = ?4, output_bytes = ?5, \
                 output_json = ?6, stderr_tail = ?7 \
                 WHERE run_id = ?1 AND idx = ?8 AND +task_id = ?2 \
                 AND (output_attempt IS NULL OR output_attempt <= ?3)"
            }
            Self::TaskKnown => "SELECT 1 FROM tasks WHERE run_id = ?1 AND task_id = ?2",
            Self::AttemptKnown => {
                "SELECT 1 FROM attempts \
                 WHERE run_id = ?1 AND task_idx = (SELECT idx FROM tasks WHERE run_id = ?1 AND task_id = ?2) \
                 AND attempt = ?3"
            }
            // `InsertAttempt` and `AttemptFinishedWithOutput` at once: an attempt whose start
            // and end are in the same commit. Inserted after its task's `TaskRan` (or
            // `TaskRanQuietly`), which checks what `InsertAttempt` does (the task is the run's,
            // its latest attempt an earlier one): its `task_idx`, bound as a value and not
            // checked here, is the row that update found by index and id.
            Self::AttemptRan => &ATTEMPT_RAN,
            // [`crate::whole_attempts::PER_INSERT`] of them.
            Self::AttemptsRan => &ATTEMPTS_RAN,
            // A planner's task, after the run's others (`task_count` of them, indices from 0).
            Self::TaskAdded => {
                "INSERT INTO tasks (run_id, task_id, idx, status) \
                 SELECT ?1, ?2, task_count, ?3 FROM runs WHERE id = ?1"
            }
            Self::RunGrown => "UPDATE runs SET task_count = task_count + 1 WHERE id = ?1",
            // A run's tasks counted by state, kept from its `run-finished` until its next turn.
            Self::CountsForgotten => "DELETE FROM task_counts WHERE run_id = ?1",
            Self::TasksCounted => {
                "INSERT INTO task_counts (run_id, status, n) \
                 SELECT run_id, status, COUNT(*) FROM tasks WHERE run_id = ?1 GROUP BY status"
            }
            // A best-of task's output and exit code are its winner's (attempt ?3), whichever
            // candidate's attempt ended last, unless an attempt after the round (which ends at
            // ?4) started since.
            Self::TaskPicked => {
                "UPDATE tasks SET output_attempt = a.attempt, output = a.output, \
                 output_bytes = a.output_bytes, output_json = a.output_json, \
                 stderr_tail = a.stderr_tail, exit_code = a.exit_code \
                 FROM attempts AS a \
                 WHERE tasks.run_id = ?1 AND tasks.task_id = ?2 \
                 AND a.run_id = ?1 AND a.task_idx = tasks.idx AND a.attempt = ?3 \
                 AND tasks.attempts <= ?4"
            }
            // `TaskStarted` and then `TaskEndedWithOutput`, composed: the first leaves
            // `attempts` at MAX(attempts, ?3) and `exit_code` NULL, which the second reads; it
            // changes no column the second reads otherwise. One update of the row instead of two.
            // Only while the task's latest attempt is an earlier one (`attempts < ?3`): then its
            // `AttemptRan` may be inserted.
            Self::TaskRan => {
                concat!(
                    "UPDATE tasks SET status = ?5, attempts = MAX(attempts, ?3), \
                     started_at_ms = COALESCE(started_at_ms, ?12), \
                     exit_code = IIF(MAX(attempts, ?3) = ?3, ?4, NULL), \
                     reason = ?6, ended_at_ms = ?7, next_attempt = NULL, retry_at_ms = NULL, ",
                    task_output_of_attempt_3!("?13"),
                    " AND attempts < ?3"
                )
            }
            // `TaskStarted`, `TaskExitCode` and `TaskFinished`, composed as in `TaskRan`, for
            // an attempt that left no output: the task's output stays what it was.
            Self::TaskRanQuietly => {
                "UPDATE tasks SET status = ?5, attempts = MAX(attempts, ?3), \
                 started_at_ms = COALESCE(started_at_ms, ?8), \
                 exit_code = IIF(MAX(attempts, ?3) = ?3, ?4, NULL), \
                 reason = ?6, ended_at_ms = ?7, next_attempt = NULL, retry_at_ms = NULL \
                 WHERE run_id = ?1 AND idx = ?9 AND +task_id = ?2 AND attempts < ?3"
            }
        }
    }
}

/// The statements of one commit, each prepared (or taken from the cache) when first used, and
/// where the run's tasks' rows are.
pub(crate) struct Statements<'conn> {
    conn: &'conn Connection,
    taken: [Option<CachedStatement<'conn>>; Sql::COUNT],
    rows: &'conn mut TaskIndex,
}

impl<'conn> Statements<'conn> {
    pub(crate) fn new(conn: &'conn Connection, rows: &'conn mut TaskIndex) -> Self {
        Self {
            conn,
            taken: [const { None }; Sql::COUNT],
            rows,
        }
    }

    /// The row index of `task` in `run`, `None` if the run has no such task: bound where a
    /// statement says `idx = ?` (a NULL matches no row, which the caller reports as for any
    /// unknown task).
    pub(crate) fn row_of(&mut self, run: &RunId, task: &TaskId) -> rusqlite::Result<Option<i64>> {
        self.rows.of(self.conn, run, task)
    }

    /// `task` was just added to `run`.
    pub(crate) fn row_added(&mut self, run: &RunId, task: &TaskId) -> rusqlite::Result<()> {
        self.rows.added(self.conn, run, task)
    }

    pub(crate) fn get(&mut self, sql: Sql) -> rusqlite::Result<&mut CachedStatement<'conn>> {
        let slot = &mut self.taken[sql as usize];
        if slot.is_none() {
            *slot = Some(self.conn.prepare_cached(sql.text())?);
        }
        Ok(slot.as_mut().expect("filled above"))
    }
}

/// `Sql::InsertEvents`: one row of placeholders per event.
static INSERT_EVENTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    insert_rows(
        "events (run_id, seq, at_ms, kind, task_id, data_json)",
        0,
        crate::write::EVENTS_PER_INSERT,
    )
});

/// An attempt's columns, as `Sql::AttemptRan` and `Sql::AttemptsRan` insert them.
const ATTEMPT_RAN_COLUMNS: &str = "attempts (run_id, task_idx, task_id, attempt, started_at_ms, \
     pid, ended_at_ms, outcome_kind, outcome_json, exit_code, duration_ms, output, output_bytes, \
     output_json, stderr_tail, log_path, tokens, cost_usd, agent_json, containment)";

static ATTEMPT_RAN: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| insert_rows(ATTEMPT_RAN_COLUMNS, 1, 1));

static ATTEMPTS_RAN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    insert_rows(ATTEMPT_RAN_COLUMNS, 1, crate::whole_attempts::PER_INSERT)
});

/// `INSERT INTO {into} VALUES` with `rows` rows of placeholders, one per column `into` names:
/// many rows to a statement cost less than a statement each. The first `shared` columns hold
/// the same value in every row (the run, …): `?1` to `?{shared}`, bound once; the others are
/// numbered on from there, row after row.
pub(crate) fn insert_rows(into: &str, shared: usize, rows: usize) -> String {
    let own = into.matches(',').count() + 1 - shared;
    let rows: Vec<String> = (0..rows)
        .map(|row| {
            let first = shared + 1 + row * own;
            let values: Vec<String> = (1..=shared)
                .chain(first..first + own)
                .map(|n| format!("?{n}"))
                .collect();
            format!("({})", values.join(", "))
        })
        .collect();
    format!("INSERT INTO {into} VALUES {}", rows.join(", "))
}

#[cfg(test)]
mod tests {
    use super::Sql;
    use crate::migrate::MIGRATIONS;

    #[test]
    fn rows_share_their_first_columns_bound_once() {
        assert_eq!(
            super::insert_rows("t (a, b)", 0, 2),
            "INSERT INTO t (a, b) VALUES (?1, ?2), (?3, ?4)"
        );
        assert_eq!(
            super::insert_rows("t (run, s, a, b)", 2, 2),
            "INSERT INTO t (run, s, a, b) VALUES (?1, ?2, ?3, ?4), (?1, ?2, ?5, ?6)"
        );
    }

    /// A statement given the task's row index seeks the row by it (the primary key), not by
    /// the id it also checks: the planner would take the id's index if let.
    #[test]
    fn rows_found_by_index_are_sought_by_the_primary_key() {
        use Sql::*;
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for migration in MIGRATIONS {
            conn.execute_batch(migration).unwrap();
        }
        // Those `project` binds a row index to.
        let by_index = [
            TaskStarted,
            InsertAttempt,
            AttemptFinished,
            AttemptFinishedWithOutput,
            TaskExitCode,
            TaskEndedWithOutput,
            TaskFinished,
            AttemptOutput,
            TaskOutput,
            TaskRan,
            TaskRanQuietly,
        ];
        for sql in by_index {
            assert!(sql.text().contains("+task_id = ?2"), "{sql:?}");
            let mut explain = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {}", sql.text()))
                .unwrap();
            let nulls = vec![None::<i64>; explain.parameter_count()];
            let plan: Vec<String> = explain
                .query_map(rusqlite::params_from_iter(nulls), |row| row.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let searches: Vec<&String> = plan.iter().filter(|p| p.contains("SEARCH")).collect();
            assert!(!searches.is_empty(), "{sql:?}: {plan:?}");
            assert!(
                searches.iter().all(|p| p.contains("USING PRIMARY KEY")),
                "{sql:?}: {plan:?}"
            );
        }
    }
}
