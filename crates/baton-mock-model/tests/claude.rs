//! The real Claude Code CLI against the mock model.

mod common;

use baton_mock_model::{Api, MockModel, Reply, Rule, Script};
use common::*;
use std::time::Duration;

fn claude(
    server: &MockModel,
    bin: &std::path::Path,
    tmp: &std::path::Path,
) -> std::process::Command {
    let (home, cwd) = (tmp.join("home"), tmp.join("cwd"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let mut c = clean_command(bin, &home, &cwd);
    c.env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args(["-p", "--output-format", "stream-json", "--verbose"])
        .args([
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Write,Edit,Read",
        ]);
    c
}

#[test]
fn claude_writes_a_file_then_answers() {
    let bin = agent_bin("claude");
    let tmp = tempdir();
    let target = tmp.path().join("cwd/hello.txt");
    let script = Script::new()
        // The turn after the tool ran: its last message is the tool_result for our tool_use id.
        .rule(Rule::text("Done: wrote hello.txt.").when_last_contains("toolu_mock"))
        .rule(
            Rule::reply(Reply::claude_write(
                target.to_str().unwrap(),
                "hello from mock\n",
            ))
            .when_contains("MAKE-FILE")
            .times(1),
        );
    let server = MockModel::start(script).unwrap();
    let r = run(
        claude(&server, &bin, tmp.path()),
        b"MAKE-FILE please",
        Duration::from_secs(120),
    );
    save_fixture("claude-success.jsonl", &r.stdout, tmp.path(), &server.url());
    eprintln!("claude success run took {:?}", r.elapsed);

    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from mock\n"
    );
    let result = r.last_of_type("result").expect("a result line");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "Done: wrote hello.txt.");
    assert_eq!(result["num_turns"], 2);
    assert_eq!(
        result["usage"]["input_tokens"], 20,
        "10 per mocked turn: {result}"
    );
    assert!(result["total_cost_usd"].as_f64().unwrap() > 0.0, "{result}");

    let reqs = server.requests();
    let rules: Vec<_> = reqs.iter().map(|q| (q.api, q.rule)).collect();
    assert_eq!(
        rules,
        [
            (Api::AnthropicMessages, Some(1)),
            (Api::AnthropicMessages, Some(0))
        ]
    );
    assert!(reqs[0].path.starts_with("/v1/messages"));
    assert_eq!(reqs[0].body["stream"], true);
}

#[test]
fn claude_gives_up_on_repeated_overload() {
    let bin = agent_bin("claude");
    let tmp = tempdir();
    let server = MockModel::start(Script::new().rule(Rule::reply(Reply::overloaded()))).unwrap();
    let r = run(
        claude(&server, &bin, tmp.path()),
        b"say hi",
        Duration::from_secs(180),
    );
    save_fixture(
        "claude-overloaded.jsonl",
        &r.stdout,
        tmp.path(),
        &server.url(),
    );
    eprintln!(
        "claude overloaded run took {:?}, {} requests",
        r.elapsed,
        server.requests().len()
    );

    // What baton sees: exit code 1, `system/api_retry` lines while Claude Code retries by itself,
    // then a result with is_error and api_error_status 529 (subtype says "success"!).
    assert_eq!(r.code, Some(1), "stderr: {}", r.stderr);
    let retries: Vec<_> = r
        .json_lines()
        .into_iter()
        .filter(|v| v["type"] == "system" && v["subtype"] == "api_retry")
        .collect();
    assert!(!retries.is_empty());
    assert_eq!(retries[0]["error_status"], 529);
    let result = r.last_of_type("result").expect("a result line");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["api_error_status"], 529);
    assert_eq!(result["api_error_type"], "overloaded_error");
    assert_eq!(result["terminal_reason"], "api_error");
    assert!(
        result["result"].as_str().unwrap().contains("529"),
        "{result}"
    );
    assert_eq!(server.requests().len(), retries.len() + 1);
}

#[test]
fn claude_fails_fast_when_no_rule_matches() {
    let bin = agent_bin("claude");
    let tmp = tempdir();
    let server = MockModel::start(Script::new()).unwrap();
    let r = run(
        claude(&server, &bin, tmp.path()),
        b"say hi",
        Duration::from_secs(60),
    );
    // The 500 carries `x-should-retry: false`, which Claude Code honours: one request, no retries.
    assert_eq!(r.code, Some(1));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].rule, None);
    let result = r.last_of_type("result").unwrap();
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("no rule matched"),
        "{result}"
    );
}
