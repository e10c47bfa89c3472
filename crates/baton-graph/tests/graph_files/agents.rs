//! Agent tasks' settings (environment, sandbox, engines, fallbacks, candidates) and the paths
//! a graph names.

use super::*;

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
