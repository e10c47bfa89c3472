//! `--store postgres://…`: every command against a real PostgreSQL (the suite's server, a
//! database of its own per test), as against the SQLite file.

use crate::test::{Test, baton_in};
use std::time::Duration;

const GRAPH: &str = r#"
[defaults]
backoff = "10ms"

[[task]]
id = "fetch"
run = "echo fetched"

[[task]]
id = "flaky"
needs = ["fetch"]
retries = 1
run = 'test "$BATON_ATTEMPT" -gt 1 && echo {{ needs.fetch.output }} twice'
"#;

#[test]
fn a_run_is_recorded_in_postgres_and_read_back_by_every_reader() {
    let url = baton_testpg::fresh_database();
    let out = Test::new()
        .graph("graph.toml", GRAPH)
        .args(&["--store", &url, "run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("flaky")["attempts"], 2);
    assert_eq!(out.json_task("flaky")["output"], "fetched twice");
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    // Nothing went to the SQLite file.
    assert!(!out.path().join(".baton/baton.db").exists());

    let root = out.path().to_path_buf();
    let runs = baton_in(&root, &["--store", &url, "runs"]);
    assert_eq!(runs.code, Some(0), "{}", runs.stderr);
    assert!(runs.stdout.contains(&run), "{}", runs.stdout);
    let status = baton_in(&root, &["--store", &url, "status", &run]);
    assert!(status.stdout.contains("flaky"), "{}", status.stdout);
    assert!(
        status.stdout.contains("“fetched twice”"),
        "{}",
        status.stdout
    );
    let events = baton_in(&root, &["--store", &url, "events", &run, "--json"]);
    let kinds: Vec<String> = events
        .stdout
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
    assert!(kinds.iter().any(|k| k == "retry-scheduled"), "{kinds:?}");
    // The views read it as they read the file: the report, and watch (of a run that ended:
    // its status).
    let page = out.path().parent().unwrap().join("report.html");
    let report = baton_in(
        &root,
        &[
            "--store",
            &url,
            "report",
            &run,
            "-o",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(report.code, Some(0), "{}", report.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches(r#"data-status="ok""#).count(),
        2,
        "the retried attempt and fetch's"
    );
    assert_eq!(html.matches(r#"data-status="bad""#).count(), 1);
    let watched = baton_in(&root, &["--store", &url, "watch", &run]);
    assert!(
        watched.stdout.contains(&format!("run {run} of `graph`")),
        "{}",
        watched.stdout
    );
    // The same through BATON_STORE.
    let listed = std::process::Command::new(crate::test::BATON)
        .args(["runs", "--json"])
        .current_dir(&root)
        .env("BATON_STORE", &url)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&run));
}

#[test]
fn a_server_that_cannot_be_reached_is_named_without_its_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://baton:hunter2@127.0.0.1:{port}/runs");
    let out = Test::new().args(&["--store", &url, "runs"]).run().status(3);
    assert!(
        out.stderr.contains(&format!(
            "cannot reach the run store at postgres://baton@127.0.0.1:{port}/runs"
        )),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

#[test]
fn a_schema_newer_than_this_baton_is_refused_naming_its_version() {
    let url = baton_testpg::fresh_database();
    // A baton of the future migrated it.
    baton_testpg::execute(
        &url,
        "CREATE TABLE baton_schema (version INTEGER NOT NULL, name TEXT NOT NULL); \
         INSERT INTO baton_schema VALUES (99, 'v99_future')",
    );
    let out = Test::new().args(&["--store", &url, "runs"]).run().status(3);
    assert!(
        out.stderr
            .contains("has schema version 99, newer than version 6 that this baton knows"),
        "{}",
        out.stderr
    );
}

/// The store of `url`, as another process opens it.
fn store(url: &str) -> baton_store::PgStore {
    baton_store::PgStore::open(url).unwrap()
}

#[test]
fn a_driver_killed_mid_run_is_resumed_from_postgres_and_nothing_is_lost() {
    use baton_store::RunReader;
    let url = baton_testpg::fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran.log");
    let mut graph = String::from("[run]\nconcurrency = 4\n\n");
    for i in 0..24 {
        let needs = if i >= 4 {
            format!("needs = [\"t{}\"]\n", i - 4)
        } else {
            String::new()
        };
        graph.push_str(&format!(
            "[[task]]\nid = \"t{i}\"\n{needs}run = \"sleep 0.15; echo t{i} >> '{}'\"\n\n",
            ran.display()
        ));
    }
    let mut running = Test::new()
        .graph("graph.toml", &graph)
        .args(&["--store", &url, "run", "graph.toml", "--quiet"])
        .spawn();
    let run = running.await_that("a third done", crate::test::RUN_LIMIT, |_| {
        let store = baton_store::PgStore::open(&url).ok()?;
        let run = store.latest_run().ok()??;
        let done = store
            .tasks(&run.id)
            .ok()?
            .iter()
            .filter(|t| t.status == baton_model::TaskState::Succeeded)
            .count();
        (done >= 8).then(|| run.id.to_string())
    });
    let killed = running.kill();
    let before: Vec<String> = store(&url)
        .tasks(&baton_model::RunId::new(run.clone()).unwrap())
        .unwrap()
        .into_iter()
        .filter(|t| t.status == baton_model::TaskState::Succeeded)
        .map(|t| t.task.to_string())
        .collect();
    killed
        .then()
        .args(&["--store", &url, "resume", &run, "--quiet"])
        .run()
        .status(0);

    let store = store(&url);
    let id = baton_model::RunId::new(run).unwrap();
    let tasks = store.tasks(&id).unwrap();
    assert!(
        tasks
            .iter()
            .all(|t| t.status == baton_model::TaskState::Succeeded),
        "{tasks:#?}"
    );
    assert!(store.check_consistency(&id).unwrap().is_empty());
    let log = std::fs::read_to_string(&ran).unwrap();
    for task in &tasks {
        let lines = log.lines().filter(|l| *l == task.task.as_str()).count();
        let attempts = store.attempts(&id, &task.task).unwrap().len();
        assert!(
            lines >= 1 && lines <= attempts,
            "{}: {lines} lines, {attempts} attempts",
            task.task
        );
        // What had succeeded before the kill was not run again.
        if before.contains(&task.task.to_string()) {
            assert_eq!((lines, attempts), (1, 1), "{}", task.task);
        }
    }
}

#[test]
fn a_task_waiting_for_approval_is_approved_through_postgres() {
    use baton_store::RunReader;
    let url = baton_testpg::fresh_database();
    let mut running = Test::new()
        .graph(
            "graph.toml",
            "[[task]]\nid = \"gate\"\napproval = true\nrun = \"echo deployed\"\n",
        )
        .args(&["--store", &url, "run", "graph.toml", "--json"])
        .spawn();
    let run = running.await_that("gate waiting", crate::test::RUN_LIMIT, |_| {
        let store = baton_store::PgStore::open(&url).ok()?;
        let run = store.latest_run().ok()??;
        let gate = store.tasks(&run.id).ok()?.into_iter().next()?;
        (gate.status == baton_model::TaskState::Waiting).then(|| run.id.to_string())
    });
    let approved = baton_in(running.path(), &["--store", &url, "approve", &run, "gate"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    let out = running.wait(crate::test::RUN_LIMIT).status(0);
    assert_eq!(out.json_task("gate")["output"], "deployed");
    let decisions = store(&url)
        .decisions(&baton_model::RunId::new(run).unwrap())
        .unwrap();
    assert_eq!(decisions.len(), 1);
    assert!(decisions[0].approved);
}

#[test]
fn a_run_asked_through_the_store_to_cancel_is_cancelled_by_its_driver() {
    use baton_store::RunReader;
    let url = baton_testpg::fresh_database();
    let mut running = Test::new()
        .graph(
            "graph.toml",
            "[[task]]\nid = \"slow\"\nrun = \"sleep 60\"\n\n[[task]]\nid = \"after\"\nneeds = [\"slow\"]\nrun = \"true\"\n",
        )
        .args(&["--store", &url, "run", "graph.toml", "--json"])
        .spawn();
    let run = running.await_that("slow running", crate::test::RUN_LIMIT, |_| {
        let store = baton_store::PgStore::open(&url).ok()?;
        let run = store.latest_run().ok()??;
        let tasks = store.tasks(&run.id).ok()?;
        (tasks[0].status == baton_model::TaskState::Running).then_some(run.id)
    });
    // As `baton cancel` on a machine no signal from here would reach asks it.
    assert!(baton_store::WorkQueue::request_cancel(&store(&url), &run).unwrap());
    let out = running.wait(Duration::from_secs(60)).status(130);
    assert_eq!(out.json()["run"]["state"], "cancelled");
    assert_eq!(out.json_task("slow")["state"], "cancelled");
    // Answered: a retry later is not cancelled by the old request.
    let record = store(&url).run(&run).unwrap().unwrap();
    assert_eq!(record.status, baton_model::RunState::Cancelled);
    assert!(!store(&url).cancel_requested(&run).unwrap());
}
