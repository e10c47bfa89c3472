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
fn a_spent_run_budget_stops_the_agent_that_spent_it_and_starts_nothing_more() {
    // Its first message, a tool call, spends $3 of $1: its work is stopped there.
    let model = expensive_work_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 1.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
prompt = "two"

[[task]]
id = "third"
prompt = "three"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let first = out.json_task("first");
    assert_eq!(first["state"], "failed", "{first}");
    assert_eq!(first["outcome"]["kind"], "over-budget", "{first}");
    assert!(
        first["outcome"]["limit"]
            .as_str()
            .unwrap()
            .starts_with("run budget $1.00 reached"),
        "{first}"
    );
    for task in ["second", "third"] {
        let t = out.json_task(task);
        assert_eq!(t["state"], "skipped", "{t}");
        assert_eq!(t["reason"], "not started: run budget spent", "{t}");
        assert_eq!(t["attempts"], 0, "{t}");
    }
    assert_eq!(out.json()["run"]["state"], "failed");
    // Only the first task ever asked the model.
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn a_task_over_its_own_budget_fails_alone() {
    let model = expensive_work_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[[task]]
id = "capped"
prompt = "one"
budget = { usd = 0.5 }
retries = 2

[[task]]
id = "free"
prompt = "two"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let capped = out.json_task("capped");
    assert_eq!(capped["state"], "failed", "{capped}");
    // Over budget is the task's own failure: not retried.
    assert_eq!(capped["attempts"], 1, "{capped}");
    assert!(
        capped["outcome"]["limit"]
            .as_str()
            .unwrap()
            .starts_with("task budget $0.50 reached"),
        "{capped}"
    );
    assert_eq!(out.json_task("free")["state"], "succeeded");
}

#[test]
fn a_hung_agent_is_ended_by_its_idle_timeout_and_retried() {
    // The first request gets response headers and then nothing: Claude Code waits on that
    // stream for minutes (it clamps its own idle timeout to at least 300 s). The second
    // attempt's request is answered.
    let script = Script::new()
        .rule(Rule::hang().times(1))
        .rule(Rule::text("Answered after the hang"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "work"
prompt = "do the work"
idle_timeout = "2s"
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
    assert_eq!(first, Outcome::IdleTimeout { after_ms: 2000 });
    // baton's verdict, not the agent's: the machinery's failure, hence retried.
    assert_eq!(first.failure_class(), Some(FailureClass::Infrastructure));
    // What the hung CLI had said before it went quiet was still read.
    let usage = attempts[0].agent.clone().expect("agent usage recorded");
    assert!(usage.session_id.is_some(), "{usage:?}");
    assert_eq!(attempts[1].outcome, Some(Outcome::Exited { code: 0 }));
    assert_eq!(out.json_task("work")["output"], "Answered after the hang");
    assert_eq!(out.store().task("work").status, TaskState::Succeeded);
    assert_eq!(model.requests().len(), 2);
    assert!(elapsed < std::time::Duration::from_secs(15), "{elapsed:?}");
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
fn a_retried_run_counts_what_it_spent_before_against_its_budget() {
    let model = expensive_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 5.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    // About $3 spent: another agent at the average would pass $5, so it does not start.
    assert_eq!(out.json_task("first")["state"], "succeeded");
    assert_eq!(out.json_task("second")["state"], "skipped");
    assert_eq!(model.requests().len(), 1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    // Retrying the skipped task in the same run: the $3 spent before still count.
    let again = out
        .then()
        .args(&["retry", &run, "second", "--json"])
        .run()
        .status(1);
    assert_eq!(again.json_task("second")["state"], "skipped");
    assert_eq!(
        again.json_task("second")["reason"],
        "not started: run budget spent"
    );
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn a_soft_budget_pauses_the_run_until_a_person_approves() {
    let model = expensive_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 100.0, soft_usd = 2.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"

[[task]]
id = "third"
needs = ["second"]
prompt = "three"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(4);
    let json = out.json();
    assert_eq!(json["run"]["state"], "waiting", "{json}");
    let states: Vec<_> = ["first", "second", "third"]
        .iter()
        .map(|t| out.json_task(t)["state"].as_str().unwrap().to_owned())
        .collect();
    // About $3 spent by the first: past the soft $2, nothing else started, nothing lost.
    assert_eq!(states[0], "succeeded");
    assert!(states[1] == "ready" || states[1] == "pending", "{states:?}");
    assert_eq!(states[2], "pending");
    assert_eq!(model.requests().len(), 1);
    let run = json["run"]["id"].as_str().unwrap().to_owned();

    // Resuming without a decision about the money is refused, saying what to do.
    let refused = out
        .then()
        .args(&["resume", &run])
        .run()
        .status(2)
        .stderr_contains("is waiting at its soft budget ($3.")
        .stderr_contains(&format!("baton approve {run}"));

    // Approved: the rest runs, up to the hard budget.
    let approved = refused
        .then()
        .args(&["approve", &run, "--json"])
        .run()
        .status(0);
    assert_eq!(approved.json()["run"]["state"], "succeeded");
    assert_eq!(approved.json_task("third")["state"], "succeeded");
    assert_eq!(model.requests().len(), 3);
    let changed = approved
        .store()
        .events_of(|k| matches!(k, baton_model::EventKind::BudgetChanged { .. }));
    assert_eq!(
        changed,
        [baton_model::EventKind::BudgetChanged {
            usd: Some(100.0),
            tokens: None,
            soft_usd: None,
            soft_tokens: None
        }]
    );
    approved.store().assert_consistent();
}

#[test]
fn raising_the_budget_lets_a_spent_run_go_on() {
    let model = expensive_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 4.0, soft_usd = 2.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(4);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let raised = out
        .then()
        .args(&["resume", &run, "--raise-budget", "10", "--json"])
        .run()
        .status(0);
    assert_eq!(raised.json_task("second")["state"], "succeeded");
    assert_eq!(model.requests().len(), 2);
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
fn a_codex_answer_that_spent_the_run_budget_is_kept_and_nothing_more_starts() {
    // Codex tells what it spent only with its answer: by then the money is spent, and
    // throwing the answer away would buy nothing.
    let model = MockModel::start(
        Script::new().rule(Rule::reply(Reply::text("done").costing(1_000_000, 10))),
    )
    .unwrap();
    let graph = r#"
[defaults]
engine = "codex"
model = "gpt-5"

[run]
concurrency = 1
budget = { usd = 1.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
prompt = "two"
"#;
    let out = with_codex(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    // $1.25 priced from the table for gpt-5's million input tokens: past the run's $1.
    let first = out.json_task("first");
    assert_eq!(first["state"], "succeeded", "{first}");
    assert_eq!(first["output"], "done", "{first}");
    assert!(
        first["agent"]["cost_usd"].as_f64().unwrap() > 1.0,
        "{first}"
    );
    let second = out.json_task("second");
    assert_eq!(second["state"], "skipped", "{second}");
    assert_eq!(
        second["reason"], "not started: run budget spent",
        "{second}"
    );
    assert_eq!(model.requests().len(), 1);
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
fn a_run_its_budget_stopped_goes_on_with_more_budget_and_says_what_did_not_fit() {
    let model = expensive_model();
    // Each answer costs about $3: after the first, the next agent's reserve ($3, the average)
    // does not fit in what is left of $4, though only $3 is spent.
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 4.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"

[[task]]
id = "third"
needs = ["second"]
prompt = "three"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(out.json_task("second")["state"], "skipped");
    let stop = out.store().run().stop.unwrap();
    assert_eq!(stop.cause, baton_model::StopCause::BudgetSpent);
    assert_eq!(
        stop.reason,
        "budget spent: `second` would reserve $3.00 (the average of the finished agents) and \
         does not fit: $3.00 spent, of $4.00"
    );
    // Without more budget it says what to do.
    let refused = out
        .then()
        .args(&["resume", &run])
        .run()
        .status(2)
        .stderr_contains("--raise-budget");
    let raised = refused
        .then()
        .args(&["resume", &run, "--raise-budget", "7", "--json"])
        .run()
        .status(1);
    assert_eq!(raised.json_task("second")["state"], "succeeded");
    assert_eq!(
        raised.json_task("third")["state"],
        "skipped",
        "$7 covers one more"
    );
    // `retry` takes more budget too.
    let retried = raised
        .then()
        .args(&["retry", &run, "--raise-budget", "20", "--json"])
        .run()
        .status(0);
    assert_eq!(retried.json_task("third")["state"], "succeeded");
    assert_eq!(model.requests().len(), 3);
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

/// The escapes, each writing its pid under `root`, for Claude Code's Bash tool to run; then
/// `then` (a shell command).
fn agent_escapes(root: &Path, then: &str) -> (String, [String; 3]) {
    let pid = |name: &str| root.join(name).to_str().unwrap().to_owned();
    let (daemon, double, stubborn) = (pid("daemon.pid"), pid("double.pid"), pid("stubborn.pid"));
    let command = format!(
        "setsid sh -c 'echo $$ > {daemon}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         ( ( setsid sh -c 'echo $$ > {double}; exec sleep 300' </dev/null >/dev/null 2>&1 & ) & )\n\
         sh -c 'trap \"\" TERM; echo $$ > {stubborn}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         while [ ! -s {daemon} ] || [ ! -s {double} ] || [ ! -s {stubborn} ]; do sleep 0.01; done\n\
         {then}"
    );
    (command, [daemon, double, stubborn])
}

fn assert_gone(paths: &[String], when: &str) {
    for path in paths {
        let pid: i32 = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .trim()
            .parse()
            .unwrap();
        assert!(
            crate::procs::gone_within(pid, std::time::Duration::from_secs(5)),
            "{when}: {path}: {pid} outlived the agent's attempt"
        );
    }
}

fn cgroups_here(test: &str) -> bool {
    if baton_exec::cgroups_available() {
        return true;
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{test}: skipped: cgroup v2 is not writable here"
    );
    false
}

/// `test` with a Claude task (not confined: the pid files are written outside its worktree)
/// whose Bash tool runs `command`, then answers `Daemons: started`; its worktree's repository
/// has a commit.
fn daemon_agent(test: Test, command: &str, timeout: &str) -> (Test, MockModel) {
    let script = Script::new()
        .rule(Rule::text("Daemons: started").when_last_contains("toolu_mock"))
        .rule(
            Rule::tool_use(
                "Bash",
                serde_json::json!({"command": command, "description": "start daemons"}),
            )
            .when_contains("TASK-DAEMONS"),
        );
    let model = MockModel::start(script).unwrap();
    let graph = format!(
        "[[task]]\nid = \"work\"\nengine = \"claude\"\ntimeout = \"{timeout}\"\n\
         confine = \"none\"\nprompt = \"TASK-DAEMONS: start some servers\"\n\
         allowed_tools = [\"Bash\"]\n"
    );
    let test = with_claude(test, &model).graph("graph.toml", &graph);
    crate::workspaces::git(test.path(), &["add", "-A"]);
    crate::workspaces::git(test.path(), &["commit", "-qm", "start"]);
    (test, model)
}

/// What an agent's tool calls start ends with the agent's attempt (#14 item 3): a daemon in a
/// session of its own, a double fork into one and a TERM-ignoring child, started by Claude
/// Code's Bash tool, outlive the tool call but not the attempt.
#[test]
fn what_an_agent_s_tools_left_running_ends_with_its_attempt() {
    if !cgroups_here("what_an_agent_s_tools_left_running_ends_with_its_attempt") {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let (command, pids) = agent_escapes(&root, "true");
    let (test, _model) = daemon_agent(test, &command, "2m");
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let work = out.json_task("work");
    assert_eq!(work["output"], "Daemons: started", "{work}");
    assert_eq!(work["containment"], "cgroup");
    assert_gone(&pids, "after the agent finished");
}

/// … when the agent's time runs out under a tool call that hangs …
#[test]
fn what_an_agent_s_tools_left_running_ends_with_its_timeout() {
    if !cgroups_here("what_an_agent_s_tools_left_running_ends_with_its_timeout") {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let (command, pids) = agent_escapes(&root, "sleep 120");
    let (test, _model) = daemon_agent(test, &command, "4s");
    let out = test
        .args(&["run", "graph.toml", "--json", "--kill-grace", "200ms"])
        .run()
        .status(1);
    assert_eq!(out.json_task("work")["state"], "timed_out");
    assert_gone(&pids, "after the agent's timeout");
}

/// … and when its driver dies (the daemons live on: nothing is left to end them) and the run
/// is resumed, which ends them before the task goes on.
#[test]
fn what_an_agent_s_tools_left_running_ends_when_its_run_is_resumed() {
    if !cgroups_here("what_an_agent_s_tools_left_running_ends_when_its_run_is_resumed") {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let marker = root.join("started");
    let (escapes, pids) = agent_escapes(&root, &format!("touch {}; sleep 120", marker.display()));
    // The second time (after the resume) the tool call returns at once.
    let command = format!(
        "if [ -e {} ]; then true; else\n{escapes}\nfi",
        marker.display()
    );
    let (test, _model) = daemon_agent(test, &command, "2m");
    let mut running = test.args(&["run", "graph.toml", "--quiet"]).spawn();
    running.await_that("the daemons", crate::test::RUN_LIMIT, |root| {
        root.join("started").exists().then_some(())
    });
    let killed = running.kill();
    std::thread::sleep(std::time::Duration::from_millis(200));
    for path in &pids {
        let pid: i32 = std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(crate::procs::alive(pid), "{path} died with the driver");
    }
    let (_, resumed) = killed.resumed();
    assert_eq!(resumed.json_task("work")["output"], "Daemons: started");
    assert_gone(&pids, "after the resume");
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
