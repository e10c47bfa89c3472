//! The `http` engine: baton asks a model API itself (OpenAI-compatible chat completions or the
//! Anthropic Messages API), here the scripted model server.

use baton_mock_model::{Api, MockModel, Reply, Rule, Script};
use baton_model::{FailureClass, Outcome};

use crate::test::Test;

fn with_http(test: Test, model: &MockModel, api: &str) -> Test {
    let base = match api {
        "openai" => format!("{}/v1", model.url()),
        _ => model.url(),
    };
    let config = format!(
        "[engines.http]\napi = \"{api}\"\nbase_url = \"{base}\"\nkey_env = \"MOCK_API_KEY\"\n"
    );
    test.file("baton.toml", config)
        .env("MOCK_API_KEY", "mock-key-0123456789-abcdefghij")
}

#[test]
fn an_openai_compatible_endpoint_answers_a_planning_task() {
    let model = MockModel::start(Script::new().rule(Rule::reply(Reply::Text {
        text: "Plan: 1. schema 2. api 3. docs".into(),
        input_tokens: 2_000,
        output_tokens: 100,
    })))
    .unwrap();
    let graph = r#"
[[task]]
id = "plan"
engine = "http"
model = "gpt-5"
prompt = "Plan the work. Scope: {{ task.id }}"
scope = ["docs/**"]

[[task]]
id = "show"
needs = ["plan"]
run = "echo {{ needs.plan.output }}"
"#;
    let out = with_http(Test::new(), &model, "openai")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        out.json_task("plan")["output"],
        "Plan: 1. schema 2. api 3. docs"
    );
    assert_eq!(
        out.json_task("show")["output"],
        "Plan: 1. schema 2. api 3. docs"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.api, Api::OpenAiChat);
    assert_eq!(request.body["model"], "gpt-5");
    assert_eq!(
        request.header("authorization"),
        Some("Bearer mock-key-0123456789-abcdefghij")
    );
    // baton's preamble went as the system message, the prompt as the user's, with what is
    // the task's own (its scope) after it.
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("run by baton")
    );
    assert_eq!(
        messages[1]["content"],
        "Plan the work. Scope: plan\n\nChange only files matching: docs/**. Other tasks own the rest of the repository."
    );
    let agent = &out.json_task("plan")["agent"];
    assert_eq!(agent["engine"], "http");
    assert_eq!(agent["input_tokens"], 2_000);
    assert_eq!(agent["output_tokens"], 100);
    // gpt-5 from the price table: 2000 × $1.25/M + 100 × $10/M.
    assert!(
        (agent["cost_usd"].as_f64().unwrap() - 0.0035).abs() < 1e-12,
        "{agent}"
    );
    assert_eq!(agent["estimated"], true);
}

#[test]
fn an_anthropic_rate_limit_is_retried_after_the_wait_it_asked_for() {
    let model = MockModel::start(
        Script::new()
            .rule(Rule::reply(Reply::rate_limited(1)).times(1))
            .rule(Rule::text("Reviewed.")),
    )
    .unwrap();
    let graph = r#"
[[task]]
id = "review"
engine = "http"
model = "claude-sonnet-4-5"
prompt = "Review it."
retries = 2
backoff = "10ms"
"#;
    let out = with_http(Test::new(), &model, "anthropic")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let attempts = out.store().attempts("review");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    match attempts[0].outcome.clone().unwrap() {
        Outcome::AgentFailed {
            class,
            reason,
            retry_after_ms,
            ..
        } => {
            assert_eq!(class, FailureClass::Infrastructure);
            assert_eq!(reason, "api_error_429");
            assert_eq!(retry_after_ms, Some(1000));
        }
        other => panic!("{other:?}"),
    }
    // The retry waited for the API's second, not the 10 ms backoff.
    let gap = attempts[1].started_at_ms - attempts[0].ended_at_ms.unwrap();
    assert!(gap >= 1000, "retried after {gap} ms");
    assert_eq!(out.json_task("review")["output"], "Reviewed.");
    let requests = model.requests();
    assert_eq!(requests[0].api, Api::AnthropicMessages);
    assert_eq!(
        requests[0].header("x-api-key"),
        Some("mock-key-0123456789-abcdefghij")
    );
}

#[test]
fn an_http_task_without_a_model_is_told_what_to_set() {
    let model = MockModel::start(Script::new().rule(Rule::text("x"))).unwrap();
    let out = with_http(Test::new(), &model, "openai")
        .graph(
            "graph.toml",
            "[[task]]\nid = \"a\"\nengine = \"http\"\nprompt = \"p\"\n",
        )
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains(
            "task `a`: engine `http` needs a model: set `model` on the task or under [engines.http]",
        );
    assert!(!out.state_dir_exists());
    assert!(model.requests().is_empty());
}

#[test]
fn sibling_prompts_start_with_the_same_bytes_and_differ_only_at_the_end() {
    let model = MockModel::start(Script::new().rule(Rule::text("done"))).unwrap();
    // Two instances of one task: their shared context first, their item and their scopes and
    // checks (baton's, each task's own) after it.
    let graph = r#"
[[task]]
id = "write"
engine = "http"
model = "gpt-5"
for_each = ["alpha", "beta"]
scope = ["{{ item }}/**"]
verify = ["true"]
prompt = """
SHARED CONTEXT: the style guide, the schema and the API, the same for every writer.
Now write the {{ item }} chapter."""
"#;
    let out = with_http(Test::new(), &model, "openai")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("write/alpha")["output"], "done");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    // What a provider caches is the request's prefix: system message, then the user's.
    let bytes: Vec<String> = requests
        .iter()
        .map(|r| serde_json::to_string(&r.body["messages"]).unwrap())
        .collect();
    let common = bytes[0]
        .bytes()
        .zip(bytes[1].bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let shared = &bytes[0][..common];
    assert!(
        shared.ends_with("Now write the "),
        "they part at the item, not before: {shared}"
    );
    assert!(shared.contains("run by baton"), "{shared}");
    for request in &requests {
        let user = request.body["messages"][1]["content"].as_str().unwrap();
        let item = if user.contains("alpha chapter") {
            "alpha"
        } else {
            "beta"
        };
        assert!(
            user.ends_with(&format!(
                "Change only files matching: {item}/**. Other tasks own the rest of the \
                 repository.\nWhen you are done, baton will check your work by running: true. \
                 Make sure they pass."
            )),
            "{user}"
        );
    }
}
