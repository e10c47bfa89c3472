//! Queries for `baton runs`, `status`, `logs`, `events` and for resuming a run.

use std::collections::BTreeMap;

use baton_model::{Containment, Event, EventKind, RunId, TaskId};
use rusqlite::{OptionalExtension, Row, Transaction, params};

use crate::decode;
use crate::event_batches::{self, is_batched};
use crate::{
    AttemptRecord, Driver, RunReader, RunRecord, RunSummary, SqliteStore, StoreError, TaskRecord,
};

pub(crate) const RUN_COLUMNS: &str = "id, name, graph_path, status, started_at_ms, ended_at_ms, \
     concurrency, task_count, stop_reason, driver_pid, driver_start_time, driver_host, stop_cause";

pub(crate) const TASK_COLUMNS: &str = "task_id, idx, status, attempts, next_attempt, retry_at_ms, \
     started_at_ms, ended_at_ms, exit_code, reason, output_attempt, output, output_bytes, \
     output_json, stderr_tail";

pub(crate) const ATTEMPT_COLUMNS: &str = "task_id, attempt, started_at_ms, ended_at_ms, pid, outcome_json, \
     exit_code, duration_ms, output, output_bytes, output_json, stderr_tail, log_path, agent_json, \
     containment, task_idx";

/// The reader's side of the seam, written here once: nothing else answers these questions
/// about a SQLite store.
impl RunReader for SqliteStore {
    fn location(&self) -> String {
        self.path().display().to_string()
    }

    /// The newest `limit` runs, newest first, each with its tasks counted by state.
    fn runs(&self, limit: u32) -> Result<Vec<RunSummary>, StoreError> {
        self.read(|tx| {
            let runs = tx
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs \
                     ORDER BY started_at_ms DESC, id DESC LIMIT ?1"
                ))?
                .query_map([limit], run_record)?
                .collect::<Result<Vec<_>, _>>()?;
            runs.into_iter()
                .map(|run| {
                    let counts = task_counts(tx, &run.id)?;
                    let (tokens, cost_usd) = spend(tx, &run.id)?;
                    Ok(RunSummary {
                        run,
                        counts,
                        tokens,
                        cost_usd,
                    })
                })
                .collect()
        })
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.read(|tx| {
            Ok(tx
                .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
                .query_row([run.as_str()], run_record)
                .optional()?)
        })
    }

    /// The run started last, for `baton status` without a run.
    fn latest_run(&self) -> Result<Option<RunRecord>, StoreError> {
        self.read(|tx| {
            Ok(tx
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at_ms DESC, id DESC LIMIT 1"
                ))?
                .query_row([], run_record)
                .optional()?)
        })
    }

    /// Every task of the run, in graph order.
    fn tasks(&self, run: &RunId) -> Result<Vec<TaskRecord>, StoreError> {
        self.read(|tx| {
            Ok(tx
                .prepare_cached(&format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE run_id = ?1 ORDER BY idx"
                ))?
                .query_map([run.as_str()], task_record)?
                .collect::<Result<_, _>>()?)
        })
    }

    /// Every attempt of one task, first first.
    fn attempts(&self, run: &RunId, task: &TaskId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.read(|tx| {
            let mut outcomes = decode::Outcomes::default();
            Ok(tx
                .prepare_cached(&format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM attempts \
                     WHERE run_id = ?1 AND task_idx = \
                     (SELECT idx FROM tasks WHERE run_id = ?1 AND task_id = ?2) ORDER BY attempt"
                ))?
                .query_map([run.as_str(), task.as_str()], |row| {
                    attempt_record(row, &mut outcomes)
                })?
                .collect::<Result<_, _>>()?)
        })
    }

    /// Every attempt of the run, by task (in graph order) and attempt number: for timelines and
    /// reports.
    fn run_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError> {
        let mut attempts = Vec::new();
        self.each_attempt(run, &mut |attempt| attempts.push(attempt))?;
        Ok(attempts)
    }

    /// [`RunReader::run_attempts`] one at a time, none kept: a 100,000-task run's attempts
    /// together take about as much memory as the rest of the run.
    fn each_attempt(
        &self,
        run: &RunId,
        f: &mut dyn FnMut(AttemptRecord),
    ) -> Result<(), StoreError> {
        self.read(|tx| {
            let mut statement = tx.prepare_cached(&format!(
                "SELECT {ATTEMPT_COLUMNS} FROM attempts \
                 WHERE run_id = ?1 ORDER BY task_idx, attempt"
            ))?;
            let mut outcomes = decode::Outcomes::default();
            for attempt in
                statement.query_map([run.as_str()], |row| attempt_record(row, &mut outcomes))?
            {
                f(attempt?);
            }
            Ok(())
        })
    }

    /// Attempts started and never finished: after a crash, the ones a resume records as
    /// interrupted. Scans the run's attempts: it runs once per resume, and an index kept for it
    /// would cost every commit a page.
    fn open_attempts(&self, run: &RunId) -> Result<Vec<AttemptRecord>, StoreError> {
        self.read(|tx| {
            let mut outcomes = decode::Outcomes::default();
            Ok(tx
                .prepare_cached(&format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM attempts \
                     WHERE run_id = ?1 AND ended_at_ms IS NULL ORDER BY task_idx, attempt"
                ))?
                .query_map([run.as_str()], |row| attempt_record(row, &mut outcomes))?
                .collect::<Result<_, _>>()?)
        })
    }

    /// Up to `limit` events of the run with `seq > after_seq`, in order: pass the last `seq`
    /// seen to follow a run.
    fn events(&self, run: &RunId, after_seq: u64, limit: u32) -> Result<Vec<Event>, StoreError> {
        self.read(|tx| events_after(tx, run, after_seq, Some(limit)))
    }

    /// What the run's agent attempts used and cost: tokens and dollars, `None` without any.
    fn run_spend(&self, run: &RunId) -> Result<(Option<u64>, Option<f64>), StoreError> {
        self.read(|tx| spend(tx, run))
    }

    /// The run's events of `kind`, in order.
    fn events_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Vec<Event>, StoreError> {
        self.read(|tx| {
            let mut statement = tx.prepare_cached(of_kind(kind, Which::All))?;
            let rows = decode_events(run, statement.query(params![run.as_str(), kind.as_str()])?)?;
            let batched = event_batches::after(tx, run, 0, Some(kind), None)?;
            Ok(event_batches::merged(rows, batched, None))
        })
    }

    /// The run's last event of `kind`.
    fn last_event_of_kind(
        &self,
        run: &RunId,
        kind: baton_model::EventName,
    ) -> Result<Option<Event>, StoreError> {
        self.read(|tx| {
            let mut statement = tx.prepare_cached(of_kind(kind, Which::Last))?;
            let row = decode_events(run, statement.query(params![run.as_str(), kind.as_str()])?)?;
            let batched = event_batches::last_of_kind(tx, run, kind)?;
            Ok(row.into_iter().chain(batched).max_by_key(|event| event.seq))
        })
    }

    /// The `seq` of the run's last event; 0 when it has none.
    fn last_seq(&self, run: &RunId) -> Result<u64, StoreError> {
        self.read(|tx| event_batches::last_seq(tx, run))
    }

    /// The graph the run was started with, as given to [`RunLog::create_run`].
    fn graph_json(&self, run: &RunId) -> Result<Option<String>, StoreError> {
        self.read(|tx| {
            let mut statement = tx.prepare_cached(
                "SELECT json, packed FROM run_graph_parts WHERE run_id = ?1 ORDER BY part",
            )?;
            let mut rows = statement.query([run.as_str()])?;
            let mut json: Option<Vec<u8>> = None;
            while let Some(row) = rows.next()? {
                let part = row.get_ref(0)?.as_blob().map_err(not_json)?;
                let json = json.get_or_insert_with(Vec::new);
                if row.get(1)? {
                    let unpacked = crate::packing::unpack(part).map_err(not_json)?;
                    json.extend_from_slice(&unpacked);
                } else {
                    json.extend_from_slice(part);
                }
            }
            json.map(|json| String::from_utf8(json).map_err(not_json))
                .transpose()
        })
    }

    fn decisions(&self, run: &RunId) -> Result<Vec<crate::Decision>, StoreError> {
        self.read_decisions(run)
    }

    fn check_consistency(&self, run: &RunId) -> Result<Vec<String>, StoreError> {
        self.consistency_problems(run)
    }
}

pub(crate) fn events_after(
    tx: &Transaction<'_>,
    run: &RunId,
    after_seq: u64,
    limit: Option<u32>,
) -> Result<Vec<Event>, StoreError> {
    let mut statement = tx.prepare_cached(
        "SELECT seq, at_ms, data_json FROM events \
         WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
    )?;
    // A negative LIMIT means none.
    let rows = decode_events(
        run,
        statement.query(params![
            run.as_str(),
            after_seq,
            limit.map_or(-1, i64::from)
        ])?,
    )?;
    let limit = limit.map(|limit| limit as usize);
    let batched = event_batches::after(tx, run, after_seq, None, limit)?;
    Ok(event_batches::merged(rows, batched, limit))
}

/// Events from rows of `seq, at_ms, data_json`.
/// A part of a run's graph that is not bytes, or parts that are not UTF-8 together.
fn not_json(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::BadValue(
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(err))
            .into(),
    )
}

/// The condition of the index of the rare kinds of event, term for term as in
/// `migrations/v10_rare_event_kinds.sql`: SQLite uses a partial index only for a query whose
/// WHERE holds each term of the index's own.
macro_rules! rare_kinds {
    () => {
        "kind <> 'attempt-started' AND kind <> 'attempt-finished' \
         AND kind <> 'task-finished' AND kind <> 'agent-activity'"
    };
}

#[derive(Clone, Copy)]
enum Which {
    All,
    Last,
}

/// The query for a run's events of one kind (`?1` the run, `?2` the kind). A rare kind's
/// names its index: without statistics SQLite would rather walk the run's every event in
/// order than look each one found up in the table.
fn of_kind(kind: baton_model::EventName, which: Which) -> &'static str {
    match (is_batched(kind), which) {
        (true, Which::All) => {
            "SELECT seq, at_ms, data_json FROM events WHERE run_id = ?1 AND kind = ?2 ORDER BY seq"
        }
        (true, Which::Last) => {
            "SELECT seq, at_ms, data_json FROM events WHERE run_id = ?1 AND kind = ?2 \
             ORDER BY seq DESC LIMIT 1"
        }
        (false, Which::All) => concat!(
            "SELECT seq, at_ms, data_json FROM events INDEXED BY events_of_rare_kinds \
             WHERE run_id = ?1 AND kind = ?2 AND ",
            rare_kinds!(),
            " ORDER BY seq"
        ),
        (false, Which::Last) => concat!(
            "SELECT seq, at_ms, data_json FROM events INDEXED BY events_of_rare_kinds \
             WHERE run_id = ?1 AND kind = ?2 AND ",
            rare_kinds!(),
            " ORDER BY seq DESC LIMIT 1"
        ),
    }
}

fn decode_events(run: &RunId, mut rows: rusqlite::Rows<'_>) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: u64 = row.get(0)?;
        let data: String = row.get(2)?;
        let kind: EventKind = serde_json::from_str(&data).map_err(|source| StoreError::Decode {
            run: run.clone(),
            seq,
            source,
        })?;
        events.push(Event {
            seq,
            at_ms: row.get(1)?,
            kind,
        });
    }
    Ok(events)
}

fn task_counts(
    tx: &Transaction<'_>,
    run: &RunId,
) -> Result<BTreeMap<baton_model::TaskState, u32>, StoreError> {
    let counted = |sql: &str| -> Result<BTreeMap<baton_model::TaskState, u32>, StoreError> {
        Ok(tx
            .prepare_cached(sql)?
            .query_map([run.as_str()], |row| {
                Ok((decode::task_state(row, 0)?, row.get(1)?))
            })?
            .collect::<Result<_, _>>()?)
    };
    // Kept when the run finished (`project::count_tasks`); a run going on is counted here.
    let kept = counted("SELECT status, n FROM task_counts WHERE run_id = ?1 AND n > 0")?;
    if !kept.is_empty() {
        return Ok(kept);
    }
    counted("SELECT status, COUNT(*) FROM tasks WHERE run_id = ?1 GROUP BY status")
}

/// What a run's agent attempts used and cost, summed.
fn spend(tx: &Transaction<'_>, run: &RunId) -> Result<(Option<u64>, Option<f64>), StoreError> {
    let mut statement =
        tx.prepare_cached("SELECT SUM(tokens), SUM(cost_usd) FROM attempts WHERE run_id = ?1")?;
    let (tokens, cost): (Option<i64>, Option<f64>) =
        statement.query_row([run.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok((tokens.map(|t| t.max(0) as u64), cost))
}

pub(crate) fn run_record(row: &Row<'_>) -> rusqlite::Result<RunRecord> {
    let pid: Option<u32> = row.get(9)?;
    let start_time: Option<u64> = row.get(10)?;
    let host: Option<String> = row.get(11)?;
    let driver = match (pid, start_time, host) {
        (Some(pid), Some(start_time), Some(host)) => Some(Driver {
            pid,
            start_time,
            host,
        }),
        _ => None,
    };
    Ok(RunRecord {
        id: decode::run_id(row, 0)?,
        name: row.get(1)?,
        graph_path: row.get(2)?,
        status: decode::run_state(row, 3)?,
        started_at_ms: row.get(4)?,
        ended_at_ms: row.get(5)?,
        concurrency: row.get(6)?,
        task_count: row.get(7)?,
        stop: decode::stop(row.get(8)?, row.get(12)?),
        driver,
    })
}

pub(crate) fn task_record(row: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        task: decode::task_id(row, 0)?,
        idx: row.get(1)?,
        status: decode::task_state(row, 2)?,
        attempts: row.get(3)?,
        next_attempt: row.get(4)?,
        retry_at_ms: row.get(5)?,
        started_at_ms: row.get(6)?,
        ended_at_ms: row.get(7)?,
        exit_code: row.get(8)?,
        reason: row.get(9)?,
        output_attempt: row.get(10)?,
        output: row.get(11)?,
        output_bytes: row.get(12)?,
        output_json: row.get(13)?,
        stderr_tail: row.get(14)?,
    })
}

/// An attempt's row (`ATTEMPT_COLUMNS`), its outcome decoded by `outcomes`.
pub(crate) fn attempt_record(
    row: &Row<'_>,
    outcomes: &mut decode::Outcomes,
) -> rusqlite::Result<AttemptRecord> {
    Ok(AttemptRecord {
        task: decode::task_id(row, 0)?,
        task_idx: row.get(15)?,
        attempt: row.get(1)?,
        started_at_ms: row.get(2)?,
        ended_at_ms: row.get(3)?,
        pid: row.get(4)?,
        outcome: outcomes.decode(row, 5)?,
        exit_code: row.get(6)?,
        duration_ms: row.get(7)?,
        output: row.get(8)?,
        output_bytes: row.get(9)?,
        output_json: row.get(10)?,
        stderr_tail: row.get(11)?,
        log_path: row.get(12)?,
        agent: decode::agent_usage(row, 13)?,
        // An unknown name (a newer baton's) reads as unknown, not as an error.
        containment: row
            .get::<_, Option<String>>(14)?
            .as_deref()
            .and_then(Containment::parse),
    })
}

#[cfg(test)]
mod tests {
    use baton_model::EventName;

    use super::{Which, of_kind};
    use crate::event_batches::is_batched;
    use crate::migrate::MIGRATIONS;

    /// The frequent kinds are exactly those the index leaves out, and a lookup of any other
    /// kind reads the index, not the run's every event.
    #[test]
    fn a_rare_kind_is_looked_up_in_its_index() {
        let migration = MIGRATIONS
            .iter()
            .find(|m| m.contains("CREATE INDEX events_of_rare_kinds"))
            .unwrap();
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words(migration).contains(&words(rare_kinds!())),
            "the condition differs"
        );
        for kind in EventName::ALL {
            let quoted = format!("'{}'", kind.as_str());
            assert_eq!(
                is_batched(kind),
                rare_kinds!().contains(&quoted),
                "{kind:?}"
            );
        }
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for migration in MIGRATIONS {
            conn.execute_batch(migration).unwrap();
        }
        for kind in EventName::ALL {
            for which in [Which::All, Which::Last] {
                let plan: Vec<String> = conn
                    .prepare(&format!("EXPLAIN QUERY PLAN {}", of_kind(kind, which)))
                    .unwrap()
                    .query_map(rusqlite::params!["r", kind.as_str()], |row| row.get(3))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                let indexed = plan.iter().any(|p| p.contains("events_of_rare_kinds"));
                assert_eq!(indexed, !is_batched(kind), "{kind:?}: {plan:?}");
            }
        }
    }
}
