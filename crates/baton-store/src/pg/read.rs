//! What readers query, and the rows decoded into the records SQLite's readers return.

use std::collections::BTreeMap;

use baton_model::{Containment, Event, EventKind, RunId, RunState, RunView, TaskId, TaskState};
use postgres::Row;

use super::{PgStore, describe_server};
use crate::seam::RunReader;
use crate::{AttemptRecord, Decision, Driver, RunRecord, RunSummary, StoreError, TaskRecord};

const RUN_COLUMNS: &str = "id, name, graph_path, status, started_at_ms, ended_at_ms, \
     concurrency, task_count, stop_reason, driver_pid, driver_start_time, driver_host, stop_cause";

const TASK_COLUMNS: &str = "task_id, idx, status, attempts, next_attempt, retry_at_ms, \
     started_at_ms, ended_at_ms, exit_code, reason, output_attempt, output, output_bytes, \
     output_json, stderr_tail";

const ATTEMPT_COLUMNS: &str = "task_id, attempt, started_at_ms, ended_at_ms, pid, outcome_json, \
     exit_code, duration_ms, output, output_bytes, output_json, stderr_tail, log_path, \
     agent_json, containment, task_idx";

fn bad(what: &str, value: &str) -> StoreError {
    StoreError::PgValue(format!("{what} `{value}` is not valid"))
}

fn u32_of(value: Option<i64>) -> Option<u32> {
    value.and_then(|v| u32::try_from(v).ok())
}

fn run_record(row: &Row) -> Result<RunRecord, StoreError> {
    let id: String = row.get(0);
    let status: String = row.get(3);
    let driver = match (
        row.get::<_, Option<i64>>(9),
        row.get::<_, Option<i64>>(10),
        row.get::<_, Option<String>>(11),
    ) {
        (Some(pid), Some(start_time), Some(host)) => Some(Driver {
            pid: pid as u32,
            start_time: start_time as u64,
            host,
        }),
        _ => None,
    };
    Ok(RunRecord {
        id: RunId::new(id.clone()).map_err(|_| bad("run id", &id))?,
        name: row.get(1),
        graph_path: row.get(2),
        status: RunState::parse(&status).ok_or_else(|| bad("run state", &status))?,
        started_at_ms: row.get(4),
        ended_at_ms: row.get(5),
        concurrency: row.get::<_, i64>(6) as u32,
        task_count: row.get::<_, i64>(7) as u32,
        stop: crate::decode::stop(row.get(8), row.get(12)),
        driver,
    })
}

fn task_record(row: &Row) -> Result<TaskRecord, StoreError> {
    let id: String = row.get(0);
    let status: String = row.get(2);
    Ok(TaskRecord {
        task: TaskId::new(id.clone()).map_err(|_| bad("task id", &id))?,
        idx: row.get::<_, i64>(1) as u32,
        status: TaskState::parse(&status).ok_or_else(|| bad("task state", &status))?,
        attempts: row.get::<_, i64>(3) as u32,
        next_attempt: u32_of(row.get(4)),
        retry_at_ms: row.get(5),
        started_at_ms: row.get(6),
        ended_at_ms: row.get(7),
        exit_code: row.get(8),
        reason: row.get(9),
        output_attempt: u32_of(row.get(10)),
        output: row.get(11),
        output_bytes: row.get::<_, Option<i64>>(12).map(|b| b as u64),
        output_json: row.get(13),
        stderr_tail: row.get(14),
    })
}

fn attempt_record(row: &Row) -> Result<AttemptRecord, StoreError> {
    let id: String = row.get(0);
    let outcome = row
        .get::<_, Option<String>>(5)
        .map(|json| serde_json::from_str(&json).map_err(|_| bad("outcome", &json)))
        .transpose()?;
    let agent = row
        .get::<_, Option<String>>(13)
        .map(|json| serde_json::from_str(&json).map_err(|_| bad("agent usage", &json)))
        .transpose()?;
    Ok(AttemptRecord {
        task: TaskId::new(id.clone()).map_err(|_| bad("task id", &id))?,
        task_idx: u32::try_from(row.get::<_, i64>(15))
            .map_err(|_| bad("task index", "out of range"))?,
        attempt: row.get::<_, i64>(1) as u32,
        started_at_ms: row.get(2),
        ended_at_ms: row.get(3),
        pid: u32_of(row.get(4)),
        outcome,
        exit_code: row.get(6),
        duration_ms: row.get::<_, Option<i64>>(7).map(|d| d as u64),
        output: row.get(8),
        output_bytes: row.get::<_, Option<i64>>(9).map(|b| b as u64),
        output_json: row.get(10),
        stderr_tail: row.get(11),
        log_path: row.get(12),
        agent,
        containment: row
            .get::<_, Option<String>>(14)
            .as_deref()
            .and_then(Containment::parse),
    })
}

fn events_of(run: &RunId, rows: Vec<Row>) -> Result<Vec<Event>, StoreError> {
    rows.into_iter()
        .map(|row| {
            let seq = row.get::<_, i64>(0) as u64;
            let data: String = row.get(2);
            let kind: EventKind =
                serde_json::from_str(&data).map_err(|source| StoreError::Decode {
                    run: run.clone(),
                    seq,
                    source,
                })?;
            Ok(Event {
                seq,
                at_ms: row.get(1),
                kind,
            })
        })
        .collect()
}

fn summary(client: &mut postgres::Client, run: RunRecord) -> Result<RunSummary, StoreError> {
    let mut counts = BTreeMap::new();
    for row in client.query(
        "SELECT status, COUNT(*) FROM tasks WHERE run_id = $1 GROUP BY status",
        &[&run.id.as_str()],
    )? {
        let status: String = row.get(0);
        let state = TaskState::parse(&status).ok_or_else(|| bad("task state", &status))?;
        counts.insert(state, row.get::<_, i64>(1) as u32);
    }
    let (tokens, cost_usd) = spend(client, &run.id)?;
    Ok(RunSummary {
        run,
        counts,
        tokens,
        cost_usd,
    })
}

fn spend(
    client: &mut postgres::Client,
    run: &RunId,
) -> Result<(Option<u64>, Option<f64>), StoreError> {
    let row = client.query_one(
        "SELECT SUM(tokens)::BIGINT, SUM(cost_usd) FROM attempts WHERE run_id = $1",
        &[&run.as_str()],
    )?;
    Ok((
        row.get::<_, Option<i64>>(0).map(|t| t.max(0) as u64),
        row.get(1),
    ))
}

/// The reader's side of the seam, written here once, as SQLite's is (`crate::read`).
impl RunReader for PgStore {
    fn location(&self) -> String {
        describe_server(&self.url)
    }

    fn carries_cancel_requests(&self) -> bool {
        true
    }

    fn cancel_requested(&self, run: &RunId) -> Result<bool, StoreError> {
        let run = run.clone();
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "SELECT 1 FROM runs WHERE id = $1 AND cancel_requested_at_ms IS NOT NULL",
            )?;
            Ok(session
                .client
                .query_opt(&statement, &[&run.as_str()])?
                .is_some())
        })
    }

    fn runs(&self, limit: u32) -> Result<Vec<RunSummary>, StoreError> {
        self.conn.call(move |client| {
            let rows = client.query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at_ms DESC, id DESC LIMIT $1"
                ),
                &[&i64::from(limit)],
            )?;
            let runs: Vec<RunRecord> = rows.iter().map(run_record).collect::<Result<_, _>>()?;
            runs.into_iter().map(|run| summary(client, run)).collect()
        })
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            client
                .query_opt(
                    &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
                    &[&run.as_str()],
                )?
                .as_ref()
                .map(run_record)
                .transpose()
        })
    }

    fn latest_run(&self) -> Result<Option<RunRecord>, StoreError> {
        self.conn.call(move |client| {
            client
                .query_opt(
                    &format!(
                        "SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at_ms DESC, id DESC LIMIT 1"
                    ),
                    &[],
                )?
                .as_ref()
                .map(run_record)
                .transpose()
        })
    }

    fn tasks(&self, run: &RunId) -> Result<Vec<TaskRecord>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            client
                .query(
                    &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE run_id = $1 ORDER BY idx"),
                    &[&run.as_str()],
                )?
                .iter()
                .map(task_record)
                .collect()
        })
    }

    fn attempts(&self, run: &RunId, task: &TaskId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts_where(run, Some(task), false)
    }

    fn run_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts_where(run, None, false)
    }

    fn each_attempt(
        &self,
        run: &RunId,
        f: &mut dyn FnMut(AttemptRecord),
    ) -> Result<(), StoreError> {
        for attempt in self.attempts_where(run, None, false)? {
            f(attempt);
        }
        Ok(())
    }

    fn open_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts_where(run, None, true)
    }

    fn events(&self, run: &RunId, after_seq: u64, limit: u32) -> Result<Vec<Event>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            let rows = client.query(
                "SELECT seq, at_ms, data_json FROM events WHERE run_id = $1 AND seq > $2 \
                 ORDER BY seq LIMIT $3",
                &[
                    &run.as_str(),
                    &i64::try_from(after_seq).unwrap_or(i64::MAX),
                    &i64::from(limit),
                ],
            )?;
            events_of(&run, rows)
        })
    }

    fn events_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Vec<Event>, StoreError> {
        self.select_events_of_kind(run, kind, false)
    }

    fn last_event_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Option<Event>, StoreError> {
        Ok(self.select_events_of_kind(run, kind, true)?.pop())
    }

    fn last_seq(&self, run: &RunId) -> Result<u64, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            Ok(client
                .query_one(
                    "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = $1",
                    &[&run.as_str()],
                )?
                .get::<_, i64>(0) as u64)
        })
    }

    fn run_spend(&self, run: &RunId) -> Result<(Option<u64>, Option<f64>), StoreError> {
        let run = run.clone();
        self.conn.call(move |client| spend(client, &run))
    }

    fn graph_json(&self, run: &RunId) -> Result<Option<String>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            Ok(client
                .query_opt(
                    "SELECT graph_json FROM run_graphs WHERE run_id = $1",
                    &[&run.as_str()],
                )?
                .map(|row| row.get(0)))
        })
    }

    fn decisions(&self, run: &RunId) -> Result<Vec<Decision>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            client
                .query(
                    "SELECT task_id, approved, reason, at_ms FROM approvals WHERE run_id = $1 \
                     ORDER BY at_ms, task_id",
                    &[&run.as_str()],
                )?
                .iter()
                .map(|row| {
                    let id: String = row.get(0);
                    Ok(Decision {
                        task: TaskId::new(id.clone()).map_err(|_| bad("task id", &id))?,
                        approved: row.get(1),
                        reason: row.get(2),
                        at_ms: row.get(3),
                    })
                })
                .collect()
        })
    }

    /// The tables against the fold of the log, read in one snapshot.
    fn check_consistency(&self, run: &RunId) -> Result<Vec<String>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            let mut tx = client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let record = tx
                .query_opt(
                    &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
                    &[&run.as_str()],
                )?
                .as_ref()
                .map(run_record)
                .transpose()?
                .ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
            let tasks: Vec<TaskRecord> = tx
                .query(
                    &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE run_id = $1 ORDER BY idx"),
                    &[&run.as_str()],
                )?
                .iter()
                .map(task_record)
                .collect::<Result<_, _>>()?;
            let attempts: Vec<AttemptRecord> = tx
                .query(
                    &format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = $1 \
                         ORDER BY task_idx, attempt"
                    ),
                    &[&run.as_str()],
                )?
                .iter()
                .map(attempt_record)
                .collect::<Result<_, _>>()?;
            let rows = tx.query(
                "SELECT seq, at_ms, data_json FROM events WHERE run_id = $1 ORDER BY seq",
                &[&run.as_str()],
            )?;
            tx.commit()?;
            let events = events_of(&run, rows)?;
            let planned: std::collections::HashSet<&TaskId> = events
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::GraphExpanded { added, .. } => Some(added),
                    _ => None,
                })
                .flatten()
                .collect();
            let mut view = RunView::new(
                tasks
                    .iter()
                    .map(|t| t.task.clone())
                    .filter(|t| !planned.contains(t)),
            );
            let mut problems = Vec::new();
            let mut expected = 1;
            for event in &events {
                if event.seq != expected {
                    problems.push(format!(
                        "event {} follows event {}",
                        event.seq,
                        expected - 1
                    ));
                }
                expected = event.seq + 1;
                let seen = view.anomalies().len();
                view.apply(event);
                problems.extend(view.anomalies()[seen..].iter().map(ToString::to_string));
            }
            crate::consistency::compare(&record, &tasks, &attempts, &view, &mut problems);
            Ok(problems)
        })
    }

    fn log_files(&self, run: &RunId, prefix: &str) -> Result<Vec<crate::StoredLog>, StoreError> {
        super::logs::files(self, run, prefix)
    }

    fn log_bytes(&self, run: &RunId, file: &str, from: u64) -> Result<Vec<u8>, StoreError> {
        super::logs::bytes(self, run, file, from)
    }
}

impl PgStore {
    pub(super) fn attempts_where(
        &self,
        run: &RunId,
        task: Option<&TaskId>,
        open_only: bool,
    ) -> Result<Vec<AttemptRecord>, StoreError> {
        let (run, task) = (run.clone(), task.cloned());
        self.conn.call(move |client| {
            let open = if open_only {
                " AND ended_at_ms IS NULL"
            } else {
                ""
            };
            let rows = match &task {
                Some(task) => client.query(
                    &format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = $1 AND task_idx = \
                         (SELECT idx FROM tasks WHERE run_id = $1 AND task_id = $2){open} \
                         ORDER BY attempt"
                    ),
                    &[&run.as_str(), &task.as_str()],
                )?,
                None => client.query(
                    &format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = $1{open} \
                         ORDER BY task_idx, attempt"
                    ),
                    &[&run.as_str()],
                )?,
            };
            rows.iter().map(attempt_record).collect()
        })
    }

    pub(super) fn select_events_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
        last_only: bool,
    ) -> Result<Vec<Event>, StoreError> {
        let (run, kind) = (run.clone(), kind.as_str());
        self.conn.call(move |client| {
            let rows = if last_only {
                client.query(
                    "SELECT seq, at_ms, data_json FROM events WHERE run_id = $1 AND kind = $2 \
                     ORDER BY seq DESC LIMIT 1",
                    &[&run.as_str(), &kind],
                )?
            } else {
                client.query(
                    "SELECT seq, at_ms, data_json FROM events WHERE run_id = $1 AND kind = $2 \
                     ORDER BY seq",
                    &[&run.as_str(), &kind],
                )?
            };
            events_of(&run, rows)
        })
    }
}
