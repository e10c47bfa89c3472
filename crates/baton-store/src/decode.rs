//! Columns into model types. A value that does not parse is reported as a conversion failure of
//! its column, which becomes [`StoreError::BadValue`](crate::StoreError::BadValue).

use baton_model::{Outcome, RunId, RunState, StopCause, TaskId, TaskState};
use rusqlite::Row;
use rusqlite::types::Type;

fn invalid(idx: usize, what: &str, value: &str) -> rusqlite::Error {
    let message = format!("`{value}` is not a {what}");
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, message.into())
}

pub(crate) fn task_state(row: &Row<'_>, idx: usize) -> rusqlite::Result<TaskState> {
    let text: String = row.get(idx)?;
    TaskState::parse(&text).ok_or_else(|| invalid(idx, "task state", &text))
}

pub(crate) fn run_state(row: &Row<'_>, idx: usize) -> rusqlite::Result<RunState> {
    let text: String = row.get(idx)?;
    RunState::parse(&text).ok_or_else(|| invalid(idx, "run state", &text))
}

pub(crate) fn task_id(row: &Row<'_>, idx: usize) -> rusqlite::Result<TaskId> {
    let text: String = row.get(idx)?;
    TaskId::new(text.as_str()).map_err(|_| invalid(idx, "task id", &text))
}

pub(crate) fn run_id(row: &Row<'_>, idx: usize) -> rusqlite::Result<RunId> {
    let text: String = row.get(idx)?;
    RunId::new(text.as_str()).map_err(|_| invalid(idx, "run id", &text))
}

pub(crate) fn outcome(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<Outcome>> {
    let Some(text) = row.get::<_, Option<String>>(idx)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|err| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, err.into()))
}

pub(crate) fn agent_usage(
    row: &Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<baton_model::AgentUsage>> {
    let Some(text) = row.get::<_, Option<String>>(idx)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
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
