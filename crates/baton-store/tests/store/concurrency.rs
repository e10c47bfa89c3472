//! Several connections on one file: writers wait for each other, readers wait for nobody.

use baton_store::{RunLog, RunReader};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use baton_model::{Outcome, TaskState};
use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::support::*;

/// One dispatcher turn: the end of task `i`, and the start of task `i + 1`.
fn turn(i: usize) -> (Vec<baton_model::Event>, Vec<baton_store::AttemptOutput>) {
    let (this, next) = (format!("t{i}"), format!("t{}", i + 1));
    let at = i as i64;
    (
        vec![
            finished(at, &this, 1, Outcome::Exited { code: 0 }),
            task_finished(at, &this, TaskState::Succeeded, None),
            started(at, &next, 1),
        ],
        vec![output(
            &this,
            1,
            "some output of a few dozen bytes, as a shell task gives",
        )],
    )
}

/// Run `r1` of `tasks` tasks in a new store, its first task started.
fn begun(db: &Db, tasks: usize) -> (baton_store::SqliteStore, baton_model::RunId) {
    let store = db.open();
    store.create_run(&new_numbered_run("r1", tasks)).unwrap();
    let run = run_id("r1");
    store.commit(&run, &[started(0, "t0", 1)], &[]).unwrap();
    (store, run)
}

#[test]
fn two_writers_on_one_run_both_succeed_and_seq_stays_dense() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_numbered_run("r1", 2_000)).unwrap();
    let run = run_id("r1");
    std::thread::scope(|scope| {
        for writer in 0..2 {
            let store = db.open();
            let run = &run;
            scope.spawn(move || {
                for i in 0..300 {
                    let id = format!("t{}", writer * 1000 + i);
                    store
                        .commit(run, &[started(1, &id, 1), started(2, &id, 2)], &[])
                        .unwrap();
                }
            });
        }
    });
    let seqs: Vec<u64> = store
        .events(&run, 0, 10_000)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=1200).collect::<Vec<u64>>());
    assert_consistent(&store, &run);
}

/// Why every write transaction begins IMMEDIATE: a deferred one that has read a snapshot cannot
/// become a writer once another connection has committed since, and SQLite fails it at once as
/// busy, whatever the busy timeout.
#[test]
fn a_deferred_read_then_write_fails_as_busy_despite_the_timeout() {
    let db = Db::new();
    db.open().create_run(&new_run("r1", &["a"])).unwrap();
    let mut a = Connection::open(db.path()).unwrap();
    let b = Connection::open(db.path()).unwrap();
    a.busy_timeout(Duration::from_secs(5)).unwrap();

    let tx = a
        .transaction_with_behavior(TransactionBehavior::Deferred)
        .unwrap();
    let _: i64 = tx
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    b.execute("UPDATE runs SET name = 'changed'", []).unwrap();
    let start = Instant::now();
    let err = tx.execute("UPDATE runs SET name = 'mine'", []).unwrap_err();
    assert_eq!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "it did not wait: waiting cannot help"
    );
}

#[test]
fn a_reader_sees_no_lock_errors_while_a_writer_is_busy() {
    let db = Db::new();
    let (writer, run) = begun(&db, 3_001);
    let reader = baton_store::SqliteStore::open_readonly(&db.path()).unwrap();
    let done = AtomicBool::new(false);

    let (reads, last_seen) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..3_000 {
                let (events, outputs) = turn(i);
                writer.commit(&run, &events, &outputs).unwrap();
            }
            done.store(true, Ordering::Release);
        });
        let reading = scope.spawn(|| {
            let (mut reads, mut after) = (0u64, 0u64);
            while !done.load(Ordering::Acquire) {
                // Any error, "database is locked" above all, fails the test.
                let summary = &reader.runs(10).unwrap()[0];
                assert_eq!(summary.run.task_count, 3_001);
                let tasks = reader.tasks(&run).unwrap();
                // A snapshot never shows half a turn: succeeded tasks are followed by exactly
                // one running one.
                let succeeded = tasks
                    .iter()
                    .filter(|t| t.status == TaskState::Succeeded)
                    .count();
                assert_eq!(tasks[succeeded].status, TaskState::Running);
                for event in reader.events(&run, after, 500).unwrap() {
                    assert_eq!(event.seq, after + 1);
                    after = event.seq;
                }
                reads += 1;
            }
            (reads, after)
        });
        reading.join().unwrap()
    });
    eprintln!("reader: {reads} rounds of queries while 3,000 turns were committed");
    assert!(reads > 0);
    assert!(last_seen <= 9_001);
    assert_consistent(&writer, &run);
}

#[test]
fn commit_cost_of_a_three_event_turn() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_numbered_run("r1", 5_001)).unwrap();
    let run = run_id("r1");
    store.commit(&run, &[started(0, "t0", 1)], &[]).unwrap();
    let turns: Vec<_> = (0..5_000).map(turn).collect();
    let mut took = Vec::with_capacity(turns.len());
    for (events, outputs) in &turns {
        let start = Instant::now();
        store.commit(&run, events, outputs).unwrap();
        took.push(start.elapsed());
    }
    took.sort();
    let mean = took.iter().sum::<Duration>() / took.len() as u32;
    eprintln!(
        "commit of 3 events + 1 output (debug build): mean {mean:?}, median {:?}, p99 {:?}",
        took[took.len() / 2],
        took[took.len() * 99 / 100]
    );
    assert_consistent(&store, &run);
}

/// With checkpoints on a thread of their own, the WAL still goes back into the database file
/// while commits go on (long before the writer would checkpoint by itself), and every commit
/// is there afterwards.
#[test]
fn background_checkpoints_copy_the_wal_back_while_commits_go_on() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_numbered_run("r1", 20_001)).unwrap();
    let run = run_id("r1");
    store.commit(&run, &[started(0, "t0", 1)], &[]).unwrap();
    let db_size = || std::fs::metadata(db.path()).map_or(0, |m| m.len());
    let wal = {
        let mut wal = db.path().into_os_string();
        wal.push("-wal");
        std::path::PathBuf::from(wal)
    };
    let before = db_size();
    assert_eq!(store.background_checkpoints(), None);
    store.checkpoint_in_background();
    assert_eq!(store.background_checkpoints(), Some(0));
    // In WAL mode the database file grows only when a checkpoint copies pages into it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut i = 0;
    while db_size() <= before {
        assert!(
            Instant::now() < deadline && i < 20_000,
            "no checkpoint after {i} commits"
        );
        let (events, outputs) = turn(i);
        store.commit(&run, &events, &outputs).unwrap();
        i += 1;
    }
    // The writer checkpoints by itself only at 16,000 pages: this one was the thread's.
    let wal_pages = std::fs::metadata(&wal).map_or(0, |m| m.len()) / 4096;
    assert!(wal_pages < 8_000, "the WAL reached {wal_pages} pages first");
    while store.background_checkpoints() == Some(0) {
        // Commits go on while it copies; it completes between them.
        assert!(
            Instant::now() < deadline,
            "the thread never completed a checkpoint"
        );
        let (events, outputs) = turn(i);
        store.commit(&run, &events, &outputs).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    store.stop_background_checkpoints();
    assert_eq!(store.background_checkpoints(), None);
    // Commits go on as before once the thread is gone.
    let (events, outputs) = turn(i);
    store.commit(&run, &events, &outputs).unwrap();
    assert_consistent(&store, &run);
}

/// Processes opening a database nobody has made yet, all at once (two runs started together
/// in a new project): every one opens it. The switch to WAL is answered "locked" at once,
/// without the busy timeout, while another connection is making the database.
#[test]
fn many_opening_a_new_database_at_once_all_open_it() {
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let opened: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    let path = &path;
                    scope.spawn(move || {
                        baton_store::SqliteStore::open(path)
                            .map(drop)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for result in opened {
            assert!(result.is_ok(), "round {round}: {result:?}");
        }
    }
}

/// One store read on several threads at once (a run's result reads its tasks beside its
/// attempts, the dashboard a page per request): each read gets its whole answer, whether the
/// store was opened to write or only to read, while other threads hold its connections.
#[test]
fn one_store_read_on_many_threads_at_once_answers_each() {
    let db = Db::new();
    let (writer, run) = begun(&db, 200);
    for i in 0..199 {
        let (events, outputs) = turn(i);
        writer.commit(&run, &events, &outputs).unwrap();
    }
    let reader = baton_store::SqliteStore::open_readonly(&db.path()).unwrap();
    for store in [&writer, &reader] {
        std::thread::scope(|scope| {
            // More threads than the store opens spare connections: the rest wait their turn.
            let readers: Vec<_> = (0..6)
                .map(|_| {
                    scope.spawn(|| {
                        (0..20)
                            .map(|_| store.tasks(&run).unwrap().len())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let attempts: Vec<usize> = (0..20)
                .map(|_| store.run_attempts(&run).unwrap().len())
                .collect();
            assert_eq!(attempts, [200; 20]);
            for tasks in readers {
                assert_eq!(tasks.join().unwrap(), [200; 20]);
            }
        });
    }
    // The spare connections close before the store's own: the last to close still removes the
    // WAL.
    drop(reader);
    drop(writer);
    let mut wal = db.path().into_os_string();
    wal.push("-wal");
    assert!(!std::path::Path::new(&wal).exists());
}
