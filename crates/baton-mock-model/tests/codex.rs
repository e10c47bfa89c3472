//! The real Codex CLI (`codex exec`) against the mock model.

mod common;

use baton_mock_model::{Api, MockModel, Reply, Rule, Script};
use common::*;
use std::path::Path;
use std::time::Duration;

/// `codex exec --json` pointed at the mock through a custom `model_providers.mock` entry.
/// `provider_extra` is appended inside the provider table (e.g. retry limits).
fn codex(
    server: &MockModel,
    bin: &Path,
    tmp: &Path,
    provider_extra: &str,
) -> std::process::Command {
    let (home, codex_home, cwd) = (tmp.join("home"), tmp.join("codex-home"), tmp.join("cwd"));
    for d in [&home, &codex_home, &cwd] {
        std::fs::create_dir_all(d).unwrap();
    }
    let provider = format!(
        "model_providers.mock={{name=\"mock\",base_url=\"{}/v1\",env_key=\"MOCK_KEY\",wire_api=\"responses\"{provider_extra}}}",
        server.url()
    );
    let mut c = clean_command(bin, &home, &cwd);
    c.env("CODEX_HOME", &codex_home)
        .env("MOCK_KEY", "test")
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-c",
            "model_provider=mock",
            "-c",
        ])
        .arg(provider)
        .args(["-m", "mock-model"]);
    c
}

#[test]
fn codex_answers_text() {
    let bin = agent_bin("codex");
    let tmp = tempdir();
    let script = Script::new().rule(Rule::reply(Reply::Text {
        text: "Hello from mock.".into(),
        input_tokens: 50,
        output_tokens: 4,
    }));
    let server = MockModel::start(script).unwrap();
    let mut cmd = codex(&server, &bin, tmp.path(), "");
    cmd.arg("say hi");
    // stdin empty and closed: codex exec reads stdin even when given a prompt.
    let r = run(cmd, b"", Duration::from_secs(120));
    eprintln!("codex text run took {:?}", r.elapsed);
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let msg = r
        .json_lines()
        .into_iter()
        .rev()
        .find(|v| v["type"] == "item.completed" && v["item"]["type"] == "agent_message");
    assert_eq!(
        msg.expect("an agent_message")["item"]["text"],
        "Hello from mock."
    );
    let done = r.last_of_type("turn.completed").expect("turn.completed");
    assert_eq!(done["usage"]["input_tokens"], 50);
    assert_eq!(done["usage"]["output_tokens"], 4);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        (reqs[0].api, reqs[0].path.as_str()),
        (Api::OpenAiResponses, "/v1/responses")
    );
    assert!(reqs[0].last_text().contains("say hi"));
}

#[test]
fn codex_writes_a_file_with_exec_command() {
    let bin = agent_bin("codex");
    let tmp = tempdir();
    let script = Script::new()
        // After the command ran, the last input item is its function_call_output for our call id.
        .rule(Rule::text("Wrote hello.txt.").when_last_contains("call_mock"))
        .rule(
            Rule::reply(Reply::codex_write("hello.txt", "hello from codex\n"))
                .when_contains("MAKE-FILE")
                .times(1),
        );
    let server = MockModel::start(script).unwrap();
    let mut cmd = codex(&server, &bin, tmp.path(), "");
    cmd.args(["--sandbox", "workspace-write", "-"]);
    let r = run(cmd, b"MAKE-FILE please", Duration::from_secs(120));
    save_fixture("codex-success.jsonl", &r.stdout, tmp.path(), &server.url());
    eprintln!("codex write run took {:?}", r.elapsed);
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("cwd/hello.txt")).unwrap(),
        "hello from codex\n"
    );
    let cmd_item = r
        .json_lines()
        .into_iter()
        .find(|v| v["type"] == "item.completed" && v["item"]["type"] == "command_execution")
        .expect("a command_execution item");
    assert_eq!(cmd_item["item"]["exit_code"], 0);
    let msg = r.last_of_type("item.completed").unwrap();
    assert_eq!(msg["item"]["text"], "Wrote hello.txt.");
    let rules: Vec<_> = server.requests().iter().map(|q| q.rule).collect();
    assert_eq!(rules, [Some(1), Some(0)]);
}

#[test]
fn codex_reports_server_errors() {
    let bin = agent_bin("codex");
    let tmp = tempdir();
    let server = MockModel::start(Script::new().rule(Rule::error(500))).unwrap();
    // Without these limits codex retries 6 x 5 times over about 25 s.
    let mut cmd = codex(
        &server,
        &bin,
        tmp.path(),
        ",request_max_retries=0,stream_max_retries=0",
    );
    cmd.arg("say hi");
    let r = run(cmd, b"", Duration::from_secs(120));
    save_fixture("codex-error.jsonl", &r.stdout, tmp.path(), &server.url());
    eprintln!("codex 500 run took {:?}", r.elapsed);
    assert_eq!(r.code, Some(1), "stderr: {}", r.stderr);
    assert_eq!(server.requests().len(), 1);
    let failed = r.last_of_type("turn.failed").expect("turn.failed");
    assert!(failed["error"]["message"].is_string());
}

#[test]
fn codex_reports_rate_limits_after_its_retries() {
    let bin = agent_bin("codex");
    let tmp = tempdir();
    let server = MockModel::start(Script::new().rule(Rule::reply(Reply::rate_limited(1)))).unwrap();
    let mut cmd = codex(
        &server,
        &bin,
        tmp.path(),
        ",request_max_retries=0,stream_max_retries=1",
    );
    cmd.arg("say hi");
    let r = run(cmd, b"", Duration::from_secs(120));
    save_fixture(
        "codex-rate-limited.jsonl",
        &r.stdout,
        tmp.path(),
        &server.url(),
    );
    eprintln!(
        "codex 429 run took {:?}, {} requests",
        r.elapsed,
        server.requests().len()
    );
    assert_eq!(r.code, Some(1), "stderr: {}", r.stderr);
    let failed = r.last_of_type("turn.failed").expect("turn.failed");
    assert!(
        failed["error"]["message"].as_str().unwrap().contains("429"),
        "{failed}"
    );
}

#[test]
fn codex_gives_up_on_a_hung_stream_after_its_idle_timeout() {
    let bin = agent_bin("codex");
    let tmp = tempdir();
    let server = MockModel::start(Script::new().rule(Rule::hang())).unwrap();
    let extra = ",request_max_retries=0,stream_max_retries=0,stream_idle_timeout_ms=1000";
    let mut cmd = codex(&server, &bin, tmp.path(), extra);
    cmd.arg("say hi");
    let r = run(cmd, b"", Duration::from_secs(60));
    save_fixture(
        "codex-idle-timeout.jsonl",
        &r.stdout,
        tmp.path(),
        &server.url(),
    );
    eprintln!("codex hang run took {:?}", r.elapsed);
    assert_eq!(r.code, Some(1), "stderr: {}", r.stderr);
    let failed = r.last_of_type("turn.failed").expect("turn.failed");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idle timeout"),
        "{failed}"
    );
}
