//! Runs survive their driver: `resume` after SIGKILL at many points, one driver at a time,
//! `cancel` from another terminal, `retry` of a finished run's failures.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

use baton_model::{EventKind, Outcome, RunState, TaskState};

use crate::test::{RUN_LIMIT, Store, Test, baton_in, running_long_task};

/// A random DAG of `n` short tasks, reproducible from `seed`, with each task's needs.
fn random_graph(n: usize, seed: u64) -> (String, Vec<Vec<usize>>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut text = String::from("name = \"crashy\"\n\n[run]\nconcurrency = 4\n\n");
    let mut all_needs = vec![Vec::new(); n];
    for (i, task_needs) in all_needs.iter_mut().enumerate() {
        let _ = write!(text, "[[task]]\nid = \"t{i}\"\n");
        if i > 0 {
            let k = rng.usize(0..=3.min(i));
            let mut needs: Vec<usize> =
                (0..k).map(|_| rng.usize(i.saturating_sub(20)..i)).collect();
            needs.sort_unstable();
            needs.dedup();
            let list: Vec<String> = needs.iter().map(|d| format!("\"t{d}\"")).collect();
            let _ = writeln!(text, "needs = [{}]", list.join(", "));
            *task_needs = needs;
        }
        // Some tasks take a little while, so that kills land on attempts in flight too.
        let run = if i % 3 == 0 { "sleep 0.02" } else { "true" };
        let _ = write!(text, "run = \"{run}\"\n\n");
    }
    (text, all_needs)
}

fn seed() -> u64 {
    std::env::var("BATON_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

#[test]
fn sigkill_at_many_points_then_resume_loses_and_duplicates_nothing() {
    let seed = seed();
    eprintln!("crash-resume seed: {seed} (set BATON_TEST_SEED to replay)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let tasks = 400;
    let (graph, needs) = random_graph(tasks, seed);
    let mut test = Test::new().graph("g.toml", &graph);
    let mut args: Vec<&str> = vec!["run", "g.toml", "--quiet"];
    let mut kills = 0;
    let mut seen = 0;
    let started = Instant::now();
    let out = loop {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "gave up after {kills} kills (seed {seed})"
        );
        let mut running = test.args(&args).spawn();
        // Kill after a random number of further events are recorded (or let it finish).
        let target = seen + rng.usize(1..16);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut finished = false;
        loop {
            if running.exited() {
                finished = true;
                break;
            }
            let now = Store::try_open(running.path())
                .and_then(|s| s.try_run().map(|_| s.events().len()))
                .unwrap_or(0);
            if now >= target {
                break;
            }
            assert!(Instant::now() < deadline, "no progress (seed {seed})");
            std::thread::sleep(Duration::from_millis(2));
        }
        if finished {
            break running.wait(Duration::from_secs(60)).status(0);
        }
        let out = running.kill();
        kills += 1;
        // Killed after the run was recorded as finished, before the process exited.
        if out.store().run().status != RunState::Running {
            break out;
        }
        seen = out.store().events().len();
        test = out.then();
        args = vec!["resume", "latest", "--quiet"];
    };
    eprintln!("{kills} kill points in {:?}", started.elapsed());
    assert!(kills >= 50, "only {kills} kill points (seed {seed})");

    let store = out.store();
    store.assert_consistent();
    assert_eq!(store.run().status, RunState::Succeeded);
    let records = store.tasks();
    assert_eq!(records.len(), tasks);
    assert!(records.iter().all(|t| t.status == TaskState::Succeeded));
    // Exactly one recorded success per task, in the attempts and in the event log.
    let mut successes: BTreeMap<String, usize> = BTreeMap::new();
    for attempt in store.all_attempts() {
        assert!(
            attempt.ended_at_ms.is_some(),
            "attempt left open: {attempt:?}"
        );
        if attempt.outcome == Some(Outcome::Exited { code: 0 }) {
            *successes.entry(attempt.task.to_string()).or_default() += 1;
        }
    }
    let finishes = store.events_of(|k| {
        matches!(
            k,
            EventKind::TaskFinished {
                state: TaskState::Succeeded,
                ..
            }
        )
    });
    assert_eq!(finishes.len(), tasks, "seed {seed}");
    for t in &records {
        assert_eq!(
            successes.get(t.task.as_str()),
            Some(&1),
            "task {} (seed {seed})",
            t.task
        );
    }
    // Across all the crashes, no task's successful attempt started before all it needs had
    // succeeded.
    let success: BTreeMap<String, (i64, i64)> = store
        .all_attempts()
        .iter()
        .filter(|a| a.outcome == Some(Outcome::Exited { code: 0 }))
        .map(|a| {
            (
                a.task.to_string(),
                (a.started_at_ms, a.ended_at_ms.unwrap()),
            )
        })
        .collect();
    for (i, task_needs) in needs.iter().enumerate() {
        let (start, _) = success[&format!("t{i}")];
        for n in task_needs {
            let (_, end) = success[&format!("t{n}")];
            assert!(
                end <= start,
                "t{i} started before its need t{n} ended (seed {seed})"
            );
        }
    }
}

#[test]
fn a_second_driver_is_refused_naming_the_first() {
    let running = running_long_task(false);
    let side = baton_in(running.path(), &["resume", "latest"]);
    assert_eq!(side.code, Some(2));
    assert!(
        side.stderr
            .contains(&format!("being driven by process {}", running.pid())),
        "{}",
        side.stderr
    );
    running.kill();
}

#[test]
fn cancel_from_another_terminal_stops_the_run() {
    let running = running_long_task(true);
    let side = baton_in(running.path(), &["cancel", "latest"]);
    assert_eq!(side.code, Some(0), "{}", side.stderr);
    assert!(side.stdout.contains("cancelled"));
    let out = running.wait(Duration::from_secs(30)).status(130);
    let store = out.store();
    assert_eq!(store.run().status, RunState::Cancelled);
    assert_eq!(store.task("long").status, TaskState::Cancelled);
    assert_eq!(store.task("next").status, TaskState::Skipped);
    store.assert_consistent();
}

#[test]
fn cancel_of_a_run_whose_driver_died_records_it_and_ends_its_processes() {
    let mut running = Test::new()
        .graph(
            "g.toml",
            "[[task]]\nid = \"long\"\nrun = \"echo $$ > pid; sleep 30\"\n",
        )
        .args(&["run", "g.toml"])
        .spawn();
    let pid: i32 = running.await_that("the task to start", Duration::from_secs(30), |root| {
        std::fs::read_to_string(root.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    });
    running.await_that(
        "the start to be recorded",
        Duration::from_secs(30),
        |root| {
            Store::try_open(root)
                .and_then(|s| (s.task("long").status == TaskState::Running).then_some(()))
        },
    );
    let out = running.kill();
    let cancel = baton_in(out.path(), &["cancel", "latest"]);
    assert_eq!(cancel.code, Some(0), "{}", cancel.stderr);
    let store = out.store();
    assert_eq!(store.run().status, RunState::Cancelled);
    assert_eq!(store.task("long").status, TaskState::Cancelled);
    assert_eq!(
        store.attempts("long")[0].outcome,
        Some(Outcome::Interrupted)
    );
    store.assert_consistent();
    // The orphaned task was ended.
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true);
        if zombie {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "task process {pid} survived the cancel"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn retry_runs_failures_again_as_new_attempts_of_the_same_run() {
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[[task]]
id = "flaky"
run = '[ -e fixed ] && echo fixed || { echo broken >&2; exit 1; }'

[[task]]
id = "after"
needs = ["flaky"]
run = "echo after"

[[task]]
id = "fine"
run = "echo fine"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("after")["state"], "blocked");
    let out = out
        .then()
        .file("fixed", "")
        .args(&["retry", "latest", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("flaky")["attempts"], 2);
    assert_eq!(out.json_task("after")["state"], "succeeded");
    // What had succeeded was not run again.
    assert_eq!(out.json_task("fine")["attempts"], 1);
    let store = out.store();
    assert_eq!(store.runs().len(), 1, "a retry continues the same run");
    store.assert_consistent();
    let attempts = store.attempts("flaky");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].outcome, Some(Outcome::Exited { code: 1 }));

    // Resume refuses a finished run and says what to do instead, with the run's id.
    let run = store.run().id.to_string();
    let out = out.then().args(&["resume", "latest"]).run().status(2);
    out.stderr_contains(&format!(
        "`baton retry {run}` runs a finished run's failures again"
    ));
}

#[test]
fn a_reader_polling_during_a_busy_run_is_never_locked_out() {
    let mut graph = String::from("[run]\nconcurrency = 4\n\n");
    for i in 0..400 {
        let _ = write!(graph, "[[task]]\nid = \"t{i}\"\nrun = \"true\"\n\n");
    }
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--quiet"])
        .spawn();
    let root = running.path().to_path_buf();
    let mut reads = 0;
    while !running.exited() {
        if !root.join(".baton/baton.db").exists() {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let side = baton_in(&root, &["status", "--json"]);
        assert!(!side.stderr.contains("locked"), "{}", side.stderr);
        // Before the run row exists there is nothing to show; after, status always works.
        if side.code == Some(0) {
            reads += 1;
        }
    }
    running.wait(Duration::from_secs(60)).status(0);
    assert!(reads > 0, "status never succeeded during the run");
}

#[test]
fn a_run_whose_database_is_removed_stops_and_says_so() {
    let test = Test::new().graph(
        "g.toml",
        r#"
[[task]]
id = "first"
run = "touch started; sleep 1"

[[task]]
id = "second"
needs = ["first"]
run = "echo never"
"#,
    );
    let mut running = test.args(&["run", "g.toml"]).spawn();
    running.await_that("the task to start", RUN_LIMIT, |root| {
        root.join("started").exists().then_some(())
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(running.path().join(format!(".baton/baton.db{suffix}")));
    }
    let out = running
        .wait(RUN_LIMIT)
        .status(3)
        .stderr_contains("was removed while the run was driven");
    assert!(
        !out.stdout.contains("succeeded"),
        "it must not say it succeeded:\n{}",
        out.stdout
    );
    assert!(!out.path().join("never").exists());
}

#[test]
fn a_task_started_in_the_last_moment_before_a_crash_never_runs_twice_at_once() {
    // Killed as soon as the first task prints, inside the window where launches are not
    // committed yet: the takeover must end those attempts before it runs their tasks again.
    let mut graph = String::from("[defaults]\ntimeout = \"1m\"\n");
    for i in 0..8 {
        writeln!(
            graph,
            "[[task]]\nid = \"t{i}\"\nrun = 'echo start-$BATON_TASK_ID >> exec.log; sleep 3; echo end-$BATON_TASK_ID >> exec.log'"
        )
        .unwrap();
    }
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "-j", "8"])
        .spawn();
    running.await_that("a task to start", RUN_LIMIT, |root| {
        root.join("exec.log").exists().then_some(())
    });
    let (_, resumed) = running.kill_and_resume();
    let log = String::from_utf8(resumed.read("exec.log")).unwrap();
    for i in 0..8 {
        let ends = log.lines().filter(|l| *l == format!("end-t{i}")).count();
        assert_eq!(ends, 1, "t{i} ended {ends} times:\n{log}");
    }
    let store = resumed.store();
    for task in store.tasks() {
        assert_eq!(task.status, TaskState::Succeeded, "{}", task.task);
        // Every time it ran is an attempt on record, those whose start the dead driver did
        // not get to commit among them.
        let starts = log
            .lines()
            .filter(|l| *l == format!("start-{}", task.task))
            .count();
        let attempts = store.attempts(task.task.as_str());
        assert!(
            starts <= attempts.len(),
            "{} started {starts} times, {} attempts recorded:\n{log}",
            task.task,
            attempts.len()
        );
    }
    store.assert_consistent();
}

#[test]
fn an_attempt_launched_but_not_recorded_before_a_crash_is_recorded_by_the_takeover() {
    let graph = r#"
[[task]]
id = "first"
run = "touch started; sleep 30"

[[task]]
id = "second"
run = "echo second >> ran.log"
needs = ["first"]
"#;
    let mut running = Test::new()
        .graph("g.toml", graph)
        .args(&["run", "g.toml"])
        .spawn();
    running.await_that("the task to start", RUN_LIMIT, |root| {
        root.join("started").exists().then_some(())
    });
    let killed = running.kill();
    let run = killed.store().run().id.to_string();
    // The driver noted `first` before it started it.
    let noted = killed.scratch(&run).join("launched");
    let text = std::fs::read_to_string(&noted).unwrap();
    assert_eq!(text, "first 1\n");
    // As a driver killed between starting `second` and committing its start would have
    // left it: noted, not recorded (and it ran).
    std::fs::write(&noted, "first 1\nsecond 1\n").unwrap();
    let resumed = killed
        .then()
        .args(&["resume", &run, "--json"])
        .run()
        .status(0);
    let store = resumed.store();
    let attempts = store.attempts("second");
    let outcomes: Vec<Option<Outcome>> = attempts.iter().map(|a| a.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Some(Outcome::Interrupted),
            Some(Outcome::Exited { code: 0 })
        ],
        "{attempts:?}"
    );
    assert_eq!(store.task("second").status, TaskState::Succeeded);
    // Interrupted by the crash, it did not take one of the task's retries (it has none).
    assert_eq!(resumed.json_task("second")["attempts"], 2);
    store.assert_consistent();
}
