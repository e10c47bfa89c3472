//! The two ways a run is written: created whole, then one turn at a time.

use baton_model::{Event, RunState, TaskState};
use rusqlite::{ErrorCode, OptionalExtension, params};

use crate::event_batches::{Batch, is_batched, last_seq_of_run_1};
use crate::project::apply_turn;
use crate::statements::{Sql, Statements};
use crate::{AttemptOutput, NewRun, SqliteStore, StoreError};

/// The most of a run's graph one row holds (`migrations/v11_graph_parts.sql`).
const GRAPH_PART: usize = 1 << 20;

/// Events inserted by one statement (`Sql::InsertEvents`); fewer, at the end of a turn, go
/// one by one.
pub(crate) const EVENTS_PER_INSERT: usize = 32;

/// Rows of a new run's `tasks` inserted by one statement.
const TASKS_PER_INSERT: usize = 64;

/// Inserts a new run's tasks, every one pending, in graph order. TASKS_PER_INSERT rows to a
/// statement, as events go: what a statement costs beyond its rows was half of inserting a
/// 100,000-task run's tasks one by one. `between` is called after each statement (to insert
/// the graph's parts serialised meanwhile).
fn insert_pending_tasks(
    tx: &rusqlite::Transaction<'_>,
    run: &NewRun,
    between: &mut dyn FnMut() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let (run_id, pending) = (run.id.as_str(), TaskState::Pending.as_str());
    // Taken from the cache once: each trip hashes the statement's text twice (out, back in).
    let mut insert_full = tx.prepare_cached(&INSERT_TASKS)?;
    for chunk in run.tasks.chunks(TASKS_PER_INSERT) {
        let ids: Vec<&str> = chunk.iter().map(|(task, _)| task.as_str()).collect();
        // The run and the status, the same in every row, are bound once (`?1`, `?2`).
        let mut rows: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(2 + 2 * chunk.len());
        rows.extend([&run_id as &dyn rusqlite::ToSql, &pending]);
        for (id, (_, idx)) in ids.iter().zip(chunk) {
            rows.extend([id as &dyn rusqlite::ToSql, idx]);
        }
        if chunk.len() == TASKS_PER_INSERT {
            insert_full.execute(rows.as_slice())?;
        } else {
            tx.prepare_cached(&insert_tasks(chunk.len()))?
                .execute(rows.as_slice())?;
        }
        between()?;
    }
    Ok(())
}

/// The statement inserting `n` pending tasks of a new run: the run `?1` and the status `?2`,
/// then each task's id and index.
fn insert_tasks(n: usize) -> String {
    crate::statements::insert_rows("tasks (run_id, status, task_id, idx)", 2, n)
}

static INSERT_TASKS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| insert_tasks(TASKS_PER_INSERT));

/// Writes the run's graph into `run_graph_parts`, a part at a time, serialised on a thread of
/// its own while `meanwhile` (inserting the tasks' rows) runs on this one: the two took a
/// fifth of starting a 100,000-task run one after the other. Each part is inserted as soon as
/// it is ready, between two of `meanwhile`'s statements (it calls `between`): when parts were
/// taken only after the tasks, the serialiser stopped at the second part and its 30 ms came
/// after the tasks' 80. At most four parts are held at once (one being written, one waiting
/// to be sent, one sent, one being inserted). Each part is packed there too (`packing.rs`):
/// 13 MB of a 100,000-task run's graph no longer written to the WAL and copied back.
fn write_graph_beside(
    tx: &rusqlite::Transaction<'_>,
    run: &NewRun,
    meanwhile: impl FnOnce(&mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    std::thread::scope(|scope| {
        let (sender, parts) = std::sync::mpsc::sync_channel(1);
        let writer = std::thread::Builder::new()
            .name("graph-json".into())
            .spawn_scoped(scope, move || {
                let mut out = GraphParts {
                    sender,
                    buffer: Vec::with_capacity(GRAPH_PART),
                    sent: false,
                };
                run.graph.write_json(&mut out)?;
                out.send_last()
            })
            .map_err(StoreError::GraphJson)?;
        let inserted = (|| {
            let mut insert = tx.prepare_cached(
                "INSERT INTO run_graph_parts (run_id, part, json, packed) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut next: u32 = 0;
            let mut put = |(json, packed): (Vec<u8>, bool)| -> Result<(), StoreError> {
                insert.execute(params![run.id.as_str(), next, json, packed])?;
                next += 1;
                Ok(())
            };
            meanwhile(&mut || {
                while let Ok(part) = parts.try_recv() {
                    put(part)?;
                }
                Ok(())
            })?;
            parts.iter().try_for_each(put)
        })();
        // Whatever happened here, the writer stops: its next part has nowhere to go.
        drop(parts);
        let written = writer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        inserted?;
        written.map_err(StoreError::GraphJson)
    })
}

/// The graph as it is serialised, sent to be inserted a part ([`GRAPH_PART`] bytes) at a time:
/// its bytes, and whether they are packed.
struct GraphParts {
    sender: std::sync::mpsc::SyncSender<(Vec<u8>, bool)>,
    buffer: Vec<u8>,
    /// Whether a part went: an empty graph is still one (empty) part.
    sent: bool,
}

impl GraphParts {
    fn send(&mut self) -> std::io::Result<()> {
        let full = std::mem::replace(&mut self.buffer, Vec::with_capacity(GRAPH_PART));
        self.sent = true;
        let part = match crate::packing::pack(&full) {
            Some(packed) => (packed, true),
            None => (full, false),
        };
        self.sender
            .send(part)
            .map_err(|_| std::io::Error::other("the run's record was not written"))
    }

    fn send_last(mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() && self.sent {
            return Ok(());
        }
        self.send()
    }
}

impl std::io::Write for GraphParts {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let room = GRAPH_PART - self.buffer.len();
        let taken = bytes.len().min(room);
        self.buffer.extend_from_slice(&bytes[..taken]);
        if self.buffer.len() == GRAPH_PART {
            self.send()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SqliteStore {
    /// Records a new run, `running`, with every task `pending`, in one transaction.
    pub(crate) fn insert_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.write(|tx| {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO runs (id, name, graph_path, status, started_at_ms, concurrency, \
                     task_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(params![
                    run.id.as_str(),
                    run.name,
                    run.graph_path,
                    RunState::Running.as_str(),
                    run.started_at_ms,
                    run.concurrency,
                    run.tasks.len() as u64,
                ]);
            match inserted {
                Err(err) if err.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                    return Err(StoreError::RunExists(run.id.clone()));
                }
                other => other?,
            };
            write_graph_beside(tx, run, |between| insert_pending_tasks(tx, run, between))
        })?;
        self.task_rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .created(&run.id, &run.tasks, run.started_at_ms);
        Ok(())
    }

    /// Records one dispatcher turn: appends `events` to the run's log, numbering them after the
    /// last one recorded, applies each to the tasks, attempts and run it concerns, and stores
    /// `outputs` on their attempts (and on their tasks, as the latest) — all in one IMMEDIATE
    /// transaction, so a crash leaves either the whole turn or none of it. The `seq` of the
    /// given events is ignored; the ones assigned are returned, in order.
    ///
    /// How each event changes the tables is documented in [`crate::project`]. An event about a
    /// task the run does not have, or an end or output of an attempt never started, fails the
    /// whole turn.
    ///
    /// Unfenced: for tests and benchmarks that record without a lease. A driver records
    /// through [`crate::RunLog::record`], which checks its lease in the same transaction.
    pub fn commit(
        &self,
        run: &baton_model::RunId,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError> {
        self.commit_checked(run, None, events, outputs)
    }

    /// [`SqliteStore::commit`] by the holder of `lease`: refused whole
    /// ([`StoreError::LeaseLost`]) once another process has claimed the run. What a driver
    /// commits goes this way.
    pub(crate) fn commit_fenced(
        &self,
        run: &baton_model::RunId,
        lease: crate::Lease,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError> {
        self.commit_checked(run, Some(lease.token), events, outputs)
    }

    fn commit_checked(
        &self,
        run: &baton_model::RunId,
        fence: Option<u64>,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError> {
        if events.is_empty() && outputs.is_empty() {
            return Ok(Vec::new());
        }
        self.check_present()?;
        let mut rows = self.task_rows.lock().unwrap_or_else(|poisoned| {
            // A commit panicked holding it: what it added is not there.
            let mut rows = poisoned.into_inner();
            rows.forget();
            rows
        });
        let committed = self.write(|tx| {
            if let Some(token) = fence {
                crate::driver::check_token(tx, run, token)?;
            }
            // Where the log ends, and what the task index checks itself against.
            let found: Option<(u64, i64, i64)> = tx
                .prepare_cached(concat!(
                    "SELECT ",
                    last_seq_of_run_1!(),
                    ", task_count, started_at_ms FROM runs WHERE id = ?1"
                ))?
                .query_row([run.as_str()], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()?;
            let (mut seq, task_count, started_at_ms) =
                found.ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
            rows.current(tx, run, task_count, started_at_ms)?;
            let mut statements = Statements::new(tx, &mut rows);
            let mut seqs = Vec::with_capacity(events.len());
            let (mut batched, mut rare) = (Vec::new(), Vec::new());
            for event in events {
                seq += 1;
                seqs.push(seq);
                if is_batched(event.kind.event_name()) {
                    batched.push((seq, event));
                } else {
                    rare.push((seq, event));
                }
            }
            let batch = encode_beside(&batched, || {
                insert_event_rows(&mut statements, run, &rare)?;
                apply_turn(&mut statements, run, events, outputs)
            })?;
            batch.insert(tx, run)?;
            Ok(seqs)
        });
        if committed.is_err() {
            // It may have looked up rows it inserted and rolled back.
            rows.forget();
        }
        committed
    }
}

/// Batched events from which encoding them goes on a thread of its own.
const ENCODED_BESIDE_FROM: usize = 256;

/// Encodes `events` into a [`Batch`] on a thread of its own while `meanwhile` (the commit's
/// other statements) runs on this one, when there are enough of them: the encoding was a fifth
/// of what recording a run of many short tasks cost the committing thread, and the other core
/// has room. Fewer, or no thread to be had: encoded here, after.
fn encode_beside(
    events: &[(u64, &Event)],
    meanwhile: impl FnOnce() -> Result<(), StoreError>,
) -> Result<Batch, StoreError> {
    if events.len() < ENCODED_BESIDE_FROM {
        meanwhile()?;
        return Batch::of(events);
    }
    std::thread::scope(|scope| {
        let encoder = std::thread::Builder::new()
            .name("event-json".into())
            .spawn_scoped(scope, || Batch::of(events));
        let done = meanwhile();
        let batch = match encoder {
            Ok(encoder) => encoder
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => Batch::of(events),
        };
        done?;
        batch
    })
}

/// Appends events of the kinds not batched to the run's rows of `events`, numbered as given:
/// [`EVENTS_PER_INSERT`] to a statement (what one statement costs beyond its rows was a tenth
/// of a 100,000-task run's recording when every event was a row), their JSON written into one
/// buffer.
fn insert_event_rows(
    statements: &mut Statements<'_>,
    run: &baton_model::RunId,
    events: &[(u64, &Event)],
) -> Result<(), StoreError> {
    let run_id = run.as_str();
    let mut buffer = Vec::new();
    let mut ends: Vec<usize> = Vec::with_capacity(EVENTS_PER_INSERT);
    for chunk in events.chunks(EVENTS_PER_INSERT) {
        buffer.clear();
        ends.clear();
        for (_, event) in chunk {
            serde_json::to_writer(&mut buffer, &event.kind).map_err(StoreError::Encode)?;
            ends.push(buffer.len());
        }
        let text = std::str::from_utf8(&buffer).expect("serde_json writes UTF-8");
        // What the rows bind, held while the statement runs.
        let kinds: Vec<&str> = chunk.iter().map(|(_, e)| e.kind.name()).collect();
        let tasks: Vec<Option<&str>> = chunk
            .iter()
            .map(|(_, e)| e.kind.task().map(|task| task.as_str()))
            .collect();
        let datas: Vec<&str> = ends
            .iter()
            .scan(0, |start, &end| {
                let data = &text[*start..end];
                *start = end;
                Some(data)
            })
            .collect();
        let mut rows: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(6 * chunk.len());
        for (i, (seq, event)) in chunk.iter().enumerate() {
            rows.extend([
                &run_id as &dyn rusqlite::ToSql,
                seq,
                &event.at_ms,
                &kinds[i],
                &tasks[i],
                &datas[i],
            ]);
        }
        if chunk.len() == EVENTS_PER_INSERT {
            statements
                .get(Sql::InsertEvents)?
                .execute(rows.as_slice())?;
        } else {
            let insert = statements.get(Sql::InsertEvent)?;
            for row in rows.chunks(6) {
                insert.execute(row)?;
            }
        }
    }
    Ok(())
}
