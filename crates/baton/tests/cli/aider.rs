//! aider end to end: the pinned aider (`tests/aider/requirements.txt`, installed by the test
//! command into `tests/aider/.venv`) driven by baton against the scripted model server's
//! OpenAI-compatible endpoint. Only the model is fake.

use std::path::{Path, PathBuf};

use baton_mock_model::{MockModel, Reply, Rule, Script};
use baton_model::{Outcome, TaskState};

use crate::test::Test;
use crate::workspaces::{git, repo_with};

/// `tests/aider/.venv/bin/aider`. The test command installs it; a missing one fails the test
/// with what to do rather than skipping it.
fn aider_bin() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/aider/.venv/bin/aider");
    assert!(
        path.exists(),
        "{} is missing: run ./scripts/test (it installs tests/aider/requirements.txt)",
        path.display()
    );
    path
}

/// A test whose `aider` engine is the pinned aider, talking to `model` as an OpenAI-compatible
/// API, with a home of its own (aider keeps its caches and settings there).
fn with_aider(test: Test, model: &MockModel) -> Test {
    let home = test.path().parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = format!("[engines.aider]\ncommand = \"{}\"\n", aider_bin().display());
    test.file("baton.toml", config)
        .env("HOME", home.to_str().unwrap())
        .env("OPENAI_API_BASE", &format!("{}/v1", model.url()))
        .env("OPENAI_API_KEY", "sk-proj-test-key-for-the-mock-model-only")
}

/// The model's answer in aider's `diff` edit format (its own for gpt-4o).
const EDIT: &str = "I changed the greeting.\n\nnotes.txt\n```\n<<<<<<< SEARCH\nhello\n=======\nhello, world\n>>>>>>> REPLACE\n```\n";

const GRAPH: &str = r#"
[[task]]
id = "greet"
engine = "aider"
model = "openai/gpt-4o"
workspace = "worktree"
retries = 2
backoff = "100ms"
timeout = "4m"
prompt = "In notes.txt, change hello to hello, world."

[[task]]
id = "echo"
needs = ["greet"]
run = "printf '%s' {{ needs.greet.output }}"
"#;

fn repo() -> Test {
    let test = repo_with(GRAPH).file("notes.txt", "hello\n");
    git(test.path(), &["add", "notes.txt"]);
    git(test.path(), &["commit", "-qm", "notes"]);
    test
}

#[test]
fn aider_edits_a_file_in_its_worktree_and_baton_commits_it() {
    let script = Script::new().rule(Rule::reply(Reply::Text {
        text: EDIT.into(),
        input_tokens: 1_234_567,
        output_tokens: 4_321,
    }));
    let model = MockModel::start(script).unwrap();
    let test = repo();
    let root = test.path().to_owned();
    let out = with_aider(test, &model)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);

    // aider applied its own edit format in the task's worktree; baton committed it (aider's
    // commits are off), and nothing of aider's own came along: not its caches, not a line in
    // `.gitignore`.
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let branch = format!("baton/{run}/greet");
    assert_eq!(
        git(&root, &["show", &format!("{branch}:notes.txt")]),
        "hello, world"
    );
    let changed = git(&root, &["diff", "--name-only", "HEAD", &branch]);
    assert_eq!(changed, "notes.txt", "only the task's edit is committed");
    let author = git(&root, &["log", "-1", "--format=%an %s", &branch]);
    assert!(
        author.starts_with("baton baton: greet attempt 1"),
        "{author}"
    );
    // The user's own tree is untouched, and so is their analytics setting.
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "hello\n"
    );
    assert!(!root.join(".gitignore").exists());

    // Its answer is the task's output, handed on.
    let output = out.json_task("greet")["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.starts_with("I changed the greeting."), "{output}");
    assert!(output.contains(">>>>>>> REPLACE"), "{output}");
    assert_eq!(out.json_task("echo")["output"], output.as_str());

    // Tokens from its analytics log, exactly (its own lines round them to "1235k"), and the
    // cost aider priced gpt-4o at: $2.50 a million in, $10 a million out.
    let attempts = out.store().attempts("greet");
    assert_eq!(attempts.len(), 1);
    let usage = attempts[0].agent.clone().unwrap();
    assert_eq!(usage.engine, "aider");
    assert_eq!(usage.model.as_deref(), Some("openai/gpt-4o"));
    assert_eq!(usage.input_tokens, 1_234_567);
    assert_eq!(usage.output_tokens, 4_321);
    let expected = (1_234_567.0 * 2.5 + 4_321.0 * 10.0) / 1e6;
    let cost = usage.cost_usd.unwrap();
    assert!((cost - expected).abs() < 1e-6, "{cost} vs {expected}");
    assert!(!usage.cost_estimated, "aider priced it itself");
    assert_eq!(out.store().task("greet").status, TaskState::Succeeded);
    out.store().assert_consistent();
}

#[test]
fn an_overloaded_model_is_aider_s_infrastructure_failure_and_is_retried() {
    // aider retries an overload itself, with backoff, for about a minute (three requests a
    // try: its HTTP client retries too), then gives up and exits 0 having answered nothing:
    // that is the machinery's failure, and baton's retry is what gets through.
    let script = Script::new()
        .rule(Rule::reply(Reply::overloaded()).times(27))
        .rule(Rule::text(EDIT));
    let model = MockModel::start(script).unwrap();
    let test = repo();
    let root = test.path().to_owned();
    let out = with_aider(test, &model)
        .args(&["run", "graph.toml", "--json"])
        .spawn()
        // aider's own minute of retries, then baton's.
        .wait(std::time::Duration::from_secs(240))
        .status(0);
    let attempts = out.store().attempts("greet");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let (reason, message) = crate::agents::infrastructure_failure(&attempts[0]);
    assert_eq!(reason, "api_error_529");
    assert!(message.contains("529"), "{message}");
    assert_eq!(attempts[1].outcome, Some(Outcome::Exited { code: 0 }));
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        git(&root, &["show", &format!("baton/{run}/greet:notes.txt")]),
        "hello, world"
    );
}
