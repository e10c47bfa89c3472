//! Operating a run on workers: logs read from the store, branches shared through a remote,
//! a worker asked to stop, the budget, status, cancel and retry as for a local run.

use super::*;

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
    poll_until(
        Duration::from_secs(30),
        "x and y to start their tasks",
        || started("x.log") && started("y.log"),
    );
    // Asked once, x lets `a` finish and report it, then leaves.
    kill(Pid::from_raw(x as i32), Signal::SIGTERM).unwrap();
    // Asked twice, y stops `b` and gives it back.
    kill(Pid::from_raw(y as i32), Signal::SIGTERM).unwrap();
    // The second only once y has taken the first: two sent before it looks are one (a pending
    // signal is not queued twice), and it would wait for `b`'s minute.
    poll_until(
        Duration::from_secs(20),
        "y to take the first SIGTERM",
        || {
            std::fs::read_to_string(test.path().join("y.log"))
                .unwrap_or_default()
                .contains("taking no more work")
        },
    );
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
        poll_until(
            Duration::from_secs(30),
            "the followers to end with the run",
            || child.try_wait().unwrap().is_some(),
        );
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
