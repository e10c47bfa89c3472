//! `--dry-run`, `plan` and `graph`: looking at a graph without running it.

use crate::test::Test;

const DIAMOND: &str = r#"
name = "diamond"

[[task]]
id = "fetch"
run = "true"

[[task]]
id = "build"
needs = ["fetch"]
scope = ["src/**"]
run = "true"

[[task]]
id = "lint"
needs = ["fetch"]
scope = ["src/db/*.rs"]
run = "true"

[[task]]
id = "ship"
needs = ["build", "lint"]
run = "true"
"#;

#[test]
fn dry_run_prints_the_plan_and_touches_nothing() {
    let out = Test::new()
        .graph("d.toml", DIAMOND)
        .args(&["run", "d.toml", "--dry-run"])
        .run()
        .status(0)
        .stdout_contains("diamond: 4 tasks, 4 dependencies")
        .stdout_contains("critical path");
    assert!(!out.state_dir_exists(), "a dry run created .baton/");
    let exclude = std::fs::read_to_string(out.path().join(".git/info/exclude")).unwrap_or_default();
    assert!(
        !exclude.contains(".baton"),
        "a dry run touched .git/info/exclude"
    );
}

/// docs/guide/src/json.md: `baton run --dry-run --json` prints the plan, the same document as
/// `baton plan --json`. (The doc comment of `baton_report::RunResult` and STYLE.md describe a
/// run result with `"dry_run": true` instead; the user-facing document is what this holds to.)
#[test]
fn dry_run_json_is_the_plan_document() {
    let dry = Test::new()
        .graph("d.toml", DIAMOND)
        .args(&["run", "d.toml", "--dry-run", "--json"])
        .run()
        .status(0);
    assert!(!dry.state_dir_exists());
    let plan = Test::new()
        .graph("d.toml", DIAMOND)
        .args(&["plan", "d.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(dry.json()["schema"], 1);
    assert_eq!(dry.json(), plan.json());
}

#[test]
fn plan_json_has_schema_levels_critical_path_and_conflicts() {
    let out = Test::new()
        .graph("d.toml", DIAMOND)
        .args(&["plan", "d.toml", "--json"])
        .run()
        .status(0);
    let plan = out.json();
    assert_eq!(plan["schema"], 1);
    assert_eq!(plan["tasks"], 4);
    assert_eq!(plan["edges"], 4);
    assert_eq!(
        plan["levels"],
        serde_json::json!([["fetch"], ["build", "lint"], ["ship"]])
    );
    let path: Vec<&str> = plan["critical_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(path.len(), 3, "{path:?}");
    assert_eq!((path[0], path[2]), ("fetch", "ship"));
    assert!(matches!(path[1], "build" | "lint"));
    let conflicts = plan["conflicts"].to_string();
    assert!(
        conflicts.contains("build") && conflicts.contains("lint"),
        "{conflicts}"
    );
    assert!(!out.state_dir_exists());
}

#[test]
fn graph_formats_show_the_edges() {
    let mermaid = Test::new()
        .graph("d.toml", DIAMOND)
        .args(&["graph", "d.toml", "--format", "mermaid"])
        .run()
        .status(0)
        .stdout_contains("flowchart");
    // Mermaid nodes are numbered in file order.
    for edge in ["t0 --> t1", "t0 --> t2", "t1 --> t3", "t2 --> t3"] {
        assert!(
            mermaid.stdout.contains(edge),
            "no {edge}:\n{}",
            mermaid.stdout
        );
    }
    let dot = Test::new()
        .graph("d.toml", DIAMOND)
        .args(&["graph", "d.toml", "--format", "dot"])
        .run()
        .status(0)
        .stdout_contains("digraph \"diamond\"");
    for edge in [
        "\"fetch\" -> \"build\"",
        "\"fetch\" -> \"lint\"",
        "\"build\" -> \"ship\"",
        "\"lint\" -> \"ship\"",
    ] {
        assert!(dot.stdout.contains(edge), "no {edge}:\n{}", dot.stdout);
    }
    assert!(!dot.state_dir_exists());
}

#[test]
fn plan_lists_planners_with_their_limits_and_fan_outs_with_their_items() {
    let graph = r#"
[[task]]
id = "base"
run = "echo base"

[[task]]
id = "plan"
needs = ["base"]
engine = "claude"
prompt = "add an api"
expand = true
max_subtasks = 5
on_failure = "replan"

[[task]]
id = "each"
for_each = ["a", "b"]
run = "echo {{ item }}"
"#;
    let out = Test::new()
        .graph("g.toml", graph)
        .args(&["plan", "g.toml"])
        .run()
        .status(0);
    let shown = out.stdout.replace("\r\n", "\n");
    assert!(
        shown.contains(
            "planners (their answers add tasks while the run goes):\n  plan: up to 5 tasks, planning 2 levels deep, re-planning up to 2 times\n"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("for each (one task per item, added when it is ready):\n  each: 2 items\n"),
        "{shown}"
    );
}

/// Before a budgeted run starts, `baton plan` says how its agents will be held to the budget:
/// which reserve their estimate, which start one at a time for want of one.
#[test]
fn plan_says_what_each_agent_reserves_against_the_budget() {
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
budget = { usd = 2.5 }

[[task]]
id = "known"
prompt = "one"
estimate = { usd = 0.4 }

[[task]]
id = "unknown"
prompt = "two"

[[task]]
id = "shell"
run = "echo free"
"#;
    let out = Test::new()
        .graph("g.toml", graph)
        .args(&["plan", "g.toml"])
        .run()
        .status(0);
    let shown = out.stdout.replace("\r\n", "\n");
    assert!(
        shown.contains(
            "budget: $2.50 for the run; an agent reserves what it will likely cost before it starts\n  its estimate: known\n  no estimate: one at a time until an agent has finished, then their average: unknown\n"
        ),
        "{shown}"
    );
    let json = out
        .then()
        .args(&["plan", "g.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        json.json()["budget"],
        serde_json::json!({"limit": "$2.50", "estimated": ["known"], "unestimated": ["unknown"]})
    );
    // Against a token limit a dollar estimate says nothing: both go one at a time.
    let tokens = json
        .then()
        .graph("t.toml", &graph.replace("usd = 2.5", "tokens = 100000"))
        .args(&["plan", "t.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        tokens.json()["budget"]["unestimated"],
        serde_json::json!(["known", "unknown"])
    );
    // Without a budget, nothing is said.
    let free = tokens
        .then()
        .graph("f.toml", &graph.replace("budget = { usd = 2.5 }", ""))
        .args(&["plan", "f.toml"])
        .run()
        .status(0);
    assert!(!free.stdout.contains("budget"), "{}", free.stdout);
}

/// A worktree task named as one of the run's own branches (`result`; `base` in a run with a
/// `remote`, whose base workers elsewhere fetch as `baton/RUN/base`) is refused by `baton plan`
/// at its id's line. Before, `result` was refused only when a run started, and a `base` task's
/// pushed result replaced the run's base on the remote. Without a remote, `base` is a name
/// like any other.
#[test]
fn plan_refuses_a_worktree_task_named_as_the_run_s_own_branches() {
    let result = "[[task]]\nid = \"result\"\nrun = \"true\"\nworkspace = \"worktree\"\n";
    Test::new()
        .graph("graph.toml", result)
        .args(&["plan", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("graph.toml:2:6")
        .stderr_contains("task `result` works in a worktree, whose branch `baton/RUN/result`")
        .stderr_contains("merged result")
        .stderr_contains("rename the task");
    let base = "[[task]]\nid = \"base\"\nrun = \"true\"\nworkspace = \"worktree\"\n";
    Test::new()
        .graph(
            "graph.toml",
            &format!("[run]\nremote = \"origin\"\n\n{base}"),
        )
        .args(&["plan", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("graph.toml:5:6")
        .stderr_contains("task `base` works in a worktree")
        .stderr_contains("workers elsewhere fetch");
    Test::new()
        .graph("graph.toml", base)
        .args(&["plan", "graph.toml"])
        .run()
        .status(0);
    // Not in a worktree, `result` is only a name.
    Test::new()
        .graph("graph.toml", "[[task]]\nid = \"result\"\nrun = \"true\"\n")
        .args(&["plan", "graph.toml"])
        .run()
        .status(0);
}
