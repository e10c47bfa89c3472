//! SIGKILL in the middle of committing: the database must open afterwards with every turn that
//! was reported committed present, and no turn present in part.
//!
//! The writer is this test binary itself, re-run with `CRASH_DB` set so that only
//! [`crash_writer`] does anything.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use baton_model::{EventKind, Outcome, TaskState};
use baton_store::SqliteStore;
use baton_store::{RunLog, RunReader};

use crate::support::*;

const TASKS: usize = 10_000;
/// `run-started` and the first `attempt-started`, before any turn.
const PROLOGUE: u64 = 2;
const EVENTS_PER_TURN: u64 = 3;

/// Not a test on its own: the child process of [`sigkill_mid_commit_leaves_only_whole_turns`].
/// Resumes where the last child was killed and commits turns until it is killed in turn,
/// printing the last `seq` of each turn once `commit` has returned.
#[test]
fn crash_writer() {
    let Some(path) = std::env::var_os("CRASH_DB") else {
        return;
    };
    let store = SqliteStore::open(path.as_ref()).unwrap();
    let run = run_id("crash");
    let done = store.last_seq(&run).unwrap() - PROLOGUE;
    assert_eq!(done % EVENTS_PER_TURN, 0, "a turn was recorded in part");
    let mut stdout = std::io::stdout().lock();
    for i in (done / EVENTS_PER_TURN) as usize..TASKS - 1 {
        let (this, next) = (format!("t{i}"), format!("t{}", i + 1));
        let events = [
            finished(i as i64, &this, 1, Outcome::Exited { code: 0 }),
            task_finished(i as i64, &this, TaskState::Succeeded, None),
            started(i as i64, &next, 1),
        ];
        let outputs = [output(&this, 1, &"output ".repeat(20))];
        let seqs = store.commit(&run, &events, &outputs).unwrap();
        writeln!(stdout, "committed {}", seqs.last().unwrap()).unwrap();
        stdout.flush().unwrap();
    }
}

#[test]
fn sigkill_mid_commit_leaves_only_whole_turns() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_numbered_run("crash", TASKS)).unwrap();
    let run = run_id("crash");
    let run_started = event(
        0,
        EventKind::RunStarted {
            name: "crash".into(),
            tasks: TASKS as u32,
            concurrency: 1,
        },
    );
    store
        .commit(&run, &[run_started, started(0, "t0", 1)], &[])
        .unwrap();
    drop(store);

    let exe = std::env::current_exe().unwrap();
    let mut previous = PROLOGUE;
    for round in 0..8u64 {
        let mut child = Command::new(&exe)
            .args([
                "crash::crash_writer",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CRASH_DB", db.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Wait for a few commits so the kill lands mid-stream, at a point that varies by round.
        let wanted = 20 + round * 37;
        let mut reported = previous;
        let mut seen = 0;
        while seen < wanted {
            let line = lines
                .next()
                .expect("the writer stopped before it was killed");
            if let Some(seq) = committed(&line.unwrap()) {
                reported = seq;
                seen += 1;
            }
        }
        std::thread::sleep(Duration::from_micros(300 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        // Lines written before the kill were committed before they were written.
        for line in lines {
            if let Some(seq) = committed(&line.unwrap()) {
                reported = seq;
            }
        }

        let store = SqliteStore::open(&db.path()).unwrap();
        let last = store.last_seq(&run).unwrap();
        assert!(
            last >= reported,
            "round {round}: {reported} was committed, {last} is stored"
        );
        assert_eq!(
            (last - PROLOGUE) % EVENTS_PER_TURN,
            0,
            "round {round}: half a turn"
        );
        assert_consistent(&store, &run);
        let succeeded = ((last - PROLOGUE) / EVENTS_PER_TURN) as usize;
        let tasks = store.tasks(&run).unwrap();
        assert!(
            tasks[..succeeded]
                .iter()
                .all(|t| t.status == TaskState::Succeeded)
        );
        assert!(
            tasks[..succeeded]
                .iter()
                .all(|t| t.output_attempt == Some(1))
        );
        assert_eq!(tasks[succeeded].status, TaskState::Running);
        assert!(
            tasks[succeeded + 1..]
                .iter()
                .all(|t| t.status == TaskState::Pending)
        );
        eprintln!("round {round}: killed after seq {reported}, {last} stored");
        assert!(last > previous, "round {round}: no progress");
        previous = last;
    }
}

/// The `seq` in a line the writer printed; the test harness prints lines of its own around them.
fn committed(line: &str) -> Option<u64> {
    let (_, seq) = line.split_once("committed ")?;
    Some(seq.trim().parse().unwrap())
}
