//! `--otlp`: a run sent as an OpenTelemetry trace, received by a collector on loopback that
//! decodes the protobuf as any collector would.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::report::fake_claude;
use crate::test::Test;
use crate::workspaces::{git, repo_with};

/// What the collector was sent: the request line, the headers, the body.
pub(crate) type Received = (String, Vec<String>, Vec<u8>);

/// A collector that takes one export.
pub(crate) fn collector() -> (String, JoinHandle<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            headers.push(line.trim().to_owned());
        }
        let length: usize = headers
            .iter()
            .find_map(|h| {
                h.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap();
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .unwrap();
        (request_line, headers, body)
    });
    (url, handle)
}

fn attr<'s>(span: &'s Span, key: &str) -> Option<&'s Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text<'s>(span: &'s Span, key: &str) -> &'s str {
    match attr(span, key) {
        Some(Value::StringValue(s)) => s,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(Value::IntValue(n)) => *n,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

const GRAPH: &str = r#"
name = "traced"

[[task]]
id = "api"
prompt = "Add rate limiting to src/api.rs"

[[task]]
id = "build"
needs = ["api"]
retries = 1
backoff = "10ms"
run = 'test "$BATON_ATTEMPT" -gt 1'
verify = ["echo s3cr3t-value-123 > /dev/null"]
"#;

#[test]
fn a_run_is_one_trace_of_its_tasks_attempts_and_checks_named_as_the_conventions_say() {
    let test = repo_with(GRAPH).file("src/api.rs", "pub fn api() {}\n");
    let engines = fake_claude(&test);
    let test = test.file("baton.toml", engines);
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "the project"]);
    let (url, received) = collector();
    let out = test
        .env("MY_TOKEN", "s3cr3t-value-123")
        .env("BATON_SECRET_ENV", "MY_TOKEN")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-team=core%20team")
        .args(&["run", "graph.toml", "--otlp", &url])
        .run()
        .status(0);
    let (request, headers, body) = received.join().unwrap();
    assert!(
        out.stderr.contains("baton: sent the run's trace ("),
        "{}",
        out.stderr
    );
    assert!(request.starts_with("POST /v1/traces "), "{request}");
    assert!(
        headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("content-type: application/x-protobuf")),
        "{headers:?}"
    );
    assert!(
        headers.iter().any(|h| h == "x-team: core team"),
        "{headers:?}"
    );
    // Nothing secret leaves the machine, in any attribute.
    assert!(
        !String::from_utf8_lossy(&body).contains("s3cr3t-value-123"),
        "the secret is in the trace"
    );

    let export = ExportTraceServiceRequest::decode(&body[..]).unwrap();
    let resource = &export.resource_spans[0];
    let service = resource
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .find(|kv| kv.key == "service.name");
    assert!(
        matches!(service.and_then(|kv| kv.value.as_ref()?.value.as_ref()), Some(Value::StringValue(s)) if s == "baton")
    );
    let spans = &resource.scope_spans[0].spans;
    let by_name: HashMap<&str, &Span> = spans.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut names: Vec<&str> = by_name.keys().copied().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "attempt 1 of build",
            "attempt 2 of build",
            "check build",
            "invoke_agent api",
            "invoke_workflow traced",
            "task api",
            "task build",
        ],
        "{spans:#?}"
    );
    assert!(
        spans
            .iter()
            .all(|s| s.trace_id == spans[0].trace_id && s.trace_id.len() == 16)
    );

    // Parents: run ← task ← attempt ← check.
    let run = by_name["invoke_workflow traced"];
    assert!(run.parent_span_id.is_empty());
    assert_eq!(text(run, "gen_ai.operation.name"), "invoke_workflow");
    assert_eq!(text(run, "baton.outcome"), "succeeded");
    let run_id = text(run, "baton.run.id");
    assert_eq!(out.store().run().id.as_str(), run_id);
    for task in ["task api", "task build"] {
        assert_eq!(by_name[task].parent_span_id, run.span_id, "{task}");
    }
    let agent = by_name["invoke_agent api"];
    assert_eq!(agent.parent_span_id, by_name["task api"].span_id);
    assert_eq!(
        by_name["attempt 1 of build"].parent_span_id,
        by_name["task build"].span_id
    );
    assert_eq!(
        by_name["check build"].parent_span_id,
        by_name["attempt 2 of build"].span_id
    );

    // The agent's attempt, after the GenAI conventions, and baton's own.
    assert_eq!(text(agent, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(agent, "gen_ai.agent.name"), "api");
    assert_eq!(text(agent, "gen_ai.provider.name"), "anthropic");
    assert_eq!(text(agent, "gen_ai.request.model"), "claude-sonnet-4-5");
    assert_eq!(text(agent, "gen_ai.conversation.id"), "s-1");
    assert_eq!(int(agent, "gen_ai.usage.input_tokens"), 12000);
    assert_eq!(int(agent, "gen_ai.usage.output_tokens"), 900);
    assert_eq!(int(agent, "gen_ai.usage.cache_read.input_tokens"), 3000);
    assert_eq!(int(agent, "gen_ai.usage.cache_creation.input_tokens"), 0);
    assert!(
        matches!(attr(agent, "baton.cost.usd"), Some(Value::DoubleValue(usd)) if (*usd - 0.0412).abs() < 1e-9)
    );
    assert_eq!(text(agent, "baton.task.id"), "api");
    assert_eq!(int(agent, "baton.attempt"), 1);
    assert_eq!(text(agent, "baton.outcome"), "succeeded");
    assert!(agent.end_time_unix_nano > agent.start_time_unix_nano);

    // The failed attempt says how, and is an error; the retry that passed is not.
    let failed = by_name["attempt 1 of build"];
    assert_eq!(text(failed, "error.type"), "exit_1");
    assert_eq!(failed.status.as_ref().map(|s| s.code), Some(2));
    assert!(attr(by_name["attempt 2 of build"], "error.type").is_none());
    // The check's command was redacted before it left.
    let check = by_name["check build"];
    assert!(
        text(check, "baton.check.command").contains("[REDACTED"),
        "{check:?}"
    );
}

#[test]
fn a_collector_that_is_not_there_is_a_warning_not_a_failure() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Test::new()
        .graph("graph.toml", "[[task]]\nid = \"a\"\nrun = \"true\"\n")
        .args(&[
            "run",
            "graph.toml",
            "--otlp",
            &format!("http://127.0.0.1:{port}"),
        ])
        .run()
        .status(0);
    assert!(
        out.stderr
            .contains("baton: warning: could not export the run's trace: cannot send the trace to"),
        "{}",
        out.stderr
    );
    let bad = Test::new()
        .graph("graph.toml", "[[task]]\nid = \"a\"\nrun = \"true\"\n")
        .args(&["run", "graph.toml", "--otlp", "127.0.0.1:4318"])
        .run()
        .status(2);
    assert!(
        bad.stderr
            .contains("an OTLP/HTTP endpoint is an http:// or https:// address"),
        "{}",
        bad.stderr
    );
    assert!(!bad.state_dir_exists());
}
