//! What every store backend must do, written against the traits ([`RunLog`], [`RunReader`])
//! and run against each backend, SQLite and PostgreSQL (see the `backends` at the end). A
//! backend is a [`Database`]: handles opened on it behave like separate processes.

use std::time::Duration;

use baton_model::{AgentUsage, EventKind, Outcome, RunState, TaskState};
use baton_store::{Driver, LEASE_TERM, Lease, Liveness, SqliteStore, Store, StoreError};

use crate::support::*;

/// One database of a backend, fresh for each test.
pub(crate) trait Database: Sync {
    /// A new handle on it for reading and writing, as another process would open one.
    fn open(&self) -> Box<dyn Store>;
    /// A handle that only reads.
    fn reader(&self) -> Box<dyn Store>;
}

fn driver(pid: u32, host: &str) -> Driver {
    Driver {
        pid,
        start_time: u64::from(pid) * 100,
        host: host.into(),
    }
}

/// What the caller of a claim can tell: driver `alive` is alive; others on `box` are dead;
/// those elsewhere cannot be seen.
fn seen(alive: u32) -> impl Fn(&Driver) -> Liveness {
    move |d| match (d.host.as_str(), d.pid == alive) {
        ("box", true) => Liveness::Alive,
        ("box", false) => Liveness::Dead,
        _ => Liveness::Unknown,
    }
}

const T0: i64 = 1_000_000;

/// `r1` of tasks `a` and `b`, held by driver 1 on `box`.
fn held(store: &dyn Store) -> Lease {
    store.create_run(&new_run("r1", &["a", "b"])).unwrap();
    claimed(store, &run_id("r1"))
}

/// `run`, claimed by driver 1 on `box`.
fn claimed(store: &dyn Store, run: &baton_model::RunId) -> Lease {
    store
        .claim(run, &driver(1, "box"), T0, LEASE_TERM, &seen(1))
        .unwrap()
        .lease
}

/// The run's tasks in order, each as `id:state`.
fn states(store: &dyn Store, run: &baton_model::RunId) -> Vec<String> {
    store
        .tasks(run)
        .unwrap()
        .iter()
        .map(|t| format!("{}:{}", t.task, t.status.as_str()))
        .collect()
}

pub(crate) fn a_new_run_has_its_tasks_pending_in_graph_order(db: &dyn Database) {
    let store = db.open();
    store.create_run(&new_run("r1", &["b", "a"])).unwrap();
    let run = run_id("r1");
    let record = store.run(&run).unwrap().unwrap();
    assert_eq!(record.status, RunState::Running);
    assert_eq!((record.task_count, record.concurrency), (2, 4));
    assert_eq!(record.driver, None);
    let tasks = store.tasks(&run).unwrap();
    let ids: Vec<&str> = tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    assert!(
        tasks
            .iter()
            .all(|t| t.status == TaskState::Pending && t.attempts == 0)
    );
    assert_eq!(
        store.graph_json(&run).unwrap().as_deref(),
        Some(r#"{"tasks":[]}"#)
    );
    let summaries = store.runs(10).unwrap();
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].count(TaskState::Pending), 2);
    assert_eq!(store.latest_run().unwrap().unwrap().id, run);
    let again = store.create_run(&new_run("r1", &["a"])).unwrap_err();
    assert!(matches!(again, StoreError::RunExists(_)), "{again:?}");
    assert_eq!(store.run(&run_id("r9")).unwrap(), None);
}

/// A graph written in many small pieces, long enough to span several parts of a SQLite row
/// (1 MiB each) and with characters of two bytes, so that a part ends inside one.
#[derive(Debug)]
struct Pieces(String);

impl baton_store::GraphJson for Pieces {
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        for piece in self.0.as_bytes().chunks(1000) {
            out.write_all(piece)?;
        }
        Ok(())
    }
}

pub(crate) fn a_large_graph_comes_back_whole(db: &dyn Database) {
    let store = db.open();
    let name = "καλά".repeat(350_000);
    let json = format!(r#"{{"name":"{name}","tasks":[]}}"#);
    assert!(json.len() > 2 * 1024 * 1024 + 1);
    let graph = Pieces(json);
    let mut new = new_run("r1", &["a"]);
    new.graph = &graph;
    store.create_run(&new).unwrap();
    let back = store.graph_json(&run_id("r1")).unwrap().unwrap();
    assert!(
        back == graph.0,
        "{} bytes back of {}",
        back.len(),
        graph.0.len()
    );
}

/// A graph whose JSON fails after more than a part was written.
#[derive(Debug)]
struct Unwritable;

impl baton_store::GraphJson for Unwritable {
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(&vec![b' '; 3 * 1024 * 1024 / 2])?;
        Err(std::io::Error::other("no more"))
    }
}

/// A run whose graph cannot be written is not created at all, and the store goes on.
pub(crate) fn a_graph_that_cannot_be_written_leaves_no_run(db: &dyn Database) {
    let store = db.open();
    let mut new = new_run("r1", &["a", "b"]);
    new.graph = &Unwritable;
    let err = store.create_run(&new).unwrap_err();
    assert!(err.to_string().contains("graph"), "{err}");
    assert_eq!(store.run(&run_id("r1")).unwrap(), None);
    assert_eq!(store.graph_json(&run_id("r1")).unwrap(), None);
    store.create_run(&new_run("r1", &["a", "b"])).unwrap();
    assert_eq!(store.tasks(&run_id("r1")).unwrap().len(), 2);
}

pub(crate) fn a_planners_tasks_join_the_run_after_the_others(db: &dyn Database) {
    let store = db.open();
    let lease = held(store.as_ref());
    let run = run_id("r1");
    let expanded = EventKind::GraphExpanded {
        task: task("a"),
        attempt: 1,
        added: vec![task("a/x"), task("a/y")],
        tasks: serde_json::json!([{"id": "a/x"}, {"id": "a/y"}]),
        replaces: Vec::new(),
    };
    store
        .record(
            &run,
            lease,
            &[
                started(1_100, "a", 1),
                event(1_200, expanded.clone()),
                finished(1_200, "a", 1, Outcome::Exited { code: 0 }),
                task_finished(1_200, "a", TaskState::Succeeded, None),
                started(1_300, "a/x", 1),
            ],
            &[],
        )
        .unwrap();
    assert_eq!(
        states(store.as_ref(), &run),
        ["a:succeeded", "b:pending", "a/x:running", "a/y:pending"]
    );
    let record = store.run(&run).unwrap().unwrap();
    assert_eq!(record.task_count, 4);
    let summary = &store.runs(1).unwrap()[0];
    assert_eq!(
        (
            summary.count(TaskState::Pending),
            summary.count(TaskState::Running)
        ),
        (2, 1)
    );
    let recorded = store
        .events_of_kind(&run, baton_model::EventName::GraphExpanded)
        .unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].kind, expanded);
    assert_eq!(store.check_consistency(&run).unwrap(), Vec::<String>::new());
    // An expansion by a task the run lacks fails the whole turn.
    let stray = EventKind::GraphExpanded {
        task: task("zz"),
        attempt: 1,
        added: vec![task("zz/q")],
        tasks: serde_json::json!([]),
        replaces: Vec::new(),
    };
    assert!(
        store
            .record(&run, lease, &[event(1_400, stray)], &[])
            .is_err()
    );
    assert_eq!(store.tasks(&run).unwrap().len(), 4);
    // A task added and started in a turn that fails is not the run's; the next task added
    // takes its place in the table, and each is told apart by its id.
    let adds = |id: &str| EventKind::GraphExpanded {
        task: task("a"),
        attempt: 1,
        added: vec![task(id)],
        tasks: serde_json::json!([{ "id": id }]),
        replaces: Vec::new(),
    };
    let failed = [
        event(1_500, adds("a/z")),
        started(1_500, "a/z", 1),
        started(1_500, "zz", 1),
    ];
    assert!(store.record(&run, lease, &failed, &[]).is_err());
    store
        .record(
            &run,
            lease,
            &[event(1_600, adds("a/w")), started(1_600, "a/w", 1)],
            &[],
        )
        .unwrap();
    assert!(
        store
            .record(&run, lease, &[started(1_700, "a/z", 1)], &[])
            .is_err()
    );
    let tasks = store.tasks(&run).unwrap();
    let last = tasks.last().unwrap();
    assert_eq!(
        (last.task.as_str(), last.idx, last.status),
        ("a/w", 4, TaskState::Running)
    );
    assert_eq!(store.attempts(&run, &task("a/w")).unwrap().len(), 1);
    assert_eq!(store.check_consistency(&run).unwrap(), Vec::<String>::new());
}

/// A turn of many events is numbered in order, each event whole, and a second turn numbers
/// on: in SQLite, rare kinds more than one statement's worth (32 rows to a statement), and the
/// kinds every attempt writes interleaved with them (one batch row).
pub(crate) fn a_long_turn_is_numbered_in_order(db: &dyn Database) {
    let store = db.open();
    let ids: Vec<String> = (0..35).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    store.create_run(&new_run("r1", &names)).unwrap();
    let run = run_id("r1");
    let lease = store
        .claim(&run, &driver(1, "box"), T0, LEASE_TERM, &seen(1))
        .unwrap()
        .lease;
    // 3 × 35 = 105 events: 35 rare ones (a full statement's worth and three more) between 70
    // of the kinds batched.
    let mut turn = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        turn.push(event(
            500 + i as i64,
            EventKind::TaskWaiting { task: task(id) },
        ));
        turn.push(started(1_000 + i as i64, id, 1));
        turn.push(finished(
            2_000 + i as i64,
            id,
            1,
            Outcome::Exited { code: i as i32 },
        ));
    }
    let seqs = store.record(&run, lease, &turn, &[]).unwrap();
    assert_eq!(seqs, (1..=105).collect::<Vec<u64>>());
    let back = store.events(&run, 0, 200).unwrap();
    assert_eq!(back.len(), 105);
    for (event, (sent, seq)) in back.iter().zip(turn.iter().zip(1..)) {
        assert_eq!(event.seq, seq);
        assert_eq!(event.at_ms, sent.at_ms);
        assert_eq!(event.kind, sent.kind, "event {seq}");
    }
    let more = store
        .record(
            &run,
            lease,
            &[task_finished(3_000, "t0", TaskState::Succeeded, None)],
            &[],
        )
        .unwrap();
    assert_eq!(more, [106]);
    let waiting = store
        .events_of_kind(&run, baton_model::EventName::TaskWaiting)
        .unwrap();
    assert_eq!(
        waiting.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (0..35).map(|i| 1 + 3 * i).collect::<Vec<u64>>()
    );
    let t34 = store.attempts(&run, &task("t34")).unwrap();
    assert_eq!(t34[0].outcome, Some(Outcome::Exited { code: 34 }));
}

/// A turn of short tasks, each started, ended and finished in it (what a run of many small
/// tasks commits): more of them than one statement inserts (`whole_attempts.rs`), their events
/// enough to be encoded on a thread of their own (SQLite's `write.rs`), with and without
/// output, some failing, one after a task's own earlier attempt in another turn.
pub(crate) fn a_turn_of_many_short_tasks_records_each(db: &dyn Database) {
    let store = db.open();
    let ids = numbered(95);
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    store.create_run(&new_run("r1", &names)).unwrap();
    let run = run_id("r1");
    let lease = claimed(store.as_ref(), &run);
    store
        .record(
            &run,
            lease,
            &[
                started(10, "t7", 1),
                finished(11, "t7", 1, Outcome::TimedOut),
            ],
            &[],
        )
        .unwrap();
    let attempt_of = |i: usize| if i == 7 { 2 } else { 1 };
    let mut turn = Vec::new();
    let mut outputs = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let code = i32::from(i % 5 == 0);
        let state = if code == 0 {
            TaskState::Succeeded
        } else {
            TaskState::Failed
        };
        turn.push(started(100 + i as i64, id, attempt_of(i)));
        turn.push(finished(
            200 + i as i64,
            id,
            attempt_of(i),
            Outcome::Exited { code },
        ));
        turn.push(task_finished(300 + i as i64, id, state, None));
        if i % 3 == 0 {
            outputs.push(output(id, attempt_of(i), &format!("{id} said")));
        }
    }
    store.record(&run, lease, &turn, &outputs).unwrap();
    let tasks = store.tasks(&run).unwrap();
    for (i, (id, record)) in ids.iter().zip(&tasks).enumerate() {
        let failed = i % 5 == 0;
        assert_eq!(
            record.status,
            if failed {
                TaskState::Failed
            } else {
                TaskState::Succeeded
            },
            "{id}"
        );
        assert_eq!(record.attempts, attempt_of(i), "{id}");
        assert_eq!(record.exit_code, Some(i32::from(failed)), "{id}");
        assert_eq!(
            record.started_at_ms,
            Some(if i == 7 { 10 } else { 100 + i as i64 })
        );
        assert_eq!(record.ended_at_ms, Some(300 + i as i64), "{id}");
        let said = (i % 3 == 0).then(|| format!("{id} said"));
        assert_eq!(record.output, said, "{id}");
        let attempts = store.attempts(&run, &task(id)).unwrap();
        let last = attempts.last().unwrap();
        assert_eq!(last.attempt, attempt_of(i), "{id}");
        assert_eq!(
            (last.started_at_ms, last.ended_at_ms),
            (100 + i as i64, Some(200 + i as i64)),
            "{id}"
        );
        assert_eq!(
            last.outcome,
            Some(Outcome::Exited {
                code: i32::from(failed)
            })
        );
        assert_eq!(last.output, said, "{id}");
    }
    assert_eq!(store.run_attempts(&run).unwrap().len(), 96);
    assert_eq!(store.events(&run, 0, 1_000).unwrap().len(), 2 + 3 * 95);
    assert!(store.check_consistency(&run).unwrap().is_empty());
}

/// A best-of task's candidates end in any order; the task's output and exit code are its
/// winner's once it is picked, not the last candidate's to end.
pub(crate) fn a_best_of_tasks_output_is_its_winners(db: &dyn Database) {
    let store = db.open();
    let lease = held(store.as_ref());
    let run = run_id("r1");
    let candidate = |k: u32, passed: bool| baton_model::Candidate {
        candidate: k,
        attempt: k,
        engine: "e".into(),
        model: None,
        passed,
        warnings: false,
        lines: 1,
        files: 1,
        branch: None,
        outcome: if passed { "succeeded" } else { "failed" }.into(),
    };
    store
        .record(
            &run,
            lease,
            &[
                started(1_100, "a", 1),
                started(1_100, "a", 2),
                started(1_100, "a", 3),
                finished(1_200, "a", 2, Outcome::Exited { code: 0 }),
                finished(1_300, "a", 1, Outcome::Exited { code: 0 }),
                finished(1_400, "a", 3, Outcome::Exited { code: 1 }),
                event(
                    1_400,
                    EventKind::Picked {
                        task: task("a"),
                        candidates: vec![
                            candidate(1, true),
                            candidate(2, true),
                            candidate(3, false),
                        ],
                        winner: Some(2),
                        why: "candidate 2 won".into(),
                    },
                ),
                task_finished(1_400, "a", TaskState::Succeeded, None),
            ],
            &[
                output("a", 2, "second"),
                output("a", 1, "first"),
                output("a", 3, "third"),
            ],
        )
        .unwrap();
    let a = store
        .tasks(&run)
        .unwrap()
        .into_iter()
        .find(|t| t.task.as_str() == "a")
        .unwrap();
    assert_eq!(a.status, TaskState::Succeeded);
    assert_eq!(a.output.as_deref(), Some("second"), "{a:?}");
    assert_eq!(a.output_attempt, Some(2), "{a:?}");
    assert_eq!(a.exit_code, Some(0), "{a:?}");
    assert_eq!(a.attempts, 3, "{a:?}");
    // The tables agree with the fold of the events, the definition of what they hold.
    assert_eq!(store.check_consistency(&run).unwrap(), Vec::<String>::new());
}

pub(crate) fn a_turn_is_recorded_whole_and_numbered(db: &dyn Database) {
    let store = db.open();
    let lease = held(store.as_ref());
    let run = run_id("r1");
    let seqs = store
        .record(
            &run,
            lease,
            &[
                started(1_100, "a", 1),
                finished(1_200, "a", 1, Outcome::Exited { code: 0 }),
                task_finished(1_200, "a", TaskState::Succeeded, None),
                started(1_300, "b", 1),
            ],
            &[output("a", 1, "done")],
        )
        .unwrap();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(store.last_seq(&run).unwrap(), 4);
    let after = store.events(&run, 2, 10).unwrap();
    assert_eq!(after.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(store.events(&run, 0, 1).unwrap().len(), 1);
    assert_eq!(
        store
            .events_of_kind(&run, baton_model::EventName::AttemptStarted)
            .unwrap()
            .len(),
        2
    );
    let last = store
        .last_event_of_kind(&run, baton_model::EventName::AttemptStarted)
        .unwrap();
    assert_eq!(last.map(|e| e.seq), Some(4));
    let a = store.attempts(&run, &task("a")).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].outcome, Some(Outcome::Exited { code: 0 }));
    assert_eq!(a[0].output.as_deref(), Some("done"));
    let open = store.open_attempts(&run).unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].task, task("b"));
    let mut seen = Vec::new();
    store
        .each_attempt(&run, &mut |attempt| {
            seen.push((attempt.task, attempt.task_idx))
        })
        .unwrap();
    // In task-index order, each with its task's index (the result is assembled by it).
    assert_eq!(seen, [(task("a"), 0), (task("b"), 1)]);
    assert_eq!(store.run_attempts(&run).unwrap().len(), 2);
    let tasks = store.tasks(&run).unwrap();
    assert_eq!(tasks[0].status, TaskState::Succeeded);
    assert_eq!(tasks[1].status, TaskState::Running);
    // A turn with an event about a task the run lacks is refused whole.
    let err = store
        .record(
            &run,
            lease,
            &[
                finished(1_400, "b", 1, Outcome::Exited { code: 1 }),
                started(1_400, "nope", 1),
            ],
            &[],
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownTask { .. }), "{err:?}");
    assert_eq!(store.last_seq(&run).unwrap(), 4);
    assert_eq!(store.open_attempts(&run).unwrap().len(), 1);
    assert!(store.check_consistency(&run).unwrap().is_empty());
}

pub(crate) fn what_agents_spent_is_summed_per_run(db: &dyn Database) {
    let store = db.open();
    let lease = held(store.as_ref());
    let run = run_id("r1");
    let spent = |attempt, tokens, usd| {
        event(
            2_000,
            EventKind::AttemptFinished {
                task: task("a"),
                attempt,
                outcome: Outcome::Exited { code: 0 },
                duration_ms: 5,
                agent: Some(Box::new(AgentUsage {
                    input_tokens: tokens,
                    cost_usd: Some(usd),
                    ..AgentUsage::default()
                })),
                containment: None,
            },
        )
    };
    assert_eq!(store.run_spend(&run).unwrap(), (None, None));
    store
        .record(
            &run,
            lease,
            &[
                started(1_000, "a", 1),
                spent(1, 100, 0.25),
                started(3_000, "a", 2),
                spent(2, 50, 0.5),
            ],
            &[],
        )
        .unwrap();
    let (tokens, usd) = store.run_spend(&run).unwrap();
    assert_eq!(tokens, Some(150));
    assert!((usd.unwrap() - 0.75).abs() < 1e-9, "{usd:?}");
}

pub(crate) fn a_task_is_decided_once(db: &dyn Database) {
    let store = db.open();
    held(store.as_ref());
    let run = run_id("r1");
    assert!(store.decisions(&run).unwrap().is_empty());
    // A person decides from another process.
    let other = db.open();
    other
        .decide(&run, &task("a"), false, Some("not now"), 5)
        .unwrap()
        .unwrap();
    let first = other
        .decide(&run, &task("a"), true, None, 6)
        .unwrap()
        .unwrap_err();
    assert!(!first.approved);
    assert_eq!(first.reason.as_deref(), Some("not now"));
    let decisions = store.decisions(&run).unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!((decisions[0].task.as_str(), decisions[0].at_ms), ("a", 5));
}

pub(crate) fn a_live_driver_keeps_its_run_and_a_dead_one_is_replaced(db: &dyn Database) {
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    let first = store
        .claim(&run, &driver(1, "box"), T0, LEASE_TERM, &|_| unreachable!())
        .unwrap();
    assert_eq!(first.replaced, None);
    assert_eq!(
        first.lease.expires_at_ms,
        T0 + LEASE_TERM.as_millis() as i64
    );
    // Claiming again renews, and asks nobody.
    let again = store
        .claim(
            &run,
            &driver(1, "box"),
            T0 + 5,
            LEASE_TERM,
            &|_| unreachable!(),
        )
        .unwrap();
    assert_eq!(again.lease.token, first.lease.token);
    // Alive on its host: held, whatever its lease says (a laptop that slept past it).
    let far_later = T0 + 100 * LEASE_TERM.as_millis() as i64;
    let err = store
        .claim(&run, &driver(2, "box"), far_later, LEASE_TERM, &seen(1))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::RunHeld { pid: 1, start_time: 100, ref host, .. } if host == "box"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "run r1 is held by process 1 on box");
    // Dead on its host: replaced at once, lease or not.
    let second = store
        .claim(&run, &driver(2, "box"), T0 + 10, LEASE_TERM, &seen(2))
        .unwrap();
    assert_eq!(second.replaced, Some(driver(1, "box")));
    assert!(second.lease.token > first.lease.token);
    assert_eq!(
        store.run(&run).unwrap().unwrap().driver,
        Some(driver(2, "box"))
    );
    // The replaced driver, if it was alive after all, cannot release the new one's claim.
    assert!(!store.release(&run, first.lease).unwrap());
    assert!(store.release(&run, second.lease).unwrap());
    assert_eq!(store.run(&run).unwrap().unwrap().driver, None);
    let err = store
        .claim(&run_id("r9"), &driver(1, "box"), T0, LEASE_TERM, &seen(1))
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownRun(_)), "{err:?}");
}

pub(crate) fn a_driver_out_of_sight_holds_its_run_until_its_lease_lapses(db: &dyn Database) {
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    let term = Duration::from_secs(10);
    let remote = store
        .claim(&run, &driver(7, "elsewhere"), T0, term, &seen(0))
        .unwrap()
        .lease;
    let claim_at = |now| store.claim(&run, &driver(2, "box"), now, term, &seen(2));
    assert!(matches!(
        claim_at(T0 + 9_999),
        Err(StoreError::RunHeld { pid: 7, .. })
    ));
    // Its heartbeat keeps it.
    let renewed = store.renew(&run, remote, T0 + 9_000, term).unwrap();
    assert_eq!(renewed.expires_at_ms, T0 + 19_000);
    assert!(claim_at(T0 + 18_000).is_err());
    // Past its lease, it is taken over.
    let taken = claim_at(T0 + 19_000).unwrap();
    assert_eq!(taken.replaced, Some(driver(7, "elsewhere")));
    // And the old holder's heartbeat says so.
    let lost = store.renew(&run, renewed, T0 + 19_500, term).unwrap_err();
    assert!(matches!(lost, StoreError::LeaseLost { .. }), "{lost:?}");
}

pub(crate) fn a_driver_whose_run_was_taken_over_records_nothing(db: &dyn Database) {
    let store = db.open();
    let old = held(store.as_ref());
    let run = run_id("r1");
    store
        .record(&run, old, &[started(1_100, "a", 1)], &[])
        .unwrap();
    // Another process on another host takes the run over once the old lease lapsed.
    let other = db.open();
    let later = T0 + 2 * LEASE_TERM.as_millis() as i64;
    let new = other
        .claim(&run, &driver(9, "elsewhere"), later, LEASE_TERM, &|_| {
            Liveness::Unknown
        })
        .unwrap()
        .lease;
    assert!(new.token > old.token);
    // The stale driver's late completion changes nothing.
    let err = store
        .record(
            &run,
            old,
            &[
                finished(1_200, "a", 1, Outcome::Exited { code: 0 }),
                task_finished(1_200, "a", TaskState::Succeeded, None),
            ],
            &[output("a", 1, "late")],
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "run r1 was taken over by another process; this one no longer drives it"
    );
    assert_eq!(store.last_seq(&run).unwrap(), 1);
    assert_eq!(store.tasks(&run).unwrap()[0].status, TaskState::Running);
    // The new holder records.
    other
        .record(
            &run,
            new,
            &[finished(later, "a", 1, Outcome::Interrupted)],
            &[],
        )
        .unwrap();
    assert_eq!(store.last_seq(&run).unwrap(), 2);
}

pub(crate) fn an_attempts_number_fences_what_is_written_about_it(db: &dyn Database) {
    let store = db.open();
    let lease = held(store.as_ref());
    let run = run_id("r1");
    let record = |events: &[baton_model::Event], outputs: &[baton_store::AttemptOutput]| {
        store.record(&run, lease, events, outputs)
    };
    record(
        &[
            started(1, "a", 1),
            finished(2, "a", 1, Outcome::Exited { code: 1 }),
        ],
        &[],
    )
    .unwrap();
    // An attempt ends once: a late second end (a stale worker's) changes nothing.
    let again = record(&[finished(3, "a", 1, Outcome::Exited { code: 0 })], &[]).unwrap_err();
    assert!(
        matches!(again, StoreError::AttemptEnded { attempt: 1, .. }),
        "{again:?}"
    );
    let with_output = record(
        &[finished(3, "a", 1, Outcome::Exited { code: 0 })],
        &[output("a", 1, "late")],
    )
    .unwrap_err();
    assert!(
        matches!(with_output, StoreError::AttemptEnded { .. }),
        "{with_output:?}"
    );
    // Numbers only grow (a gap is a start a crash lost: fine).
    record(&[started(4, "a", 3)], &[]).unwrap();
    let repeated = record(&[started(5, "a", 3)], &[]).unwrap_err();
    assert!(
        matches!(repeated, StoreError::AttemptExists { .. }),
        "{repeated:?}"
    );
    let older = record(&[started(5, "a", 2)], &[]).unwrap_err();
    assert!(
        matches!(older, StoreError::AttemptOutOfOrder { attempt: 2, .. }),
        "{older:?}"
    );
    // The same through a whole attempt in one turn.
    let whole = |attempt| {
        vec![
            started(6, "b", attempt),
            finished(7, "b", attempt, Outcome::Exited { code: 0 }),
            task_finished(7, "b", TaskState::Succeeded, None),
        ]
    };
    record(&whole(2), &[output("b", 2, "ok")]).unwrap();
    let older_whole = record(&whole(1), &[output("b", 1, "ok")]).unwrap_err();
    assert!(
        matches!(
            older_whole,
            StoreError::AttemptOutOfOrder { attempt: 1, .. }
        ),
        "{older_whole:?}"
    );
    // Nothing of the refused turns was recorded.
    let a = store.attempts(&run, &task("a")).unwrap();
    assert_eq!(a.iter().map(|x| x.attempt).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(a[0].outcome, Some(Outcome::Exited { code: 1 }));
    assert_eq!(store.last_seq(&run).unwrap(), 6);
    assert!(store.check_consistency(&run).unwrap().is_empty());
}

pub(crate) fn handles_claiming_at_once_get_exactly_one_driver(db: &dyn Database) {
    db.open().create_run(&new_run("r1", &["a"])).unwrap();
    let winners: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=8)
            .map(|pid| {
                let store = db.open();
                scope.spawn(move || {
                    store
                        .claim(&run_id("r1"), &driver(pid, "box"), T0, LEASE_TERM, &|_| {
                            Liveness::Alive
                        })
                        .is_ok()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert_eq!(winners, 1);
}

pub(crate) fn only_a_run_no_live_driver_holds_is_deleted(db: &dyn Database) {
    let store = db.open();
    let lease = held(store.as_ref());
    let run = run_id("r1");
    store
        .record(&run, lease, &[started(1, "a", 1)], &[output("a", 1, "x")])
        .unwrap();
    let err = store.delete_run(&run, T0, &seen(1)).unwrap_err();
    assert!(matches!(err, StoreError::RunHeld { pid: 1, .. }), "{err:?}");
    assert!(store.run(&run).unwrap().is_some());
    // Its driver died: the run is interrupted, and may go, with all it recorded.
    assert!(store.delete_run(&run, T0, &seen(0)).unwrap());
    assert_eq!(store.run(&run).unwrap(), None);
    assert!(store.tasks(&run).unwrap().is_empty());
    assert!(store.attempts(&run, &task("a")).unwrap().is_empty());
    assert!(store.events(&run, 0, 10).unwrap().is_empty());
    assert_eq!(store.graph_json(&run).unwrap(), None);
    assert!(!store.delete_run(&run, T0, &seen(1)).unwrap());
    // Made again under its id, with its tasks in another order: each is its own row.
    store.create_run(&new_run("r1", &["b", "a"])).unwrap();
    let lease = claimed(store.as_ref(), &run);
    store
        .record(&run, lease, &[started(2, "a", 1)], &[])
        .unwrap();
    assert_eq!(states(store.as_ref(), &run), ["b:pending", "a:running"]);
    assert!(store.delete_run(&run, T0, &seen(0)).unwrap());
    // A finished run goes even while its driver lives on.
    let lease = held(store.as_ref());
    store
        .record(
            &run,
            lease,
            &[event(
                2,
                EventKind::RunFinished {
                    state: RunState::Failed,
                },
            )],
            &[],
        )
        .unwrap();
    assert!(store.delete_run(&run, T0, &seen(1)).unwrap());
}

pub(crate) fn readers_see_whole_turns_while_a_driver_records(db: &dyn Database) {
    let store = db.open();
    store.create_run(&new_numbered_run("r1", 201)).unwrap();
    let run = run_id("r1");
    let lease = claimed(store.as_ref(), &run);
    store
        .record(&run, lease, &[started(0, "t0", 1)], &[])
        .unwrap();
    let reader = db.reader();
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for i in 0..200 {
                let (this, next) = (format!("t{i}"), format!("t{}", i + 1));
                store
                    .record(
                        &run,
                        lease,
                        &[
                            finished(i, &this, 1, Outcome::Exited { code: 0 }),
                            task_finished(i, &this, TaskState::Succeeded, None),
                            started(i, &next, 1),
                        ],
                        &[output(&this, 1, "out")],
                    )
                    .unwrap();
            }
        });
        let mut looks = 0;
        while !writer.is_finished() || looks == 0 {
            // Every look is one whole turn or another: exactly one task running, and the
            // succeeded ones each with their output.
            let tasks = reader.tasks(&run).unwrap();
            let running = tasks
                .iter()
                .filter(|t| t.status == TaskState::Running)
                .count();
            assert_eq!(running, 1, "a half-recorded turn was seen");
            let problems = reader.check_consistency(&run).unwrap();
            assert!(problems.is_empty(), "{problems:#?}");
            looks += 1;
        }
        writer.join().unwrap();
    });
    assert_eq!(reader.last_seq(&run).unwrap(), 601);
}

/// Every case above, as one `#[test]` per backend.
macro_rules! conformance {
    ($backend:ident, $database:expr) => {
        mod $backend {
            use super::*;
            conformance!(@cases $database;
                a_new_run_has_its_tasks_pending_in_graph_order,
                a_large_graph_comes_back_whole,
                a_turn_is_recorded_whole_and_numbered,
                a_long_turn_is_numbered_in_order,
                a_turn_of_many_short_tasks_records_each,
                a_best_of_tasks_output_is_its_winners,
                what_agents_spent_is_summed_per_run,
                a_task_is_decided_once,
                a_live_driver_keeps_its_run_and_a_dead_one_is_replaced,
                a_driver_out_of_sight_holds_its_run_until_its_lease_lapses,
                a_driver_whose_run_was_taken_over_records_nothing,
                an_attempts_number_fences_what_is_written_about_it,
                handles_claiming_at_once_get_exactly_one_driver,
                only_a_run_no_live_driver_holds_is_deleted,
                readers_see_whole_turns_while_a_driver_records,
                a_planners_tasks_join_the_run_after_the_others,
                a_graph_that_cannot_be_written_leaves_no_run,
            );
        }
    };
    (@cases $database:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                super::$case(&$database);
            }
        )*
    };
}

/// SQLite: a database file; each handle its own connection, as each process has.
struct Sqlite(Db);

impl Database for Sqlite {
    fn open(&self) -> Box<dyn Store> {
        Box::new(self.0.open())
    }

    fn reader(&self) -> Box<dyn Store> {
        Box::new(SqliteStore::open_readonly(&self.0.path()).unwrap())
    }
}

conformance!(sqlite, Sqlite(Db::new()));

/// A reader's handle speaks the whole language but cannot write: its claim fails.
#[test]
fn a_read_only_sqlite_handle_refuses_to_write() {
    let db = Sqlite(Db::new());
    db.open().create_run(&new_run("r1", &["a"])).unwrap();
    let reader = db.reader();
    let claimed = reader.claim(&run_id("r1"), &driver(1, "box"), T0, LEASE_TERM, &seen(1));
    assert!(claimed.is_err(), "{claimed:?}");
}

/// PostgreSQL: a database of its own on the suite's server; each handle its own connection.
struct Postgres(String);

impl Postgres {
    fn new() -> Self {
        Self(baton_testpg::fresh_database())
    }
}

impl Database for Postgres {
    fn open(&self) -> Box<dyn Store> {
        Box::new(baton_store::PgStore::open(&self.0).unwrap())
    }

    fn reader(&self) -> Box<dyn Store> {
        Box::new(baton_store::PgStore::open(&self.0).unwrap())
    }
}

conformance!(postgres, Postgres::new());
