//! `baton worker`: runs submitted with `baton run --detach` to a real PostgreSQL, run by
//! several worker processes; leases, fencing and takeover when workers die or pause.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::test::{Test, baton_in, file_holds, poll_until};

/// Worker processes of a test, stopped (SIGKILL) when it ends however it ends.
struct Workers(Vec<Child>);

impl Workers {
    fn start(&mut self, test: &Test, url: &str, name: &str, extra: &[&str]) -> u32 {
        let mut args = vec!["--store", url, "worker"];
        args.extend_from_slice(extra);
        let child = test
            .command(&args, &format!("{name}.log"))
            .spawn()
            .expect("start a worker");
        let pid = child.id();
        self.0.push(child);
        pid
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn submit(test: &Test, url: &str) -> String {
    let out = baton_in(test.path(), &["--store", url, "run", "g.toml", "--detach"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("baton worker"), "{}", out.stderr);
    out.stdout.trim().to_owned()
}

fn status(dir: &Path, url: &str, run: &str) -> Value {
    let out = baton_in(dir, &["--store", url, "status", run, "--json"]);
    assert!(matches!(out.code, Some(0..=2)), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// Polls the run's status until it has ended (for good: an interrupted run is taken over); panics after `limit` with the workers' logs.
fn await_end(test: &Test, url: &str, run: &str, limit: Duration, logs: &[&str]) -> Value {
    if let Some(ended) = await_end_or(test, url, run, limit) {
        return ended;
    }
    let logs: Vec<String> = logs
        .iter()
        .map(|l| {
            let text = std::fs::read_to_string(test.path().join(l)).unwrap_or_default();
            format!("--- {l}:\n{text}")
        })
        .collect();
    panic!("run {run} has not ended\n{}", logs.join("\n"));
}

/// What a run that did not succeed came to, short enough to read in a CI log that keeps only
/// part of the output: its state, every task that did not succeed with its outcome and
/// reason, the problems the workers reported, and the run's `next`.
fn why_not(test: &Test, ended: &Value, logs: &[&str]) -> String {
    let mut said = format!("run {}", ended["run"]["state"]);
    for task in ended["tasks"].as_array().into_iter().flatten() {
        if task["state"] != "succeeded" {
            said.push_str(&format!(
                "\n  {} {} after {} attempt(s): {} / {} / {}",
                task["id"],
                task["state"],
                task["attempts"],
                task["outcome"],
                task["reason"],
                task["output"]
            ));
        }
    }
    for log in logs {
        let text = std::fs::read_to_string(test.path().join(log)).unwrap_or_default();
        for line in text.lines().filter(|l| {
            !l.contains(" started") && !l.contains(" ended: exit 0") && !l.contains("claimed")
        }) {
            said.push_str(&format!("\n  {log}: {line}"));
        }
    }
    said.push_str(&format!("\n  next: {}", ended["next"]));
    said
}

/// Waits (30 s at most) until `n` of the run's tasks succeeded.
fn await_succeeded(test: &Test, url: &str, run: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = status(test.path(), url, run);
        let done = now["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["state"] == "succeeded")
            .count();
        if done >= n {
            return;
        }
        assert!(Instant::now() < deadline, "the run never got going: {now}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts that the run succeeded, saying why not where it did not.
fn assert_succeeded(test: &Test, ended: &Value, logs: &[&str]) {
    assert_eq!(
        ended["run"]["state"],
        "succeeded",
        "{}",
        why_not(test, ended, logs)
    );
}

/// The run's event log.
fn events(dir: &Path, url: &str, run: &str) -> Vec<Value> {
    let out = baton_in(dir, &["--store", url, "events", run, "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event"))
        .collect()
}

/// The most attempts the log has running at once.
fn peak_running(events: &[Value]) -> usize {
    let (mut running, mut peak) = (0usize, 0usize);
    for event in events {
        match event["kind"].as_str() {
            Some("attempt-started") => {
                running += 1;
                peak = peak.max(running);
            }
            Some("attempt-finished") => running -= 1,
            _ => {}
        }
    }
    peak
}

/// Per task, the outcomes of its attempts, in order.
fn outcomes(events: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut by_task: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in events {
        if event["kind"] == "attempt-finished" {
            let outcome = &event["outcome"];
            let name = outcome["kind"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| outcome.to_string());
            by_task
                .entry(event["task"].as_str().unwrap().to_owned())
                .or_default()
                .push(name);
        }
    }
    by_task
}

#[test]
fn five_hundred_tasks_on_three_workers_complete_exactly_once_within_the_runs_concurrency() {
    let url = baton_testpg::fresh_database();
    // Tasks in chains of five: each hands its output on; every one appends its id once.
    let mut graph = String::from("[run]\nconcurrency = 6\n");
    for i in 0..500 {
        graph.push_str(&format!(
            "\n[[task]]\nid = \"t{i}\"\nrun = \"echo t{i} >> done.log; echo from-t{i}\"\n"
        ));
        if i % 5 != 0 {
            graph.push_str(&format!("needs = [\"t{}\"]\n", i - 1));
        }
    }
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    let queued = status(test.path(), &url, &run);
    assert_eq!(queued["run"]["state"], "queued");
    assert_eq!(queued["next"], serde_json::json!(["baton workers"]));
    let shown = baton_in(test.path(), &["--store", &url, "status", &run]);
    assert!(
        shown
            .stdout
            .contains(&format!("queued for a worker: 500 tasks (run {run})")),
        "{}",
        shown.stdout
    );

    let mut workers = Workers(Vec::new());
    for name in ["w1", "w2", "w3"] {
        workers.start(&test, &url, name, &["--slots", "3"]);
    }
    // While they work, `baton workers` lists all three.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = baton_in(test.path(), &["--store", &url, "workers", "--json"]);
        let listed: Value = serde_json::from_str(&listed.stdout).unwrap_or(Value::Null);
        if listed.as_array().is_some_and(|l| l.len() == 3) {
            assert!(listed.as_array().unwrap().iter().all(|w| w["slots"] == 3));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the workers never all registered: {listed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let logs = ["w1.log", "w2.log", "w3.log"];
    let ended = await_end(&test, &url, &run, Duration::from_secs(240), &logs);
    assert_succeeded(&test, &ended, &logs);

    // Every task once, from the records and from what the tasks themselves wrote.
    let tasks = ended["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 500);
    for task in tasks {
        assert_eq!(task["state"], "succeeded", "{task}");
        assert_eq!(task["attempts"], 1, "{task}");
    }
    let log = std::fs::read_to_string(test.path().join("done.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 500, "each task appended once");
    assert_eq!(lines.iter().collect::<BTreeSet<_>>().len(), 500);
    let t4 = tasks.iter().find(|t| t["id"] == "t4").unwrap();
    assert_eq!(t4["output"], "from-t4");

    let events = events(test.path(), &url, &run);
    assert!(
        peak_running(&events) <= 6,
        "the run's concurrency holds across workers"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "attempt-finished")
            .count(),
        500
    );
    // The work was shared: more than one worker ran attempts.
    let ran: Vec<usize> = logs
        .iter()
        .map(|l| {
            std::fs::read_to_string(test.path().join(l))
                .unwrap()
                .matches("ended: exit 0")
                .count()
        })
        .collect();
    assert_eq!(ran.iter().sum::<usize>(), 500, "{ran:?}");
    assert!(ran.iter().filter(|&&n| n > 0).count() >= 2, "{ran:?}");
}

#[test]
fn a_killed_worker_and_a_paused_one_lose_nothing_and_the_paused_ones_late_end_is_refused() {
    let url = baton_testpg::fresh_database();
    let mut graph = String::from("[run]\nconcurrency = 6\n");
    for i in 0..12 {
        graph.push_str(&format!(
            "\n[[task]]\nid = \"t{i}\"\nrun = \"echo $$ >> pids.$BATON_TASK_ID; sleep 8; echo t{i} >> done.log\"\n"
        ));
    }
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    // The first coordinates; the other two only run attempts, on short leases.
    workers.start(&test, &url, "a", &["--slots", "2"]);
    poll_until(Duration::from_secs(30), "a worker to take the run", || {
        status(test.path(), &url, &run)["run"]["state"] != "queued"
    });
    let short = ["--slots", "2", "--lease", "2s", "--no-coordinate"];
    let killed = workers.start(&test, &url, "b", &short);
    let paused = workers.start(&test, &url, "c", &short);
    // Once both hold attempts, one dies and the other freezes past its lease.
    let holds = |log: &str| {
        std::fs::read_to_string(test.path().join(log))
            .unwrap_or_default()
            .matches("started")
            .count()
    };
    poll_until(
        Duration::from_secs(30),
        "b and c to take their share",
        || holds("b.log") >= 2 && holds("c.log") >= 2,
    );
    // Their tasks' processes are running (a claim is logged before its process starts).
    let held_by = |log: &str| -> Vec<String> {
        std::fs::read_to_string(test.path().join(log))
            .unwrap()
            .lines()
            .filter(|l| l.ends_with("attempt 1 started"))
            .map(|l| l.split_whitespace().nth(3).unwrap().to_owned())
            .collect()
    };
    let running: Vec<String> = [held_by("b.log"), held_by("c.log")].concat();
    poll_until(
        Duration::from_secs(30),
        "b's and c's tasks to start",
        || {
            running
                .iter()
                .all(|t| test.path().join(format!("pids.{t}")).exists())
        },
    );
    kill(Pid::from_raw(killed as i32), Signal::SIGKILL).unwrap();
    kill(Pid::from_raw(paused as i32), Signal::SIGSTOP).unwrap();
    // `baton workers` says which one is gone: the killed one is lost, the paused one is
    // still a process here.
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let out = baton_in(test.path(), &["--store", &url, "workers", "--json"]);
        let listed: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
        let state = |pid: u32| {
            listed
                .as_array()
                .and_then(|l| l.iter().find(|w| w["pid"] == pid))
                .map(|w| w["state"].clone())
        };
        if state(killed) == Some(Value::from("lost")) {
            assert_eq!(state(paused), Some(Value::from("alive")), "{listed}");
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "the killed worker is not lost: {listed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let table = baton_in(test.path(), &["--store", &url, "workers"]).stdout;
    let lost_id = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["pid"] == killed)
        .and_then(|w| w["id"].as_str())
        .unwrap()
        .to_owned();
    let row = table
        .lines()
        .find(|l| l.starts_with(&lost_id))
        .unwrap_or_default();
    assert!(
        row.contains(" lost ") && row.contains("run again elsewhere when their leases lapse"),
        "{table}"
    );
    let c_held: Vec<String> = std::fs::read_to_string(test.path().join("c.log"))
        .unwrap()
        .lines()
        .filter(|l| l.ends_with("attempt 1 started"))
        .map(|l| l.split_whitespace().nth(3).unwrap().to_owned())
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    // Not heard from past its 2 s lease, the paused one is lost too, though its process is
    // here: its claims lapsed (what a worker on another host looks like when it dies).
    let out = baton_in(test.path(), &["--store", &url, "workers", "--json"]);
    let listed: Value = serde_json::from_str(&out.stdout).unwrap();
    let paused_row = listed
        .as_array()
        .and_then(|l| l.iter().find(|w| w["pid"] == paused))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(paused_row["state"], "lost", "{listed}");
    assert!(
        paused_row["heard_ms_ago"].as_i64() > Some(2_000),
        "{listed}"
    );
    kill(Pid::from_raw(paused as i32), Signal::SIGCONT).unwrap();

    let ended = await_end(
        &test,
        &url,
        &run,
        Duration::from_secs(120),
        &["a.log", "b.log", "c.log"],
    );
    assert_succeeded(&test, &ended, &["a.log", "b.log", "c.log"]);
    let c_log = std::fs::read_to_string(test.path().join("c.log")).unwrap();
    for task in &c_held {
        assert!(
            c_log.contains(&format!("{task} attempt 1 is no longer this worker's")),
            "{c_log}"
        );
    }
    // The recorded ends: each task succeeded once; the attempts of the dead and the paused
    // worker were interrupted (and not charged: none of these tasks has retries).
    let log = events(test.path(), &url, &run);
    let by_task = outcomes(&log);
    // Each interrupted attempt is said to be lost with the worker that lost it, before its
    // end; the killed worker's among them (#32 item 5).
    let lost: Vec<&Value> = log.iter().filter(|e| e["kind"] == "attempt-lost").collect();
    assert!(
        lost.iter().any(|e| e["worker"] == lost_id.as_str()),
        "{lost_id} lost nothing: {lost:?}"
    );
    for event in &lost {
        let (task, attempt) = (&event["task"], &event["attempt"]);
        let end = log
            .iter()
            .find(|e| {
                e["kind"] == "attempt-finished" && e["task"] == *task && e["attempt"] == *attempt
            })
            .unwrap_or_else(|| panic!("no end of {event}"));
        assert!(
            end["seq"].as_u64() > event["seq"].as_u64(),
            "{event} after {end}"
        );
        assert_eq!(end["outcome"]["kind"], "interrupted", "{end}");
    }
    // `baton events` says it in words.
    let told = baton_in(test.path(), &["--store", &url, "events", &run]).stdout;
    assert!(
        told.contains(&format!("worker {lost_id} lost; runs again elsewhere")),
        "{told}"
    );
    assert_eq!(by_task.len(), 12);
    let mut interrupted = 0;
    for (task, ends) in &by_task {
        assert_eq!(
            ends.last().map(String::as_str),
            Some("exited"),
            "{task}: {ends:?}"
        );
        assert_eq!(
            ends.iter().filter(|e| *e == "exited").count(),
            1,
            "{task}: {ends:?}"
        );
        interrupted += ends.iter().filter(|e| *e == "interrupted").count();
    }
    assert!(interrupted >= 4, "b's two and c's two: {by_task:?}");
    let done = std::fs::read_to_string(test.path().join("done.log")).unwrap();
    // What the killed worker left running was stopped by a worker on its host before it could
    // write (its tasks sleep 8 s): every task wrote once, by the attempt that counted.
    for task in by_task.keys() {
        assert_eq!(
            done.lines().filter(|l| l == task).count(),
            1,
            "{task}: {done}"
        );
    }
    // Any worker on the host stops them: a or c here or, as the suite runs, a worker of
    // another test; which one says so is not asserted.
    for task in &c_held {
        assert!(by_task[task].len() >= 2, "{task}: {:?}", by_task[task]);
        // Its first attempt's process was stopped when the worker learned it had lost it
        // (before it could write), and the attempt that replaced it wrote once.
        let pids = std::fs::read_to_string(test.path().join(format!("pids.{task}"))).unwrap();
        let first: i32 = pids.lines().next().unwrap().parse().unwrap();
        assert!(
            kill(Pid::from_raw(first), None).is_err(),
            "{task}'s first process lives"
        );
        assert_eq!(
            done.lines().filter(|l| l == task).count(),
            1,
            "{task}: {done}"
        );
    }
}

#[test]
fn when_the_coordinator_dies_another_worker_takes_the_run_over() {
    let url = baton_testpg::fresh_database();
    let mut graph = String::from("[run]\nconcurrency = 2\n");
    for i in 0..16 {
        graph.push_str(&format!(
            "\n[[task]]\nid = \"t{i}\"\nrun = \"sleep 0.3; echo t{i} >> done.log\"\n"
        ));
        if i > 0 {
            graph.push_str(&format!("needs = [\"t{}\"]\n", i - 1));
        }
    }
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    let first = workers.start(&test, &url, "a", &[]);
    await_succeeded(&test, &url, &run, 3);
    workers.start(&test, &url, "b", &[]);
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(first as i32), Signal::SIGKILL).unwrap();

    let ended = await_end(
        &test,
        &url,
        &run,
        Duration::from_secs(60),
        &["a.log", "b.log"],
    );
    assert_succeeded(&test, &ended, &["a.log", "b.log"]);
    // It says so once the run's result is read back, a moment after the run ended.
    let said = format!("run {run} coordinated: succeeded");
    let deadline = Instant::now() + Duration::from_secs(20);
    let b_log = loop {
        let b_log = std::fs::read_to_string(test.path().join("b.log")).unwrap();
        if b_log.contains(&said) || Instant::now() > deadline {
            break b_log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        b_log.contains(&format!("coordinating run {run}")),
        "{b_log}"
    );
    assert!(b_log.contains(&said), "{b_log}");
    for task in ended["tasks"].as_array().unwrap() {
        assert_eq!(task["state"], "succeeded", "{task}");
    }
    let events = events(test.path(), &url, &run);
    // Recorded as the worker's takeover, not as a person's `baton resume`.
    assert!(
        events.iter().any(|e| e["kind"] == "run-resumed"),
        "the takeover is recorded"
    );
    let text = baton_in(test.path(), &["--store", &url, "events", &run]).stdout;
    assert!(
        text.contains("taken over by worker") && text.contains("its coordinator was gone"),
        "{text}"
    );
}

#[test]
fn detach_and_workers_need_a_postgresql_store() {
    let test = Test::new().graph("g.toml", "[[task]]\nid = \"a\"\nrun = \"true\"\n");
    for args in [
        &["run", "g.toml", "--detach"][..],
        &["worker"][..],
        &["workers"][..],
    ] {
        let out = baton_in(test.path(), args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("needs a PostgreSQL store"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("--store postgres://"), "{}", out.stderr);
    }
    let url = baton_testpg::fresh_database();
    let none = baton_in(test.path(), &["--store", &url, "workers"]);
    assert_eq!(none.code, Some(0), "{}", none.stderr);
    assert!(
        none.stdout.contains("start one with `baton worker`"),
        "{}",
        none.stdout
    );
}

/// A best-of task's candidates run on whichever worker coordinates the run, so its `runs_on`
/// could not be honoured: `--detach` refuses the graph, naming the file, the task, its labels
/// and what to do, before it needs a store. Without `runs_on` the same task is submitted (here
/// it gets as far as asking for a PostgreSQL store). Before, it was queued and its candidates
/// ran on a worker without the label.
#[test]
fn detach_refuses_a_best_of_task_that_says_runs_on() {
    let task = "[[task]]\nid = \"pick\"\nprompt = \"write it\"\nengine = \"claude\"\nbest_of = 2\n";
    let test = Test::new().graph("g.toml", &format!("{task}runs_on = [\"gpu\"]\n"));
    let out = baton_in(test.path(), &["run", "g.toml", "--detach"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    for part in [
        "g.toml",
        "task `pick` is best-of (2 candidates)",
        "runs_on = [\"gpu\"]",
        "remove their `runs_on`",
    ] {
        assert!(out.stderr.contains(part), "{part}: {}", out.stderr);
    }
    let plain = Test::new().graph("g.toml", task);
    let out = baton_in(plain.path(), &["run", "g.toml", "--detach"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("needs a PostgreSQL store"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_task_that_runs_on_a_label_goes_to_a_worker_that_has_it() {
    let url = baton_testpg::fresh_database();
    let graph = r#"
[[task]]
id = "train"
runs_on = ["gpu"]
run = "echo trained"

[[task]]
id = "report"
needs = ["train"]
run = "echo {{ needs.train.output }} and reported"
"#;
    let test = Test::new().graph("g.toml", graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "plain", &["--slots", "1"]);
    let ended_early = await_end_or(&test, &url, &run, Duration::from_secs(3));
    assert!(
        ended_early.is_none(),
        "no worker has the label: the run waits"
    );
    workers.start(
        &test,
        &url,
        "gpu",
        &["--labels", "gpu,big", "--no-coordinate"],
    );
    let ended = await_end(
        &test,
        &url,
        &run,
        Duration::from_secs(60),
        &["plain.log", "gpu.log"],
    );
    assert_succeeded(&test, &ended, &["plain.log", "gpu.log"]);
    let gpu = std::fs::read_to_string(test.path().join("gpu.log")).unwrap();
    assert!(
        gpu.contains(&format!("{run} train attempt 1 ended: exit 0")),
        "{gpu}"
    );
    let report = ended["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "report")
        .cloned();
    assert_eq!(report.unwrap()["output"], "trained and reported");

    let bad = Test::new()
        .graph(
            "g.toml",
            "[[task]]\nid = \"a\"\nruns_on = [\"g p u\"]\nrun = \"true\"\n",
        )
        .args(&["plan", "g.toml"])
        .run()
        .status(2);
    bad.stderr_contains("runs_on label `g p u` is not a label");
}

/// The run's status once it has ended, or `None` if it has not within `limit`. An
/// interrupted run has not ended: its coordinator died, and a worker is about to take it over.
fn await_end_or(test: &Test, url: &str, run: &str, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let now = status(test.path(), url, run);
        if !matches!(
            now["run"]["state"].as_str(),
            Some("queued" | "running" | "interrupted")
        ) {
            return Some(now);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

mod faults;
mod operating;
