//! Removing old runs: on request, by default after every run, never a running one.

use crate::test::{Test, baton_in, running_long_task};

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
