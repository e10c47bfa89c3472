//! Reading what runs recorded, from another process: `runs`, `status`, `logs`, `events`,
//! including `--follow` on a run still in progress.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::test::{BATON, Test, baton_in};

fn spawn_in(dir: &Path, args: &[&str]) -> Child {
    Command::new(BATON)
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("BATON_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton")
}

/// Waits for `child` to exit, at most `limit`, and returns its stdout.
fn finish(mut child: Child, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("baton did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    out
}

const TWO_RUNS: &str = r#"
[[task]]
id = "greet"
run = "echo hello from greet"

[[task]]
id = "flaky"
retries = 1
backoff = "10ms"
run = 'echo "attempt $BATON_ATTEMPT"; [ "$BATON_ATTEMPT" -ge 2 ]'
"#;

#[test]
fn runs_and_status_show_what_was_recorded() {
    let first = Test::new()
        .graph("g.toml", TWO_RUNS)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let second = first
        .then()
        .graph("bad.toml", "[[task]]\nid = \"boom\"\nrun = \"exit 3\"\n")
        .args(&["run", "bad.toml"])
        .run()
        .status(1);
    let root = second.path().to_path_buf();

    let side = baton_in(&root, &["runs", "--json"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!(code, 0);
    let list: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(list["schema"], 1);
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    // Newest first.
    assert_eq!(runs[0]["name"], "bad");
    assert_eq!(runs[0]["state"], "failed");
    assert_eq!(runs[0]["failed"], 1);
    assert_eq!(runs[1]["state"], "succeeded");
    assert_eq!(runs[1]["succeeded"], 2);

    let side = baton_in(&root, &["runs"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!(code, 0);
    assert!(stdout.lines().count() == 3, "{stdout}");

    // The latest run by default; another by a prefix of its id.
    let side = baton_in(&root, &["status"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("boom") && stdout.contains("exit 3"),
        "{stdout}"
    );
    let older = runs[1]["id"].as_str().unwrap();
    let side = baton_in(&root, &["status", older, "--json"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!(code, 0);
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["schema"], 1);
    assert_eq!(result["run"]["id"], older);
    let flaky = &result["tasks"].as_array().unwrap()[1];
    assert_eq!(flaky["attempts"], 2);
    assert_eq!(flaky["output"], "attempt 2");

    let side = baton_in(&root, &["status", "19990101"]);
    let (code, stderr) = (side.code.unwrap_or(-1), side.stderr);
    assert_eq!(code, 2);
    assert!(stderr.contains("no run `19990101`"), "{stderr}");
    // Both runs started today: a date prefix alone is ambiguous.
    let side = baton_in(&root, &["status", &older[..4]]);
    let (code, stderr) = (side.code.unwrap_or(-1), side.stderr);
    assert_eq!(code, 2);
    assert!(stderr.contains("matches 2 runs"), "{stderr}");
}

#[test]
fn logs_print_each_attempt() {
    let out = Test::new()
        .graph("g.toml", TWO_RUNS)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let root = out.path().to_path_buf();
    let side = baton_in(&root, &["logs", "latest", "flaky", "--attempt", "1"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!((code, stdout.as_str()), (0, "attempt 1\n"));
    let side = baton_in(&root, &["logs", "latest", "flaky"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!((code, stdout.as_str()), (0, "attempt 2\n"));
    let side = baton_in(&root, &["logs", "latest", "nosuch"]);
    let (code, stderr) = (side.code.unwrap_or(-1), side.stderr);
    assert_eq!(code, 2);
    assert!(stderr.contains("no task `nosuch`"), "{stderr}");
    let side = baton_in(&root, &["logs", "latest", "flaky", "--attempt", "9"]);
    let (code, stderr) = (side.code.unwrap_or(-1), side.stderr);
    assert_eq!(code, 2);
    assert!(stderr.contains("no attempt 9"), "{stderr}");
}

#[test]
fn no_store_is_no_runs_for_runs_and_a_clear_error_for_a_run() {
    // Nothing recorded here yet, not even the store file: `runs` lists nothing, and succeeds.
    let out = Test::new().args(&["runs", "--json"]).run().status(0);
    assert!(!out.state_dir_exists());
    assert_eq!(out.stdout, "{\n  \"schema\": 1,\n  \"runs\": []\n}\n");
    assert_eq!(out.stderr, "");
    let out = out.then().args(&["runs"]).run().status(0);
    assert_eq!(out.stdout, "no runs recorded yet\n");
    // So does a named store that does not exist; it is not created by reading it.
    let out = out
        .then()
        .args(&["runs", "--json", "--store", "sqlite:records/none.db"])
        .run()
        .status(0);
    assert_eq!(out.json()["runs"], serde_json::json!([]));
    assert!(!out.path().join("records").exists());
    // A command about one run has none to show.
    out.then()
        .args(&["status"])
        .run()
        .status(2)
        .stderr_contains("no runs are recorded here");
}

#[test]
fn logs_and_events_follow_a_task_still_running() {
    let mut running = Test::new()
        .graph(
            "g.toml",
            r#"
[[task]]
id = "slow"
run = '''
echo "tick 1"
while [ ! -e go ]; do sleep 0.05; done
echo "tick 2"
'''
"#,
        )
        .args(&["run", "g.toml"])
        .spawn();
    let root = running.path().to_path_buf();
    // Wait until the first tick is in the log, seen through `baton logs`.
    running.await_that("the first tick", Duration::from_secs(30), |root| {
        let side = baton_in(root, &["logs", "latest", "slow"]);
        let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
        (code == 0 && stdout.contains("tick 1")).then_some(())
    });
    let logs = spawn_in(&root, &["logs", "latest", "slow", "--follow"]);
    let events = spawn_in(&root, &["events", "latest", "--follow", "--json"]);
    // Both followers keep running while the task does.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(root.join("go"), "").unwrap();
    // Keep the repository (owned by the output) until the followers are done.
    let _out = running.wait(Duration::from_secs(30)).status(0);
    let logged = finish(logs, Duration::from_secs(30));
    assert_eq!(logged, "tick 1\ntick 2\n");
    let events = finish(events, Duration::from_secs(30));
    let kinds: Vec<String> = events
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run-started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run-finished"));
    assert!(kinds.iter().any(|k| k == "attempt-finished"));
}

#[test]
fn a_killed_run_shows_as_interrupted() {
    let mut running = Test::new()
        .graph(
            "g.toml",
            "[[task]]\nid = \"long\"\nrun = \"touch started; sleep 30\"\n",
        )
        .args(&["run", "g.toml"])
        .spawn();
    running.await_that("the task to start", Duration::from_secs(30), |root| {
        root.join("started").exists().then_some(())
    });
    // The start of an attempt is recorded within a commit window: wait for it.
    running.await_that(
        "the start to be recorded",
        Duration::from_secs(30),
        |root| {
            let stdout = baton_in(root, &["status", "--json"]).stdout;
            stdout.contains("\"running\"").then_some(())
        },
    );
    let out = running.kill();
    let side = baton_in(out.path(), &["runs", "--json"]);
    let (code, stdout) = (side.code.unwrap_or(-1), side.stdout);
    assert_eq!(code, 0);
    let list: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(list["runs"][0]["state"], "interrupted");
    let stdout = baton_in(out.path(), &["status"]).stdout;
    assert!(stdout.contains("interrupted"), "{stdout}");
}

#[test]
fn status_of_a_big_run_says_how_many_tasks_it_does_not_list_and_all_lists_them() {
    let mut graph = String::from("[[task]]\nid = \"broken\"\nrun = \"exit 1\"\n");
    for i in 0..60 {
        graph.push_str(&format!("[[task]]\nid = \"t{i}\"\nrun = \"true\"\n"));
    }
    let out = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml"])
        .run()
        .status(1);
    let run = out.store().run().id.to_string();
    let hint =
        format!("60 succeeded tasks not listed; `baton status {run} --all` lists every task");
    // The summary at the end of the run, and `status`, list the failure and count the rest.
    let out = out.stdout_contains(&hint);
    let root = out.path().to_path_buf();
    let status = baton_in(&root, &["status"]).stdout;
    let rows = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with('t') && l.contains(" succeeded "))
            .count()
    };
    assert_eq!(rows(&status), 0, "{status}");
    assert!(status.contains("\nbroken "), "{status}");
    assert!(status.contains(&hint), "{status}");
    let all = baton_in(&root, &["status", "--all"]).stdout;
    assert_eq!(rows(&all), 60, "{all}");
    assert!(all.contains("\nbroken "), "{all}");
    assert!(!all.contains("not listed"), "{all}");
}

#[test]
fn tables_line_up_ids_and_names_in_any_script() {
    let out = Test::new()
        .graph(
            "g.toml",
            "name = \"日本\"\n\n[[task]]\nid = \"日本語-タスク\"\nrun = \"true\"\n\n[[task]]\nid = \"a\"\nrun = \"true\"\n",
        )
        .args(&["run", "g.toml", "--quiet"])
        .run()
        .status(0);
    // A CJK character takes two columns on a terminal: the next column starts at the same one
    // on every line.
    let column_of = |line: &str, word: &str| {
        let at = line
            .find(word)
            .unwrap_or_else(|| panic!("{word} in {line:?}"));
        line[..at]
            .chars()
            .map(|c| if c.is_ascii() { 1 } else { 2 })
            .sum::<usize>()
    };
    let status = out.then().args(&["status"]).run().status(0);
    let lines: Vec<&str> = status.stdout.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("TASK")).unwrap();
    let state = column_of(lines[header], "STATE");
    assert_eq!(
        column_of(lines[header + 1], "succeeded"),
        state,
        "{}",
        status.stdout
    );
    assert_eq!(
        column_of(lines[header + 2], "succeeded"),
        state,
        "{}",
        status.stdout
    );
    let runs = status.then().args(&["runs"]).run().status(0);
    let lines: Vec<&str> = runs.stdout.lines().collect();
    assert_eq!(
        column_of(lines[1], "succeeded"),
        column_of(lines[0], "STATE"),
        "{}",
        runs.stdout
    );
}

/// `status` of a run still going counts its running attempts in the concurrency timeline, up
/// to now: with two tasks running it said `peak 0 of 2` (only ended attempts were counted).
#[test]
fn status_of_a_running_run_counts_the_attempts_running_now() {
    let wait = "while [ ! -e go ]; do sleep 0.05; done";
    let graph = format!(
        "[run]\nconcurrency = 2\n\n[[task]]\nid = \"a\"\nrun = \"{wait}\"\n\n\
         [[task]]\nid = \"b\"\nrun = \"{wait}\"\n"
    );
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml"])
        .spawn();
    let status = running.await_that("both starts recorded", Duration::from_secs(30), |root| {
        let out = baton_in(root, &["status", "--json"]);
        let status: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
        let tasks = status["tasks"].as_array()?;
        (tasks.iter().filter(|t| t["state"] == "running").count() == 2).then_some(status)
    });
    assert_eq!(status["timeline"]["peak"], 2, "{}", status["timeline"]);
    std::fs::write(running.path().join("go"), "").unwrap();
    running.wait(Duration::from_secs(30)).status(0);
}
