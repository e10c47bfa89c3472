//! Task graphs of the earlier orchestrators load, with a note of what was mapped to what.

use baton_model::TaskState;

use crate::test::Test;

#[test]
fn legacy_nodes_run_with_conversion_notes() {
    let out = Test::new()
        .graph(
            "legacy.json",
            r#"{"id": "x", "nodes": [
                {"id": "a", "goal": "echo hi", "agentKind": "shell", "deps": []},
                {"id": "b", "goal": "echo there", "agentKind": "shell", "deps": ["a"]}
            ]}"#,
        )
        .args(&["run", "legacy.json", "--json"])
        .run()
        .status(0)
        .stderr_contains("note: legacy.json: converted from the legacy `nodes` format")
        .stderr_contains("nodes[].deps → needs");
    assert_eq!(out.json()["run"]["name"], "x");
    assert_eq!(out.json_task("a")["output"], "hi");
    assert_eq!(out.json_task("b")["output"], "there");
    let store = out.store();
    let (a, b) = (store.attempts("a"), store.attempts("b"));
    assert!(
        a[0].ended_at_ms.unwrap() <= b[0].started_at_ms,
        "b ran before a finished"
    );
    assert!(
        store
            .tasks()
            .iter()
            .all(|t| t.status == TaskState::Succeeded)
    );
}

#[test]
fn legacy_subtasks_are_agent_prompts() {
    let graph = r#"{"title": "y", "subtasks": [
        {"id": "s1", "title": "one", "description": "do one", "expectedFiles": ["src/a.rs"]},
        {"id": "s2", "title": "two", "description": "do two", "blockedBy": ["s1"],
         "acceptance": ["it works"]}
    ]}"#;
    Test::new()
        .graph("subtasks.json", graph)
        .args(&["plan", "subtasks.json", "--json"])
        .run()
        .status(0)
        .stderr_contains("blockedBy → needs")
        .stdout_contains("\"s2\"");
    // Run by claude: here, one that is not installed, which is said before anything starts.
    let out = Test::new()
        .graph("subtasks.json", graph)
        .graph(
            "baton.toml",
            "[engines.claude]\ncommand = \"/nonexistent/claude\"\n",
        )
        .args(&["run", "subtasks.json"])
        .run()
        .status(2)
        .stderr_contains("engine `claude`: `/nonexistent/claude` is not installed");
    assert!(!out.state_dir_exists());
}
