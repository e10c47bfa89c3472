//! How an event changes the tables that project the event log: as [`baton_model::RunView`], the
//! one fold of the log, says (its docs have the table, event by event), done here in batched
//! SQL. [`crate::consistency`] replays the log through the fold and compares; the property test
//! `tests/store/fold.rs` holds the two to each other for random logs committed in random turns.
//!
//! An [`AttemptOutput`] lands on its attempt row and on the task row unless a later attempt's
//! output is there already.
//!
//! A finished task's turn usually holds its `attempt-finished`, that attempt's output and then
//! its `task-finished`: [`apply_turn`] applies the three with one update of the attempt and one
//! of the task instead of five updates; if the attempt's `attempt-started` is in the turn too
//! (a short task), the task row is updated once and the attempt's row inserted whole, with the
//! turn's other such attempts (`whole_attempts.rs`). That is
//! what recording a task mostly costs, and a run of many short tasks records thousands a
//! second. Those statements find the task's row by its index, which
//! [`crate::task_index::TaskIndex`] keeps, rather than by its id through a second index.

use std::collections::HashMap;

/// A turn's maps by task id: foldhash (seeded at random), not std's SipHash, which hashing
/// each of a large turn's ids twice made a twentieth of recording it.
type ById<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use baton_model::{
    Containment, Event, EventKind, Outcome, RunId, RunState, StopCause, TaskId, TaskState,
};
use rusqlite::{ErrorCode, params};

use crate::decode::outcome_kind;
use crate::statements::{Sql, Statements};
use crate::whole_attempts::{AttemptRow, WholeAttempts};
use crate::{AttemptOutput, StoreError};

/// Applies a turn's events in order, then its outputs (an output changes no column an event
/// reads or writes, so outputs may come last). An attempt's first output in the turn is applied
/// with the attempt's `attempt-finished`, and so is the `task-finished` that is the next event
/// about that task: the result is the same, in fewer statements.
pub(crate) fn apply_turn(
    statements: &mut Statements<'_>,
    run: &RunId,
    events: &[Event],
    outputs: &[AttemptOutput],
) -> Result<(), StoreError> {
    // The first output of each attempt; one taken by its `attempt-finished` is removed, so that
    // the rest of the attempt's outputs, if any, still land after it, in order.
    let mut first_output: ById<(&str, u32), usize> = ById::default();
    for (i, output) in outputs.iter().enumerate().rev() {
        first_output.insert((output.task.as_str(), output.attempt), i);
    }
    let mut output_applied = vec![false; outputs.len()];
    let next_about_task = next_about_same_task(events);
    let mut event_applied = vec![false; events.len()];
    let mut whole = WholeAttempts::default();
    for (i, event) in events.iter().enumerate() {
        if event_applied[i] {
            continue;
        }
        if let Some((finished, output, task_finished)) =
            whole_attempt(events, &next_about_task, &first_output, i)
        {
            // Started, ended (with its output, if it left one), and its task finished, all
            // in this turn: one insert and one update instead of two or three of each.
            if let Some(output) = output {
                let o = first_output
                    .remove(&(outputs[output].task.as_str(), outputs[output].attempt))
                    .expect("whole_attempt found the output");
                debug_assert_eq!(o, output);
                output_applied[output] = true;
            }
            event_applied[finished] = true;
            event_applied[task_finished] = true;
            run_attempt(
                statements,
                &mut whole,
                run,
                event,
                &events[finished],
                output.map(|o| &outputs[o]),
                &events[task_finished],
            )?;
            continue;
        }
        // What follows may read the attempts waiting to be inserted.
        whole.insert(statements)?;
        let output = match &event.kind {
            EventKind::AttemptFinished { task, attempt, .. } => {
                first_output.remove(&(task.as_str(), *attempt))
            }
            _ => None,
        };
        if let Some(o) = output {
            output_applied[o] = true;
            let finished = next_about_task[i]
                .filter(|&next| matches!(events[next].kind, EventKind::TaskFinished { .. }));
            if let Some(next) = finished {
                event_applied[next] = true;
            }
            end_attempt(
                statements,
                run,
                event,
                &outputs[o],
                finished.map(|next| &events[next]),
            )?;
            continue;
        }
        apply_event(statements, run, event)?;
    }
    whole.insert(statements)?;
    for (output, applied) in outputs.iter().zip(output_applied) {
        if !applied {
            apply_output(statements, run, output)?;
        }
    }
    // After every output of the turn: a best-of task's output and exit code are its
    // winner's, whichever candidate's attempt ended (or had its output land) last.
    for event in events {
        if let Some((attempt, last)) = event.kind.picked_attempt() {
            let task = event.kind.task().expect("a pick is about a task");
            statements.get(Sql::TaskPicked)?.execute(params![
                run.as_str(),
                task.as_str(),
                attempt,
                last
            ])?;
        }
    }
    count_tasks(statements, run, events)
}

/// A run's tasks are counted by state once, when it finishes, for readers that list many runs;
/// the counts are forgotten at its next turn, and a reader counts the tasks of a run that has
/// none kept. Keeping them counted at every status change instead (a trigger, up to schema
/// version 11) cost a tenth of a 100,000-task run.
fn count_tasks(
    statements: &mut Statements<'_>,
    run: &RunId,
    events: &[Event],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    statements
        .get(Sql::CountsForgotten)?
        .execute(params![run.as_str()])?;
    if events
        .iter()
        .any(|event| matches!(event.kind, EventKind::RunFinished { .. }))
    {
        statements
            .get(Sql::TasksCounted)?
            .execute(params![run.as_str()])?;
    }
    Ok(())
}

/// If event `i` starts an attempt that ends in this turn, and the next event about its task
/// finishes the task: the indices of the `attempt-finished`, of the attempt's first output
/// here if it has one, and of the `task-finished`. (An output that lands in a later turn is
/// applied then, as it would be after an end applied on its own.)
fn whole_attempt(
    events: &[Event],
    next_about_task: &[Option<usize>],
    first_output: &ById<(&str, u32), usize>,
    i: usize,
) -> Option<(usize, Option<usize>, usize)> {
    let EventKind::AttemptStarted { task, attempt, .. } = &events[i].kind else {
        return None;
    };
    let finished = next_about_task[i]?;
    let EventKind::AttemptFinished { attempt: ended, .. } = &events[finished].kind else {
        return None;
    };
    if ended != attempt {
        return None;
    }
    let output = first_output.get(&(task.as_str(), *attempt)).copied();
    let task_finished = next_about_task[finished]?;
    matches!(events[task_finished].kind, EventKind::TaskFinished { .. }).then_some((
        finished,
        output,
        task_finished,
    ))
}

/// For each event about a task, the index of the next event about the same task.
fn next_about_same_task(events: &[Event]) -> Vec<Option<usize>> {
    let mut next = vec![None; events.len()];
    let mut seen: ById<&str, usize> = ById::default();
    for (i, event) in events.iter().enumerate().rev() {
        if let Some(task) = event.kind.task() {
            next[i] = seen.insert(task.as_str(), i);
        }
    }
    next
}

/// The `tokens`, `cost_usd` and `agent_json` columns of an attempt.
pub(crate) type UsageColumns = (Option<i64>, Option<f64>, Option<String>);

pub(crate) fn usage_columns(
    agent: Option<&baton_model::AgentUsage>,
) -> Result<UsageColumns, StoreError> {
    let Some(agent) = agent else {
        return Ok((None, None, None));
    };
    let json = serde_json::to_string(agent).map_err(StoreError::Encode)?;
    Ok((
        Some(i64::try_from(agent.tokens()).unwrap_or(i64::MAX)),
        agent.cost_usd,
        Some(json),
    ))
}

/// `attempt-finished` with the attempt's output and, if given, the task's `task-finished`.
fn end_attempt(
    statements: &mut Statements<'_>,
    run: &RunId,
    finished: &Event,
    output: &AttemptOutput,
    task_finished: Option<&Event>,
) -> Result<(), StoreError> {
    let EventKind::AttemptFinished {
        task,
        attempt,
        outcome,
        duration_ms,
        agent,
        containment,
    } = &finished.kind
    else {
        unreachable!("end_attempt is given an attempt-finished event");
    };
    let id = run.as_str();
    let json = outcome_json(outcome)?;
    let code = outcome.exit_code();
    let (tokens, cost, agent_json) = usage_columns(agent.as_deref())?;
    let row = statements.row_of(run, task)?;
    let changed = statements
        .get(Sql::AttemptFinishedWithOutput)?
        .execute(params![
            id,
            task.as_str(),
            attempt,
            finished.at_ms,
            outcome_kind(outcome),
            json,
            code,
            duration_ms,
            output.output,
            output.output_bytes,
            output.output_json,
            output.stderr_tail,
            output.log_path,
            tokens,
            cost,
            agent_json,
            containment.map(Containment::as_str),
            row
        ])?;
    open_attempt(statements, changed, run, task, *attempt)?;
    let Some(Event {
        at_ms,
        kind: EventKind::TaskFinished { state, reason, .. },
        ..
    }) = task_finished
    else {
        task_exit_code(statements, run, task, *attempt, code)?;
        return task_output(statements, run, output);
    };
    let changed = statements.get(Sql::TaskEndedWithOutput)?.execute(params![
        id,
        task.as_str(),
        attempt,
        code,
        state.as_str(),
        reason,
        at_ms,
        output.output,
        output.output_bytes,
        output.output_json,
        output.stderr_tail,
        row
    ])?;
    known_task(changed, run, task)
}

/// `attempt-started`, `attempt-finished` with the attempt's output if it left one, and
/// `task-finished`: the task's row updated, the attempt's row added to `whole`.
fn run_attempt<'e>(
    statements: &mut Statements<'_>,
    whole: &mut WholeAttempts<'e>,
    run: &'e RunId,
    started: &'e Event,
    finished: &'e Event,
    output: Option<&'e AttemptOutput>,
    task_finished: &'e Event,
) -> Result<(), StoreError> {
    let (
        EventKind::AttemptStarted { task, attempt, pid },
        EventKind::AttemptFinished {
            outcome,
            duration_ms,
            agent,
            containment,
            ..
        },
        EventKind::TaskFinished { state, reason, .. },
    ) = (&started.kind, &finished.kind, &task_finished.kind)
    else {
        unreachable!("run_attempt is given a started, a finished and a task-finished event");
    };
    let id = run.as_str();
    let code = outcome.exit_code();
    let row = statements.row_of(run, task)?;
    // Only while the task's latest attempt is an earlier one: then the attempt may be inserted.
    let changed = match output {
        Some(output) => statements.get(Sql::TaskRan)?.execute(params![
            id,
            task.as_str(),
            attempt,
            code,
            state.as_str(),
            reason,
            task_finished.at_ms,
            output.output,
            output.output_bytes,
            output.output_json,
            output.stderr_tail,
            started.at_ms,
            row
        ])?,
        // The task's output stays what it was.
        None => statements.get(Sql::TaskRanQuietly)?.execute(params![
            id,
            task.as_str(),
            attempt,
            code,
            state.as_str(),
            reason,
            task_finished.at_ms,
            started.at_ms,
            row
        ])?,
    };
    let Some(task_idx) = row.filter(|_| changed > 0) else {
        return Err(attempt_refused(statements, run, task, *attempt));
    };
    let (tokens, cost_usd, agent_json) = usage_columns(agent.as_deref())?;
    // An attempt that left no output has its output columns NULL, as one whose output
    // never came.
    whole.push(
        statements,
        AttemptRow {
            run,
            task,
            run_id: id,
            task_id: task.as_str(),
            task_idx,
            attempt: *attempt,
            started_at_ms: started.at_ms,
            pid: *pid,
            ended_at_ms: finished.at_ms,
            outcome_kind: outcome_kind(outcome),
            outcome_json: outcome_json(outcome)?,
            exit_code: code,
            duration_ms: *duration_ms,
            output: output.map(|o| &o.output),
            output_bytes: output.map(|o| o.output_bytes),
            output_json: output.and_then(|o| o.output_json.as_ref()),
            stderr_tail: output.map(|o| &o.stderr_tail),
            log_path: output.map(|o| &o.log_path),
            tokens,
            cost_usd,
            agent_json,
            containment: containment.map(Containment::as_str),
        },
    )
}

/// An attempt's row was inserted, or why not: it existed already, it is numbered below the
/// task's latest attempt, or the run has no such task.
fn attempt_inserted(
    statements: &mut Statements<'_>,
    inserted: rusqlite::Result<usize>,
    run: &RunId,
    task: &TaskId,
    attempt: u32,
) -> Result<(), StoreError> {
    match inserted {
        Err(err) if err.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
            Err(StoreError::AttemptExists {
                run: run.clone(),
                task: task.clone(),
                attempt,
            })
        }
        // Inserted from the task's row (for its index), and only while the task's latest
        // attempt is not a later one.
        Ok(0) => Err(attempt_refused(statements, run, task, attempt)),
        Ok(_) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// Why attempt `attempt` of `task` could not be recorded as started: the run has no such task,
/// or the task's latest attempt is not an earlier one.
fn attempt_refused(
    statements: &mut Statements<'_>,
    run: &RunId,
    task: &TaskId,
    attempt: u32,
) -> StoreError {
    let known = statements
        .get(Sql::TaskKnown)
        .and_then(|known| known.exists(params![run.as_str(), task.as_str()]));
    match known {
        Err(err) => err.into(),
        Ok(false) => StoreError::UnknownTask {
            run: run.clone(),
            task: task.clone(),
        },
        Ok(true) => StoreError::AttemptOutOfOrder {
            run: run.clone(),
            task: task.clone(),
            attempt,
        },
    }
}

fn outcome_json(outcome: &Outcome) -> Result<String, StoreError> {
    serde_json::to_string(outcome).map_err(StoreError::Encode)
}

fn apply_event(
    statements: &mut Statements<'_>,
    run: &RunId,
    event: &Event,
) -> Result<(), StoreError> {
    let at = event.at_ms;
    let id = run.as_str();
    match &event.kind {
        // A takeover reopens the run just as its start opened it.
        EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
            statements
                .get(Sql::RunStarted)?
                .execute(params![id, RunState::Running.as_str()])?;
        }
        EventKind::TaskReset { task } => {
            let changed = statements.get(Sql::TaskReset)?.execute(params![
                id,
                task.as_str(),
                TaskState::Pending.as_str()
            ])?;
            known_task(changed, run, task)?;
        }
        EventKind::RunStopping { reason, cause } => {
            let cause = StopCause::of(reason, *cause);
            statements
                .get(Sql::RunStopping)?
                .execute(params![id, reason, cause.as_str()])?;
        }
        EventKind::TaskWaiting { task } => {
            let changed = statements.get(Sql::TaskWaiting)?.execute(params![
                id,
                task.as_str(),
                TaskState::Waiting.as_str()
            ])?;
            known_task(changed, run, task)?;
        }
        // No column changes, but the task must be the run's, as for every event about a task.
        EventKind::TaskDecided { task, .. }
        | EventKind::Reviewed { task, .. }
        | EventKind::Picked { task, .. }
        | EventKind::Replanning { task, .. }
        | EventKind::AttemptLost { task, .. }
        | EventKind::AgentActivity { task, .. }
        | EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit { task, .. })
        | EventKind::Checked {
            task: Some(task), ..
        } => {
            let known = statements
                .get(Sql::TaskKnown)?
                .exists(params![id, task.as_str()])?;
            known_task(usize::from(known), run, task)?;
        }
        // The event is the record; readers look it up when they need the budget.
        EventKind::BudgetChanged { .. }
        | EventKind::GraphReloaded { .. }
        | EventKind::ResultMerged { .. }
        | EventKind::Checked { task: None, .. } => {}
        EventKind::RunFinished { state } => {
            statements
                .get(Sql::RunFinished)?
                .execute(params![id, state.as_str(), at])?;
        }
        EventKind::AttemptStarted { task, attempt, pid } => {
            let row = statements.row_of(run, task)?;
            let changed = statements.get(Sql::TaskStarted)?.execute(params![
                id,
                task.as_str(),
                TaskState::Running.as_str(),
                attempt,
                at,
                row
            ])?;
            known_task(changed, run, task)?;
            let inserted = statements.get(Sql::InsertAttempt)?.execute(params![
                id,
                task.as_str(),
                attempt,
                at,
                pid,
                row
            ]);
            attempt_inserted(statements, inserted, run, task, *attempt)?;
        }
        EventKind::AttemptFinished {
            task,
            attempt,
            outcome,
            duration_ms,
            agent,
            containment,
        } => {
            let json = outcome_json(outcome)?;
            let code = outcome.exit_code();
            let (tokens, cost, agent_json) = usage_columns(agent.as_deref())?;
            let row = statements.row_of(run, task)?;
            let changed = statements.get(Sql::AttemptFinished)?.execute(params![
                id,
                task.as_str(),
                attempt,
                at,
                outcome_kind(outcome),
                json,
                code,
                duration_ms,
                tokens,
                cost,
                agent_json,
                containment.map(Containment::as_str),
                row
            ])?;
            open_attempt(statements, changed, run, task, *attempt)?;
            task_exit_code(statements, run, task, *attempt, code)?;
        }
        EventKind::RetryScheduled {
            task,
            attempt,
            delay_ms,
        } => {
            let retry_at = at.saturating_add(i64::try_from(*delay_ms).unwrap_or(i64::MAX));
            let changed = statements.get(Sql::RetryScheduled)?.execute(params![
                id,
                task.as_str(),
                TaskState::Pending.as_str(),
                attempt,
                retry_at
            ])?;
            known_task(changed, run, task)?;
        }
        EventKind::GraphExpanded { task, added, .. } => {
            let known = statements
                .get(Sql::TaskKnown)?
                .exists(params![id, task.as_str()])?;
            known_task(usize::from(known), run, task)?;
            for new in added {
                let pending = TaskState::Pending.as_str();
                statements
                    .get(Sql::TaskAdded)?
                    .execute(params![id, new.as_str(), pending])?;
                statements.get(Sql::RunGrown)?.execute(params![id])?;
                statements.row_added(run, new)?;
            }
        }
        EventKind::TaskFinished {
            task,
            state,
            reason,
        } => {
            let row = statements.row_of(run, task)?;
            let changed = statements.get(Sql::TaskFinished)?.execute(params![
                id,
                task.as_str(),
                state.as_str(),
                reason,
                at,
                row
            ])?;
            known_task(changed, run, task)?;
        }
    }
    Ok(())
}

/// The task's exit code is its latest attempt's.
fn task_exit_code(
    statements: &mut Statements<'_>,
    run: &RunId,
    task: &TaskId,
    attempt: u32,
    code: Option<i32>,
) -> Result<(), StoreError> {
    let row = statements.row_of(run, task)?;
    statements.get(Sql::TaskExitCode)?.execute(params![
        run.as_str(),
        task.as_str(),
        attempt,
        code,
        row
    ])?;
    Ok(())
}

fn apply_output(
    statements: &mut Statements<'_>,
    run: &RunId,
    output: &AttemptOutput,
) -> Result<(), StoreError> {
    let row = statements.row_of(run, &output.task)?;
    let changed = statements.get(Sql::AttemptOutput)?.execute(params![
        run.as_str(),
        output.task.as_str(),
        output.attempt,
        output.output,
        output.output_bytes,
        output.output_json,
        output.stderr_tail,
        output.log_path,
        row
    ])?;
    known_attempt(changed, run, &output.task, output.attempt)?;
    task_output(statements, run, output)
}

/// The output lands on the task unless a later attempt's is there already.
fn task_output(
    statements: &mut Statements<'_>,
    run: &RunId,
    output: &AttemptOutput,
) -> Result<(), StoreError> {
    let row = statements.row_of(run, &output.task)?;
    statements.get(Sql::TaskOutput)?.execute(params![
        run.as_str(),
        output.task.as_str(),
        output.attempt,
        output.output,
        output.output_bytes,
        output.output_json,
        output.stderr_tail,
        row
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

/// The end of an attempt landed on its row, or why not: the attempt ended already, or it was
/// never started.
fn open_attempt(
    statements: &mut Statements<'_>,
    changed: usize,
    run: &RunId,
    task: &TaskId,
    attempt: u32,
) -> Result<(), StoreError> {
    if changed > 0 {
        return Ok(());
    }
    let started =
        statements
            .get(Sql::AttemptKnown)?
            .exists(params![run.as_str(), task.as_str(), attempt])?;
    known_attempt(usize::from(started), run, task, attempt)?;
    Err(StoreError::AttemptEnded {
        run: run.clone(),
        task: task.clone(),
        attempt,
    })
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
