//! Removing old runs: on request, by default after every run, never a running one.

use crate::test::{RUN_LIMIT, Test, baton_in, running_long_task};

const GRAPH: &str = "[[task]]\nid = \"a\"\nrun = \"echo some output\"\n";

#[test]
fn keep_removes_older_runs_with_their_logs() {
    let mut out = Test::new()
        .graph("g.toml", GRAPH)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    for _ in 0..2 {
        out = out.then().args(&["run", "g.toml"]).run().status(0);
    }
    let runs = out.store().runs();
    assert_eq!(runs.len(), 3);
    let oldest = runs[2].id.to_string();
    assert!(out.path().join(".baton/runs").join(&oldest).exists());

    let dry = out
        .then()
        .args(&["prune", "--keep", "1", "--dry-run"])
        .run()
        .status(0)
        .stdout_contains("would remove 2 runs");
    assert_eq!(dry.store().runs().len(), 3, "a dry run removes nothing");

    let out = dry
        .then()
        .args(&["prune", "--keep", "1", "--json"])
        .run()
        .status(0);
    let report = out.json();
    assert_eq!(report["schema"], 1);
    assert_eq!(report["removed"].as_array().unwrap().len(), 2);
    let left = out.store().runs();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, runs[0].id, "the newest is kept");
    assert!(
        !out.path().join(".baton/runs").join(&oldest).exists(),
        "its logs went too"
    );
}

#[test]
fn older_than_and_missing_flags() {
    let out = Test::new()
        .graph("g.toml", GRAPH)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let out = out
        .then()
        .args(&["prune", "--older-than", "1h"])
        .run()
        .status(0)
        .stdout_contains("removed 0 runs");
    let out = out.then().args(&["prune"]).run().status(2);
    out.stderr_contains("--keep N");
}

#[test]
fn default_retention_applies_after_each_run() {
    let mut out = Test::new()
        .graph("g.toml", GRAPH)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    for _ in 0..3 {
        out = out
            .then()
            .env("BATON_KEEP_RUNS", "2")
            .args(&["run", "g.toml"])
            .run()
            .status(0);
    }
    assert_eq!(out.store().runs().len(), 2);
}

#[test]
fn a_running_run_is_never_pruned() {
    let running = running_long_task(false);
    let side = baton_in(
        running.path(),
        &["prune", "--keep", "0", "--older-than", "0s"],
    );
    assert_eq!(side.code, Some(0));
    assert!(side.stdout.contains("it is running"), "{}", side.stdout);
    let out = running.kill();
    assert_eq!(out.store().runs().len(), 1);
}

/// A run whose driver was killed while its task ran: the task's shell pid is in `pid`, and
/// its second attempt (after a resume) succeeds at once.
fn interrupted_run() -> crate::test::Output {
    let graph = "[[task]]\nid = \"long\"\nrun = '[ $BATON_ATTEMPT -gt 1 ] && exit 0; echo $$ > pid; sleep 30'\n";
    let mut running = Test::new()
        .graph("long.toml", graph)
        .file("tiny.toml", GRAPH)
        .args(&["run", "long.toml"])
        .spawn();
    running.await_that("the task's start to be recorded", RUN_LIMIT, |root| {
        let store = crate::test::Store::once_a_run_is_in(root)?;
        store.try_run()?;
        let recorded = !store.attempts("long").is_empty();
        (recorded && root.join("pid").exists()).then_some(())
    });
    running.kill()
}

fn task_pid(out: &crate::test::Output) -> i32 {
    let text = String::from_utf8(out.read("pid")).unwrap();
    text.trim().parse().unwrap()
}

#[test]
fn retention_never_removes_a_run_that_can_still_be_resumed() {
    let killed = interrupted_run();
    let interrupted = killed.store().run().id.to_string();
    let mut out = killed;
    for _ in 0..2 {
        out = out
            .then()
            .env("BATON_KEEP_RUNS", "1")
            .env("BATON_KEEP_LOG_BYTES", "0")
            .args(&["run", "tiny.toml"])
            .run()
            .status(0);
    }
    let ids: Vec<String> = out
        .store()
        .runs()
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    assert!(ids.contains(&interrupted), "{ids:?}");
    assert_eq!(ids.len(), 2, "the newest and the interrupted one: {ids:?}");
    let resumed = out
        .then()
        .args(&["resume", &interrupted, "--json"])
        .run()
        .status(0);
    assert_eq!(resumed.json_task("long")["state"], "succeeded");
    assert!(!crate::procs::alive(task_pid(&resumed)));
}

#[test]
fn pruning_an_interrupted_run_ends_what_its_driver_left_and_its_scratch() {
    let killed = interrupted_run();
    let run = killed.store().run().id.to_string();
    let pid = task_pid(&killed);
    assert!(crate::procs::alive(pid), "the orphaned task runs on");
    assert!(killed.scratch(&run).exists());
    let out = killed
        .then()
        .args(&["prune", "--keep", "0"])
        .run()
        .status(0)
        .stdout_contains("removed 1 runs");
    assert!(out.store().runs().is_empty());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while crate::procs::alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !crate::procs::alive(pid),
        "the orphaned task outlived the prune"
    );
    assert!(!out.scratch(&run).exists(), "its scratch was left");
    assert!(!out.path().join(".baton/runs").join(&run).exists());
}

#[test]
fn files_of_runs_without_a_record_are_swept_once_they_are_old() {
    let out = Test::new()
        .graph("g.toml", GRAPH)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let runs = out.path().join(".baton/runs");
    let recorded = out.store().run().id.to_string();
    // Each run's directory names its store; a stray names this one, or another.
    let ours = std::fs::read_to_string(runs.join(&recorded).join("store")).unwrap();
    for (stray, store) in [
        ("20200101-000000-aaaa", ours.as_str()),
        ("20200101-000000-bbbb", ours.as_str()),
        ("20200101-000000-cccc", "/elsewhere/other.db"),
    ] {
        std::fs::create_dir_all(runs.join(stray).join("logs")).unwrap();
        std::fs::write(
            runs.join(stray).join("logs/t.1.log"),
            "left by a killed prune",
        )
        .unwrap();
        std::fs::write(runs.join(stray).join("store"), store).unwrap();
    }
    // The old one was killed before its first record (finding 20): its scratch (on tmpfs
    // where there is one) is left too.
    let scratch = out.scratch("20200101-000000-aaaa").join("handoff");
    std::fs::create_dir_all(&scratch).unwrap();
    // One is old; one could be a run being started right now; one is another store's run.
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for old in ["20200101-000000-aaaa", "20200101-000000-cccc"] {
        std::fs::File::open(runs.join(old))
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }
    let out = out
        .then()
        .args(&["prune", "--keep", "5"])
        .run()
        .status(0)
        .stdout_contains("removed the files of run 20200101-000000-aaaa, which has no record");
    assert!(!runs.join("20200101-000000-aaaa").exists());
    assert!(
        !scratch.exists(),
        "its scratch stays: {}",
        scratch.display()
    );
    assert!(runs.join("20200101-000000-bbbb").exists());
    assert!(
        runs.join("20200101-000000-cccc").exists(),
        "another store's run was swept"
    );
    assert_eq!(out.store().runs().len(), 1, "the recorded run stays");
}
