//! Re-deriving a run's tables from its event log, to prove that a crash left no half-applied
//! turn. Written apart from [`crate::project`] on purpose: two derivations that agree are
//! evidence, one derivation compared with itself is not.

use std::collections::BTreeMap;

use baton_model::{EventKind, Outcome, RunId, RunState, TaskId, TaskState};
use rusqlite::params;

use crate::read::{
    ATTEMPT_COLUMNS, RUN_COLUMNS, TASK_COLUMNS, attempt_record, run_record, task_record,
};
use crate::{AttemptRecord, RunRecord, SqliteStore, StoreError, TaskRecord};

#[derive(Debug, PartialEq)]
struct RunView {
    status: RunState,
    ended_at_ms: Option<i64>,
    stop_reason: Option<String>,
}

#[derive(Debug, PartialEq)]
struct TaskView {
    status: TaskState,
    attempts: u32,
    next_attempt: Option<u32>,
    retry_at_ms: Option<i64>,
    started_at_ms: Option<i64>,
    ended_at_ms: Option<i64>,
    exit_code: Option<i32>,
    reason: Option<String>,
}

#[derive(Debug, PartialEq)]
struct AttemptView {
    started_at_ms: i64,
    pid: Option<u32>,
    ended_at_ms: Option<i64>,
    outcome: Option<Outcome>,
    exit_code: Option<i32>,
    duration_ms: Option<u64>,
}

impl TaskView {
    fn fresh() -> Self {
        Self {
            status: TaskState::Pending,
            attempts: 0,
            next_attempt: None,
            retry_at_ms: None,
            started_at_ms: None,
            ended_at_ms: None,
            exit_code: None,
            reason: None,
        }
    }
}

impl From<&RunRecord> for RunView {
    fn from(run: &RunRecord) -> Self {
        Self {
            status: run.status,
            ended_at_ms: run.ended_at_ms,
            stop_reason: run.stop_reason.clone(),
        }
    }
}

impl From<&TaskRecord> for TaskView {
    fn from(task: &TaskRecord) -> Self {
        Self {
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
}

impl From<&AttemptRecord> for AttemptView {
    fn from(attempt: &AttemptRecord) -> Self {
        Self {
            started_at_ms: attempt.started_at_ms,
            pid: attempt.pid,
            ended_at_ms: attempt.ended_at_ms,
            outcome: attempt.outcome.clone(),
            exit_code: attempt.exit_code,
            duration_ms: attempt.duration_ms,
        }
    }
}

/// What the event log says the tables should hold.
struct Derived {
    run: RunView,
    tasks: BTreeMap<TaskId, TaskView>,
    attempts: BTreeMap<(TaskId, u32), AttemptView>,
}

impl SqliteStore {
    /// Replays the run's event log from the state `create_run` left and lists every way the
    /// `runs`, `tasks` and `attempts` tables disagree with it, plus any gap in the numbering of
    /// the log. Empty means consistent. Reads one snapshot, so it may run beside a writer.
    pub fn check_consistency(&self, run: &RunId) -> Result<Vec<String>, StoreError> {
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
                .query_map([run.as_str()], attempt_record)?
                .collect::<Result<_, _>>()?;

            let mut problems = Vec::new();
            let mut derived = Derived {
                run: RunView {
                    status: RunState::Running,
                    ended_at_ms: None,
                    stop_reason: None,
                },
                tasks: tasks
                    .iter()
                    .map(|task| (task.task.clone(), TaskView::fresh()))
                    .collect(),
                attempts: BTreeMap::new(),
            };

            let mut statement = tx.prepare_cached(
                "SELECT seq, at_ms, kind, task_id, data_json FROM events \
                 WHERE run_id = ?1 ORDER BY seq",
            )?;
            let mut rows = statement.query(params![run.as_str()])?;
            let mut expected_seq = 1;
            while let Some(row) = rows.next()? {
                let seq: u64 = row.get(0)?;
                let at_ms: i64 = row.get(1)?;
                let kind_column: String = row.get(2)?;
                let task_column: Option<String> = row.get(3)?;
                let data: String = row.get(4)?;
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
                if kind.name() != kind_column
                    || kind.task().map(TaskId::as_str) != task_column.as_deref()
                {
                    problems.push(format!(
                        "event {seq}: columns say {kind_column} of {task_column:?}, data says {} \
                         of {:?}",
                        kind.name(),
                        kind.task().map(TaskId::as_str)
                    ));
                }
                derived.apply(seq, at_ms, kind, &mut problems);
            }

            compare(&record, &tasks, &attempts, &derived, &mut problems);

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
            if kept != counted {
                problems.push(format!(
                    "task counts: the table has {kept:?}, the tasks give {counted:?}"
                ));
            }
            Ok(problems)
        })
    }
}

impl Derived {
    fn apply(&mut self, seq: u64, at: i64, kind: EventKind, problems: &mut Vec<String>) {
        if let Some(task) = kind.task().filter(|task| !self.tasks.contains_key(*task)) {
            problems.push(format!(
                "event {seq} is about task {task}, which the run lacks"
            ));
            return;
        }
        match kind {
            EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
                self.run = RunView {
                    status: RunState::Running,
                    ended_at_ms: None,
                    stop_reason: None,
                };
            }
            EventKind::RunStopping { reason } => self.run.stop_reason = Some(reason),
            EventKind::TaskDecided { .. }
            | EventKind::BudgetChanged { .. }
            | EventKind::WorkspaceCommitted { .. }
            | EventKind::ResultMerged { .. }
            | EventKind::Checked { .. } => {}
            EventKind::RunFinished { state } => {
                self.run.status = state;
                self.run.ended_at_ms = Some(at);
            }
            EventKind::AttemptStarted { task, attempt, pid } => {
                let view = self.task(&task);
                view.status = TaskState::Running;
                view.attempts = view.attempts.max(attempt);
                view.started_at_ms = view.started_at_ms.or(Some(at));
                view.ended_at_ms = None;
                view.reason = None;
                view.exit_code = None;
                view.next_attempt = None;
                view.retry_at_ms = None;
                let fresh = AttemptView {
                    started_at_ms: at,
                    pid,
                    ended_at_ms: None,
                    outcome: None,
                    exit_code: None,
                    duration_ms: None,
                };
                if self
                    .attempts
                    .insert((task.clone(), attempt), fresh)
                    .is_some()
                {
                    problems.push(format!(
                        "event {seq} starts attempt {attempt} of {task} again"
                    ));
                }
            }
            EventKind::AttemptFinished {
                task,
                attempt,
                outcome,
                duration_ms,
                ..
            } => {
                let code = outcome.exit_code();
                let Some(view) = self.attempts.get_mut(&(task.clone(), attempt)) else {
                    problems.push(format!(
                        "event {seq} ends attempt {attempt} of {task}, which never started"
                    ));
                    return;
                };
                view.ended_at_ms = Some(at);
                view.outcome = Some(outcome);
                view.exit_code = code;
                view.duration_ms = Some(duration_ms);
                let task = self.task(&task);
                if task.attempts == attempt {
                    task.exit_code = code;
                }
            }
            EventKind::RetryScheduled {
                task,
                attempt,
                delay_ms,
            } => {
                let view = self.task(&task);
                view.status = TaskState::Pending;
                view.next_attempt = Some(attempt);
                view.retry_at_ms =
                    Some(at.saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX)));
            }
            EventKind::TaskWaiting { task } => self.task(&task).status = TaskState::Waiting,
            EventKind::TaskReset { task } => {
                let view = self.task(&task);
                view.status = TaskState::Pending;
                view.reason = None;
                view.ended_at_ms = None;
                view.next_attempt = None;
                view.retry_at_ms = None;
            }
            EventKind::TaskFinished {
                task,
                state,
                reason,
            } => {
                let view = self.task(&task);
                view.status = state;
                view.reason = reason;
                view.ended_at_ms = Some(at);
                view.next_attempt = None;
                view.retry_at_ms = None;
            }
        }
    }

    fn task(&mut self, task: &TaskId) -> &mut TaskView {
        self.tasks
            .get_mut(task)
            .expect("events about unknown tasks are rejected before they are applied")
    }
}

fn compare(
    run: &RunRecord,
    tasks: &[TaskRecord],
    attempts: &[AttemptRecord],
    derived: &Derived,
    problems: &mut Vec<String>,
) {
    let table = RunView::from(run);
    if table != derived.run {
        problems.push(format!(
            "run: the table has {table:?}, the events give {:?}",
            derived.run
        ));
    }
    for task in tasks {
        let table = TaskView::from(task);
        let events = &derived.tasks[&task.task];
        if table != *events {
            problems.push(format!(
                "task {}: the table has {table:?}, the events give {events:?}",
                task.task
            ));
        }
    }
    let mut stored = BTreeMap::new();
    for attempt in attempts {
        stored.insert((attempt.task.clone(), attempt.attempt), attempt);
    }
    for (key @ (task, number), events) in &derived.attempts {
        match stored.get(key) {
            None => problems.push(format!(
                "attempt {number} of {task} is missing from the table"
            )),
            Some(attempt) => {
                let table = AttemptView::from(*attempt);
                if table != *events {
                    problems.push(format!(
                        "attempt {number} of {task}: the table has {table:?}, the events give \
                         {events:?}"
                    ));
                }
            }
        }
    }
    for (task, number) in stored.keys() {
        if !derived.attempts.contains_key(&(task.clone(), *number)) {
            problems.push(format!(
                "attempt {number} of {task} has no attempt-started event"
            ));
        }
    }
    for task in tasks {
        let latest_output = attempts
            .iter()
            .filter(|attempt| attempt.task == task.task && attempt.output.is_some())
            .max_by_key(|attempt| attempt.attempt);
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
