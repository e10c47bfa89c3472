//! Schema migrations, tracked by `PRAGMA user_version`.

use std::path::Path;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::StoreError;

/// Migration `i` takes the schema from version `i` to version `i + 1`. Append only: a released
/// migration never changes.
pub(crate) const MIGRATIONS: &[&str] = &[
    include_str!("migrations/v1_core.sql"),
    include_str!("migrations/v2_driver.sql"),
    include_str!("migrations/v3_clustered.sql"),
    include_str!("migrations/v4_agent_usage.sql"),
    include_str!("migrations/v5_approvals.sql"),
    include_str!("migrations/v6_containment.sql"),
    include_str!("migrations/v7_graph_order.sql"),
    include_str!("migrations/v8_lease.sql"),
    include_str!("migrations/v9_stop_cause.sql"),
    include_str!("migrations/v10_rare_event_kinds.sql"),
    include_str!("migrations/v11_graph_parts.sql"),
    include_str!("migrations/v12_counts_at_finish.sql"),
    include_str!("migrations/v13_event_batches.sql"),
    include_str!("migrations/v14_packed.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Applies the migrations the database lacks, all of them in one IMMEDIATE transaction: a
/// process killed part way (the first run creating `.baton/baton.db`) leaves the database as
/// it was, never at a version between, and two processes opening a fresh database at once
/// cannot both apply one.
pub(crate) fn migrate(
    conn: &Connection,
    path: &Path,
    migrations: &[&str],
) -> Result<(), StoreError> {
    let known = migrations.len() as u32;
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    // Read inside the write lock: another process may have migrated since we looked.
    let found = user_version(&tx)?;
    if found > known {
        return Err(StoreError::SchemaTooNew {
            path: path.to_owned(),
            found,
            known,
        });
    }
    if found == known {
        return Ok(());
    }
    for version in found + 1..=known {
        tx.execute_batch(migrations[version as usize - 1])
            .map_err(|source| StoreError::Migrate {
                path: path.to_owned(),
                version,
                source: source.into(),
            })?;
    }
    tx.pragma_update(None, "user_version", known)?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use baton_model::{Event, EventKind, Outcome, RunId, TaskId, TaskState};

    use super::*;
    use crate::{AttemptOutput, Driver, Durability, NewRun, RunLog, RunReader, SqliteStore};

    fn new_run(id: &str) -> NewRun<'static> {
        NewRun {
            id: RunId::new(id).unwrap(),
            name: "old".into(),
            graph_path: "graph.toml".into(),
            graph: &"{}",
            concurrency: 2,
            started_at_ms: 1,
            tasks: vec![(TaskId::new("a").unwrap(), 0)],
        }
    }

    #[test]
    fn opening_a_version_1_database_migrates_it_and_keeps_its_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        old_database_with(&path, 1, &new_run("r1"));
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = RunId::new("r1").unwrap();
        assert_eq!(store.run(&run).unwrap().unwrap().name, "old");
        // Its graph, one row of text then, is read back from its parts.
        assert_eq!(store.graph_json(&run).unwrap().as_deref(), Some("{}"));
        // Version 2's columns work on the migrated run.
        let me = Driver {
            pid: 1,
            start_time: 2,
            host: "h".into(),
        };
        store
            .claim_driver(&run, &me, 0, crate::LEASE_TERM, |_| crate::Liveness::Alive)
            .unwrap();
        assert_eq!(store.run(&run).unwrap().unwrap().driver, Some(me));
    }

    #[test]
    fn a_run_stopped_before_its_cause_was_recorded_reads_back_with_the_cause_its_words_give() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let run = RunId::new("r1").unwrap();
        {
            // Version 8: a run's stop was words only.
            old_database_with(&path, 8, &new_run("r1"));
            let conn = Connection::open(&path).unwrap();
            conn.execute(
                "UPDATE runs SET stop_reason = 'budget spent: $0.30 of $0.30' WHERE id = 'r1'",
                [],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let stop = store.run(&run).unwrap().unwrap().stop.unwrap();
        assert_eq!(stop.cause, baton_model::StopCause::BudgetSpent);
        assert_eq!(stop.reason, "budget spent: $0.30 of $0.30");
        // A stop recorded now keeps its cause, whatever its words.
        store
            .commit(
                &run,
                &[Event {
                    seq: 1,
                    at_ms: 5,
                    kind: EventKind::RunStopping {
                        reason: "budget spent, in other words".into(),
                        cause: Some(baton_model::StopCause::SoftBudget),
                    },
                }],
                &[],
            )
            .unwrap();
        let stop = store.run(&run).unwrap().unwrap().stop.unwrap();
        assert_eq!(stop.cause, baton_model::StopCause::SoftBudget);
    }

    /// A database at `path` of schema `version` holding `run`: today's code records it in a
    /// current database, whose rows are copied into the old one (today's writes name tables
    /// and columns an old schema lacks).
    fn old_database_with(path: &Path, version: usize, run: &NewRun) {
        let current_path = path.with_extension("current");
        let current = SqliteStore::open(&current_path).unwrap();
        current.create_run(run).unwrap();
        drop(current);
        let old =
            SqliteStore::open_migrated(path, Durability::Normal, &MIGRATIONS[..version]).unwrap();
        assert_eq!(old.schema_version().unwrap(), version as u32);
        drop(old);
        copy_rows(&current_path, path);
    }

    /// Replaces every row of `to`'s tables with `from`'s, in the columns `to` has; into a
    /// database from before version 13, batched events go as rows of `events`, as every event
    /// was then.
    fn copy_rows(from: &Path, to: &Path) {
        let conn = Connection::open(to).unwrap();
        conn.execute("ATTACH DATABASE ?1 AS src", [from.to_str().unwrap()])
            .unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for table in &tables {
            let columns: Vec<String> = conn
                .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let columns = columns.join(", ");
            // Before version 11 a run's graph was one row of text.
            let source = match table.as_str() {
                "run_graphs" => "(SELECT run_id, CAST(json AS TEXT) AS graph_json \
                                 FROM src.run_graph_parts WHERE part = 0)"
                    .to_owned(),
                _ => format!("src.{table}"),
            };
            conn.execute_batch(&format!(
                "DELETE FROM main.{table}; \
                 INSERT INTO main.{table} ({columns}) SELECT {columns} FROM {source};"
            ))
            .unwrap();
        }
        // Before version 14 nothing was packed.
        if tables.iter().any(|table| table == "run_graphs") {
            conn.execute("DELETE FROM main.run_graphs", []).unwrap();
            for (run, part, json) in unpacked_graph_parts(&conn) {
                assert_eq!(part, 0, "a graph of one part");
                conn.execute(
                    "INSERT INTO main.run_graphs (run_id, graph_json) VALUES (?1, ?2)",
                    rusqlite::params![run, String::from_utf8(json).unwrap()],
                )
                .unwrap();
            }
        }
        let has = |table: &str, column: &str| {
            conn.prepare(&format!(
                "SELECT 1 FROM pragma_table_info('{table}') WHERE name = ?1"
            ))
            .unwrap()
            .exists([column])
            .unwrap()
        };
        if tables.iter().any(|table| table == "run_graph_parts")
            && !has("run_graph_parts", "packed")
        {
            conn.execute("DELETE FROM main.run_graph_parts", [])
                .unwrap();
            for (run, part, json) in unpacked_graph_parts(&conn) {
                conn.execute(
                    "INSERT INTO main.run_graph_parts (run_id, part, json) VALUES (?1, ?2, ?3)",
                    rusqlite::params![run, part, json],
                )
                .unwrap();
            }
        }
        let batches = unpacked_batches(&conn);
        if !tables.iter().any(|table| table == "event_batches") {
            for (run, _, _, text) in batches {
                for line in crate::event_batches::lines(&text) {
                    let line = line.unwrap();
                    let kind: baton_model::EventKind = serde_json::from_str(line.data).unwrap();
                    conn.execute(
                        "INSERT INTO main.events (run_id, seq, at_ms, kind, task_id, data_json) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        rusqlite::params![
                            run,
                            line.seq,
                            line.at_ms,
                            line.kind,
                            kind.task().map(|task| task.as_str()),
                            line.data
                        ],
                    )
                    .unwrap();
                }
            }
        } else if !has("event_batches", "packed") {
            // Before version 14 every batch was text.
            conn.execute("DELETE FROM main.event_batches", []).unwrap();
            for (run, last_seq, first_seq, text) in batches {
                conn.execute(
                    "INSERT INTO main.event_batches (run_id, last_seq, first_seq, events) \
                     VALUES (?1, ?2, ?3, ?4)",
                    rusqlite::params![run, last_seq, first_seq, text],
                )
                .unwrap();
            }
        }
    }

    /// Every part of a graph in the attached `src`, unpacked: run, part, JSON.
    fn unpacked_graph_parts(conn: &Connection) -> Vec<(String, u32, Vec<u8>)> {
        conn.prepare("SELECT run_id, part, json, packed FROM src.run_graph_parts ORDER BY part")
            .unwrap()
            .query_map([], |row| {
                let json: Vec<u8> = row.get(2)?;
                let json = if row.get(3)? {
                    crate::packing::unpack(&json).unwrap()
                } else {
                    json
                };
                Ok((row.get(0)?, row.get(1)?, json))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Every batch of events in the attached `src`, its lines unpacked: run, last and first
    /// `seq`, lines.
    fn unpacked_batches(conn: &Connection) -> Vec<(String, u64, u64, String)> {
        let mut statement = conn
            .prepare(
                "SELECT last_seq, events, packed, run_id, first_seq FROM src.event_batches \
                 ORDER BY last_seq",
            )
            .unwrap();
        let mut rows = statement.query([]).unwrap();
        let mut batches = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            let run: String = row.get(3).unwrap();
            let lines =
                crate::event_batches::RowLines::of(row, &RunId::new(run.clone()).unwrap()).unwrap();
            batches.push((
                run,
                row.get(0).unwrap(),
                row.get(4).unwrap(),
                lines.text().to_owned(),
            ));
        }
        batches
    }

    #[test]
    fn opening_a_version_2_database_keeps_its_tasks_attempts_and_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let run = RunId::new("r1").unwrap();
        let (a, b) = (TaskId::new("a").unwrap(), TaskId::new("b").unwrap());
        let event = |seq, kind| Event {
            seq,
            at_ms: 10 * seq as i64,
            kind,
        };
        let started = |seq, task: &TaskId| {
            event(
                seq,
                EventKind::AttemptStarted {
                    task: task.clone(),
                    attempt: 1,
                    pid: Some(7),
                },
            )
        };
        let output = |task: &TaskId| AttemptOutput {
            task: task.clone(),
            attempt: 1,
            output: format!("{task} said hi"),
            output_bytes: 8,
            output_json: None,
            stderr_tail: String::new(),
            log_path: format!("{task}.log"),
        };
        let (tasks, attempts, events) = {
            // Today's code writes columns version 2 lacks: it records the run in a current
            // database, whose rows are then copied into a version-2 one, column by column.
            let current_path = dir.path().join("current.db");
            let old = SqliteStore::open(&current_path).unwrap();
            let mut created = new_run("r1");
            created.tasks.push((b.clone(), 1));
            old.create_run(&created).unwrap();
            old.commit(
                &run,
                &[
                    started(1, &a),
                    event(
                        2,
                        EventKind::AttemptFinished {
                            task: a.clone(),
                            attempt: 1,
                            outcome: Outcome::Exited { code: 0 },
                            duration_ms: 3,
                            agent: None,
                            containment: None,
                        },
                    ),
                    event(
                        3,
                        EventKind::TaskFinished {
                            task: a.clone(),
                            state: TaskState::Succeeded,
                            reason: None,
                        },
                    ),
                    started(4, &b),
                ],
                &[output(&a)],
            )
            .unwrap();
            let written = (
                old.tasks(&run).unwrap(),
                old.run_attempts(&run).unwrap(),
                old.events(&run, 0, 100).unwrap(),
            );
            drop(old);
            let v2 =
                SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..2]).unwrap();
            assert_eq!(v2.schema_version().unwrap(), 2);
            drop(v2);
            copy_rows(&current_path, &path);
            written
        };

        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(store.tasks(&run).unwrap(), tasks);
        assert_eq!(store.run_attempts(&run).unwrap(), attempts);
        assert_eq!(store.events(&run, 0, 100).unwrap(), events);
        assert_eq!(store.check_consistency(&run).unwrap(), Vec::<String>::new());
        // The triggers came back with their tables.
        let finished = event(
            5,
            EventKind::TaskFinished {
                task: b.clone(),
                state: TaskState::Failed,
                reason: Some("no".into()),
            },
        );
        assert_eq!(store.commit(&run, &[finished], &[]).unwrap(), [5]);
        assert_eq!(store.check_consistency(&run).unwrap(), Vec::<String>::new());
        // Its old events are rows, the new one a batch's: the log is both, in order.
        let seqs = |events: Vec<Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(store.events(&run, 0, 100).unwrap()), [1, 2, 3, 4, 5]);
        assert_eq!(seqs(store.events(&run, 3, 1).unwrap()), [4]);
        assert_eq!(seqs(store.events(&run, 4, 1).unwrap()), [5]);
        let finished = baton_model::EventName::TaskFinished;
        assert_eq!(seqs(store.events_of_kind(&run, finished).unwrap()), [3, 5]);
        let last = store.last_event_of_kind(&run, finished).unwrap().unwrap();
        assert_eq!(last.seq, 5);
        assert_eq!(store.last_seq(&run).unwrap(), 5);
        let summary = store.runs(1).unwrap().remove(0);
        assert_eq!(summary.count(TaskState::Failed), 1);
        let conn = Connection::open(&path).unwrap();
        let err = conn.execute("UPDATE events SET at_ms = 5", []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{err}");
        let err = conn
            .execute("UPDATE event_batches SET first_seq = 0", [])
            .unwrap_err();
        assert!(err.to_string().contains("append-only"), "{err}");
        // And deleting the run still takes everything with it.
        assert!(
            store
                .delete_run(&run, 0, &|_| crate::Liveness::Dead)
                .unwrap()
        );
        for table in [
            "tasks",
            "attempts",
            "events",
            "event_batches",
            "task_counts",
            "run_graph_parts",
        ] {
            let rows: i64 = conn
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
                    row.get(0)
                })
                .unwrap();
            assert_eq!(rows, 0, "{table}");
        }
    }

    #[test]
    fn a_database_newer_than_this_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open(&path).unwrap());
        let older_build = SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]);
        let err = older_build.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::SchemaTooNew {
                    found: SCHEMA_VERSION,
                    known: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("use a newer baton"), "{err}");
    }

    /// After an upgrade of baton, `baton runs` reads the older database instead of asking for
    /// a write first: it is migrated once, then read.
    #[test]
    fn a_reader_that_may_upgrade_migrates_an_old_database_then_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        old_database_with(&path, 6, &new_run("r1"));
        let reader = SqliteStore::open_readonly_upgrading(&path).unwrap();
        assert_eq!(reader.schema_version().unwrap(), SCHEMA_VERSION);
        let run = RunId::new("r1").unwrap();
        assert_eq!(reader.run(&run).unwrap().unwrap().name, "old");
    }

    #[test]
    fn a_reader_refuses_an_old_database_instead_of_misreading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]).unwrap());
        let err = SqliteStore::open_readonly(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooOld { found: 1, .. }),
            "{err:?}"
        );
    }

    /// All or nothing (finding 16: a SIGKILL while the first run created the database left it
    /// at version 6 of 8, which readers then refused): a migration that fails part way leaves
    /// none of those before it applied either.
    #[test]
    fn a_failing_migration_leaves_the_database_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let broken = [MIGRATIONS[0], "CREATE TABLE x (a); THIS IS NOT SQL;"];
        let err = SqliteStore::open_migrated(&path, Durability::Normal, &broken).unwrap_err();
        assert!(
            matches!(err, StoreError::Migrate { version: 2, .. }),
            "{err:?}"
        );
        let conn = Connection::open(&path).unwrap();
        assert_eq!(user_version(&conn).unwrap(), 0);
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0, "version 1's tables went with the failure");
        drop(conn);
        let store =
            SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]).unwrap();
        assert_eq!(store.schema_version().unwrap(), 1);
    }
}
