//! `baton worker`: runs submitted with `baton run --detach` to a real PostgreSQL, run by
//! several worker processes; leases, fencing and takeover when workers die or pause.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::test::{Test, baton_in};

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
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(test.path(), &url, &run)["run"]["state"] == "queued" {
        assert!(Instant::now() < deadline, "no worker took the run");
        std::thread::sleep(Duration::from_millis(100));
    }
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
    let deadline = Instant::now() + Duration::from_secs(30);
    while holds("b.log") < 2 || holds("c.log") < 2 {
        assert!(Instant::now() < deadline, "b and c never took their share");
        std::thread::sleep(Duration::from_millis(50));
    }
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
    while !running
        .iter()
        .all(|t| test.path().join(format!("pids.{t}")).exists())
    {
        assert!(Instant::now() < deadline, "b's and c's tasks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
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
    let by_task = outcomes(&events(test.path(), &url, &run));
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

#[test]
fn a_workers_logs_are_read_from_the_store_where_its_files_are_not() {
    let url = baton_testpg::fresh_database();
    let graph = r#"
[[task]]
id = "build"
run = "echo compiling; echo the token is $SECRET_TOKEN; echo built"
verify = ["echo checked it"]
secret_env = ["SECRET_TOKEN"]
"#;
    let test = Test::new()
        .graph("g.toml", graph)
        .env("SECRET_TOKEN", "hunter22");
    let run = submit(&test, &url);
    // The worker works in a directory of its own: its logs are files there, and in the store.
    let elsewhere = test.path().parent().unwrap().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let mut command = test.command(&["--store", &url, "worker"], "w.log");
    command.current_dir(&elsewhere);
    let mut workers = Workers(vec![command.spawn().unwrap()]);
    let ended = await_end(&test, &url, &run, Duration::from_secs(60), &["w.log"]);
    assert_succeeded(&test, &ended, &["w.log"]);
    drop(workers.0.drain(..).collect::<Vec<_>>());
    std::fs::remove_dir_all(elsewhere.join(".baton/runs")).unwrap();

    let logs = baton_in(test.path(), &["--store", &url, "logs", &run, "build"]);
    assert_eq!(logs.code, Some(0), "{}", logs.stderr);
    assert!(logs.stdout.contains("compiling\n"), "{}", logs.stdout);
    assert!(logs.stdout.contains("built"), "{}", logs.stdout);
    assert!(
        logs.stdout.contains("checked it"),
        "the check's log too: {}",
        logs.stdout
    );
    assert!(
        !logs.stdout.contains("hunter22"),
        "redacted before it left: {}",
        logs.stdout
    );
    let task_only = baton_in(
        test.path(),
        &["--store", &url, "logs", &run, "build", "--phase", "task"],
    );
    assert!(
        !task_only.stdout.contains("checked it"),
        "{}",
        task_only.stdout
    );
}

#[test]
fn worktree_tasks_on_two_machines_share_their_branches_through_a_bare_remote() {
    use crate::workspaces::git;
    let url = baton_testpg::fresh_database();
    let place = tempfile::tempdir().unwrap();
    let bare = place.path().join("remote.git");
    let graph = format!(
        r#"
[run]
remote = "{}"

[defaults]
workspace = "worktree"

[[task]]
id = "a"
runs_on = ["one"]
run = "echo from a > a.txt"

[[task]]
id = "b"
runs_on = ["two"]
run = "echo from b > b.txt"

[[task]]
id = "c"
needs = ["a", "b"]
runs_on = ["two"]
run = "cat a.txt b.txt > c.txt"
"#,
        bare.display()
    );
    let test = crate::workspaces::repo_with(&graph);
    git(
        place.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        test.path(),
        &["push", "-q", bare.to_str().unwrap(), "HEAD:refs/heads/main"],
    );
    let user_head = git(test.path(), &["rev-parse", "HEAD"]);
    // Two "machines": a clone each, nothing shared but the remote and the database.
    let mut workers = Workers(Vec::new());
    for (name, extra) in [("one", &[][..]), ("two", &["--no-coordinate"][..])] {
        let clone = place.path().join(name);
        git(
            place.path(),
            &[
                "clone",
                "-q",
                "-b",
                "main",
                bare.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        let mut args = vec!["--store", &url, "worker", "--labels", name];
        args.extend_from_slice(extra);
        let mut command = test.command(&args, &format!("{name}.log"));
        command.current_dir(&clone);
        workers.0.push(command.spawn().unwrap());
    }
    let out = baton_in(
        test.path(),
        &["--store", &url, "run", "graph.toml", "--detach"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let run = out.stdout.trim().to_owned();
    let ended = await_end(
        &test,
        &url,
        &run,
        Duration::from_secs(90),
        &["one.log", "two.log"],
    );
    assert_succeeded(&test, &ended, &["one.log", "two.log"]);

    // The result is on the remote, merged from both machines' work; c saw a's file, made on
    // the other machine.
    let result = format!("baton/{run}/result");
    let show = |path: &str| git(&bare, &["show", &format!("{result}:{path}")]);
    assert_eq!(show("a.txt"), "from a");
    assert_eq!(show("b.txt"), "from b");
    assert_eq!(show("c.txt"), "from a\nfrom b");
    let one = std::fs::read_to_string(test.path().join("one.log")).unwrap();
    let two = std::fs::read_to_string(test.path().join("two.log")).unwrap();
    assert!(
        one.contains(&format!("{run} a attempt 1 ended: exit 0")),
        "{one}"
    );
    assert!(
        two.contains(&format!("{run} c attempt 1 ended: exit 0")),
        "{two}"
    );
    // The user's own branch is where it was; the run left no branch of its own there.
    assert_eq!(git(test.path(), &["rev-parse", "HEAD"]), user_head);
    assert_eq!(git(test.path(), &["branch", "--list", "baton/*"]), "");
}

#[test]
fn a_worker_asked_to_stop_finishes_what_it_runs_and_asked_again_gives_it_back() {
    let url = baton_testpg::fresh_database();
    let graph = r#"
[[task]]
id = "a"
runs_on = ["x"]
run = "sleep 2; echo done-a"

[[task]]
id = "b"
runs_on = ["y"]
run = "test -e once && echo second || { touch once; sleep 60; }"
"#;
    let test = Test::new().graph("g.toml", graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "coordinator", &[]);
    let x = workers.start(&test, &url, "x", &["--labels", "x", "--no-coordinate"]);
    let y = workers.start(&test, &url, "y", &["--labels", "y", "--no-coordinate"]);
    let started = |log: &str| {
        std::fs::read_to_string(test.path().join(log))
            .unwrap_or_default()
            .contains("attempt 1 started")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(started("x.log") && started("y.log")) {
        assert!(
            Instant::now() < deadline,
            "x and y never started their tasks"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Asked once, x lets `a` finish and report it, then leaves.
    kill(Pid::from_raw(x as i32), Signal::SIGTERM).unwrap();
    // Asked twice, y stops `b` and gives it back.
    kill(Pid::from_raw(y as i32), Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(y as i32), Signal::SIGTERM).unwrap();
    let mut exited = |pid: u32| {
        let child = workers.0.iter_mut().find(|c| c.id() == pid).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "worker {pid} did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(exited(y).success());
    assert!(exited(x).success());
    let x_log = std::fs::read_to_string(test.path().join("x.log")).unwrap();
    assert!(x_log.contains("taking no more work"), "{x_log}");
    assert!(
        x_log.contains(&format!("{run} a attempt 1 ended: exit 0")),
        "{x_log}"
    );
    let y_log = std::fs::read_to_string(test.path().join("y.log")).unwrap();
    assert!(
        y_log.contains(&format!("{run} b attempt 1 given back")),
        "{y_log}"
    );

    // Another worker with the label takes `b` again; the run succeeds, nothing was charged.
    workers.start(&test, &url, "y2", &["--labels", "y", "--no-coordinate"]);
    let ended = await_end(
        &test,
        &url,
        &run,
        Duration::from_secs(60),
        &["coordinator.log", "y2.log"],
    );
    assert_succeeded(&test, &ended, &["coordinator.log", "y2.log"]);
    let by_task = outcomes(&events(test.path(), &url, &run));
    assert_eq!(by_task["a"], ["exited"]);
    assert_eq!(by_task["b"], ["interrupted", "exited"]);
}

#[test]
fn the_runs_budget_holds_for_an_agent_on_a_worker() {
    use baton_mock_model::{MockModel, Reply, Rule, Script};
    // claude-sonnet-4-5 at $3 per million input tokens: the first answer costs $0.50, the
    // second $1.80, and the run may spend $2. The second starts (what one attempt costs on
    // average still fits), and is stopped on its worker when it takes the run past $2: the
    // worker knew the run had spent $0.50 before it. Alone, $1.80 would have fitted.
    let answer = |marker: &str, input_tokens: u64| {
        Rule::reply(Reply::Text {
            text: "done".into(),
            input_tokens,
            output_tokens: 10,
        })
        .when_contains(marker)
    };
    let model = MockModel::start(
        Script::new()
            .rule(answer("TASK-CHEAP", 166_667))
            .rule(
                Rule::text("done")
                    .when_contains("TASK-DEAR")
                    .when_last_contains("toolu_mock"),
            )
            // Mid-work (a tool call) when it passes the budget: stopped there.
            .rule(
                Rule::reply(
                    Reply::tool_use("Bash", serde_json::json!({"command": "true"}))
                        .costing(600_000, 10),
                )
                .when_contains("TASK-DEAR"),
            ),
    )
    .unwrap();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 2.0 }

[[task]]
id = "first"
prompt = "TASK-CHEAP one"

[[task]]
id = "second"
needs = ["first"]
prompt = "TASK-DEAR two"

[[task]]
id = "third"
needs = ["second"]
prompt = "TASK-CHEAP three"
"#;
    let url = baton_testpg::fresh_database();
    let test = crate::agents::with_claude(Test::new(), &model).graph("g.toml", graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "w", &[]);
    let ended = await_end(&test, &url, &run, Duration::from_secs(120), &["w.log"]);
    assert_eq!(ended["run"]["state"], "failed", "{ended}");
    let task = |id: &str| {
        ended["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(task("first")["state"], "succeeded", "{ended}");
    let second = task("second");
    assert_eq!(second["outcome"]["kind"], "over-budget", "{second}");
    assert!(
        second["outcome"]["limit"]
            .as_str()
            .unwrap()
            .starts_with("run budget $2.00 reached"),
        "{second}"
    );
    assert_eq!(task("third")["attempts"], 0, "{ended}");
}

#[test]
fn a_run_on_workers_is_followed_cancelled_and_retried_as_a_local_one() {
    let url = baton_testpg::fresh_database();
    // `slow` hangs until `go` exists; what needs it waits.
    let graph = r#"
[[task]]
id = "slow"
run = "echo started; if [ ! -e go ]; then sleep 60; fi; echo went"

[[task]]
id = "after"
needs = ["slow"]
run = "echo after {{ needs.slow.output }}"
"#;
    let test = Test::new().graph("g.toml", graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "w", &["--lease", "3s"]);
    // Followed from another process while it runs: the events, and the task's log.
    let mut events = test
        .command(&["--store", &url, "events", &run, "--follow"], "events.err")
        .spawn()
        .unwrap();
    let mut log = test
        .command(
            &["--store", &url, "logs", &run, "slow", "--follow"],
            "logs.err",
        )
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = status(test.path(), &url, &run);
        let slow = now["tasks"].as_array().unwrap()[0]["state"].clone();
        if slow == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "slow never ran: {now}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Cancelled from here: the worker stops the attempt at its next renewal.
    let cancelled = baton_in(test.path(), &["--store", &url, "cancel", &run]);
    assert_eq!(cancelled.code, Some(0), "{}", cancelled.stderr);
    let ended = await_end(&test, &url, &run, Duration::from_secs(60), &["w.log"]);
    assert_eq!(
        ended["run"]["state"],
        "cancelled",
        "{}",
        why_not(&test, &ended, &["w.log"])
    );
    let tasks = ended["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["state"], "cancelled", "{ended}");
    // The followers ended with the run, having shown it as it went.
    let followed = |child: &mut Child| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a follower outlived the run");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut text = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut text).unwrap();
        text
    };
    let shown = followed(&mut events);
    assert!(shown.contains("attempt-started slow#1"), "{shown}");
    assert!(shown.contains("run-finished"), "{shown}");
    let shown = followed(&mut log);
    assert!(shown.contains("started"), "{shown}");
    assert!(!shown.contains("went"), "{shown}");

    // Retried: the cancelled task runs again (through the store, driven by `retry`) and what
    // needed it follows.
    std::fs::write(test.path().join("go"), "").unwrap();
    let retried = baton_in(test.path(), &["--store", &url, "retry", &run, "--json"]);
    assert_eq!(retried.code, Some(0), "{}", retried.stderr);
    let now = status(test.path(), &url, &run);
    assert_eq!(now["run"]["state"], "succeeded", "{now}");
    let after = now["tasks"].as_array().unwrap()[1].clone();
    assert_eq!(after["output"], "after started\nwent", "{after}");
}

#[test]
fn a_run_no_worker_took_yet_is_cancelled_where_it_waits() {
    let url = baton_testpg::fresh_database();
    let test = Test::new().graph(
        "g.toml",
        "[[task]]\nid = \"a\"\nrun = \"echo ran >> ran.log\"\n",
    );
    let run = submit(&test, &url);
    let cancelled = baton_in(test.path(), &["--store", &url, "cancel", &run]);
    assert_eq!(cancelled.code, Some(0), "{}", cancelled.stderr);
    assert!(
        cancelled
            .stdout
            .contains("cancelled (before a worker took it)"),
        "{}",
        cancelled.stdout
    );
    let now = status(test.path(), &url, &run);
    assert_eq!(now["run"]["state"], "cancelled", "{now}");
    // A worker that comes later finds nothing to do.
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "w", &[]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(!test.path().join("ran.log").exists());
    assert_eq!(status(test.path(), &url, &run)["run"]["state"], "cancelled");
}

/// Finding 3 of the hostile pass: after PostgreSQL dropped their connections (restarted, to
/// its clients), workers warned "cannot claim work: the PostgreSQL database failed" once a
/// second for good, without the cause, and the run stayed `running`. They connect again.
#[test]
fn workers_carry_on_after_the_server_drops_their_connections() {
    let url = baton_testpg::fresh_database();
    let mut graph = String::from("[run]\nconcurrency = 2\n");
    for i in 0..16 {
        graph.push_str(&format!(
            "\n[[task]]\nid = \"t{i}\"\nrun = \"sleep 0.2; echo t{i} >> done.log\"\n"
        ));
    }
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "a", &["--slots", "2", "--lease", "6s"]);
    workers.start(&test, &url, "b", &["--slots", "2", "--lease", "6s"]);
    await_succeeded(&test, &url, &run, 3);
    // Twice, as the report restarted the server twice.
    baton_testpg::cut_connections(&url);
    std::thread::sleep(Duration::from_secs(1));
    baton_testpg::cut_connections(&url);

    let ended = await_end(
        &test,
        &url,
        &run,
        Duration::from_secs(90),
        &["a.log", "b.log"],
    );
    assert_succeeded(&test, &ended, &["a.log", "b.log"]);
    // The coordinator's turns were sent again until the store had them, and the workers'
    // ends: the run went on where it was, and no task ran twice.
    let done = std::fs::read_to_string(test.path().join("done.log")).unwrap();
    let mut lines: Vec<&str> = done.lines().collect();
    lines.sort_unstable();
    let mut expected: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
    expected.sort_unstable();
    assert_eq!(
        lines,
        expected,
        "{}",
        why_not(&test, &ended, &["a.log", "b.log"])
    );
    // A problem a worker reports says what caused it.
    for log in ["a.log", "b.log"] {
        let text = std::fs::read_to_string(test.path().join(log)).unwrap();
        for line in text
            .lines()
            .filter(|l| l.contains("the PostgreSQL database failed"))
        {
            assert!(
                line.contains("database failed: "),
                "a problem without its cause: {line}"
            );
        }
    }
}

/// #31 item 1: a worker that cannot reach the store for longer than its lease stops its
/// attempts itself, before their coordinator takes them as interrupted and runs them again, so
/// that two copies never run at once. The database refuses connections for twice the lease.
#[test]
fn a_worker_cut_off_past_its_lease_stops_its_attempt_before_it_runs_again() {
    let url = baton_testpg::fresh_database();
    let graph = "[[task]]\nid = \"slow\"\nrun = \"echo start >> runs.log; sleep 6; echo done >> runs.log\"\n";
    let test = Test::new().graph("g.toml", graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    workers.start(&test, &url, "a", &["--slots", "1", "--lease", "3s"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(test.path().join("runs.log")).is_ok_and(|l| l.contains("start"))
    {
        assert!(Instant::now() < deadline, "the task never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (server, db) = url.rsplit_once('/').unwrap();
    let admin = format!("{server}/postgres");
    baton_testpg::execute(
        &admin,
        &format!("ALTER DATABASE {db} ALLOW_CONNECTIONS false"),
    );
    baton_testpg::cut_connections(&url);
    std::thread::sleep(Duration::from_secs(6));
    baton_testpg::execute(
        &admin,
        &format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"),
    );

    let ended = await_end(&test, &url, &run, Duration::from_secs(90), &["a.log"]);
    assert_succeeded(&test, &ended, &["a.log"]);
    // The first copy was stopped while the store was out of reach (it never said `done`);
    // the second ran whole. Never two at once: each start is followed by its own end or by
    // nothing.
    let runs = std::fs::read_to_string(test.path().join("runs.log")).unwrap();
    assert_eq!(runs, "start\nstart\ndone\n", "{runs}");
    let log = std::fs::read_to_string(test.path().join("a.log")).unwrap();
    assert!(
        log.contains("stopped 1 attempt whose lease runs out"),
        "{log}"
    );
}

/// Stops process `pid` (SIGSTOP) for `how_long`, then lets it go on.
fn pause(pid: u32, how_long: Duration) {
    kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();
    std::thread::sleep(how_long);
    kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
}

/// Worker `a` (started with `a_args`, a 3 s lease) coordinating the run submitted last, then
/// workers `b` and `c` (two slots each, the same lease) to run its attempts: the workers, and
/// `a`'s pid.
fn coordinator_and_two(test: &Test, url: &str, a_args: &[&str]) -> (Workers, u32) {
    coordinator_on(test, url, a_args, false)
}

/// [`coordinator_and_two`], worker `a` on "another host": in a UTS namespace of its own
/// named `otherhost` (`unshare --uts`).
fn coordinator_elsewhere_and_two(test: &Test, url: &str, a_args: &[&str]) -> (Workers, u32) {
    coordinator_on(test, url, a_args, true)
}

fn coordinator_on(test: &Test, url: &str, a_args: &[&str], elsewhere: bool) -> (Workers, u32) {
    let mut workers = Workers(Vec::new());
    let mut args = a_args.to_vec();
    args.extend(["--lease", "3s"]);
    let coordinator = if elsewhere {
        let mut args_all = vec!["--store", url, "worker"];
        args_all.extend_from_slice(&args);
        let baton = test.command(&args_all, "a.log");
        let mut command = std::process::Command::new("unshare");
        command
            .args([
                "--uts",
                "sh",
                "-c",
                "hostname otherhost && exec \"$0\" \"$@\"",
            ])
            .arg(baton.get_program())
            .args(baton.get_args());
        if let Some(dir) = baton.get_current_dir() {
            command.current_dir(dir);
        }
        for (key, value) in baton.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        let log = std::fs::File::create(test.path().join("a.log")).unwrap();
        command
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(std::process::Stdio::null());
        let child = command.spawn().expect("start a worker on another host");
        let pid = child.id();
        workers.0.push(child);
        pid
    } else {
        workers.start(test, url, "a", &args)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(test.path().join("a.log"))
        .is_ok_and(|log| log.contains("coordinating run"))
    {
        assert!(Instant::now() < deadline, "worker a never coordinated");
        std::thread::sleep(Duration::from_millis(50));
    }
    for name in ["b", "c"] {
        workers.start(test, url, name, &["--slots", "2", "--lease", "3s"]);
    }
    (workers, coordinator)
}

/// A graph of `n` independent one-second tasks run `concurrency` at a time, each running
/// `script` (with `{id}` its task's id).
fn one_second_tasks(n: usize, concurrency: u32, script: &str) -> String {
    let mut graph = format!("[run]\nconcurrency = {concurrency}\n");
    for i in 0..n {
        let run = script.replace("{id}", &format!("t{i}"));
        graph.push_str(&format!("\n[[task]]\nid = \"t{i}\"\nrun = \"{run}\"\n"));
    }
    graph
}

/// #31 item 2 (split brain): a coordinator paused past its lease is taken over; when it
/// wakes, its fenced calls are refused and it says it lost the run. It took its successor's
/// ends and emptied its queue before (every take and stop was unfenced): 2 of 2 trials of the
/// report hung the run for good.
#[test]
fn a_coordinator_that_wakes_after_a_takeover_leaves_the_run_to_its_successor() {
    split_brain(false);
}

/// The same with the coordinator on another host, as the report ran it: a UTS namespace of
/// its own names it `otherhost`, so the others can tell nothing of its process and only its
/// lease decides.
#[test]
fn a_coordinator_on_another_host_that_wakes_after_a_takeover_leaves_the_run() {
    split_brain(true);
}

fn split_brain(other_host: bool) {
    let url = baton_testpg::fresh_database();
    // Twice the workers' slots: some attempts wait in the queue at any time.
    let mut graph = one_second_tasks(48, 8, "sleep 1; echo {id} >> done.log");
    // Each needs the one eight before it: what it is handed goes through the run's scratch,
    // which the woken coordinator removed from under its successor (the soak found it).
    for i in 8..48 {
        let task = format!("id = \"t{i}\"\n");
        graph = graph.replace(&task, &format!("{task}needs = [\"t{}\"]\n", i - 8));
    }
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    // The coordinator runs no attempt itself (it offers no engine a shell task needs): what
    // it held while paused is only the run.
    let (_workers, paused) = if other_host {
        coordinator_elsewhere_and_two(&test, &url, &["--engines", "claude"])
    } else {
        coordinator_and_two(&test, &url, &["--engines", "claude"])
    };
    await_succeeded(&test, &url, &run, 4);
    if other_host {
        let log = std::fs::read_to_string(test.path().join("a.log")).unwrap();
        assert!(log.starts_with("baton worker otherhost-"), "{log}");
    }
    pause(paused, Duration::from_secs(8));

    let logs = ["a.log", "b.log", "c.log"];
    let ended = await_end(&test, &url, &run, Duration::from_secs(90), &logs);
    assert_succeeded(&test, &ended, &logs);
    let done = std::fs::read_to_string(test.path().join("done.log")).unwrap();
    let finished: BTreeSet<&str> = done.lines().collect();
    assert_eq!(finished.len(), 48, "{}", why_not(&test, &ended, &logs));
    assert!(
        events(test.path(), &url, &run)
            .iter()
            .any(|e| e["kind"] == "run-resumed"),
        "the run was taken over while its coordinator was paused: {}",
        why_not(&test, &ended, &logs)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(test.path().join("a.log")).unwrap();
        if log.contains(&format!(
            "run {run} coordinated: lost: another worker took it over"
        )) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the woken coordinator never said it lost the run: {log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// #31 item 4 (finding 10): a worker taking over a run whose coordinator was SIGKILLed adopts
/// the attempts still running on live workers (and those waiting in the queue) instead of
/// running them again beside themselves. Before, every attempt in flight ran a second time:
/// the report counted 11 of 200 tasks completed twice and 25 overlapping pairs.
#[test]
fn a_takeover_after_the_coordinator_is_killed_adopts_what_runs_on_workers() {
    let url = baton_testpg::fresh_database();
    // More than the workers' slots: some attempts wait in the queue when it dies.
    let graph = one_second_tasks(
        30,
        6,
        "echo {id} >> started.log; sleep 1; echo {id} >> ended.log",
    );
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    // The coordinator runs no attempt itself: its death ends no attempt.
    let (_workers, coordinator) = coordinator_and_two(&test, &url, &["--engines", "claude"]);
    await_succeeded(&test, &url, &run, 5);
    kill(Pid::from_raw(coordinator as i32), Signal::SIGKILL).unwrap();

    let logs = ["a.log", "b.log", "c.log"];
    let ended = await_end(&test, &url, &run, Duration::from_secs(90), &logs);
    assert_succeeded(&test, &ended, &logs);
    let events = events(test.path(), &url, &run);
    assert!(
        events.iter().any(|e| e["kind"] == "run-resumed"),
        "the run was taken over"
    );
    // Every task started once and ended once: nothing in flight ran again.
    for file in ["started.log", "ended.log"] {
        let text = std::fs::read_to_string(test.path().join(file)).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        let mut expected: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
        expected.sort_unstable();
        assert_eq!(lines, expected, "{file}: {}", why_not(&test, &ended, &logs));
    }
    // The record agrees: no attempt was cut short by the takeover.
    let outcomes = outcomes(&events);
    for (task, ends) in &outcomes {
        assert_eq!(ends.len(), 1, "{task}: {ends:?}");
    }
}

/// #31 item 4, as the report ran it: the coordinator also runs attempts when it is killed.
/// Its own attempts' processes die with it (ended by the takeover on its host) and run again
/// once their leases lapse; what the other workers run is adopted. No task completes twice.
#[test]
fn a_coordinator_killed_with_attempts_of_its_own_completes_each_task_once() {
    let url = baton_testpg::fresh_database();
    let graph = one_second_tasks(30, 6, "sleep 1; echo {id} >> ended.log");
    let test = Test::new().graph("g.toml", &graph);
    let run = submit(&test, &url);
    let (_workers, coordinator) = coordinator_and_two(&test, &url, &["--slots", "2"]);
    await_succeeded(&test, &url, &run, 5);
    kill(Pid::from_raw(coordinator as i32), Signal::SIGKILL).unwrap();

    let logs = ["a.log", "b.log", "c.log"];
    let ended = await_end(&test, &url, &run, Duration::from_secs(90), &logs);
    assert_succeeded(&test, &ended, &logs);
    // Each task completed; twice only where the killed worker ran it: its process may have
    // done its work after the worker died and before the takeover ended it, unreported (at
    // least once is all a worker that dies can promise). What the live workers ran was
    // adopted, never run again.
    let text = std::fs::read_to_string(test.path().join("ended.log")).unwrap();
    let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
    for line in text.lines() {
        *completed.entry(line).or_default() += 1;
    }
    assert_eq!(completed.len(), 30, "{}", why_not(&test, &ended, &logs));
    let on_the_killed = std::fs::read_to_string(test.path().join("a.log")).unwrap();
    for (task, times) in completed {
        assert!(
            times == 1 || on_the_killed.contains(&format!(" {task} attempt 1 started")),
            "{task} completed {times} times, not on the killed worker: {}",
            why_not(&test, &ended, &logs)
        );
    }
}

/// #31 item 5 (finding 11): a worker paused past its lease must not let its attempts run on
/// beside their re-runs. Its watchdog (a process of its own) ends them when the worker stops
/// renewing, before the lease lapses: nothing the first copy does comes after the second
/// copy's start. Before, both copies ran side by side until the worker woke.
#[test]
fn a_paused_workers_attempts_stop_before_they_run_again_elsewhere() {
    let url = baton_testpg::fresh_database();
    let graph = "[[task]]\nid = \"slow\"\nrun = \"for i in 1 2 3 4 5 6 7 8 9 10 11 12; do \
                 echo tick-$BATON_ATTEMPT >> runs.log; sleep 0.5; done\"\n";
    let test = Test::new().graph("g.toml", graph);
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    // A coordinator that runs nothing, then the worker that takes the task.
    workers.start(&test, &url, "a", &["--engines", "claude", "--lease", "3s"]);
    let paused = workers.start(&test, &url, "b", &["--slots", "1", "--lease", "3s"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(test.path().join("runs.log")).is_ok_and(|l| l.contains("tick-1"))
    {
        assert!(Instant::now() < deadline, "the task never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    workers.start(&test, &url, "c", &["--slots", "1", "--lease", "3s"]);
    pause(paused, Duration::from_secs(8));

    let logs = ["a.log", "b.log", "c.log"];
    let ended = await_end(&test, &url, &run, Duration::from_secs(90), &logs);
    assert_succeeded(&test, &ended, &logs);
    let ticks = std::fs::read_to_string(test.path().join("runs.log")).unwrap();
    let second = ticks
        .lines()
        .position(|l| l == "tick-2")
        .unwrap_or_else(|| panic!("it never ran again: {ticks}"));
    assert!(
        ticks.lines().skip(second).all(|l| l != "tick-1"),
        "the paused worker's copy ran on beside its re-run: {ticks}"
    );
    assert_eq!(
        ticks.lines().filter(|l| *l == "tick-2").count(),
        12,
        "{ticks}"
    );
    let b_log = std::fs::read_to_string(test.path().join("b.log")).unwrap();
    assert!(
        b_log.contains("not heard from for") && b_log.contains("ended before their leases lapse"),
        "{b_log}"
    );
}

/// A process whose realtime clock runs `skew` seconds ahead (an `LD_PRELOAD` shim of
/// `clock_gettime`, built here with the system's C compiler): what a machine whose clock is off
/// looks like to baton. The environment to run it with.
fn skewed_clock(test: &Test, skew: i64) -> Vec<(String, String)> {
    let source = test.path().join("skew.c");
    std::fs::write(
        &source,
        r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(id, ts);
    const char *s = getenv("BATON_TEST_SKEW_SECONDS");
    if (r == 0 && id == CLOCK_REALTIME && s) ts->tv_sec += atol(s);
    return r;
}
"#,
    )
    .unwrap();
    let shim = test.path().join("skew.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg("-ldl")
        .status()
        .expect("a C compiler");
    assert!(built.success());
    vec![
        ("LD_PRELOAD".into(), shim.display().to_string()),
        ("BATON_TEST_SKEW_SECONDS".into(), skew.to_string()),
    ]
}

/// #31 item 9 (finding 18): times come from one clock, the store's. A coordinator an hour
/// ahead made a few seconds' run last an hour (`started_at` was the submitter's clock, the
/// attempts the coordinator's).
#[test]
fn a_worker_whose_clock_is_off_records_times_on_the_stores_clock() {
    let url = baton_testpg::fresh_database();
    let graph = one_second_tasks(4, 2, "sleep 0.3; echo {id} >> done.log");
    let test = Test::new().graph("g.toml", &graph);
    let before = baton_model::now_ms();
    let run = submit(&test, &url);
    let mut workers = Workers(Vec::new());
    let skew = skewed_clock(&test, 3600);
    let mut args = vec!["--store", url.as_str(), "worker", "--slots", "2"];
    args.extend(["--lease", "3s"]);
    let child = test
        .command(&args, "a.log")
        .envs(skew.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .spawn()
        .expect("start a worker");
    workers.0.push(child);
    let ended = await_end(&test, &url, &run, Duration::from_secs(60), &["a.log"]);
    assert_succeeded(&test, &ended, &["a.log"]);
    let after = baton_model::now_ms();
    let section = &ended["run"];
    let span = section["span_ms"].as_i64().unwrap_or(i64::MAX);
    assert!(
        span < 60_000,
        "a run of a few seconds lasted {span} ms: {section}"
    );
    for event in events(test.path(), &url, &run) {
        let at = event["at_ms"].as_i64().unwrap();
        assert!(
            (before - 5_000..=after + 5_000).contains(&at),
            "{event} is not on the store's clock ({before}..{after})"
        );
    }
}

/// #31 item 8 (finding 12): a worker in another checkout ran a run on its own HEAD, and the
/// submitter could neither diff nor apply the result. A run carries the repository it was
/// submitted from and the commit its base named there: a worker elsewhere (without a `[run]
/// remote`) leaves it, saying why, and one in that repository starts from that commit even if
/// HEAD has moved since.
#[test]
fn a_run_from_another_repository_is_left_to_a_worker_in_that_one() {
    use crate::workspaces::{git, repo_with};
    let url = baton_testpg::fresh_database();
    let mut graph = String::from("[run]\nconcurrency = 4\n");
    for id in ["a", "b", "c", "d"] {
        graph.push_str(&format!(
            "\n[[task]]\nid = \"{id}\"\nworkspace = \"worktree\"\n\
             run = \"sleep 1; git log -1 --format=%s > {id}.txt\"\n"
        ));
    }
    let test = repo_with(&graph);
    let submitted = git(test.path(), &["rev-parse", "HEAD"]);
    // Another checkout: a clone, one commit ahead.
    let other = test.path().join("elsewhere");
    git(test.path(), &["clone", "-q", ".", other.to_str().unwrap()]);
    std::fs::write(other.join("more.txt"), "more\n").unwrap();
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-qm", "DIFFERENT CHECKOUT"]);
    let out = baton_in(
        test.path(),
        &["--store", &url, "run", "graph.toml", "--detach"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let run = out.stdout.trim().to_owned();
    // HEAD moves after the submission: the run starts from what was submitted.
    std::fs::write(test.path().join("later.txt"), "later\n").unwrap();
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "LATER"]);

    let mut workers = Workers(Vec::new());
    let args = ["--store", url.as_str(), "worker", "--lease", "3s"];
    let child = test
        .command(&args, "b.log")
        .current_dir(&other)
        .spawn()
        .expect("start a worker");
    workers.0.push(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let said = format!("leaves run {run} to other workers: the run was submitted from");
    loop {
        let log = std::fs::read_to_string(test.path().join("b.log")).unwrap_or_default();
        if log.contains(&said) {
            assert!(log.contains("`[run] remote`"), "{log}");
            assert_eq!(log.matches(&said).count(), 1, "said once: {log}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other checkout's worker said nothing: {log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status(test.path(), &url, &run)["run"]["state"], "queued");

    // A worker there that only runs attempts claims some, gives them back, and claims no more
    // of the run's; the worker in the run's repository runs them all.
    let args = [
        "--store",
        url.as_str(),
        "worker",
        "--lease",
        "3s",
        "--no-coordinate",
    ];
    let child = test
        .command(&args, "c.log")
        .current_dir(&other)
        .spawn()
        .expect("start a worker");
    workers.0.push(child);
    workers.start(&test, &url, "a", &["--lease", "3s", "--slots", "2"]);
    let logs = ["a.log", "b.log", "c.log"];
    let ended = await_end(&test, &url, &run, Duration::from_secs(60), &logs);
    assert_succeeded(&test, &ended, &logs);
    let c_log = std::fs::read_to_string(test.path().join("c.log")).unwrap();
    assert!(
        c_log
            .matches(&format!("leaves run {run} to other workers"))
            .count()
            == 1,
        "{c_log}"
    );
    assert!(!c_log.contains("ended:"), "it ran an attempt: {c_log}");
    let result = format!("baton/{run}/result");
    for id in ["a", "b", "c", "d"] {
        assert_eq!(
            git(test.path(), &["show", &format!("{result}:{id}.txt")]),
            "the user's work"
        );
    }
    let merged = git(test.path(), &["log", "--format=%H", &result]);
    assert!(merged.lines().any(|c| c == submitted), "{merged}");
    assert!(!merged.contains(&git(test.path(), &["rev-parse", "HEAD"])));
}
