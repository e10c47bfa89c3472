//! Another process's connection coming and going beside this process's. SQLite's locks are POSIX
//! locks: held per process, and all of them dropped when the process closes any descriptor of the
//! file. A store that opened the database file outside SQLite while the process held connections
//! to it (to make sure it exists) left them unlocked; another process closing its connection then
//! took itself for the last, checkpointed and removed the WAL the first was reading, which died
//! with SQLITE_IOERR_SHORT_READ (a run waiting for approval lost its driver when `baton approve`
//! wrote).
//!
//! The other process is this test binary itself, re-run with `LOCKS_DB` set so that only
//! [`other_process_writes_and_closes`] does anything.

use std::process::Command;

use baton_model::{Outcome, TaskState};
use baton_store::{RunLog, RunReader, SqliteStore};

use crate::support::*;

/// Not a test on its own: the other process of
/// [`a_process_opening_its_database_again_keeps_its_locks_while_another_writes_and_closes`].
#[test]
fn other_process_writes_and_closes() {
    let Some(path) = std::env::var_os("LOCKS_DB") else {
        return;
    };
    let store = SqliteStore::open(path.as_ref()).unwrap();
    store
        .commit(
            &run_id("r"),
            &[finished(2, "a", 1, Outcome::Exited { code: 0 })],
            &[],
        )
        .unwrap();
}

#[test]
fn a_process_opening_its_database_again_keeps_its_locks_while_another_writes_and_closes() {
    let db = Db::new();
    let first = db.open();
    first.create_run(&new_run("r", &["a", "b"])).unwrap();
    let run = run_id("r");
    first.commit(&run, &[started(1, "a", 1)], &[]).unwrap();
    // Every way this process opens the database again while it holds it: a run's recorder, a
    // second store (the dashboard, a worker, a command opening its own), a reader.
    let recorder = first.open_another().unwrap();
    let again = db.open();
    let reader = SqliteStore::open_readonly(&db.path()).unwrap();

    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "locks::other_process_writes_and_closes",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LOCKS_DB", db.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut wal = db.path().into_os_string();
    wal.push("-wal");
    assert!(
        std::path::Path::new(&wal).exists(),
        "the other process, closing, took itself for the database's last connection and \
         removed the WAL this one holds"
    );
    recorder
        .commit(
            &run,
            &[task_finished(3, "a", TaskState::Succeeded, None)],
            &[],
        )
        .unwrap();
    for store in [&first, &recorder, &again, &reader] {
        assert_eq!(store.last_seq(&run).unwrap(), 3);
    }
}
