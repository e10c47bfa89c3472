//! Agent tasks end to end: the real agent CLIs from `tests/agents` (installed by the test
//! command at the versions its lockfile pins), driven by baton against a scripted model server
//! on loopback. Only the model is fake.

use std::path::{Path, PathBuf};

use baton_mock_model::{MockModel, Reply, Rule, Script};
use baton_model::{FailureClass, Outcome, TaskState};

use crate::test::{Output, Test};

/// `tests/agents/node_modules/.bin/NAME`. The test command installs it; a missing one fails
/// the test with what to do rather than skipping it.
pub(crate) fn agent_bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/agents/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run ./scripts/test (it runs `npm ci` in tests/agents)",
        path.display()
    );
    path.canonicalize().unwrap()
}

/// A test whose `claude` engine is the pinned CLI, talking to `model`, with a home of its own
/// (Claude Code keeps sessions there).
pub(crate) fn with_claude(test: Test, model: &MockModel) -> Test {
    let home = test.path().parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = format!(
        "[engines.claude]\ncommand = \"{}\"\n",
        agent_bin("claude").display()
    );
    test.file("baton.toml", config)
        .env("HOME", home.to_str().unwrap())
        .env("ANTHROPIC_BASE_URL", &model.url())
        .env(
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-test-key-for-the-mock-model-only",
        )
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
}

/// The reason and message of an attempt that failed for the machinery's reasons.
pub(crate) fn infrastructure_failure(attempt: &baton_store::AttemptRecord) -> (String, String) {
    match attempt.outcome.clone() {
        Some(Outcome::AgentFailed {
            class: FailureClass::Infrastructure,
            reason,
            message,
            ..
        }) => (reason, message),
        other => panic!("not an infrastructure failure: {other:?}"),
    }
}

fn attempts_of(out: &Output, task: &str) -> Vec<baton_store::AttemptRecord> {
    out.store().attempts(task)
}

#[test]
fn three_claude_tasks_edit_files_and_hand_their_results_on() {
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let file = |name: &str| root.join(name).to_str().unwrap().to_owned();
    // Each task's prompt carries a marker its rules match on; the turn after a tool ran ends
    // with the tool's result (for the mock's tool-use id).
    let script = Script::new()
        .rule(
            Rule::text("Schema ready: users(id, email)")
                .when_contains("TASK-SCHEMA")
                .when_last_contains("toolu_mock"),
        )
        .rule(
            Rule::reply(Reply::claude_write(
                &file("schema.sql"),
                "CREATE TABLE users (id, email);\n",
            ))
            .when_contains("TASK-SCHEMA"),
        )
        .rule(
            Rule::text("API ready: GET /users")
                .when_contains("TASK-API")
                .when_last_contains("toolu_mock"),
        )
        .rule(
            Rule::reply(Reply::claude_write(&file("api.txt"), "GET /users\n"))
                .when_contains("TASK-API"),
        )
        .rule(Rule::text("Reviewed: looks consistent").when_contains("TASK-REVIEW"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[defaults]
engine = "claude"
timeout = "2m"

[[task]]
id = "schema"
prompt = "TASK-SCHEMA: add a users table in schema.sql"

[[task]]
id = "api"
needs = ["schema"]
prompt = """
TASK-API: write the API on top of the schema.
The schema task reported: {{ needs.schema.output }}
"""

[[task]]
id = "review"
needs = ["api"]
prompt = "TASK-REVIEW: {{ needs.api.output }}"
"#;
    let out = with_claude(test, &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run();
    let out = out.status(0);

    // The real CLI wrote the files the model asked it to.
    assert_eq!(out.read("schema.sql"), b"CREATE TABLE users (id, email);\n");
    assert_eq!(out.read("api.txt"), b"GET /users\n");

    // The agent's final message is the task's output, and it reached the next prompt.
    assert_eq!(
        out.json_task("schema")["output"],
        "Schema ready: users(id, email)"
    );
    let asked_api = model
        .requests()
        .into_iter()
        .find(|r| r.text().contains("TASK-API"))
        .expect("the api task asked the model");
    assert!(
        asked_api
            .text()
            .contains("The schema task reported: Schema ready: users(id, email)"),
        "{}",
        asked_api.text()
    );

    // Tokens, cost, model and session are recorded per attempt.
    for task in ["schema", "api", "review"] {
        let attempts = attempts_of(&out, task);
        assert_eq!(attempts.len(), 1, "{task}");
        let usage = attempts[0].agent.clone().expect("agent usage recorded");
        assert_eq!(usage.engine, "claude");
        assert!(usage.input_tokens >= 10, "{task}: {usage:?}");
        assert!(usage.output_tokens >= 5, "{task}: {usage:?}");
        assert!(usage.cost_usd.unwrap() > 0.0, "{task}: {usage:?}");
        assert!(!usage.cost_estimated, "claude reports its own cost");
        assert!(usage.session_id.is_some(), "{task}: {usage:?}");
        assert_eq!(attempts[0].outcome, Some(Outcome::Exited { code: 0 }));
    }
    let schema = attempts_of(&out, "schema")[0].agent.clone().unwrap();
    assert_eq!(schema.turns, Some(2));
    assert_eq!(schema.tool_calls, 1);
    out.store().assert_consistent();

    // The result document sums it up per task and per engine and model.
    let json = out.json();
    let total = json["spend"]["cost_usd"].as_f64().unwrap();
    assert!(total > 0.0, "{json}");
    assert_eq!(json["spend"]["attempts"], 3);
    assert_eq!(json["spend"]["by_model"][0]["engine"], "claude");
    assert_eq!(out.json_task("schema")["agent"]["tool_calls"], 1);
    assert_eq!(out.json_task("schema")["agent"]["turns"], 2);
    // And `baton runs` shows it.
    let runs = out.then().args(&["runs", "--json"]).run().status(0);
    let line = &runs.json()["runs"][0];
    assert!(line["tokens"].as_u64().unwrap() >= 45, "{line}");
    assert!(
        (line["cost_usd"].as_f64().unwrap() - total).abs() < 1e-9,
        "{line}"
    );
    runs.then()
        .args(&["status"])
        .run()
        .status(0)
        .stdout_contains("spent $")
        .stdout_contains("claude/claude-")
        .stdout_contains("tokens");
}

#[test]
fn an_overloaded_model_is_an_infrastructure_failure_retried_until_it_answers() {
    // The CLI retries a 529 itself, a few times: the model stays overloaded longer than
    // that, so that baton's own retry is what gets through.
    let script = Script::new()
        .rule(Rule::reply(Reply::overloaded()).times(4))
        .rule(Rule::text("Finally done"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "work"
prompt = "do the work"
retries = 5
backoff = "100ms"
"#;
    let out = with_claude(Test::new(), &model)
        .env("CLAUDE_CODE_MAX_RETRIES", "1")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run();
    let out = out.status(0);
    let attempts = attempts_of(&out, "work");
    // With one retry of its own, each attempt of the CLI asks the model twice.
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert_eq!(model.requests().len(), 5);
    let (reason, message) = infrastructure_failure(&attempts[0]);
    assert_eq!(reason, "api_error_529");
    assert!(message.contains("529"), "{message}");
    assert_eq!(
        attempts.last().unwrap().outcome,
        Some(Outcome::Exited { code: 0 })
    );
    assert_eq!(out.json_task("work")["output"], "Finally done");
    assert_eq!(out.store().task("work").status, TaskState::Succeeded);
}

/// A test whose `codex` engine is the pinned CLI with a model provider pointing at `model`, and
/// a `CODEX_HOME` of its own.
pub(crate) fn with_codex(test: Test, model: &MockModel) -> Test {
    let tmp = test.path().parent().unwrap().to_owned();
    let (home, codex_home) = (tmp.join("home"), tmp.join("codex-home"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&codex_home).unwrap();
    let provider = format!(
        // No retries of its own: codex would otherwise ask 30 times over 25 s before giving up.
        "model_providers.mock={{name=\"mock\",base_url=\"{}/v1\",env_key=\"OPENAI_API_KEY\",wire_api=\"responses\",request_max_retries=0,stream_max_retries=0}}",
        model.url()
    );
    let config = format!(
        "[engines.codex]\ncommand = \"{}\"\nargs = [\"-c\", \"model_provider=mock\", \"-c\", '{provider}']\n",
        agent_bin("codex").display()
    );
    test.file("baton.toml", config)
        .env("HOME", home.to_str().unwrap())
        .env("CODEX_HOME", codex_home.to_str().unwrap())
        .env("OPENAI_API_KEY", "sk-proj-test-key-for-the-mock-model-only")
}

#[test]
fn a_codex_task_is_priced_from_the_table() {
    let script = Script::new().rule(Rule::reply(Reply::Text {
        text: "Codex says the tests pass".into(),
        input_tokens: 1_000_000,
        output_tokens: 100_000,
    }));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "check"
engine = "codex"
model = "gpt-5"
prompt = "-n check the tests"

[[task]]
id = "echo"
needs = ["check"]
run = "printf '%s' {{ needs.check.output }}"
"#;
    let out = with_codex(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        out.json_task("check")["output"],
        "Codex says the tests pass"
    );
    assert_eq!(out.json_task("echo")["output"], "Codex says the tests pass");
    // The prompt reached codex whole, on stdin: a leading `-n` is not a flag.
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.text().contains("-n check the tests")),
        "{:?}",
        model
            .requests()
            .iter()
            .map(|r| r.text())
            .collect::<Vec<_>>()
    );
    let usage = attempts_of(&out, "check")[0].agent.clone().unwrap();
    assert_eq!(usage.engine, "codex");
    assert_eq!(usage.model.as_deref(), Some("gpt-5"));
    assert!(usage.session_id.is_some(), "{usage:?}");
    assert_eq!(usage.output_tokens, 100_000);
    // gpt-5: $1.25 per million in, $10 per million out (cached input at a tenth).
    let expected = (usage.input_tokens as f64 * 1.25
        + usage.cache_read_tokens as f64 * 0.125
        + usage.output_tokens as f64 * 10.0)
        / 1e6;
    let cost = usage.cost_usd.unwrap();
    assert!(
        (cost - expected).abs() < 1e-9,
        "{cost} vs {expected}: {usage:?}"
    );
    assert!(cost >= 2.0, "{usage:?}");
    assert!(usage.cost_estimated);
}

/// A test whose `gemini` engine is the pinned CLI, talking to `model` with API-key auth (the
/// only auth that honours `GOOGLE_GEMINI_BASE_URL`), with a home and a temporary directory of
/// its own (it writes error reports to `os.tmpdir()`).
fn with_gemini(test: Test, model: &MockModel) -> Test {
    let tmp = test.path().parent().unwrap().to_owned();
    let (home, tmpdir) = (tmp.join("home"), tmp.join("tmp"));
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::create_dir_all(&tmpdir).unwrap();
    // One attempt per request: its own retries of a failing model take minutes.
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}"#,
    )
    .unwrap();
    let config = format!(
        "[engines.gemini]\ncommand = \"{}\"\n",
        agent_bin("gemini").display()
    );
    test.file("baton.toml", config)
        .env("HOME", home.to_str().unwrap())
        .env("TMPDIR", tmpdir.to_str().unwrap())
        .env("GOOGLE_GEMINI_BASE_URL", &model.url())
        .env("GEMINI_API_KEY", "AIzaSy-test-key-for-the-mock-model-only")
}

#[test]
fn a_gemini_task_writes_a_file_and_hands_its_answer_on() {
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let target = root.join("notes.md");
    let script = Script::new()
        // The turn after the tool ran ends with the tool's functionResponse.
        .rule(
            Rule::reply(Reply::Text {
                text: "Wrote notes.md".into(),
                input_tokens: 400_000,
                output_tokens: 20_000,
            })
            .when_last_contains("functionResponse"),
        )
        .rule(
            Rule::reply(Reply::gemini_write(target.to_str().unwrap(), "# Notes\n"))
                .when_contains("TASK-NOTES")
                .times(1),
        );
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "notes"
engine = "gemini"
model = "gemini-2.5-pro"
prompt = "TASK-NOTES: write notes.md"

[[task]]
id = "echo"
needs = ["notes"]
run = "printf 'got: %s' {{ needs.notes.output }}"
"#;
    let out = with_gemini(test, &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run();
    let out = out.status(0);

    // The real CLI wrote the file the model asked for, and its answer is the task's output.
    assert_eq!(out.read("notes.md"), b"# Notes\n");
    assert_eq!(out.json_task("notes")["output"], "Wrote notes.md");
    assert_eq!(out.json_task("echo")["output"], "got: Wrote notes.md");
    // The prompt reached it on stdin, and the model it was told to use was asked.
    let asked: Vec<_> = model
        .requests()
        .into_iter()
        .filter(|r| r.rule.is_some())
        .collect();
    assert_eq!(asked.len(), 2, "{:?}", model.requests());
    assert!(asked[0].text().contains("TASK-NOTES: write notes.md"));
    assert!(
        asked
            .iter()
            .all(|r| r.path.contains("/models/gemini-2.5-pro:")),
        "{:?}",
        asked.iter().map(|r| &r.path).collect::<Vec<_>>()
    );

    let attempts = attempts_of(&out, "notes");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, Some(Outcome::Exited { code: 0 }));
    let usage = attempts[0].agent.clone().expect("agent usage recorded");
    assert_eq!(usage.engine, "gemini");
    assert_eq!(usage.model.as_deref(), Some("gemini-2.5-pro"));
    assert!(usage.session_id.is_some(), "{usage:?}");
    assert_eq!(usage.tool_calls, 1);
    // Both turns: the mock's 10 / 5 for the tool call, then the answer's.
    assert_eq!(usage.input_tokens + usage.cache_read_tokens, 400_010);
    assert_eq!(usage.output_tokens, 20_005);
    // gemini-2.5-pro: $1.25 per million in, $10 per million out (cached input at a tenth).
    let expected = (usage.input_tokens as f64 * 1.25
        + usage.cache_read_tokens as f64 * 0.125
        + usage.output_tokens as f64 * 10.0)
        / 1e6;
    let cost = usage.cost_usd.unwrap();
    assert!(
        (cost - expected).abs() < 1e-9,
        "{cost} vs {expected}: {usage:?}"
    );
    assert!(cost > 0.7, "{usage:?}");
    assert!(usage.cost_estimated);
    out.store().assert_consistent();
}

/// A model whose every answer costs about $3 with claude-sonnet-4-5 (a million input tokens).
/// A model whose agent is stopped mid-work by any budget under $3: its first message, a tool
/// call, costs a million input tokens (priced at $3 for claude-sonnet-4-5); with the tool's
/// result it answers.
pub(crate) fn expensive_work_model() -> MockModel {
    MockModel::start(
        Script::new()
            .rule(Rule::text("done, expensively").when_last_contains("toolu_mock"))
            .rule(Rule::reply(
                Reply::tool_use("Bash", serde_json::json!({"command": "true"}))
                    .costing(1_000_000, 10),
            )),
    )
    .unwrap()
}

/// A model whose agent answers at once, expensively: its answer costs a million input tokens
/// ($3 for claude-sonnet-4-5).
pub(crate) fn expensive_model() -> MockModel {
    MockModel::start(Script::new().rule(Rule::reply(
        Reply::text("done, expensively").costing(1_000_000, 10),
    )))
    .unwrap()
}

#[test]
fn a_hung_agent_is_ended_by_its_idle_timeout_and_retried() {
    // The first request gets response headers and then nothing: Claude Code waits on that
    // stream for minutes (it clamps its own idle timeout to at least 300 s). The second
    // attempt's request is answered.
    // 4 s of silence, not less: a Claude Code that starts on a busy machine (the suite's
    // other tests beside it) can take two seconds to say its first line.
    let script = Script::new()
        .rule(Rule::hang().times(1))
        .rule(Rule::text("Answered after the hang"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "work"
prompt = "do the work"
idle_timeout = "4s"
retries = 1
backoff = "100ms"
"#;
    let started = std::time::Instant::now();
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run();
    let elapsed = started.elapsed();
    let out = out.status(0);
    let attempts = attempts_of(&out, "work");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let first = attempts[0].outcome.clone().unwrap();
    assert_eq!(first, Outcome::IdleTimeout { after_ms: 4000 });
    // baton's verdict, not the agent's: the machinery's failure, hence retried.
    assert_eq!(first.failure_class(), Some(FailureClass::Infrastructure));
    // What the hung CLI had said before it went quiet was still read.
    let usage = attempts[0].agent.clone().expect("agent usage recorded");
    assert!(usage.session_id.is_some(), "{usage:?}");
    assert_eq!(attempts[1].outcome, Some(Outcome::Exited { code: 0 }));
    assert_eq!(out.json_task("work")["output"], "Answered after the hang");
    assert_eq!(out.store().task("work").status, TaskState::Succeeded);
    assert_eq!(model.requests().len(), 2);
    // Cut short: left alone, Claude Code would have waited 300 s on the hung stream.
    assert!(elapsed < std::time::Duration::from_secs(60), "{elapsed:?}");
    out.store().assert_consistent();
}

#[test]
fn a_gemini_api_error_is_an_infrastructure_failure_retried() {
    // Gemini CLI exits with a code that varies (244 for a 500) and says what happened only in
    // its result line's text: `[API Error: {"error":{"code":500,…}}]`.
    let script = Script::new()
        .rule(Rule::error(500).times(1))
        .rule(Rule::text("Second time lucky"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "work"
engine = "gemini"
model = "gemini-2.5-flash"
prompt = "do the work"
retries = 1
backoff = "100ms"
"#;
    let out = with_gemini(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run();
    let out = out.status(0);
    let attempts = attempts_of(&out, "work");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let (reason, message) = infrastructure_failure(&attempts[0]);
    assert_eq!(reason, "api_error_500");
    assert!(message.contains("scripted HTTP 500"), "{message}");
    assert_eq!(attempts[1].outcome, Some(Outcome::Exited { code: 0 }));
    assert_eq!(out.json_task("work")["output"], "Second time lucky");
    assert_eq!(
        model.requests().iter().filter(|r| r.rule.is_some()).count(),
        2
    );
}

#[test]
fn an_attempt_cut_short_by_the_api_continues_the_agent_s_session() {
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let file = root.join("half.txt").to_str().unwrap().to_owned();
    let script = Script::new()
        .rule(
            Rule::text("Finished after resuming")
                .when_contains("TASK-LONG")
                .when_last_contains("Your previous attempt at this task was cut short"),
        )
        // The turn after the file was written: the API is down for longer than the CLI's own
        // retries (one, with CLAUDE_CODE_MAX_RETRIES=1).
        .rule(
            Rule::reply(Reply::overloaded())
                .when_contains("TASK-LONG")
                .when_last_contains("toolu_mock")
                .times(2),
        )
        .rule(
            Rule::reply(Reply::claude_write(&file, "first half\n"))
                .when_contains("TASK-LONG")
                .times(1),
        );
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "long"
prompt = "TASK-LONG: write half.txt, then report"
retries = 2
backoff = "10ms"
"#;
    let out = with_claude(test, &model)
        .env("CLAUDE_CODE_MAX_RETRIES", "1")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.read("half.txt"), b"first half\n");
    assert_eq!(out.json_task("long")["output"], "Finished after resuming");
    let attempts = attempts_of(&out, "long");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let first_session = attempts[0].agent.clone().unwrap().session_id.unwrap();
    // The second attempt asked the model with the first one's conversation in it: the task,
    // the file it wrote, and then the word that it was cut short.
    let last = model.requests().pop().unwrap();
    let text = last.text();
    assert!(text.contains("TASK-LONG"), "{text}");
    assert!(text.contains("toolu_mock"), "{text}");
    assert!(
        text.contains("cut short (the agent could not work"),
        "{text}"
    );
    assert_eq!(
        attempts[1].agent.clone().unwrap().session_id.as_deref(),
        Some(first_session.as_str())
    );
}

#[test]
fn a_codex_server_error_is_retried_then_succeeds() {
    let script = Script::new()
        .rule(Rule::error(500).times(1))
        .rule(Rule::text("codex got through"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "work"
engine = "codex"
model = "gpt-5"
prompt = "do the work"
retries = 2
backoff = "50ms"
"#;
    let out = with_codex(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let attempts = attempts_of(&out, "work");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let Some(Outcome::AgentFailed { class, message, .. }) = attempts[0].outcome.clone() else {
        panic!("{:?}", attempts[0].outcome);
    };
    assert_eq!(class, FailureClass::Infrastructure, "{message}");
    assert_eq!(out.json_task("work")["output"], "codex got through");
}

#[test]
fn a_failed_check_is_fixed_by_claude_in_the_same_session() {
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let file = root.join("answer.txt").to_str().unwrap().to_owned();
    let script = Script::new()
        .rule(
            Rule::text("fixed it")
                .when_contains("fix round 1")
                .when_last_contains("toolu_mock"),
        )
        .rule(Rule::reply(Reply::claude_write(&file, "42\n")).when_last_contains("fix round 1"))
        .rule(
            Rule::text("done")
                .when_contains("TASK-FIX")
                .when_last_contains("toolu_mock"),
        )
        .rule(Rule::reply(Reply::claude_write(&file, "41\n")).when_contains("TASK-FIX"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "answer"
prompt = "TASK-FIX: write the answer to answer.txt"
verify = ["grep -qx 42 answer.txt"]
fix_attempts = 1
"#;
    let out = with_claude(test, &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.read("answer.txt"), b"42\n");
    let task = out.json_task("answer");
    assert_eq!(task["output"], "fixed it", "{task}");
    assert_eq!(task["attempts"], 1, "{task}");
    // The fix went into the same conversation: the original task is in it, and the check's
    // failure after it.
    let last = model.requests().pop().unwrap().text();
    assert!(last.contains("TASK-FIX"), "{last}");
    assert!(last.contains("grep -qx 42 answer.txt"), "{last}");
    // Both rounds' tokens count.
    let usage = attempts_of(&out, "answer")[0].agent.clone().unwrap();
    assert!(usage.output_tokens >= 20, "{usage:?}");
}

#[test]
fn a_claude_task_in_a_worktree_is_confined_to_it_and_still_keeps_its_session() {
    if !crate::test::landlock_sandbox_test(
        "a_claude_task_in_a_worktree_is_confined_to_it_and_still_keeps_its_session",
    ) {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let escaped = root.join("escaped.txt");
    // A shell command inside the worktree (relative to its cwd: the run's id is not known
    // here), then a write into the main checkout, then the answer.
    let script = Script::new()
        .rule(
            Rule::reply(Reply::claude_write(escaped.to_str().unwrap(), "out\n"))
                .when_last_contains("toolu_mock")
                .times(1),
        )
        .rule(Rule::text("Confined: done").when_last_contains("toolu_mock"))
        .rule(
            Rule::tool_use(
                "Bash",
                serde_json::json!({"command": "echo inside > inside.txt", "description": "write"}),
            )
            .when_contains("TASK-CONFINED"),
        );
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "work"
engine = "claude"
timeout = "2m"
prompt = "TASK-CONFINED: write a file"
allowed_tools = ["Bash", "Write"]
"#;
    let test = with_claude(test, &model).graph("graph.toml", graph);
    // Worktrees need a commit to start from.
    crate::workspaces::git(&root, &["add", "-A"]);
    crate::workspaces::git(&root, &["commit", "-qm", "start"]);
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);

    assert_eq!(out.json_task("work")["output"], "Confined: done");
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        crate::workspaces::git(&root, &["show", &format!("baton/{run}/result:inside.txt")]),
        "inside"
    );
    // The write outside was refused, and Claude Code was told so.
    assert!(!escaped.exists());
    let told = model
        .requests()
        .iter()
        .any(|r| r.text().to_lowercase().contains("permission denied"));
    assert!(told, "{:#?}", model.requests().last().map(|r| r.text()));
    // Its session was saved under HOME, writable for it: a later attempt could continue it.
    let home = root.parent().unwrap().join("home");
    let sessions = walk_files(&home.join(".claude/projects"));
    assert!(
        sessions
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "jsonl")),
        "{sessions:?}"
    );
}

/// Every file beneath `dir`.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.path().is_dir() {
                stack.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files
}

#[test]
fn an_agent_whose_api_cannot_be_reached_is_the_machinery_s_failure_and_is_retried() {
    // A model server that went away: the port refuses connections, and Claude Code retries it
    // (`api_retry` lines) until the attempt's time runs out.
    let gone = {
        let model = MockModel::start(Script::new()).unwrap();
        model.url()
    };
    let model = MockModel::start(Script::new()).unwrap();
    let graph = r#"
[[task]]
id = "unlucky"
prompt = "anything"
timeout = "4s"
retries = 1
backoff = "10ms"
"#;
    let out = with_claude(Test::new(), &model)
        .env("ANTHROPIC_BASE_URL", &gone)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let task = out.json_task("unlucky");
    assert_eq!(
        task["attempts"], 2,
        "retried as the machinery's failure: {task:#}"
    );
    assert_eq!(task["outcome"]["kind"], "agent-failed", "{task:#}");
    assert_eq!(task["outcome"]["class"], "infrastructure", "{task:#}");
    assert_eq!(task["outcome"]["reason"], "api_unreachable", "{task:#}");
    let message = task["outcome"]["message"].as_str().unwrap();
    assert!(message.contains("model API was not answering"), "{message}");
}

/// An agent task outside a git repository works in the directory itself; the run says so, and
/// that it runs without the write sandbox (#16 item 5).
#[test]
fn an_agent_outside_a_repository_is_said_to_work_in_place() {
    let model = MockModel::start(Script::new().rule(Rule::text("done in place"))).unwrap();
    let test = Test::new();
    std::fs::remove_dir_all(test.path().join(".git")).unwrap();
    let out = with_claude(test, &model)
        .graph(
            "graph.toml",
            "[[task]]\nid = \"work\"\nprompt = \"do it\"\n",
        )
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0)
        .stderr_contains("is not inside a git repository: agent tasks `work` work in it directly")
        .stderr_contains("without the write sandbox");
    assert_eq!(out.json_task("work")["output"], "done in place");
}

/// A task on `engine` (`engine = …` and `model = …` lines) whose first request gets `first`
/// (the agent does something), whose next gets `failure` (the machinery's), and whose next
/// attempt, told it was cut short, finishes: checked to have continued its session (the model
/// saw the task and the word that it was cut short, and not the task on its own).
fn continued(
    test: Test,
    engine: &str,
    first: Rule,
    failure: Rule,
    with: impl FnOnce(Test, &MockModel) -> Test,
) -> Output {
    let script = Script::new()
        .rule(
            Rule::text("Finished after resuming")
                .when_last_contains("Your previous attempt at this task was cut short"),
        )
        .rule(failure.times(1))
        .rule(first.when_contains("TASK-LONG").times(1));
    let model = MockModel::start(script).unwrap();
    let graph = format!(
        "[[task]]\nid = \"long\"\n{engine}\nprompt = \"TASK-LONG: write half.txt, then report\"\nretries = 2\nbackoff = \"10ms\"\n"
    );
    let out = with(test, &model)
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("long")["output"], "Finished after resuming");
    let attempts = attempts_of(&out, "long");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let last = model.requests().pop().unwrap().text();
    assert!(last.contains("TASK-LONG"), "{last}");
    assert!(last.contains("cut short"), "{last}");
    out
}

#[test]
fn a_codex_attempt_cut_short_by_the_api_continues_its_session() {
    // After its command ran, the API fails (codex does not retry here): the machinery's.
    let out = continued(
        Test::new(),
        "engine = \"codex\"\nmodel = \"gpt-5\"",
        Rule::reply(Reply::codex_exec("echo first half > half.txt")),
        Rule::error(500).when_contains("first half"),
        with_codex,
    );
    let attempts = attempts_of(&out, "long");
    let first = attempts[0].agent.clone().unwrap().session_id.unwrap();
    assert_eq!(
        attempts[1].agent.clone().unwrap().session_id.as_deref(),
        Some(first.as_str())
    );
}

#[test]
fn a_gemini_attempt_cut_short_by_the_api_continues_its_session() {
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let file = root.join("half.txt").to_str().unwrap().to_owned();
    // After the file was written, the API fails: the machinery's.
    let out = continued(
        test,
        "engine = \"gemini\"\nmodel = \"gemini-2.5-flash\"",
        Rule::reply(Reply::gemini_write(&file, "first half\n")),
        Rule::error(500)
            .when_contains("TASK-LONG")
            .when_last_contains("functionResponse"),
        with_gemini,
    );
    assert_eq!(out.read("half.txt"), b"first half\n");
}

mod budgets;
mod leftovers;
