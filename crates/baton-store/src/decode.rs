//! Columns into model types. A value that does not parse is reported as a conversion failure of
//! its column, which becomes [`StoreError::BadValue`](crate::StoreError::BadValue).

use baton_model::{Outcome, RunId, RunState, StopCause, TaskId, TaskState};
use rusqlite::Row;
use rusqlite::types::Type;

fn invalid(idx: usize, what: &str, value: &str) -> rusqlite::Error {
    let message = format!("`{value}` is not a {what}");
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, message.into())
}

// Text columns are read where SQLite holds them, not copied first: a 100,000-task run's result
// reads 200,000 rows back.

/// Column `idx` as text, `None` if NULL; a value of another type, or not UTF-8, is an error of
/// that column, as `row.get::<_, Option<String>>` says it.
fn text_or_null<'r>(row: &'r Row<'_>, idx: usize) -> rusqlite::Result<Option<&'r str>> {
    let value = row.get_ref(idx)?;
    value.as_str_or_null().map_err(|err| match err {
        rusqlite::types::FromSqlError::InvalidType => wrong_type(row, idx, value.data_type()),
        other => rusqlite::Error::FromSqlConversionFailure(idx, value.data_type(), other.into()),
    })
}

/// Column `idx` as text; NULL is an error of that column.
fn text<'r>(row: &'r Row<'_>, idx: usize) -> rusqlite::Result<&'r str> {
    text_or_null(row, idx)?.ok_or_else(|| wrong_type(row, idx, Type::Null))
}

/// Column `idx` holds a `found` where text was wanted.
fn wrong_type(row: &Row<'_>, idx: usize, found: Type) -> rusqlite::Error {
    let name = row
        .as_ref()
        .column_name(idx)
        .map_or_else(|_| String::new(), str::to_owned);
    rusqlite::Error::InvalidColumnType(idx, name, found)
}

pub(crate) fn task_state(row: &Row<'_>, idx: usize) -> rusqlite::Result<TaskState> {
    let text = text(row, idx)?;
    TaskState::parse(text).ok_or_else(|| invalid(idx, "task state", text))
}

pub(crate) fn run_state(row: &Row<'_>, idx: usize) -> rusqlite::Result<RunState> {
    let text = text(row, idx)?;
    RunState::parse(text).ok_or_else(|| invalid(idx, "run state", text))
}

pub(crate) fn task_id(row: &Row<'_>, idx: usize) -> rusqlite::Result<TaskId> {
    let text = text(row, idx)?;
    TaskId::new(text).map_err(|_| invalid(idx, "task id", text))
}

pub(crate) fn run_id(row: &Row<'_>, idx: usize) -> rusqlite::Result<RunId> {
    let text = text(row, idx)?;
    RunId::new(text).map_err(|_| invalid(idx, "run id", text))
}

/// Outcomes decoded from their JSON, the last one kept: a run's attempts mostly end alike
/// (`{"kind":"exited","code":0}`), and decoding the JSON was a tenth of reading a 100,000-task
/// run's attempts back.
#[derive(Default)]
pub(crate) struct Outcomes {
    last: Option<(String, Outcome)>,
}

impl Outcomes {
    pub(crate) fn decode(
        &mut self,
        row: &Row<'_>,
        idx: usize,
    ) -> rusqlite::Result<Option<Outcome>> {
        let Some(text) = text_or_null(row, idx)? else {
            return Ok(None);
        };
        if let Some((json, outcome)) = &self.last
            && json == text
        {
            return Ok(Some(outcome.clone()));
        }
        let outcome: Outcome = serde_json::from_str(text).map_err(|err| {
            rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, err.into())
        })?;
        self.last = Some((text.to_owned(), outcome.clone()));
        Ok(Some(outcome))
    }
}

pub(crate) fn agent_usage(
    row: &Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<baton_model::AgentUsage>> {
    let Some(text) = text_or_null(row, idx)? else {
        return Ok(None);
    };
    serde_json::from_str(text)
        .map(Some)
        .map_err(|err| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, err.into()))
}

/// The `kind` tag an outcome serializes with, kept in its own column for queries.
/// Why a run stopped, from its `stop_reason` and `stop_cause` columns: a run recorded before
/// the cause was (schema 9; PostgreSQL 5) has only the words.
pub(crate) fn stop(reason: Option<String>, cause: Option<String>) -> Option<baton_model::Stop> {
    let reason = reason?;
    let cause = StopCause::of(&reason, cause.as_deref().and_then(StopCause::parse));
    Some(baton_model::Stop { cause, reason })
}

pub(crate) fn outcome_kind(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Exited { .. } => "exited",
        Outcome::Signaled { .. } => "signaled",
        Outcome::TimedOut => "timed-out",
        Outcome::SpawnFailed { .. } => "spawn-failed",
        Outcome::LaunchFailed { .. } => "launch-failed",
        Outcome::Cancelled => "cancelled",
        Outcome::Leaked { .. } => "leaked",
        Outcome::Interrupted => "interrupted",
        Outcome::IdleTimeout { .. } => "idle-timeout",
        Outcome::AgentFailed { .. } => "agent-failed",
        Outcome::OverBudget { .. } => "over-budget",
        Outcome::MergeConflict { .. } => "merge-conflict",
        Outcome::OutOfScope { .. } => "out-of-scope",
        Outcome::VerifyFailed { .. } => "verify-failed",
        Outcome::InvalidPlan { .. } => "invalid-plan",
        Outcome::Reviewed { .. } => "reviewed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value read in place that is not one names its column; one of another type is refused.
    #[test]
    fn a_bad_value_is_an_error_of_its_column() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let read = |sql: &str| {
            conn.query_row(sql, [], |row| {
                let outcome = Outcomes::default().decode(row, 2);
                Ok((task_id(row, 0), task_state(row, 1), outcome))
            })
            .unwrap()
        };
        let (id, state, outcome_) =
            read("SELECT 'a.b', 'succeeded', '{\"kind\":\"exited\",\"code\":3}'");
        assert_eq!(id.unwrap().as_str(), "a.b");
        assert_eq!(state.unwrap(), TaskState::Succeeded);
        assert_eq!(outcome_.unwrap(), Some(Outcome::Exited { code: 3 }));
        let (id, state, outcome_) = read("SELECT 'a b', 'done', '{'");
        assert!(
            id.unwrap_err()
                .to_string()
                .contains("`a b` is not a task id")
        );
        assert!(
            state
                .unwrap_err()
                .to_string()
                .contains("`done` is not a task state")
        );
        assert!(outcome_.is_err());
        let (id, state, outcome_) = read("SELECT 7 AS task_id, NULL AS status, NULL");
        let err = id.unwrap_err();
        assert!(
            matches!(&err, rusqlite::Error::InvalidColumnType(0, name, Type::Integer) if name == "task_id"),
            "{err:?}"
        );
        assert!(matches!(
            state.unwrap_err(),
            rusqlite::Error::InvalidColumnType(1, _, Type::Null)
        ));
        assert_eq!(outcome_.unwrap(), None);
    }

    /// An outcome like the last one decoded is that one again; any other is its own.
    #[test]
    fn outcomes_decode_each_row_s_own() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut outcomes = Outcomes::default();
        let rows = conn
            .prepare(
                "SELECT '{\"kind\":\"exited\",\"code\":0}' UNION ALL \
                 SELECT '{\"kind\":\"exited\",\"code\":0}' UNION ALL SELECT NULL UNION ALL \
                 SELECT '{\"kind\":\"exited\",\"code\":1}' UNION ALL SELECT '{' UNION ALL \
                 SELECT '{\"kind\":\"exited\",\"code\":0}'",
            )
            .unwrap()
            .query_map([], |row| Ok(outcomes.decode(row, 0).ok()))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let exited = |code| Some(Some(Outcome::Exited { code }));
        assert_eq!(
            rows,
            [exited(0), exited(0), Some(None), exited(1), None, exited(0)]
        );
    }

    #[test]
    fn outcome_kind_matches_the_serialized_tag() {
        for outcome in [
            Outcome::Exited { code: 1 },
            Outcome::signaled(9),
            Outcome::TimedOut,
            Outcome::SpawnFailed { error: "x".into() },
            Outcome::LaunchFailed { error: "x".into() },
            Outcome::Cancelled,
            Outcome::Leaked { code: 0 },
            Outcome::Interrupted,
            Outcome::IdleTimeout { after_ms: 1 },
            Outcome::AgentFailed {
                class: baton_model::FailureClass::Task,
                reason: "r".into(),
                message: "m".into(),
                retry_after_ms: None,
            },
            Outcome::OverBudget {
                limit: "l".into(),
                scope: None,
                spent_usd: None,
                tokens: 1,
            },
            Outcome::MergeConflict {
                incoming: "a".into(),
                files: vec![],
            },
            Outcome::OutOfScope { files: vec![] },
            Outcome::InvalidPlan { problems: 2 },
            Outcome::Reviewed {
                verdict: baton_model::ReviewVerdict::Rejected,
            },
            Outcome::VerifyFailed {
                command: "c".into(),
                detail: "d".into(),
            },
        ] {
            let json = serde_json::to_value(&outcome).unwrap();
            assert_eq!(json["kind"], outcome_kind(&outcome));
        }
    }
}
