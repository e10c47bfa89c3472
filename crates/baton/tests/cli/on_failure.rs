//! `[run] on_failure`: what a failure does to the rest of the run.

use baton_model::{Outcome, RunState, TaskState};

use crate::test::Test;

#[test]
fn continue_runs_dependents_and_tells_them_of_the_failure() {
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[run]
on_failure = "continue"

[[task]]
id = "a"
run = "echo doomed; exit 3"

[[task]]
id = "b"
needs = ["a"]
run = "echo a was {{ needs.a.status }}"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("a")["state"], "failed");
    assert_eq!(out.json_task("b")["state"], "succeeded");
    assert_eq!(out.json_task("b")["output"], "a was failed");
    assert_eq!(out.json()["run"]["state"], "failed");

    let store = out.store();
    assert_eq!(store.task("b").status, TaskState::Succeeded);
    assert_eq!(store.run().status, RunState::Failed);
    store.assert_consistent();
}

#[test]
fn stop_cancels_running_tasks_and_skips_the_rest() {
    // `bad` and `long` head the longest chains, so they start first and take both slots; the
    // independent `q1` and `q2` wait for a slot that the failure never frees.
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[run]
concurrency = 2
on_failure = "stop"

[[task]]
id = "bad"
run = "sleep 0.3; exit 1"

[[task]]
id = "after-bad"
needs = ["bad"]
run = "echo never"

[[task]]
id = "long"
run = "sleep 30"

[[task]]
id = "after-long"
needs = ["long"]
run = "echo never"

[[task]]
id = "q1"
run = "echo never"

[[task]]
id = "q2"
run = "echo never"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    assert!(
        out.elapsed.as_secs() < 20,
        "`long` was not stopped: {:?}",
        out.elapsed
    );
    let state = |id: &str| out.json_task(id)["state"].as_str().unwrap().to_owned();
    assert_eq!(state("bad"), "failed");
    assert_eq!(state("long"), "cancelled");
    assert_eq!(out.json_task("long")["outcome"]["kind"], "cancelled");
    let why = out.json_task("long")["reason"].as_str().unwrap().to_owned();
    assert!(why.contains("stop"), "{why}");
    for id in ["after-long", "q1", "q2"] {
        assert_eq!(state(id), "skipped", "{id}");
    }
    assert!(
        matches!(state("after-bad").as_str(), "skipped" | "blocked"),
        "{}",
        state("after-bad")
    );
    assert_eq!(out.json()["run"]["state"], "failed");

    let store = out.store();
    let run = store.run();
    assert_eq!(run.status, RunState::Failed);
    assert_eq!(
        run.stop.map(|s| s.cause),
        Some(baton_model::StopCause::TaskFailed)
    );
    assert_eq!(store.attempts("long")[0].outcome, Some(Outcome::Cancelled));
    for id in ["after-long", "q1", "q2", "after-bad"] {
        assert!(store.attempts(id).is_empty(), "{id} must not have run");
    }
    store.assert_consistent();
}
