//! Graph files in, graphs or diagnostics out: what a user of `baton run FILE` sees.

use std::path::Path;
use std::time::Duration;

use baton_graph::{Action, Graph, LoadError, Workspace, load, load_str};
use baton_model::OnFailure;

fn ok(name: &str, text: &str) -> Graph {
    match load_str(Path::new(name), text) {
        Ok(graph) => graph,
        Err(e) => panic!("{name} should load:\n{e}"),
    }
}

fn err(name: &str, text: &str) -> LoadError {
    match load_str(Path::new(name), text) {
        Ok(_) => panic!("{name} should not load"),
        Err(e) => e,
    }
}

/// The example from DESIGN.md.
const DESIGN: &str = r#"
name = "add-auth"

[defaults]                 # every task inherits these unless it sets its own
engine    = "claude"
timeout   = "20m"
retries   = 2
backoff   = "2s"
workspace = "worktree"
handoff_limit = "8KiB"

[run]
concurrency = 4
on_failure  = "block"
base        = "HEAD"
budget      = { tokens = 2_000_000, usd = 20.0 }
verify      = ["cargo test --workspace"]

[[task]]
id     = "schema"
prompt = "Add a users table migration and model."
scope  = ["migrations/**", "src/db/**"]
verify = ["cargo test -p db"]

[[task]]
id     = "api"
needs  = ["schema"]
prompt = """
Implement the HTTP API on top of the new schema.
The schema task reported: {{ needs.schema.output }}
"""

[[task]]
id     = "lint"
engine = "shell"
run    = "cargo clippy --all-targets -- -D warnings"
needs  = ["api"]
approval = true
"#;

#[test]
fn the_design_example_loads() {
    let g = ok("add-auth.toml", DESIGN);
    assert_eq!(g.name(), "add-auth");
    let run = g.run_settings();
    assert_eq!(run.concurrency, 4);
    assert_eq!(run.on_failure, OnFailure::Block);
    assert_eq!(run.base.as_deref(), Some("HEAD"));
    assert_eq!(run.budget.tokens, Some(2_000_000));
    assert_eq!(run.budget.usd, Some(20.0));
    assert_eq!(run.verify, ["cargo test --workspace"]);

    let schema = g.task(0);
    assert_eq!(schema.id.as_str(), "schema");
    assert!(matches!(&schema.action, Action::Agent { engine, .. } if engine == "claude"));
    assert_eq!(schema.timeout, Some(Duration::from_secs(20 * 60)));
    assert_eq!(schema.retries, 2);
    assert_eq!(schema.backoff, Duration::from_secs(2));
    assert_eq!(schema.handoff_limit, 8192);
    assert_eq!(schema.workspace, Workspace::Worktree);
    assert_eq!(schema.verify, ["cargo test -p db"]);

    let lint = g.task(2);
    assert_eq!(lint.needs, [1]);
    assert!(matches!(&lint.action, Action::Shell { run } if run.starts_with("cargo clippy")));
    assert!(lint.approval);
    assert_eq!(g.dependents(0), [1]);
    assert_eq!(g.index_of("lint"), Some(2));
    assert!(g.conflicts(0).is_empty());

    // What a run stores reads back the same.
    let back = Graph::from_stored_json(&g.to_stored_json()).unwrap();
    assert_eq!(back, g);
}

#[test]
fn defaults_when_nothing_is_said() {
    let g = ok(
        "plain.toml",
        r#"
[[task]]
id = "a"
run = "true"
[[task]]
id = "b"
prompt = "hello"
[[task]]
id = "c"
engine = "noop"
"#,
    );
    assert_eq!(g.name(), "plain");
    assert_eq!(g.run_settings().concurrency, 4);
    assert_eq!(g.run_settings().on_failure, OnFailure::Block);
    let a = g.task(0);
    assert_eq!(
        (a.retries, a.backoff, a.timeout, a.handoff_limit),
        (0, Duration::from_secs(1), None, 8192)
    );
    assert_eq!(a.workspace, Workspace::Shared);
    assert!(matches!(&g.task(1).action, Action::Agent { engine, .. } if engine == "claude"));
    assert_eq!(g.task(1).workspace, Workspace::Worktree);
    assert_eq!(g.task(2).action, Action::Noop);
}

#[test]
fn run_beats_the_default_engine_and_tasks_override_defaults() {
    let g = ok(
        "g.toml",
        r#"
[defaults]
engine = "codex"
timeout = "5m"
[[task]]
id = "a"
run = "make"
timeout = "1h"
handoff_limit = 1024
env = { RUST_LOG = "debug" }
cwd = "crates/x"
[[task]]
id = "b"
prompt = "do it"
"#,
    );
    assert!(matches!(g.task(0).action, Action::Shell { .. }));
    assert_eq!(g.task(0).timeout, Some(Duration::from_secs(3600)));
    assert_eq!(g.task(0).handoff_limit, 1024);
    assert_eq!(g.task(0).env["RUST_LOG"], "debug");
    assert_eq!(g.task(0).cwd.as_deref(), Some(Path::new("crates/x")));
    assert!(matches!(&g.task(1).action, Action::Agent { engine, .. } if engine == "codex"));
    assert_eq!(g.task(1).timeout, Some(Duration::from_secs(300)));
}

#[test]
fn json_with_the_same_fields() {
    let g = ok(
        "g.json",
        r#"{"name": "j", "tasks": [{"id": "a", "run": "echo a"}]}"#,
    );
    assert_eq!(g.name(), "j");
    // A `.json` file is strict JSON; `.jsonc` allows comments and trailing commas.
    let jsonc = r#"{
  // Comments and trailing commas are fine in a `.jsonc` file.
  "name": "j",
  "run": { "concurrency": 2, "on_failure": "stop" },
  "tasks": [
    { "id": "a", "run": "echo a", "scope": ["src/**"], },
    { "id": "b", "needs": ["a"], "prompt": "{{ needs.a.output }}", "scope": "src/lib.rs", "timeout": null },
  ],
}"#;
    let e = err("g.json", jsonc);
    assert!(
        e.to_string()
            .contains("g.json:2:3: error: Comments are not allowed"),
        "{e}"
    );
    let g = ok("g.jsonc", jsonc);
    assert_eq!(g.run_settings().concurrency, 2);
    assert_eq!(g.run_settings().on_failure, OnFailure::Stop);
    assert_eq!(g.task(1).needs, [0]);
    assert_eq!(g.conflicts(0), [1]);
}

#[test]
fn unknown_extension_is_tried_as_toml_then_json() {
    let g = ok("graph.txt", "[[task]]\nid = \"a\"\nrun = \"x\"\n");
    assert_eq!(g.len(), 1);
    let g = ok("graph", r#"{"task": [{"id": "a", "run": "x"}]}"#);
    assert_eq!(g.len(), 1);
    insta::assert_snapshot!(err("graph.yaml", "task:\n  - id: a\n").to_string(), @r"
    graph.yaml: error: a `.yaml` file was read as TOML (and is not valid JSON either)
      help: name graph files `*.toml` or `*.json`
    graph.yaml:1:5: error: invalid unquoted key, expected letters, numbers, `-`, `_`
      help: this is not valid TOML; see https://toml.io
    ");
}

#[test]
fn io_errors_are_diagnostics() {
    let e = load(Path::new("/nonexistent/baton/graph.toml")).unwrap_err();
    assert_eq!(e.diagnostics.len(), 1);
    assert!(e.diagnostics[0].span.is_none());
    assert!(
        e.to_string()
            .starts_with("/nonexistent/baton/graph.toml: error: cannot read the graph file")
    );
}

#[test]
fn legacy_nodes() {
    let g = ok(
        "legacy.json",
        r#"{
  "id": "auth plan",
  "createdAt": "2025-01-01",
  "nodes": [
    { "id": "db schema", "goal": "Write the schema", "scope": ["src/db/**"], "agentKind": "claude-code", "estimatedTokens": 1200 },
    { "id": "api", "goal": "Build on {{ needs.db-schema.output }}", "deps": ["db schema"], "agentKind": "mystery", "estimatedTokens": 800, "priority": 2 },
    { "id": "test", "goal": "cargo test", "deps": ["api"], "agentKind": "shell" }
  ]
}"#,
    );
    assert_eq!(g.name(), "auth plan");
    assert_eq!(g.task(0).id.as_str(), "db-schema");
    assert_eq!(g.task(1).needs, [0]);
    assert!(matches!(&g.task(1).action, Action::Agent { engine, .. } if engine == "claude"));
    assert!(matches!(&g.task(2).action, Action::Shell { run } if run == "cargo test"));
    insta::assert_snapshot!(g.notes().join("\n"), @r"
    converted from the legacy `nodes` format; `baton plan --json` shows the result
    id → name
    nodes[].goal → prompt (or run, for shell nodes); nodes[].deps → needs
    nodes[].agentKind → engine
    nodes[].agentKind `mystery` is not an engine baton knows; that node runs with claude
    node id `db schema` → `db-schema` (task ids are letters, digits, `_`, `-`, `.`)
    nodes[].estimatedTokens: 2 nodes estimate 2000 tokens in total; not enforced (budgets come later)
    `createdAt` ignored: baton has no use for it
    `nodes[].priority` ignored: baton has no use for it
    ");
}

#[test]
fn legacy_subtasks() {
    let g = ok(
        "plan.json",
        r#"{
  "title": "Refactor",
  "subtasks": [
    { "id": "s1", "title": "Split module", "description": "Split lib.rs", "expectedFiles": ["src/lib.rs", "src/a.rs"],
      "acceptance": ["builds", "tests pass"] },
    { "id": "s2", "title": "Docs only", "blockedBy": ["s1"], "acceptance": "README explains it" }
  ]
}"#,
    );
    assert_eq!(g.name(), "Refactor");
    assert_eq!(g.task(0).scope, ["src/lib.rs", "src/a.rs"]);
    let Action::Agent { prompt, .. } = &g.task(0).action else {
        panic!("agent")
    };
    assert_eq!(
        prompt,
        "Split lib.rs\n\nAcceptance criteria:\n- builds\n- tests pass"
    );
    let Action::Agent { prompt, .. } = &g.task(1).action else {
        panic!("agent")
    };
    assert_eq!(
        prompt,
        "Docs only\n\nAcceptance criteria:\n- README explains it"
    );
    assert_eq!(g.task(1).needs, [0]);
    assert!(g.notes().iter().any(|n| n.contains("Acceptance criteria")));
}

#[test]
fn legacy_ids_that_collide_after_rewriting() {
    let e = err(
        "legacy.json",
        r#"{"nodes": [{"id": "a b", "goal": "x"}, {"id": "a/b", "goal": "y"}]}"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    legacy.json:1:47: error: duplicate task id `a-b`
    legacy.json:1:19: note: first defined here
      help: task ids must be unique; rename one of them (ids from legacy files are rewritten to valid task ids, so two may have become the same)
    "#);
}

mod agents;
mod diagnostics;
mod robustness;
