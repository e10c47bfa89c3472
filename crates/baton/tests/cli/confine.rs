//! Where the kernel has no Landlock (here: `BATON_NO_LANDLOCK`, which makes baton behave as on
//! such a kernel): tasks that would be confined run unconfined after one note, and a task that
//! requires the sandbox refuses the run (or its takeover), naming it.

use std::time::Duration;

use crate::test::landlock_sandbox_test;
use crate::workspaces::repo_with;

/// Two tasks that would be confined (in worktrees), each trying to write in the main checkout.
const SOFT: &str = r#"
[defaults]
workspace = "worktree"
confine = "workspace"

[[task]]
id = "one"
run = 'echo one > "$(dirname "$(git rev-parse --git-common-dir)")/one.txt" 2>/dev/null || echo refused; echo "sandbox: ${BATON_SANDBOX:-none}"'

[[task]]
id = "two"
run = 'echo two > "$(dirname "$(git rev-parse --git-common-dir)")/two.txt" 2>/dev/null || echo refused; echo "sandbox: ${BATON_SANDBOX:-none}"'
"#;

const NOTE: &str = "baton: note: Landlock is not available (BATON_NO_LANDLOCK is set): tasks \
                    run without the write sandbox";

#[test]
fn without_landlock_confined_tasks_run_unconfined_after_one_note() {
    let out = repo_with(SOFT)
        .env("BATON_NO_LANDLOCK", "1")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    // Once, on stderr: stdout is the JSON result.
    assert_eq!(out.stderr.matches(NOTE).count(), 1, "{}", out.stderr);
    assert!(!out.stdout.contains("Landlock"), "{}", out.stdout);
    for (id, file) in [("one", "one.txt"), ("two", "two.txt")] {
        assert_eq!(out.json_task(id)["output"], "sandbox: none");
        assert!(out.path().join(file).exists(), "{id} was confined");
    }

    // The same graph where Landlock is enforced: no note, and the writes are refused.
    if !landlock_sandbox_test("without_landlock_confined_tasks_run_unconfined_after_one_note") {
        return;
    }
    let out = repo_with(SOFT)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert!(!out.stderr.contains("Landlock"), "{}", out.stderr);
    for (id, file) in [("one", "one.txt"), ("two", "two.txt")] {
        assert_eq!(out.json_task(id)["output"], "refused\nsandbox: landlock");
        assert!(!out.path().join(file).exists(), "{id} was not confined");
    }
}

/// A task that requires the sandbox, and one that does not care.
const REQUIRE: &str = r#"
[[task]]
id = "free"
run = "touch free-ran"

[[task]]
id = "strict"
confine = "require"
run = "touch strict-ran; sleep 30"
"#;

const REFUSAL: &str = "task `strict` has `confine = \"require\"` but Landlock is not \
                       available: BATON_NO_LANDLOCK is set";

#[test]
fn without_landlock_a_task_that_requires_it_refuses_the_run() {
    let out = repo_with(REQUIRE)
        .env("BATON_NO_LANDLOCK", "1")
        .args(&["run", "graph.toml"])
        .run()
        .status(2);
    assert!(out.stderr.contains(REFUSAL), "{}", out.stderr);
    assert!(out.stderr.contains("graph.toml"), "{}", out.stderr);
    // Refused before anything ran or was recorded.
    assert!(!out.path().join("free-ran").exists());
    assert!(!out.path().join("strict-ran").exists());
    assert!(!out.state_dir_exists(), "the refused run left .baton/");
}

#[test]
fn without_landlock_a_takeover_of_a_task_that_requires_it_is_refused() {
    // The run starts where Landlock is enforced; its driver dies; the takeover finds none.
    if !landlock_sandbox_test("without_landlock_a_takeover_of_a_task_that_requires_it_is_refused") {
        return;
    }
    let mut running = repo_with(REQUIRE).args(&["run", "graph.toml"]).spawn();
    running.await_that(
        "the strict task to start",
        Duration::from_secs(30),
        |root| root.join("strict-ran").exists().then_some(()),
    );
    let out = running.kill();
    let run = out.store().run().id.to_string();
    let resumed = out
        .then()
        .env("BATON_NO_LANDLOCK", "1")
        .args(&["resume", &run])
        .run()
        .status(2);
    assert!(resumed.stderr.contains(REFUSAL), "{}", resumed.stderr);
}

#[test]
fn a_confined_task_cannot_write_another_tasks_output() {
    if !landlock_sandbox_test("a_confined_task_cannot_write_another_tasks_output") {
        return;
    }
    // `forger` tries every place `victim`'s `$BATON_OUTPUT` could be, while `victim` runs.
    let graph = r#"
[defaults]
workspace = "worktree"
confine = "require"

[[task]]
id = "victim"
run = "sleep 1; echo fine"

[[task]]
id = "forger"
run = '''
own="$(dirname "$BATON_OUTPUT")"
for d in "$own" "$own/.." "$own/../victim" "$own/../../out"; do
  for f in victim.1.json 1.json; do echo '{"forged": true}' > "$d/$f" 2>/dev/null; done
done
echo '{"mine": true}' > "$BATON_OUTPUT"
'''
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let victim = out.json_task("victim");
    assert!(victim["output_json"].is_null(), "forged: {victim:#}");
    // The forger's own output is still its own.
    let forger = out.store().attempts("forger");
    assert_eq!(forger[0].output_json.as_deref(), Some(r#"{"mine":true}"#));
    let store = out.store();
    let victims = store.attempts("victim");
    assert_eq!(victims[0].output_json, None, "{victims:?}");
}
