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

// Diagnostics as the user reads them.

#[test]
fn unknown_field_with_suggestion() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "a"
need = ["b"]
run = "x"

[defaults]
timout = "5m"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r"
    g.toml:4:1: error: unknown field `need` in [[task]]
      help: did you mean `needs`?
    g.toml:8:1: error: unknown field `timout` in [defaults]
      help: did you mean `timeout`?
    ");
}

#[test]
fn cycle() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "a"
needs = ["c"]
run = "x"
[[task]]
id = "b"
needs = ["a"]
run = "x"
[[task]]
id = "c"
needs = ["b"]
run = "x"
[[task]]
id = "d"
needs = ["e"]
run = "x"
[[task]]
id = "e"
needs = ["d", "a"]
run = "x"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:8:10: error: dependency cycle: a -> c -> b -> a
    g.toml:4:10: note: `a` needs `c`
    g.toml:12:10: note: `c` needs `b`
      help: `a -> b` means a needs b; remove one of these `needs` entries to break the cycle
    g.toml:20:10: error: dependency cycle: d -> e -> d
    g.toml:16:10: note: `d` needs `e`
      help: `a -> b` means a needs b; remove one of these `needs` entries to break the cycle
    "#);
}

#[test]
fn duplicate_id() {
    let e = err(
        "g.toml",
        "[[task]]\nid = \"a\"\nrun = \"x\"\n\n[[task]]\nid = \"a\"\nrun = \"y\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:6:6: error: duplicate task id `a`
    g.toml:2:6: note: first defined here
      help: task ids must be unique; rename one of them
    "#);
}

#[test]
fn unknown_dependency() {
    let e = err(
        "g.toml",
        "[[task]]\nid = \"build\"\nrun = \"x\"\n[[task]]\nid = \"test\"\nneeds = [\"biuld\", \"test\", \"zzz\"]\nrun = \"y\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:6:10: error: unknown dependency `biuld`
      help: did you mean `build`?
    g.toml:6:19: error: task `test` needs itself
      help: remove it from `needs`
    g.toml:6:27: error: unknown dependency `zzz`
      help: `needs` lists ids of other tasks in this file
    "#);
}

#[test]
fn bad_duration() {
    let e = err(
        "g.toml",
        "[defaults]\ntimeout = \"20 minutes\"\nbackoff = 30\n[[task]]\nid = \"a\"\nrun = \"x\"\nhandoff_limit = \"lots\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:2:11: error: bad duration for `timeout`
      help: `20 minutes` is not a duration; write a number and a unit, like `30s`, `20m`, `1h30m` or `500ms`
    g.toml:3:11: error: `backoff` needs a unit
      help: write a string with a unit, like `backoff = "30s"` or `"30m"`
    g.toml:7:17: error: bad size for `handoff_limit`
      help: `lots` is not a size; write a number and a unit, like `8KiB`, `64KB`, `1MiB` or `512` (bytes)
    "#);
}

#[test]
fn scope_escape() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "a"
run = "x"
scope = ["src/**", "../other/**", "/etc/passwd", 'src\main.rs', "src/[a"]
cwd = "../.."
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:5:20: error: scope `../other/**` escapes the repository: it contains `..`
      help: paths are relative to the repository root, like `src/db/**`
    g.toml:5:35: error: scope `/etc/passwd` escapes the repository: it is absolute; write it relative to the repository root
      help: paths are relative to the repository root, like `src/db/**`
    g.toml:5:54: error: scope `src\\main.rs` contains U+005C REVERSE SOLIDUS, which separates directories on Windows only; git and globs read it otherwise
      help: write the path with plain characters, with `/` between directories
    g.toml:5:65: error: invalid scope `src/[a`: `[` without `]`
      help: globs use `*`, `?`, `**`, `[a-z]` and `{a,b}`
    g.toml:6:7: error: cwd `../..` escapes the repository: it contains `..`
      help: paths are relative to the repository root, like `src/db/**`
    "#);
}

#[test]
fn many_errors_at_once_sorted() {
    let e = err(
        "g.toml",
        r#"
name = 3

[run]
concurrency = 0
on_failure = "explode"

[[task]]
id = "bad id"
run = "x"
prompt = "y"

[[task]]
id = "a"
engine = "claud"
retries = -1
approval = "yes"

[[task]]
id = "b"
needs = ["a"]
run = "echo {{ needs.c.output }}"

[[task]]
id = "c"
prompt = "{% if %}"

[[task]]
run = "no id"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:2:8: error: `name` must be a string, not an integer
    g.toml:5:15: error: `concurrency` must be a whole number from 1 to 4294967295, not 0
    g.toml:6:14: error: unknown on failure `explode`
      help: use one of: block, continue, stop
    g.toml:9:6: error: invalid task id `bad id`: id contains ` `; use letters and digits of any script, `_`, `-` and single dots
      help: ids become file names and git branch names: letters and digits of any script, `_`, `-` and single dots; starting with a letter or digit, not ending in `.` or `.lock`, at most 100 bytes (UTF-8)
    g.toml:11:10: error: task `bad id` has both `run` and `prompt`
      help: a task runs a shell command (`run`) or prompts an agent (`prompt`), not both; split it into two tasks
    g.toml:14:6: error: task `a` has neither `run` nor `prompt`
      help: add `run = "…"` for a shell command or `prompt = "…"` for an agent
    g.toml:15:10: error: unknown engine `claud`
      help: did you mean `claude`?
    g.toml:16:11: error: `retries` must be a whole number from 0 to 4294967295, not -1
    g.toml:17:12: error: `approval` must be `true` or `false`, not a string
    g.toml:22:22: error: in `run`: `needs.c` refers to a task that is not in this task's `needs`
      help: `c` is a task in this file; add it to this task's `needs`: only the tasks in `needs` are handed over
    g.toml:26:17: error: in `prompt`: syntax error: unexpected end of block
      help: templates refer to predecessors as `{{ needs.ID.output }}` (also `.status`, `.files_changed`, `.json`); ID must be in `needs`
    g.toml:28:1: error: task has no `id`
      help: give every task a unique `id`, like `id = "build"`
    "#);
}

#[test]
fn wrong_shapes() {
    let e = err("g.toml", "[task]\nid = \"a\"\n");
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:1:1: error: `task` must be an array of tables
      help: write `[[task]]` (double brackets) above each task
    "#);
    let e = err("g.json", "[1, 2]");
    insta::assert_snapshot!(e.to_string(), @r"
    g.json:1:1: error: the graph file must be a table, not an array
      help: a graph file holds a table with `name`, `[defaults]`, `[run]` and `[[task]]` entries
    ");
    let e = err(
        "g.json",
        r#"{"task": [{"id": "a", "run": "x", "id": "b"}]}"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.json:1:35: error: `id` is given twice in [[task]]
    g.json:1:12: note: first given here
      help: remove one of them
    "#);
}

#[test]
fn engines_and_actions() {
    let e = err(
        "g.toml",
        r#"
[defaults]
engine = "shell"
[[task]]
id = "a"
prompt = "hi"
[[task]]
id = "b"
engine = "claude"
run = "make"
[[task]]
id = "c"
engine = "noop"
prompt = "x"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:6:10: error: engine `shell` does not take a `prompt`
      help: [defaults] sets this engine; set `engine` on the task to an agent, or write a shell command as `run`
    g.toml:9:10: error: engine `claude` does not take `run`
      help: `claude` is an agent: write the instructions as `prompt`, or remove `engine` to run `run` with the shell
    g.toml:13:10: error: engine `noop` does not take a `prompt`
      help: set an agent engine (claude, codex, gemini, aider, http), or write a shell command as `run`
    "#);
}

#[test]
fn syntax_errors() {
    insta::assert_snapshot!(err("g.toml", "[[task]]\nid = \"a\nrun = 1\n").to_string(), @r#"
    g.toml:2:8: error: invalid basic string, expected `"`
      help: this is not valid TOML; see https://toml.io
    "#);
    insta::assert_snapshot!(err("g.json", "{\"task\": [}").to_string(), @r"
    g.json:1:11: error: Unexpected close brace
      help: this is not valid JSON: a `.json` graph file is strict JSON; name it `.jsonc` to allow comments and trailing commas
    ");
}

#[test]
fn template_refers_to_a_task_it_does_not_need() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "fetch.v2"
run = "x"
[[task]]
id = "lint"
needs = ["fetch.v2"]
run = "y"
[[task]]
id = "report"
needs = ["lint"]
run = "echo {{ needs.lint.output }} {{ needs.fetch.v2.json.records }}"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:12:46: error: in `run`: `needs.fetch` refers to a task that is not in this task's `needs`
      help: `fetch.v2` is a task in this file; add it to this task's `needs`: only the tasks in `needs` are handed over
    "#);
}

#[test]
fn empty_graph() {
    insta::assert_snapshot!(err("g.toml", "name = \"nothing\"\n").to_string(), @r#"
    g.toml: error: the graph has no tasks
      help: add a `[[task]]` table with an `id` and a `run` command or a `prompt`
    "#);
}

#[test]
fn diagnostics_carry_spans_and_labels_for_miette() {
    let text = "[[task]]\nid = \"a\"\nrun = \"x\"\nneeds = [\"nope\"]\n";
    let e = err("g.toml", text);
    let d = &e.diagnostics[0];
    let span = d.span.clone().unwrap();
    assert_eq!(&text[span.clone()], "\"nope\"");
    assert_eq!(d.label.as_deref(), Some("no task has this id"));
    assert_eq!(e.line_col(span.start), (4, 10));
}

// Robustness and scale.

/// Every prefix of a valid file, and many single-byte mutations, load or fail without
/// panicking, and their errors display.
#[test]
fn mutated_files_never_panic() {
    let json = r#"{"name": "x", "run": {"concurrency": 2, "budget": {"tokens": 5}},
      "task": [{"id": "a", "run": "echo {{ needs.b.output }}", "needs": ["b"], "scope": ["src/{a,b}/[x-z]*"]},
               {"id": "b", "prompt": "p", "env": {"K": "v"}, "timeout": "5m"}]}"#;
    let legacy = r#"{"id": "p", "nodes": [{"id": "n 1", "goal": "g", "deps": ["n 2"], "estimatedTokens": 5},
      {"id": "n 2", "goal": "h", "agentKind": "shell"}]}"#;
    let fillers: &[u8] = b"\0\"'[]{}=,.-/\\\n #*?!{%}";
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (name, text) in [
        ("d.toml", DESIGN),
        ("d.json", json),
        ("l.json", legacy),
        ("d", DESIGN),
    ] {
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            try_load(name, &bytes[..cut]);
        }
        for _ in 0..2000 {
            let mut mutated = bytes.to_vec();
            for _ in 0..(1 + next() % 3) {
                let at = (next() as usize) % mutated.len();
                mutated[at] = fillers[(next() as usize) % fillers.len()];
            }
            try_load(name, &mutated);
        }
    }
}

fn try_load(name: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Err(e) = load_str(Path::new(name), &text) {
        let _ = e.to_string();
        for d in &e.diagnostics {
            if let Some(span) = &d.span {
                let _ = e.line_col(span.end);
            }
        }
    }
}

mod arbitrary {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}", ext in prop::sample::select(vec!["g.toml", "g.json", "g"])) {
            super::try_load(ext, text.as_bytes());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            super::try_load("g.toml", &bytes);
            super::try_load("g.json", &bytes);
        }

        #[test]
        fn deep_nesting_never_panics(depth in 1usize..3000) {
            super::try_load("g.json", format!("{}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes());
            super::try_load("g.toml", format!("a = {}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes());
            super::try_load("g.toml", format!("a = {}", "{b=".repeat(depth)).as_bytes());
        }
    }
}

/// A wide and deep graph: chains of ten, each chain's head needing the previous chain's
/// tail, every task with its own scope and a template.
fn big_graph(n: usize) -> String {
    let mut text = String::with_capacity(n * 120);
    text.push_str("name = \"big\"\n[defaults]\nengine = \"noop\"\n");
    for i in 0..n {
        text.push_str(&format!(
            "[[task]]\nid = \"t{i}\"\nscope = [\"crates/c{i}/**\"]\n"
        ));
        if i > 0 {
            text.push_str(&format!(
                "needs = [\"t{}\"]\nrun = \"echo {{{{ needs.t{}.output }}}}\"\n",
                i - 1,
                i - 1
            ));
        }
    }
    text
}

#[test]
fn twenty_thousand_tasks_load() {
    // Timing lives in benches/; this proves a large chain loads and keeps its order.
    let text = big_graph(20_000);
    let g = ok("big.toml", &text);
    assert_eq!(g.len(), 20_000);
    assert_eq!(g.task(19_999).needs, [19_998]);
}

#[test]
fn secret_env_names_add_up_survive_storage_and_bad_names_are_errors() {
    let g = ok(
        "g.toml",
        "[defaults]\nsecret_env = [\"VAULT_*\"]\n\n[[task]]\nid = \"a\"\nrun = \"true\"\nsecret_env = [\"DATABASE_URL\"]\n",
    );
    assert_eq!(*g.task(0).secret_env, ["VAULT_*", "DATABASE_URL"]);
    let stored = baton_graph::Graph::from_stored_json(&g.to_stored_json()).unwrap();
    assert_eq!(*stored.task(0).secret_env, ["VAULT_*", "DATABASE_URL"]);
    let e = err(
        "g.toml",
        "[[task]]\nid = \"a\"\nrun = \"true\"\nsecret_env = [\"DB URL\"]\n",
    );
    assert_eq!(
        e.diagnostics[0].message,
        "`DB URL` is not an environment variable name"
    );
}

#[test]
fn baton_s_sandbox_values_in_codex_s_sandbox_field_point_to_confine() {
    let e = err(
        "g.toml",
        "[[task]]\nid = \"a\"\nprompt = \"p\"\nengine = \"codex\"\nsandbox = \"workspace\"\n",
    );
    let d = &e.diagnostics[0];
    assert_eq!(
        d.message,
        "`sandbox` is codex's own sandbox mode, which has no `workspace`"
    );
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains("confine = \"workspace\""),
        "{:?}",
        d.help
    );
    let g = ok(
        "g.toml",
        "[[task]]\nid = \"a\"\nprompt = \"p\"\nengine = \"codex\"\nsandbox = \"read-only\"\n",
    );
    assert_eq!(g.len(), 1);
}

#[test]
fn pass_env_names_add_up_and_bad_names_are_errors() {
    let g = ok(
        "g.toml",
        "[defaults]\npass_env = [\"AWS_*\"]\n\n[[task]]\nid = \"a\"\nrun = \"true\"\npass_env = [\"GITHUB_TOKEN\"]\n",
    );
    assert_eq!(*g.task(0).pass_env, ["AWS_*", "GITHUB_TOKEN"]);
    let e = err(
        "g.toml",
        "[[task]]\nid = \"a\"\nrun = \"true\"\npass_env = [\"1BAD\", \"*\", \"OK_*\", \"A-B\"]\n",
    );
    let messages: Vec<&str> = e.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`1BAD` is not an environment variable name",
            "`*` is not an environment variable name",
            "`A-B` is not an environment variable name"
        ]
    );
}

#[test]
fn agent_settings_merge_over_defaults() {
    let g = baton_graph::load_str(
        Path::new("g.toml"),
        r#"
[defaults]
model = "claude-sonnet-4-5"
allowed_tools = ["Read", "Write"]
idle_timeout = "2m"

[[task]]
id = "a"
prompt = "do a"
max_turns = 5
allowed_tools = ["Read"]
budget = { usd = 1.5 }
retry_on = "any"

[[task]]
id = "b"
engine = "codex"
prompt = "do b"
sandbox = "read-only"
args = ["-c", "x=1"]
"#,
    )
    .unwrap();
    let settings = |i: u32| match &g.task(i).action {
        baton_graph::Action::Agent { settings, .. } => settings.clone(),
        other => panic!("{other:?}"),
    };
    let a = settings(0);
    assert_eq!(a.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(a.max_turns, Some(5));
    assert_eq!(a.allowed_tools, ["Read"]);
    assert_eq!(a.idle_timeout, Some(std::time::Duration::from_secs(120)));
    assert_eq!(a.budget.usd, Some(1.5));
    assert_eq!(a.retry_on, baton_graph::RetryOn::Any);
    let b = settings(1);
    assert_eq!(b.allowed_tools, ["Read", "Write"]);
    assert_eq!(b.sandbox.as_deref(), Some("read-only"));
    assert_eq!(b.args, ["-c", "x=1"]);
    assert_eq!(b.retry_on, baton_graph::RetryOn::Infrastructure);
    // The stored copy reads back the same.
    let json = serde_json::to_string(&g).unwrap();
    assert_eq!(baton_graph::Graph::from_stored_json(&json).unwrap(), g);
}

#[test]
fn agent_fields_on_a_shell_task_are_named() {
    let e = baton_graph::load_str(
        Path::new("g.toml"),
        "[[task]]\nid = \"a\"\nrun = \"make\"\nmodel = \"gpt-5\"\n",
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("g.toml:4:1"), "{text}");
    assert!(text.contains("task `a` is not an agent task"), "{text}");
}

#[test]
fn confine_is_taken_from_the_task_or_the_defaults_and_checked() {
    let g = ok(
        "g.toml",
        r#"
[defaults]
confine = "require"

[[task]]
id = "a"
run = "x"

[[task]]
id = "b"
run = "x"
confine = "none"
"#,
    );
    assert_eq!(g.task(0).confine, Some(baton_graph::Confine::Require));
    assert_eq!(g.task(1).confine, Some(baton_graph::Confine::None));
    // Unset means "decided by the task's kind and workspace", and stays unset.
    assert_eq!(
        ok("g.toml", "[[task]]\nid = \"a\"\nrun = \"x\"\n")
            .task(0)
            .confine,
        None
    );
    let json = serde_json::to_string(&g).unwrap();
    assert_eq!(Graph::from_stored_json(&json).unwrap(), g);
    let e = err(
        "g.toml",
        "[[task]]\nid = \"a\"\nrun = \"x\"\nconfine = \"workspaces\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r"
    g.toml:4:11: error: unknown confine `workspaces`
      help: did you mean `workspace`?
    ");
}

#[test]
fn paths_with_misleading_characters_are_refused_at_the_character() {
    // Each entry's first odd character is named at its own line and column, escapes included.
    let e = err(
        "g.toml",
        r#"
[defaults]
worktree_include = [".env", "node_modules\u200B"]

[[task]]
id = "a"
run = "x"
scope = ["src/\u202Egnp.rs", "docs/\t/x", 'src\main.rs', "\u2024\u2024/etc", "a／b"]
cwd = "tools\u0000"
worktree_include = ["deps", "target\u2215debug"]
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:3:42: error: worktree_include `node_modules\u{200b}` contains U+200B ZERO WIDTH SPACE, which is invisible
      help: write the path with plain characters, with `/` between directories
    g.toml:8:15: error: scope `src/\u{202e}gnp.rs` contains U+202E RIGHT-TO-LEFT OVERRIDE, which changes the order in which the text is shown
      help: write the path with plain characters, with `/` between directories
    g.toml:8:36: error: scope `docs/\t/x` contains U+0009 CHARACTER TABULATION, which is a control character
      help: write the path with plain characters, with `/` between directories
    g.toml:8:47: error: scope `src\\main.rs` contains U+005C REVERSE SOLIDUS, which separates directories on Windows only; git and globs read it otherwise
      help: write the path with plain characters, with `/` between directories
    g.toml:8:59: error: scope `․․/etc` contains U+2024 ONE DOT LEADER, which looks like `.` but is not one
      help: write the path with plain characters, with `/` between directories
    g.toml:8:80: error: scope `a／b` contains U+FF0F FULLWIDTH SOLIDUS, which looks like `/` but is not one
      help: write the path with plain characters, with `/` between directories
    g.toml:9:13: error: `cwd` cannot contain NUL (U+0000)
      help: no program can be given a NUL in its arguments, environment or paths; remove it (a task that must print one can write `printf '\0'`)
    g.toml:10:36: error: worktree_include `target∕debug` contains U+2215 DIVISION SLASH, which looks like `/` but is not one
      help: write the path with plain characters, with `/` between directories
    "#);
    let last = e.diagnostics.last().unwrap();
    assert_eq!(last.label.as_deref(), Some("U+2215"));

    // The legacy formats' paths go through the same check.
    let e = err(
        "plan.json",
        r#"{
  "title": "Refactor",
  "subtasks": [
    { "id": "s1", "title": "Split", "expectedFiles": ["src/lib.rs", "src/\u202e.rs", "a\\b"] }
  ]
}"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    plan.json:4:74: error: scope `src/\u{202e}.rs` contains U+202E RIGHT-TO-LEFT OVERRIDE, which changes the order in which the text is shown
      help: write the path with plain characters, with `/` between directories
    plan.json:4:88: error: scope `a\\b` contains U+005C REVERSE SOLIDUS, which separates directories on Windows only; git and globs read it otherwise
      help: write the path with plain characters, with `/` between directories
    "#);
}

#[test]
fn paths_in_any_script_are_fine() {
    let g = ok(
        "g.toml",
        r#"
[[task]]
id = "a"
run = "x"
scope = ["docs/日本語/**", "src/café.rs", "données/{été,hiver}/*.md"]
cwd = "outils/ünïcödé"
worktree_include = ["καλά"]
"#,
    );
    let t = g.task(0);
    assert_eq!(
        t.scope,
        ["docs/日本語/**", "src/café.rs", "données/{été,hiver}/*.md"]
    );
    assert_eq!(t.cwd.as_deref(), Some(Path::new("outils/ünïcödé")));
    assert_eq!(*t.worktree_include, ["καλά"]);
}

#[test]
fn fallbacks_and_candidates_are_engines_with_their_models() {
    let graph = ok(
        "engines.toml",
        r#"
[defaults]
fallback = ["codex", { engine = "gemini", model = "gemini-2.5-pro" }]

[[task]]
id = "a"
prompt = "x"

[[task]]
id = "b"
engine = "codex"
model = "gpt-5"
prompt = "x"
best_of = 3

[[task]]
id = "c"
prompt = "x"
candidates = ["claude", { engine = "codex", model = "o3" }]
"#,
    );
    let Action::Agent { settings, .. } = &graph.task(0).action else {
        panic!()
    };
    let names: Vec<String> = settings.fallback.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["codex", "gemini/gemini-2.5-pro"]);
    assert!(graph.task(0).candidates.is_empty());
    // `best_of`: the task's own engine and model, N times.
    let b: Vec<String> = graph
        .task(1)
        .candidates
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(b, ["codex/gpt-5", "codex/gpt-5", "codex/gpt-5"]);
    assert_eq!(graph.task(1).candidate_count(), 3);
    let c: Vec<String> = graph
        .task(2)
        .candidates
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(c, ["claude", "codex/o3"]);
    assert_eq!(graph.task(0).candidate_count(), 1);
}

#[test]
fn candidate_and_fallback_mistakes_are_named() {
    let e = err(
        "bad.toml",
        r#"
[[task]]
id = "a"
run = "true"
best_of = 2

[[task]]
id = "b"
prompt = "x"
best_of = 9

[[task]]
id = "c"
prompt = "x"
best_of = 2
candidates = ["codex", "claude"]

[[task]]
id = "d"
prompt = "x"
best_of = 2
fallback = ["codex"]

[[task]]
id = "e"
prompt = "x"
fallback = ["shell", { model = "m" }, 3]

[[task]]
id = "f"
prompt = "x"
expand = true
best_of = 2
"#,
    )
    .to_string();
    for expected in [
        "task `a` is not an agent task: `best_of` runs an agent's prompt several times",
        "`best_of` asks for 9 candidates; from 2 to 8 run at once",
        "give `best_of` or `candidates`, not both",
        "task `d` has both `best_of` and `fallback`: each candidate is one engine's try",
        "a fallback is an agent, not `shell`",
        "a fallback needs its `engine`",
        "`fallback[]` must be an engine's name or a table, not an integer",
        "task `f` is a planner: its plan is one answer, not the best of several",
    ] {
        assert!(e.contains(expected), "missing {expected:?} in:\n{e}");
    }
}
