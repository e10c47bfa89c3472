//! Each kind of event lands in the tables as documented, in one transaction per turn.

use baton_model::{EventKind, Outcome, RunState, TaskState};
use baton_store::StoreError;
use baton_store::{RunLog, RunReader};

use crate::support::*;

#[test]
fn a_new_run_has_every_task_pending_in_graph_order() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["b", "a", "c"])).unwrap();
    let run = run_id("r1");

    let record = store.run(&run).unwrap().unwrap();
    assert_eq!(record.status, RunState::Running);
    assert_eq!(record.task_count, 3);
    assert_eq!(record.concurrency, 4);
    assert_eq!(record.driver, None);
    let tasks = store.tasks(&run).unwrap();
    let ids: Vec<&str> = tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(ids, ["b", "a", "c"]);
    assert!(
        tasks
            .iter()
            .all(|t| t.status == TaskState::Pending && t.attempts == 0)
    );
    assert_eq!(store.graph_json(&run).unwrap().unwrap(), r#"{"tasks":[]}"#);
    assert_eq!(store.graph_json(&run_id("nope")).unwrap(), None);
    assert_eq!(store.run(&run_id("nope")).unwrap(), None);
    assert_eq!(store.last_seq(&run).unwrap(), 0);
    assert_consistent(&store, &run);
}

#[test]
fn a_run_id_cannot_be_created_twice() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let err = store.create_run(&new_run("r1", &["a"])).unwrap_err();
    assert!(
        matches!(err, StoreError::RunExists(ref id) if id.as_str() == "r1"),
        "{err:?}"
    );
}

#[test]
fn retry_then_success() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");

    let run_started = event(
        1_000,
        EventKind::RunStarted {
            name: "g".into(),
            tasks: 1,
            concurrency: 4,
        },
    );
    store
        .commit(&run, &[run_started, started(1_100, "a", 1)], &[])
        .unwrap();
    let a = &store.tasks(&run).unwrap()[0];
    assert_eq!(
        (a.status, a.attempts, a.started_at_ms),
        (TaskState::Running, 1, Some(1_100))
    );

    let retry = event(
        1_200,
        EventKind::RetryScheduled {
            task: task("a"),
            attempt: 2,
            delay_ms: 500,
        },
    );
    store
        .commit(
            &run,
            &[finished(1_200, "a", 1, Outcome::Exited { code: 3 }), retry],
            &[output("a", 1, "first try")],
        )
        .unwrap();
    let a = &store.tasks(&run).unwrap()[0];
    assert_eq!(a.status, TaskState::Pending);
    assert_eq!((a.next_attempt, a.retry_at_ms), (Some(2), Some(1_700)));
    assert_eq!(
        (a.exit_code, a.output.as_deref()),
        (Some(3), Some("first try"))
    );
    assert_consistent(&store, &run);

    store.commit(&run, &[started(1_700, "a", 2)], &[]).unwrap();
    let a = &store.tasks(&run).unwrap()[0];
    assert_eq!((a.status, a.attempts), (TaskState::Running, 2));
    assert_eq!(
        (a.next_attempt, a.retry_at_ms, a.exit_code),
        (None, None, None)
    );
    assert_eq!(
        a.started_at_ms,
        Some(1_100),
        "a task starts with its first attempt"
    );

    let seqs = store
        .commit(
            &run,
            &[
                finished(1_800, "a", 2, Outcome::Exited { code: 0 }),
                task_finished(1_800, "a", TaskState::Succeeded, None),
                event(
                    1_801,
                    EventKind::RunFinished {
                        state: RunState::Succeeded,
                    },
                ),
            ],
            &[output("a", 2, "done")],
        )
        .unwrap();
    assert_eq!(seqs, [6, 7, 8]);

    let a = &store.tasks(&run).unwrap()[0];
    assert_eq!(a.status, TaskState::Succeeded);
    assert_eq!(
        (a.attempts, a.exit_code, a.ended_at_ms),
        (2, Some(0), Some(1_800))
    );
    assert_eq!(
        (a.output_attempt, a.output.as_deref()),
        (Some(2), Some("done"))
    );
    let attempts = store.attempts(&run, &task("a")).unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].outcome, Some(Outcome::Exited { code: 3 }));
    assert_eq!(attempts[0].output.as_deref(), Some("first try"));
    assert_eq!(attempts[0].log_path.as_deref(), Some("logs/a.1.log"));
    assert_eq!(
        (attempts[0].started_at_ms, attempts[0].ended_at_ms),
        (1_100, Some(1_200))
    );
    assert_eq!(attempts[0].pid, Some(1001));
    assert_eq!(attempts[1].outcome, Some(Outcome::Exited { code: 0 }));
    assert_eq!(attempts[1].duration_ms, Some(10));
    assert!(store.open_attempts(&run).unwrap().is_empty());
    let record = store.run(&run).unwrap().unwrap();
    assert_eq!(
        (record.status, record.ended_at_ms),
        (RunState::Succeeded, Some(1_801))
    );
    assert_consistent(&store, &run);
}

#[test]
fn failure_blocks_dependents_and_the_run() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a", "b", "c"])).unwrap();
    let run = run_id("r1");
    store
        .commit(&run, &[started(1, "a", 1), started(1, "c", 1)], &[])
        .unwrap();
    assert_eq!(store.open_attempts(&run).unwrap().len(), 2);
    store
        .commit(
            &run,
            &[
                finished(2, "a", 1, Outcome::signaled(9)),
                task_finished(2, "a", TaskState::Failed, Some("signal 9 (SIGKILL)")),
                task_finished(2, "b", TaskState::Blocked, Some("a failed")),
                event(
                    3,
                    EventKind::RunStopping {
                        reason: "a failed".into(),
                        cause: Some(baton_model::StopCause::TaskFailed),
                    },
                ),
                finished(4, "c", 1, Outcome::Cancelled),
                task_finished(4, "c", TaskState::Cancelled, None),
                event(
                    5,
                    EventKind::RunFinished {
                        state: RunState::Blocked,
                    },
                ),
            ],
            &[],
        )
        .unwrap();

    let tasks = store.tasks(&run).unwrap();
    assert_eq!(tasks[0].status, TaskState::Failed);
    assert_eq!(tasks[0].exit_code, None, "a signal is not an exit code");
    assert_eq!(tasks[0].reason.as_deref(), Some("signal 9 (SIGKILL)"));
    assert_eq!(
        (tasks[1].status, tasks[1].attempts),
        (TaskState::Blocked, 0)
    );
    assert_eq!(tasks[1].reason.as_deref(), Some("a failed"));
    assert_eq!(tasks[2].status, TaskState::Cancelled);

    let summary = &store.runs(10).unwrap()[0];
    assert_eq!(summary.run.status, RunState::Blocked);
    assert_eq!(
        summary.run.stop,
        Some(baton_model::Stop {
            cause: baton_model::StopCause::TaskFailed,
            reason: "a failed".into()
        })
    );
    assert_eq!(
        (
            summary.count(TaskState::Failed),
            summary.count(TaskState::Blocked),
            summary.count(TaskState::Cancelled),
            summary.count(TaskState::Succeeded)
        ),
        (1, 1, 1, 0)
    );
    assert_consistent(&store, &run);
}

#[test]
fn seq_is_dense_per_run_and_events_page_in_order() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a", "b"])).unwrap();
    store.create_run(&new_run("r2", &["a"])).unwrap();
    let (r1, r2) = (run_id("r1"), run_id("r2"));

    assert_eq!(store.commit(&r1, &[started(1, "a", 1)], &[]).unwrap(), [1]);
    assert_eq!(store.commit(&r2, &[started(1, "a", 1)], &[]).unwrap(), [1]);
    assert_eq!(
        store
            .commit(
                &r1,
                &[started(2, "b", 1), finished(3, "a", 1, Outcome::TimedOut)],
                &[]
            )
            .unwrap(),
        [2, 3]
    );
    assert_eq!(store.commit(&r1, &[], &[]).unwrap(), Vec::<u64>::new());
    assert_eq!(store.last_seq(&r1).unwrap(), 3);

    let all = store.events(&r1, 0, 100).unwrap();
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(all[2].at_ms, 3);
    assert!(matches!(
        all[2].kind,
        EventKind::AttemptFinished {
            outcome: Outcome::TimedOut,
            ..
        }
    ));
    let page = store.events(&r1, 1, 1).unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [2]);
    assert!(store.events(&r1, 3, 100).unwrap().is_empty());
}

#[test]
fn a_turn_with_a_bad_event_is_not_recorded_at_all() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");

    let err = store
        .commit(&run, &[started(1, "a", 1), started(1, "ghost", 1)], &[])
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownTask { ref task, .. } if task.as_str() == "ghost"));
    let err = store
        .commit(&run, &[finished(1, "a", 1, Outcome::TimedOut)], &[])
        .unwrap_err();
    assert!(
        matches!(err, StoreError::UnknownAttempt { attempt: 1, .. }),
        "{err:?}"
    );
    let err = store
        .commit(&run, &[started(1, "a", 1)], &[output("a", 2, "x")])
        .unwrap_err();
    assert!(
        matches!(err, StoreError::UnknownAttempt { attempt: 2, .. }),
        "{err:?}"
    );
    let err = store
        .commit(&run_id("r9"), &[started(1, "a", 1)], &[])
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownRun(_)), "{err:?}");

    assert_eq!(store.last_seq(&run).unwrap(), 0);
    assert_eq!(store.tasks(&run).unwrap()[0].status, TaskState::Pending);
    assert!(store.attempts(&run, &task("a")).unwrap().is_empty());

    store.commit(&run, &[started(1, "a", 1)], &[]).unwrap();
    let err = store.commit(&run, &[started(2, "a", 1)], &[]).unwrap_err();
    assert!(
        matches!(err, StoreError::AttemptExists { attempt: 1, .. }),
        "{err:?}"
    );
    assert_eq!(store.last_seq(&run).unwrap(), 1);
    assert_consistent(&store, &run);
}

/// `commit` applies an attempt's end, its output and its task's end together when a turn holds
/// all three; the tables must come out as if each event, then each output, were committed alone.
#[test]
fn a_turn_lands_as_its_events_and_outputs_would_one_at_a_time() {
    let tasks = ["a", "b", "c", "d", "e", "f"];
    let before = [started(1, "c", 1), started(2, "c", 2)];
    let before_outputs = [output("c", 2, "c's second")];
    let retry = |at, id: &str, attempt| {
        event(
            at,
            EventKind::RetryScheduled {
                task: task(id),
                attempt,
                delay_ms: 50,
            },
        )
    };
    let ok = Outcome::Exited { code: 0 };
    let turn = [
        started(3, "a", 1),
        started(3, "b", 1),
        started(3, "d", 1),
        started(3, "e", 1),
        started(3, "f", 1),
        // Something about another task between an attempt's end and its task's end.
        finished(4, "a", 1, ok.clone()),
        started(4, "d", 2),
        task_finished(5, "a", TaskState::Succeeded, None),
        // An end followed by a retry, then the retry's end.
        finished(6, "b", 1, Outcome::Exited { code: 1 }),
        retry(6, "b", 2),
        started(7, "b", 2),
        finished(8, "b", 2, ok.clone()),
        task_finished(8, "b", TaskState::Succeeded, None),
        // An attempt that is not the latest: its exit code and output are not the task's.
        finished(9, "c", 1, Outcome::Exited { code: 3 }),
        task_finished(9, "c", TaskState::Failed, Some("exit code 3")),
        // An end without an output.
        finished(10, "d", 2, Outcome::TimedOut),
        task_finished(10, "d", TaskState::Failed, Some("timed out")),
        // Two outputs of one attempt: the second wins.
        finished(11, "e", 1, ok.clone()),
        task_finished(11, "e", TaskState::Succeeded, None),
        // An end whose next event about the task is not the task's end.
        finished(12, "f", 1, Outcome::Exited { code: 1 }),
        started(12, "f", 2),
        task_finished(13, "f", TaskState::Cancelled, Some("stopped")),
        event(
            14,
            EventKind::RunFinished {
                state: RunState::Failed,
            },
        ),
    ];
    let outputs = [
        output("e", 1, "e's first"),
        output("b", 2, "b's second"),
        output("a", 1, "a's"),
        output("c", 1, "c's first"),
        output("b", 1, "b's first"),
        output("e", 1, "e's second"),
        output("f", 1, "f's"),
    ];

    let batched = Db::new();
    let batched_store = batched.open();
    let one_by_one = Db::new();
    let one_by_one_store = one_by_one.open();
    let run = run_id("r1");
    for store in [&batched_store, &one_by_one_store] {
        store.create_run(&new_run("r1", &tasks)).unwrap();
        store.commit(&run, &before, &before_outputs).unwrap();
    }
    batched_store.commit(&run, &turn, &outputs).unwrap();
    for event in &turn {
        one_by_one_store
            .commit(&run, std::slice::from_ref(event), &[])
            .unwrap();
    }
    for output in &outputs {
        one_by_one_store
            .commit(&run, &[], std::slice::from_ref(output))
            .unwrap();
    }

    let got = batched_store.tasks(&run).unwrap();
    assert_eq!(got, one_by_one_store.tasks(&run).unwrap());
    assert_eq!(
        batched_store.run_attempts(&run).unwrap(),
        one_by_one_store.run_attempts(&run).unwrap()
    );
    assert_eq!(
        batched_store.runs(1).unwrap(),
        one_by_one_store.runs(1).unwrap()
    );
    assert_consistent(&batched_store, &run);
    // The cases above are the ones meant.
    let by_id = |id: &str| got.iter().find(|t| t.task.as_str() == id).unwrap();
    assert_eq!(by_id("c").exit_code, None);
    assert_eq!(by_id("c").output.as_deref(), Some("c's second"));
    assert_eq!(by_id("e").output.as_deref(), Some("e's second"));
    assert_eq!(by_id("b").output.as_deref(), Some("b's second"));
    assert_eq!(by_id("d").output, None);
}

#[test]
fn a_late_output_of_an_earlier_attempt_does_not_replace_the_latest() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    store
        .commit(&run, &[started(1, "a", 1), started(2, "a", 2)], &[])
        .unwrap();
    store
        .commit(&run, &[], &[output("a", 2, "second")])
        .unwrap();
    store.commit(&run, &[], &[output("a", 1, "first")]).unwrap();

    let a = &store.tasks(&run).unwrap()[0];
    assert_eq!(
        (a.output_attempt, a.output.as_deref()),
        (Some(2), Some("second"))
    );
    let attempts = store.attempts(&run, &task("a")).unwrap();
    assert_eq!(attempts[0].output.as_deref(), Some("first"));
    assert_consistent(&store, &run);
}

#[test]
fn runs_are_listed_newest_first() {
    let db = Db::new();
    let store = db.open();
    for (id, at) in [("r1", 10), ("r3", 30), ("r2", 20)] {
        let mut run = new_run(id, &["a"]);
        run.started_at_ms = at;
        store.create_run(&run).unwrap();
    }
    let ids: Vec<String> = store
        .runs(10)
        .unwrap()
        .into_iter()
        .map(|s| s.run.id.to_string())
        .collect();
    assert_eq!(ids, ["r3", "r2", "r1"]);
    assert_eq!(store.runs(1).unwrap().len(), 1);
    assert_eq!(store.runs(10).unwrap()[0].count(TaskState::Pending), 1);
    assert_eq!(store.latest_run().unwrap().unwrap().id.as_str(), "r3");
}

#[test]
fn the_event_log_cannot_be_rewritten() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let waiting = event(1, EventKind::TaskWaiting { task: task("a") });
    store
        .commit(&run_id("r1"), &[waiting, started(1, "a", 1)], &[])
        .unwrap();
    let conn = rusqlite::Connection::open(db.path()).unwrap();
    for update in [
        "UPDATE events SET at_ms = 5",
        "UPDATE event_batches SET events = ''",
    ] {
        let err = conn.execute(update, []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{update}: {err}");
    }
}

/// The events every attempt writes are stored a commit's at a time, the others a row each
/// (schema version 13); the log reads as one, in order, however the two interleave, a page at
/// a time or by kind.
#[test]
fn rows_and_batches_read_as_one_log() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a", "b"])).unwrap();
    let run = run_id("r1");
    let waiting = |task_id: &str| {
        event(
            1,
            EventKind::TaskWaiting {
                task: task(task_id),
            },
        )
    };
    store
        .commit(
            &run,
            &[
                waiting("a"),
                started(2, "a", 1),
                waiting("b"),
                started(3, "b", 1),
            ],
            &[],
        )
        .unwrap();
    store
        .commit(
            &run,
            &[
                finished(4, "a", 1, Outcome::Exited { code: 0 }),
                task_finished(4, "a", TaskState::Succeeded, None),
                waiting("a"),
            ],
            &[],
        )
        .unwrap();
    let conn = rusqlite::Connection::open(db.path()).unwrap();
    let count = |table: &str| -> i64 {
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .unwrap()
    };
    assert_eq!((count("events"), count("event_batches")), (3, 2));

    let seqs = |events: Vec<baton_model::Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.events(&run, 0, 100).unwrap()),
        [1, 2, 3, 4, 5, 6, 7]
    );
    for after in 0..7 {
        for limit in 1..4 {
            let expected: Vec<u64> = (after + 1..=7).take(limit as usize).collect();
            assert_eq!(seqs(store.events(&run, after, limit).unwrap()), expected);
        }
    }
    use baton_model::EventName::{AttemptStarted, RunFinished, TaskFinished, TaskWaiting};
    let of = |kind| seqs(store.events_of_kind(&run, kind).unwrap());
    let last = |kind| store.last_event_of_kind(&run, kind).unwrap().map(|e| e.seq);
    assert_eq!(of(AttemptStarted), [2, 4]);
    assert_eq!(of(TaskWaiting), [1, 3, 7]);
    assert_eq!(of(TaskFinished), [6]);
    assert_eq!(of(RunFinished), Vec::<u64>::new());
    assert_eq!(last(AttemptStarted), Some(4));
    assert_eq!(last(TaskWaiting), Some(7));
    assert_eq!(last(RunFinished), None);
    assert_eq!(store.last_seq(&run).unwrap(), 7);
    assert_consistent(&store, &run);

    // Deleting the run takes its batches with it.
    assert!(
        store
            .delete_run(&run, 0, &|_| baton_store::Liveness::Dead)
            .unwrap()
    );
    assert_eq!((count("events"), count("event_batches")), (0, 0));
}

/// A short task's attempt whose row is somehow there already (its task's row says it is not):
/// the turn fails whole, naming the attempt, among many short tasks or few.
#[test]
fn a_short_tasks_attempt_found_there_already_fails_its_turn() {
    for n in [100, 5] {
        let db = Db::new();
        let store = db.open();
        store.create_run(&new_numbered_run("r1", n)).unwrap();
        let run = run_id("r1");
        let conn = rusqlite::Connection::open(db.path()).unwrap();
        conn.execute(
            "INSERT INTO attempts (run_id, task_idx, task_id, attempt, started_at_ms) \
             VALUES ('r1', 3, 't3', 1, 0)",
            [],
        )
        .unwrap();
        let turn: Vec<_> = numbered(n)
            .iter()
            .flat_map(|id| {
                [
                    started(1, id, 1),
                    finished(2, id, 1, Outcome::Exited { code: 0 }),
                    task_finished(2, id, TaskState::Succeeded, None),
                ]
            })
            .collect();
        let err = store.commit(&run, &turn, &[]).unwrap_err();
        assert!(
            matches!(&err, StoreError::AttemptExists { task, attempt: 1, .. } if task.as_str() == "t3"),
            "{n}: {err:?}"
        );
        assert_eq!(store.last_seq(&run).unwrap(), 0, "{n}");
        assert!(
            store
                .tasks(&run)
                .unwrap()
                .iter()
                .all(|t| t.status == TaskState::Pending),
            "{n}"
        );
    }
}

/// A batch whose text is not lines of events is an error that says so, not a log cut short.
#[test]
fn a_damaged_batch_is_an_error() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    store.commit(&run, &[started(1, "a", 1)], &[]).unwrap();
    let conn = rusqlite::Connection::open(db.path()).unwrap();
    conn.execute_batch(
        "DELETE FROM event_batches;
         INSERT INTO event_batches (run_id, last_seq, first_seq, events)
         VALUES ('r1', 1, 1, 'not an event');",
    )
    .unwrap();
    let err = store.events(&run, 0, 10).unwrap_err();
    assert!(
        matches!(err, StoreError::BadEventBatch { last_seq: 1, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("stored damaged"), "{err}");
    assert!(store.check_consistency(&run).is_err());
}

#[test]
fn the_consistency_check_finds_a_table_that_disagrees_with_the_log() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a", "b"])).unwrap();
    let run = run_id("r1");
    store
        .commit(
            &run,
            &[
                started(1, "a", 1),
                finished(2, "a", 1, Outcome::Exited { code: 0 }),
                task_finished(2, "a", TaskState::Succeeded, None),
            ],
            &[output("a", 1, "ok")],
        )
        .unwrap();
    assert_consistent(&store, &run);

    let conn = rusqlite::Connection::open(db.path()).unwrap();
    conn.execute_batch(
        "UPDATE tasks SET status = 'running' WHERE task_id = 'a';
         INSERT INTO attempts (run_id, task_idx, task_id, attempt, started_at_ms) VALUES ('r1', 1, 'b', 1, 5);
         INSERT INTO task_counts (run_id, status, n) VALUES ('r1', 'pending', 7);",
    )
    .unwrap();
    // Event 2 taken out of its batch (which cannot be updated: it is made again without it),
    // and a kind looked up by kind put in one.
    let text: String = conn
        .query_row("SELECT events FROM event_batches", [], |row| row.get(0))
        .unwrap();
    let without_2: String = text
        .lines()
        .filter(|line| !line.starts_with("2\t"))
        .map(|line| format!("{line}\n"))
        .collect();
    let waiting = "4\t9\ttask-waiting\t{\"kind\":\"task-waiting\",\"task\":\"b\"}\n";
    conn.execute("DELETE FROM event_batches", []).unwrap();
    conn.execute(
        "INSERT INTO event_batches (run_id, last_seq, first_seq, events) VALUES ('r1', 4, 1, ?1)",
        [format!("{without_2}{waiting}")],
    )
    .unwrap();
    // And a batch whose bounds are not its lines'.
    conn.execute(
        "INSERT INTO event_batches (run_id, last_seq, first_seq, events) VALUES ('r1', 10, 9, ?1)",
        ["12\t9\ttask-waiting\t{\"kind\":\"task-waiting\",\"task\":\"b\"}\n"],
    )
    .unwrap();
    let problems = store.check_consistency(&run).unwrap();
    let text = problems.join("\n");
    assert!(text.contains("event 3 follows event 1"), "{text}");
    assert!(text.contains("task a: the table has"), "{text}");
    assert!(
        text.contains("attempt 1 of b has no attempt-started event"),
        "{text}"
    );
    assert!(text.contains("attempt 1 of a: the table has"), "{text}");
    assert!(text.contains("task counts: the table has"), "{text}");
    assert!(
        text.contains("event 4 (task-waiting) is in a batch"),
        "{text}"
    );
    assert!(
        text.contains("the batch of events 9 to 10 holds events 12 to 12"),
        "{text}"
    );
}

#[test]
fn a_runs_tasks_are_counted_while_it_goes_on_and_kept_counted_once_it_finishes() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a", "b"])).unwrap();
    let run = run_id("r1");
    let conn = rusqlite::Connection::open(db.path()).unwrap();
    let kept = || -> i64 {
        conn.query_row(
            "SELECT COUNT(*) FROM task_counts WHERE run_id = 'r1'",
            [],
            |row| row.get(0),
        )
        .unwrap()
    };
    let counts = || {
        let summary = store.runs(1).unwrap().remove(0);
        (
            summary.count(TaskState::Pending),
            summary.count(TaskState::Running),
            summary.count(TaskState::Succeeded),
        )
    };
    assert_eq!(counts(), (2, 0, 0));

    store.commit(&run, &[started(1, "a", 1)], &[]).unwrap();
    assert_eq!(counts(), (1, 1, 0));
    store
        .commit(
            &run,
            &[
                finished(2, "a", 1, Outcome::Exited { code: 0 }),
                task_finished(2, "a", TaskState::Succeeded, None),
            ],
            &[],
        )
        .unwrap();
    assert_eq!(counts(), (1, 0, 1));
    assert_eq!(kept(), 0, "a run going on is counted when read");

    let finish = event(
        3,
        EventKind::RunFinished {
            state: RunState::Failed,
        },
    );
    store.commit(&run, &[finish], &[]).unwrap();
    assert_eq!(kept(), 2, "pending and succeeded, kept");
    assert_eq!(counts(), (1, 0, 1));
    assert_consistent(&store, &run);

    // Resumed: the kept counts go with its next turn.
    let resumed = event(
        4,
        EventKind::RunResumed {
            retry: false,
            worker: None,
        },
    );
    store
        .commit(&run, &[resumed, started(5, "b", 1)], &[])
        .unwrap();
    assert_eq!(kept(), 0);
    assert_eq!(counts(), (0, 1, 1));
    assert_consistent(&store, &run);
}

#[test]
fn a_run_of_100_000_tasks_is_created_quickly() {
    let db = Db::new();
    let store = db.open();
    let run = new_numbered_run("big", 100_000);
    let start = std::time::Instant::now();
    store.create_run(&run).unwrap();
    let elapsed = start.elapsed();
    eprintln!("create_run of 100,000 tasks: {elapsed:?}");
    assert_eq!(store.tasks(&run.id).unwrap().len(), 100_000);
    // Generous for an unoptimized build on a busy machine; the point is no per-task transaction.
    assert!(elapsed.as_secs() < 10, "{elapsed:?}");
}
