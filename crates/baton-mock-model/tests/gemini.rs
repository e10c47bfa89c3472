//! The real Gemini CLI (`gemini -p`) against the mock model.

mod common;

use baton_mock_model::{Api, MockModel, Reply, Rule, Script};
use common::*;
use std::path::Path;
use std::time::Duration;

/// `gemini -p PROMPT -o stream-json`, with settings selecting API-key auth (the only auth that
/// honours GOOGLE_GEMINI_BASE_URL) plus `general_settings`.
fn gemini(
    server: &MockModel,
    bin: &Path,
    tmp: &Path,
    general_settings: &str,
    prompt: &str,
) -> std::process::Command {
    let (home, cwd, t) = (tmp.join("home"), tmp.join("cwd"), tmp.join("tmp"));
    for d in [&home.join(".gemini"), &cwd, &t] {
        std::fs::create_dir_all(d).unwrap();
    }
    let settings = format!(
        r#"{{"security":{{"auth":{{"selectedType":"gemini-api-key"}}}},"general":{{{general_settings}}}}}"#
    );
    std::fs::write(home.join(".gemini/settings.json"), settings).unwrap();
    let mut c = clean_command(bin, &home, &cwd);
    c.env("GOOGLE_GEMINI_BASE_URL", server.url())
        .env("GEMINI_API_KEY", "test")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        // It writes error reports to os.tmpdir(); keep them in the test's directory.
        .env("TMPDIR", &t)
        .args(["-p", prompt, "-o", "stream-json"]);
    c
}

#[test]
fn gemini_routes_then_writes_a_file_then_answers() {
    let bin = agent_bin("gemini");
    let tmp = tempdir();
    let target = tmp.path().join("cwd/hello.txt");
    let script = Script::new()
        // After the tool ran, the last content holds a functionResponse part.
        .rule(Rule::text("Wrote hello.txt.").when_last_contains("functionResponse"))
        .rule(
            Rule::reply(Reply::gemini_write(
                target.to_str().unwrap(),
                "hello from gemini\n",
            ))
            .when_contains("MAKE-FILE")
            .times(1),
        );
    let server = MockModel::start(script).unwrap();
    let mut cmd = gemini(&server, &bin, tmp.path(), "", "MAKE-FILE please");
    // Headless default approval mode does not even declare write_file; auto_edit does.
    cmd.args(["--approval-mode", "auto_edit"]);
    let r = run(cmd, b"", Duration::from_secs(120));
    save_fixture("gemini-success.jsonl", &r.stdout, tmp.path(), &server.url());
    eprintln!("gemini write run took {:?}", r.elapsed);

    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from gemini\n"
    );
    let result = r.last_of_type("result").expect("a result line");
    assert_eq!(result["status"], "success");
    assert_eq!(result["stats"]["tool_calls"], 1);
    let text: String = r
        .json_lines()
        .into_iter()
        .filter(|v| v["type"] == "message" && v["role"] == "assistant")
        .map(|v| v["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(text, "Wrote hello.txt.");

    // First the router's structured-output request, answered by the server itself.
    let reqs = server.requests();
    assert_eq!(reqs[0].api, Api::GeminiGenerate);
    assert_eq!(reqs[0].rule, None);
    assert!(
        reqs[0]
            .body
            .pointer("/generationConfig/responseJsonSchema")
            .is_some()
    );
    let main: Vec<_> = reqs
        .iter()
        .filter(|q| q.api == Api::GeminiStream)
        .map(|q| q.rule)
        .collect();
    assert_eq!(main, [Some(1), Some(0)]);
    assert!(
        reqs.iter()
            .all(|q| q.rule.is_some() || q.api == Api::GeminiGenerate)
    );
}

#[test]
fn gemini_reports_server_errors() {
    let bin = agent_bin("gemini");
    let tmp = tempdir();
    let server = MockModel::start(Script::new().rule(Rule::error(500))).unwrap();
    // maxAttempts 1: no own retries (the default 10 attempts with backoff take minutes).
    let cmd = gemini(&server, &bin, tmp.path(), r#""maxAttempts":1"#, "say hi");
    let r = run(cmd, b"", Duration::from_secs(120));
    save_fixture("gemini-error.jsonl", &r.stdout, tmp.path(), &server.url());
    eprintln!(
        "gemini 500 run took {:?}, exit code {:?}",
        r.elapsed, r.code
    );
    assert_ne!(r.code, Some(0));
    let result = r.last_of_type("result").expect("a result line");
    assert_eq!(result["status"], "error");
    assert!(
        result["error"]["message"].as_str().unwrap().contains("500"),
        "{result}"
    );
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|q| q.api == Api::GeminiStream)
            .count(),
        1
    );
}
