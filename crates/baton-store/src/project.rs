//! How an event changes the tables that project the event log. [`crate::consistency`] derives
//! the same from the log independently; the two must agree.
//!
//! | event | change |
//! |---|---|
//! | `run-started` | run `running`, no end, no stop reason (a resume starts it again) |
//! | `run-stopping` | run's `stop_reason` |
//! | `run-finished` | run status and end |
//! | `attempt-started` | new attempt row (start, pid); task `running`, `attempts` = highest started, start = first attempt's, end, reason, exit code and pending retry cleared |
//! | `attempt-finished` | attempt end, outcome, exit code, duration; the task's exit code, if it is the task's latest attempt |
//! | `retry-scheduled` | task `pending`, `next_attempt` and `retry_at_ms` (= event time + delay) |
//! | `task-finished` | task status, reason and end; pending retry cleared |
//!
//! An [`AttemptOutput`] lands on its attempt row and on the task row unless a later attempt's
//! output is there already.

use baton_model::{Event, EventKind, RunId, RunState, TaskId, TaskState};
use rusqlite::{ErrorCode, Transaction, params};

use crate::decode::outcome_kind;
use crate::{AttemptOutput, StoreError};

pub(crate) fn apply_event(
    tx: &Transaction<'_>,
    run: &RunId,
    event: &Event,
) -> Result<(), StoreError> {
    let at = event.at_ms;
    let id = run.as_str();
    match &event.kind {
        EventKind::RunStarted { .. } => {
            tx.prepare_cached(
                "UPDATE runs SET status = ?2, ended_at_ms = NULL, stop_reason = NULL \
                 WHERE id = ?1",
            )?
            .execute(params![id, RunState::Running.as_str()])?;
        }
        EventKind::RunStopping { reason } => {
            tx.prepare_cached("UPDATE runs SET stop_reason = ?2 WHERE id = ?1")?
                .execute(params![id, reason])?;
        }
        EventKind::RunFinished { state } => {
            tx.prepare_cached("UPDATE runs SET status = ?2, ended_at_ms = ?3 WHERE id = ?1")?
                .execute(params![id, state.as_str(), at])?;
        }
        EventKind::AttemptStarted { task, attempt, pid } => {
            let changed = tx
                .prepare_cached(
                    "UPDATE tasks SET status = ?3, attempts = MAX(attempts, ?4), \
                     started_at_ms = COALESCE(started_at_ms, ?5), ended_at_ms = NULL, \
                     reason = NULL, exit_code = NULL, next_attempt = NULL, retry_at_ms = NULL \
                     WHERE run_id = ?1 AND task_id = ?2",
                )?
                .execute(params![
                    id,
                    task.as_str(),
                    TaskState::Running.as_str(),
                    attempt,
                    at
                ])?;
            known_task(changed, run, task)?;
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO attempts (run_id, task_id, attempt, started_at_ms, pid) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![id, task.as_str(), attempt, at, pid]);
            match inserted {
                Err(err) if err.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                    return Err(StoreError::AttemptExists {
                        run: run.clone(),
                        task: task.clone(),
                        attempt: *attempt,
                    });
                }
                other => other?,
            };
        }
        EventKind::AttemptFinished {
            task,
            attempt,
            outcome,
            duration_ms,
        } => {
            let json = serde_json::to_string(outcome).map_err(StoreError::Encode)?;
            let code = outcome.exit_code();
            let changed = tx
                .prepare_cached(
                    "UPDATE attempts SET ended_at_ms = ?4, outcome_kind = ?5, outcome_json = ?6, \
                     exit_code = ?7, duration_ms = ?8 \
                     WHERE run_id = ?1 AND task_id = ?2 AND attempt = ?3",
                )?
                .execute(params![
                    id,
                    task.as_str(),
                    attempt,
                    at,
                    outcome_kind(outcome),
                    json,
                    code,
                    duration_ms
                ])?;
            known_attempt(changed, run, task, *attempt)?;
            tx.prepare_cached(
                "UPDATE tasks SET exit_code = ?4 \
                 WHERE run_id = ?1 AND task_id = ?2 AND attempts = ?3",
            )?
            .execute(params![id, task.as_str(), attempt, code])?;
        }
        EventKind::RetryScheduled {
            task,
            attempt,
            delay_ms,
        } => {
            let retry_at = at.saturating_add(i64::try_from(*delay_ms).unwrap_or(i64::MAX));
            let changed = tx
                .prepare_cached(
                    "UPDATE tasks SET status = ?3, next_attempt = ?4, retry_at_ms = ?5 \
                     WHERE run_id = ?1 AND task_id = ?2",
                )?
                .execute(params![
                    id,
                    task.as_str(),
                    TaskState::Pending.as_str(),
                    attempt,
                    retry_at
                ])?;
            known_task(changed, run, task)?;
        }
        EventKind::TaskFinished {
            task,
            state,
            reason,
        } => {
            let changed = tx
                .prepare_cached(
                    "UPDATE tasks SET status = ?3, reason = ?4, ended_at_ms = ?5, \
                     next_attempt = NULL, retry_at_ms = NULL \
                     WHERE run_id = ?1 AND task_id = ?2",
                )?
                .execute(params![id, task.as_str(), state.as_str(), reason, at])?;
            known_task(changed, run, task)?;
        }
    }
    Ok(())
}

pub(crate) fn apply_output(
    tx: &Transaction<'_>,
    run: &RunId,
    output: &AttemptOutput,
) -> Result<(), StoreError> {
    let id = run.as_str();
    let task = output.task.as_str();
    let changed = tx
        .prepare_cached(
            "UPDATE attempts SET output = ?4, output_bytes = ?5, output_json = ?6, \
             stderr_tail = ?7, log_path = ?8 \
             WHERE run_id = ?1 AND task_id = ?2 AND attempt = ?3",
        )?
        .execute(params![
            id,
            task,
            output.attempt,
            output.output,
            output.output_bytes,
            output.output_json,
            output.stderr_tail,
            output.log_path
        ])?;
    known_attempt(changed, run, &output.task, output.attempt)?;
    tx.prepare_cached(
        "UPDATE tasks SET output_attempt = ?3, output = ?4, output_bytes = ?5, output_json = ?6, \
         stderr_tail = ?7 \
         WHERE run_id = ?1 AND task_id = ?2 AND (output_attempt IS NULL OR output_attempt <= ?3)",
    )?
    .execute(params![
        id,
        task,
        output.attempt,
        output.output,
        output.output_bytes,
        output.output_json,
        output.stderr_tail
    ])?;
    Ok(())
}

fn known_task(changed: usize, run: &RunId, task: &TaskId) -> Result<(), StoreError> {
    if changed == 0 {
        return Err(StoreError::UnknownTask {
            run: run.clone(),
            task: task.clone(),
        });
    }
    Ok(())
}

fn known_attempt(
    changed: usize,
    run: &RunId,
    task: &TaskId,
    attempt: u32,
) -> Result<(), StoreError> {
    if changed == 0 {
        return Err(StoreError::UnknownAttempt {
            run: run.clone(),
            task: task.clone(),
            attempt,
        });
    }
    Ok(())
}
