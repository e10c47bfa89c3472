//! Tasks that wait for a person: `approval = true`, `baton approve RUN TASK`, `baton reject`.

use std::path::Path;

use baton_model::TaskState;

use crate::test::{RUN_LIMIT, Store, Test, baton_in};

const GRAPH: &str = r#"
[[task]]
id = "gate"
approval = true
run = "echo deployed"

[[task]]
id = "other"
run = "echo meanwhile"

[[task]]
id = "after"
needs = ["gate"]
run = "echo after"
"#;

/// The run's id once `gate` waits for approval.
fn waiting(root: &Path) -> Option<String> {
    let store = Store::once_a_run_is_in(root)?;
    let run = store.try_run()?;
    let gate = store
        .tasks()
        .into_iter()
        .find(|t| t.task.as_str() == "gate")?;
    (gate.status == TaskState::Waiting).then(|| run.id.to_string())
}

#[test]
fn an_approved_task_starts_while_other_branches_went_on() {
    let mut running = Test::new()
        .graph("graph.toml", GRAPH)
        .args(&["run", "graph.toml", "--json"])
        .spawn();
    let run = running.await_that("gate waiting", RUN_LIMIT, waiting);
    // The rest of the graph did not wait for the person.
    running.await_that("other finished", RUN_LIMIT, |root: &Path| {
        let store = Store::once_a_run_is_in(root)?;
        let other = store
            .tasks()
            .into_iter()
            .find(|t| t.task.as_str() == "other")?;
        (other.status == TaskState::Succeeded).then_some(())
    });
    let side = baton_in(running.path(), &["status", &run]);
    assert!(side.stdout.contains("waiting"), "{}", side.stdout);
    // Its row says what to type, with the run's id.
    let row = side
        .stdout
        .lines()
        .find(|l| l.starts_with("gate "))
        .unwrap();
    assert!(
        row.ends_with(&format!(
            "waits for approval: `baton approve {run} gate` or `baton reject {run} gate`"
        )),
        "{}",
        side.stdout
    );
    let approved = baton_in(running.path(), &["approve", &run, "gate"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    assert!(
        approved.stdout.contains("approved `gate`"),
        "{}",
        approved.stdout
    );
    let out = running.wait(RUN_LIMIT).status(0);
    assert_eq!(out.json_task("gate")["output"], "deployed");
    assert_eq!(out.json_task("after")["state"], "succeeded");
    // A decision is made once.
    let again = baton_in(out.path(), &["reject", &run, "gate"]);
    assert_eq!(again.code, Some(2));
    assert!(again.stderr.contains("already ended"), "{}", again.stderr);
    out.store().assert_consistent();
}

#[test]
fn the_line_that_says_a_task_waits_names_the_run() {
    let mut running = Test::new()
        .graph("graph.toml", GRAPH)
        .args(&["run", "graph.toml"])
        .spawn();
    let run = running.await_that("gate waiting", RUN_LIMIT, waiting);
    let approved = baton_in(running.path(), &["approve", &run, "gate"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    // The commands it gives can be typed as they are: the run's id, not a placeholder.
    running.wait(RUN_LIMIT).status(0).stderr_contains(&format!(
        "baton: gate waits for approval: `baton approve {run} gate` or `baton reject {run} gate`\n"
    ));
}

#[test]
fn a_rejected_task_fails_with_the_reason_and_blocks_what_needs_it() {
    let mut running = Test::new()
        .graph("graph.toml", GRAPH)
        .args(&["run", "graph.toml", "--json"])
        .spawn();
    let run = running.await_that("gate waiting", RUN_LIMIT, waiting);
    let refused = baton_in(running.path(), &["approve", &run, "other"]);
    assert_eq!(refused.code, Some(2));
    assert!(
        refused.stderr.contains("does not wait for approval")
            || refused.stderr.contains("already ended"),
        "{}",
        refused.stderr
    );
    let rejected = baton_in(
        running.path(),
        &["reject", &run, "gate", "--reason", "not on a Friday"],
    );
    assert_eq!(rejected.code, Some(0), "{}", rejected.stderr);
    let out = running.wait(RUN_LIMIT).status(1);
    let gate = out.json_task("gate");
    assert_eq!(gate["state"], "failed", "{gate}");
    assert_eq!(gate["attempts"], 0, "{gate}");
    assert_eq!(gate["reason"], "rejected: not on a Friday", "{gate}");
    assert_eq!(out.json_task("after")["state"], "blocked");
    assert_eq!(out.json_task("other")["state"], "succeeded");
}
