//! Replaying a run's event log through [`RunView`], the one fold of it, and comparing the
//! result with the `runs`, `tasks` and `attempts` tables, to prove that a crash left no
//! half-applied turn. [`crate::project`] writes the same tables with batched SQL, for speed; a
//! property test (`tests/store/fold.rs`) holds it to the fold for random logs committed in
//! random turns, so the fold is the definition and the SQL its optimized form.

use std::collections::{BTreeMap, HashSet};

use baton_model::{
    AttemptView, Event, EventKind, RunHead, RunId, RunView, TaskId, TaskState, TaskView,
};
use rusqlite::params;

use crate::event_batches::{self, is_batched};
use crate::read::{
    ATTEMPT_COLUMNS, RUN_COLUMNS, TASK_COLUMNS, attempt_record, run_record, task_record,
};
use crate::{AttemptRecord, RunRecord, SqliteStore, StoreError, TaskRecord};

/// The run's columns the fold derives.
fn run_head(run: &RunRecord) -> RunHead {
    RunHead {
        status: run.status,
        ended_at_ms: run.ended_at_ms,
        stop: run.stop.clone(),
    }
}

/// The task's columns the fold derives.
fn task_view(task: &TaskRecord) -> TaskView {
    TaskView {
        status: task.status,
        attempts: task.attempts,
        next_attempt: task.next_attempt,
        retry_at_ms: task.retry_at_ms,
        started_at_ms: task.started_at_ms,
        ended_at_ms: task.ended_at_ms,
        exit_code: task.exit_code,
        reason: task.reason.clone(),
    }
}

/// The attempt's columns the fold derives.
fn attempt_view(attempt: &AttemptRecord) -> AttemptView {
    AttemptView {
        attempt: attempt.attempt,
        started_at_ms: attempt.started_at_ms,
        pid: attempt.pid,
        ended_at_ms: attempt.ended_at_ms,
        outcome: attempt.outcome.clone(),
        exit_code: attempt.exit_code,
        duration_ms: attempt.duration_ms,
        agent: attempt.agent.clone().map(Box::new),
        containment: attempt.containment,
        // Live news, not a column: compared as the events give it.
        activity: None,
    }
}

impl SqliteStore {
    /// Replays the run's event log through [`RunView`] from the state `create_run` left, and lists every way the
    /// `runs`, `tasks` and `attempts` tables disagree with it, plus any gap in the numbering of
    /// the log. Empty means consistent. Reads one snapshot, so it may run beside a writer.
    pub(crate) fn consistency_problems(&self, run: &RunId) -> Result<Vec<String>, StoreError> {
        self.read(|tx| {
            let record = tx
                .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
                .query_row([run.as_str()], run_record)
                .map_err(|err| match err {
                    rusqlite::Error::QueryReturnedNoRows => StoreError::UnknownRun(run.clone()),
                    other => other.into(),
                })?;
            let tasks: Vec<TaskRecord> = tx
                .prepare_cached(&format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE run_id = ?1 ORDER BY idx"
                ))?
                .query_map([run.as_str()], task_record)?
                .collect::<Result<_, _>>()?;
            let attempts: Vec<AttemptRecord> = tx
                .prepare_cached(&format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ?1 \
                     ORDER BY task_idx, attempt"
                ))?
                .query_map([run.as_str()], |row| {
                    attempt_record(row, &mut crate::decode::Outcomes::default())
                })?
                .collect::<Result<_, _>>()?;

            let mut problems = Vec::new();
            // The fold starts from the tasks the run began with: those its planners added
            // join it with their `graph-expanded` events.
            let mut planned: HashSet<TaskId> = HashSet::new();
            let mut expansions = tx.prepare_cached(
                "SELECT data_json FROM events WHERE run_id = ?1 AND kind = 'graph-expanded'",
            )?;
            let mut rows = expansions.query(params![run.as_str()])?;
            while let Some(row) = rows.next()? {
                let data: String = row.get(0)?;
                if let Ok(EventKind::GraphExpanded { added, .. }) = serde_json::from_str(&data) {
                    planned.extend(added);
                }
            }
            drop(rows);
            let mut view = RunView::new(
                tasks
                    .iter()
                    .map(|task| task.task.clone())
                    .filter(|task| !planned.contains(task)),
            );

            let mut expected_seq = 1;
            for Stored {
                seq,
                at_ms,
                kind_column,
                task_column,
                data,
            } in stored_log(tx, run, &mut problems)?
            {
                if seq != expected_seq {
                    problems.push(format!("event {seq} follows event {}", expected_seq - 1));
                }
                expected_seq = seq + 1;
                let kind: EventKind = match serde_json::from_str(&data) {
                    Ok(kind) => kind,
                    Err(err) => {
                        problems.push(format!("event {seq} cannot be decoded: {err}"));
                        continue;
                    }
                };
                // A row's columns say what its data does; a batch's line says its kind.
                let data_task = kind.task().map(TaskId::as_str);
                if kind.name() != kind_column
                    || task_column
                        .as_ref()
                        .is_some_and(|task| task.as_deref() != data_task)
                {
                    problems.push(format!(
                        "event {seq}: columns say {kind_column} of {:?}, data says {} of \
                         {data_task:?}",
                        task_column.flatten(),
                        kind.name(),
                    ));
                } else if task_column.is_none() && !is_batched(kind.event_name()) {
                    problems.push(format!(
                        "event {seq} ({kind_column}) is in a batch, where a lookup by its kind \
                         does not find it"
                    ));
                }
                let seen = view.anomalies().len();
                view.apply(&Event { seq, at_ms, kind });
                problems.extend(view.anomalies()[seen..].iter().map(ToString::to_string));
            }

            compare(&record, &tasks, &attempts, &view, &mut problems);

            let mut counted: BTreeMap<TaskState, u32> = BTreeMap::new();
            for task in &tasks {
                *counted.entry(task.status).or_default() += 1;
            }
            let kept: BTreeMap<TaskState, u32> = tx
                .prepare_cached("SELECT status, n FROM task_counts WHERE run_id = ?1 AND n <> 0")?
                .query_map([run.as_str()], |row| {
                    Ok((crate::decode::task_state(row, 0)?, row.get(1)?))
                })?
                .collect::<Result<_, _>>()?;
            // None are kept while a run goes on; kept ones are the tasks' counts.
            if !kept.is_empty() && kept != counted {
                problems.push(format!(
                    "task counts: the table has {kept:?}, the tasks give {counted:?}"
                ));
            }
            Ok(problems)
        })
    }
}

pub(crate) fn compare(
    run: &RunRecord,
    tasks: &[TaskRecord],
    attempts: &[AttemptRecord],
    view: &RunView,
    problems: &mut Vec<String>,
) {
    let table = run_head(run);
    if table != *view.run() {
        problems.push(format!(
            "run: the table has {table:?}, the events give {:?}",
            view.run()
        ));
    }
    for task in tasks {
        let table = task_view(task);
        // The view was made from these very tasks.
        if let Some(events) = view.task(&task.task).filter(|events| table != **events) {
            problems.push(format!(
                "task {}: the table has {table:?}, the events give {events:?}",
                task.task
            ));
        }
    }
    let mut stored: BTreeMap<(&TaskId, u32), &AttemptRecord> = BTreeMap::new();
    for attempt in attempts {
        stored.insert((&attempt.task, attempt.attempt), attempt);
    }
    for (task, events) in view.all_attempts() {
        let number = events.attempt;
        match stored.remove(&(task, number)) {
            None => problems.push(format!(
                "attempt {number} of {task} is missing from the table"
            )),
            Some(attempt) => {
                let table = AttemptView {
                    activity: events.activity.clone(),
                    ..attempt_view(attempt)
                };
                if table != *events {
                    problems.push(format!(
                        "attempt {number} of {task}: the table has {table:?}, the events give \
                         {events:?}"
                    ));
                }
            }
        }
    }
    // What is left was never started.
    for (task, number) in stored.keys() {
        problems.push(format!(
            "attempt {number} of {task} has no attempt-started event"
        ));
    }
    for task in tasks {
        let latest_output = attempts
            .iter()
            .filter(|attempt| attempt.task == task.task && attempt.output.is_some())
            .max_by_key(|attempt| attempt.attempt);
        // Of a best-of task's round, its winner's output is the task's.
        let latest_output = match (latest_output, view.picked(&task.task)) {
            (Some(latest), Some((winner, candidates))) if candidates.contains(&latest.attempt) => {
                attempts
                    .iter()
                    .find(|attempt| attempt.task == task.task && attempt.attempt == winner)
                    .or(Some(latest))
            }
            (latest, _) => latest,
        };
        let consistent = match (task.output_attempt, latest_output) {
            (None, None) => true,
            (Some(number), Some(attempt)) => {
                number == attempt.attempt
                    && task.output == attempt.output
                    && task.output_bytes == attempt.output_bytes
                    && task.output_json == attempt.output_json
                    && task.stderr_tail == attempt.stderr_tail
            }
            _ => false,
        };
        if !consistent {
            problems.push(format!(
                "task {}: its output is attempt {:?}'s, but the latest attempt with an output is \
                 {:?}",
                task.task,
                task.output_attempt,
                latest_output.map(|attempt| attempt.attempt)
            ));
        }
    }
}

/// An event as stored, not yet decoded.
struct Stored {
    seq: u64,
    at_ms: i64,
    kind_column: String,
    /// A row's `task_id`; `None` for a batch's line, which keeps none.
    task_column: Option<Option<String>>,
    data: String,
}

/// The run's log as stored, rows and batches, in order of `seq`.
/// Each batch's lines must run in order from its `first_seq` to its `last_seq`: readers seek
/// batches by their bounds, and the next commit numbers its events after the last.
fn stored_log(
    tx: &rusqlite::Transaction<'_>,
    run: &RunId,
    problems: &mut Vec<String>,
) -> Result<Vec<Stored>, StoreError> {
    let mut log: Vec<Stored> = tx
        .prepare_cached(
            "SELECT seq, at_ms, kind, task_id, data_json FROM events \
             WHERE run_id = ?1 ORDER BY seq",
        )?
        .query_map(params![run.as_str()], |row| {
            Ok(Stored {
                seq: row.get(0)?,
                at_ms: row.get(1)?,
                kind_column: row.get(2)?,
                task_column: Some(row.get(3)?),
                data: row.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut batches = tx.prepare_cached(
        "SELECT last_seq, events, packed, first_seq FROM event_batches WHERE run_id = ?1",
    )?;
    let mut rows = batches.query(params![run.as_str()])?;
    while let Some(row) = rows.next()? {
        let (last_seq, first_seq): (u64, u64) = (row.get(0)?, row.get(3)?);
        let mut seqs = Vec::new();
        let lines = event_batches::RowLines::of(row, run)?;
        for line in lines.lines(run) {
            let line = line?;
            seqs.push(line.seq);
            log.push(Stored {
                seq: line.seq,
                at_ms: line.at_ms,
                kind_column: line.kind.to_owned(),
                task_column: None,
                data: line.data.to_owned(),
            });
        }
        let ordered = seqs.windows(2).all(|pair| pair[0] < pair[1]);
        if seqs.first() != Some(&first_seq) || seqs.last() != Some(&last_seq) || !ordered {
            let held = match (seqs.first(), seqs.last()) {
                (Some(first), Some(last)) => format!("events {first} to {last}"),
                _ => "no event".to_owned(),
            };
            let order = if ordered { "" } else { ", out of order" };
            problems.push(format!(
                "the batch of events {first_seq} to {last_seq} holds {held}{order}"
            ));
        }
    }
    log.sort_by_key(|event| event.seq);
    Ok(log)
}
