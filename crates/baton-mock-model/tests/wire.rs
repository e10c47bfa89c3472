//! The server on the wire, with a raw TCP client: no CLI needed.

use baton_mock_model::{Api, MockModel, Reply, Rule, Script};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, k: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    /// The `data:` payloads of an SSE body.
    fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }
}

fn read_response(r: &mut BufReader<TcpStream>) -> Resp {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_lowercase(), v.trim().to_string()));
    }
    let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if get("transfer-encoding").as_deref() == Some("chunked") {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        let n: usize = get("content-length").unwrap().parse().unwrap();
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    }
    Resp {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}

fn connect(m: &MockModel) -> BufReader<TcpStream> {
    let s = TcpStream::connect(m.url().trim_start_matches("http://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(s)
}

fn send(r: &mut BufReader<TcpStream>, path: &str, body: &Value) {
    let b = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
        b.len()
    );
    r.get_mut().write_all(req.as_bytes()).unwrap();
}

fn post(m: &MockModel, path: &str, body: Value) -> Resp {
    let mut c = connect(m);
    send(&mut c, path, &body);
    read_response(&mut c)
}

#[test]
fn anthropic_stream_text_and_tool_use() {
    let m = MockModel::start(
        Script::new()
            .rule(Rule::text("all done").when_last_contains("toolu_mock"))
            .rule(Rule::reply(Reply::claude_write("/tmp/x", "hi")).times(1)),
    )
    .unwrap();
    let req = json!({"model": "claude-x", "stream": true, "messages": [{"role": "user", "content": "go"}]});
    let r = post(&m, "/v1/messages?beta=true", req);
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("text/event-stream"))
    );
    let ev = r.events();
    let types: Vec<_> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[0], "message_start");
    assert_eq!(*types.last().unwrap(), "message_stop");
    assert_eq!(ev[1]["content_block"]["type"], "tool_use");
    let partial: String = ev
        .iter()
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        json!({"file_path": "/tmp/x", "content": "hi"})
    );
    let delta = ev.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");

    let next = json!({"model": "claude-x", "messages": [{"role": "user", "content": "go"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_mock_1", "content": "ok"}]}]});
    let r = post(&m, "/v1/messages", next);
    let v = r.json();
    assert_eq!(v["content"][0]["text"], "all done");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["output_tokens"], 5);
    let rules: Vec<_> = m.requests().iter().map(|q| (q.api, q.rule)).collect();
    assert_eq!(
        rules,
        [
            (Api::AnthropicMessages, Some(1)),
            (Api::AnthropicMessages, Some(0))
        ]
    );
}

#[test]
fn errors_in_each_dialect() {
    let m = MockModel::start(
        Script::new()
            .rule(Rule::reply(Reply::overloaded()).when_api(Api::AnthropicMessages))
            .rule(Rule::reply(Reply::rate_limited(7)).when_api(Api::OpenAiResponses))
            .rule(Rule::error(503)),
    )
    .unwrap();
    let r = post(&m, "/v1/messages", json!({"messages": []}));
    assert_eq!(r.status, 529);
    assert_eq!(
        r.json(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let r = post(&m, "/v1/responses", json!({"input": []}));
    assert_eq!((r.status, r.header("retry-after")), (429, Some("7")));
    assert_eq!(r.json()["error"]["type"], "rate_limit_exceeded");
    let r = post(
        &m,
        "/v1beta/models/g:generateContent",
        json!({"contents": []}),
    );
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["status"], "UNAVAILABLE");
}

#[test]
fn unmatched_requests_get_a_500_and_are_recorded() {
    let m = MockModel::start(Script::new().rule(Rule::text("x").when_contains("needle").times(1)))
        .unwrap();
    let r = post(
        &m,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "haystack"}]}),
    );
    assert_eq!(r.status, 500);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no rule matched")
    );
    assert_eq!(r.header("x-should-retry"), Some("false"));
    // Used up after one answer.
    assert_eq!(
        post(
            &m,
            "/v1/chat/completions",
            json!({"messages": [{"content": "needle"}]})
        )
        .status,
        200
    );
    assert_eq!(
        post(
            &m,
            "/v1/chat/completions",
            json!({"messages": [{"content": "needle"}]})
        )
        .status,
        500
    );
    let rules: Vec<_> = m.requests().iter().map(|q| q.rule).collect();
    assert_eq!(rules, [None, Some(0), None]);
    // Not JSON, unknown path: still answered.
    let mut c = connect(&m);
    c.get_mut()
        .write_all(b"GET /nothing HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut c).status, 500);
    assert_eq!(m.requests().last().unwrap().body, Value::Null);
}

#[test]
fn responses_stream_and_declared_tool_forms() {
    let m = MockModel::start(
        Script::new()
            .rule(Rule::reply(Reply::codex_exec("ls")).when_contains("shell please"))
            .rule(
                Rule::tool_use("apply_patch", json!("*** Begin Patch\n*** End Patch\n"))
                    .when_contains("patch please"),
            )
            .rule(Rule::text("hello there")),
    )
    .unwrap();
    let r = post(
        &m,
        "/v1/responses",
        json!({"model": "m", "stream": true, "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}),
    );
    let ev = r.events();
    let types: Vec<_> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[0], "response.created");
    assert!(types.contains(&"response.output_text.delta"));
    let done = ev.last().unwrap();
    assert_eq!(done["type"], "response.completed");
    assert_eq!(done["response"]["usage"]["input_tokens"], 10);
    let text: String = ev.iter().filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "hello there");

    let tools = json!([{"type": "function", "name": "exec_command"}, {"type": "custom", "name": "apply_patch"}]);
    let r = post(
        &m,
        "/v1/responses",
        json!({"stream": true, "tools": tools, "input": "shell please"}),
    );
    let item = r
        .events()
        .into_iter()
        .find(|e| e["type"] == "response.output_item.done")
        .unwrap();
    assert_eq!(item["item"]["type"], "function_call");
    assert_eq!(item["item"]["arguments"], r#"{"cmd":"ls"}"#);
    let r = post(
        &m,
        "/v1/responses",
        json!({"stream": true, "tools": tools, "input": "patch please"}),
    );
    let item = r
        .events()
        .into_iter()
        .find(|e| e["type"] == "response.output_item.done")
        .unwrap();
    assert_eq!(item["item"]["type"], "custom_tool_call");
    assert_eq!(item["item"]["input"], "*** Begin Patch\n*** End Patch\n");
}

#[test]
fn chat_completions_stream_with_usage_and_done() {
    let m = MockModel::start(Script::new().rule(Rule::text("abc def"))).unwrap();
    let r = post(
        &m,
        "/v1/chat/completions",
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": []}),
    );
    assert!(r.body.trim_end().ends_with("data: [DONE]"));
    let ev = r.events();
    let text: String = ev
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "abc def");
    assert_eq!(ev[ev.len() - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(ev.last().unwrap()["usage"]["total_tokens"], 15);
    let r = post(
        &m,
        "/v1/chat/completions",
        json!({"model": "m", "messages": []}),
    );
    assert_eq!(r.json()["choices"][0]["message"]["content"], "abc def");
}

#[test]
fn gemini_structured_requests_are_answered_by_schema() {
    let m = MockModel::start(Script::new().rule(Rule::text("main answer"))).unwrap();
    let schema = json!({"type": "OBJECT", "properties": {"complexity_reasoning": {"type": "STRING"},
        "complexity_score": {"type": "INTEGER"}}, "required": ["complexity_reasoning", "complexity_score"]});
    let r = post(
        &m,
        "/v1beta/models/flash:generateContent",
        json!({"contents": [], "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}}),
    );
    let text = r.json()["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"complexity_reasoning": "mock", "complexity_score": 1})
    );
    let r = post(
        &m,
        "/v1beta/models/pro:streamGenerateContent?alt=sse",
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    );
    let ev = r.events();
    let text: String = ev
        .iter()
        .filter_map(|e| e["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "main answer");
    assert_eq!(ev.last().unwrap()["candidates"][0]["finishReason"], "STOP");
    assert_eq!(ev.last().unwrap()["usageMetadata"]["totalTokenCount"], 15);
    let rules: Vec<_> = m.requests().iter().map(|q| q.rule).collect();
    assert_eq!(rules, [None, Some(0)]);
}

#[test]
fn keep_alive_chunked_request_bodies_and_count_tokens() {
    let m = MockModel::start(Script::new().rule(Rule::text("one"))).unwrap();
    let mut c = connect(&m);
    let body = json!({"messages": [{"role": "user", "content": "x"}]}).to_string();
    let (a, b) = body.split_at(10);
    let req = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    c.get_mut().write_all(req.as_bytes()).unwrap();
    assert_eq!(read_response(&mut c).json()["content"][0]["text"], "one");
    // Same connection, second request.
    send(
        &mut c,
        "/v1/messages/count_tokens",
        &json!({"messages": []}),
    );
    let r = read_response(&mut c);
    assert!(r.json()["input_tokens"].as_u64().unwrap() >= 1);
    let reqs = m.requests();
    assert_eq!(reqs[0].body["messages"][0]["content"], "x");
    assert_eq!((reqs[1].api, reqs[1].rule), (Api::Other, None));
}

#[test]
fn slow_pauses_between_events_and_hang_never_finishes() {
    let m = MockModel::start(
        Script::new()
            .rule(Rule::text("a b c").slow(100).when_contains("slow"))
            .rule(Rule::hang()),
    )
    .unwrap();
    let t = Instant::now();
    let r = post(
        &m,
        "/v1/chat/completions",
        json!({"stream": true, "messages": [{"content": "slow"}]}),
    );
    assert!(r.events().len() >= 4);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );

    let mut c = connect(&m);
    c.get_mut()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    send(
        &mut c,
        "/v1/messages",
        &json!({"stream": true, "messages": []}),
    );
    let mut head = String::new();
    c.read_line(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut rest = Vec::new();
    let err = c.read_to_end(&mut rest).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err}"
    );
    assert_eq!(m.requests().len(), 2, "a hung request is recorded");
    // Dropping the server while a connection hangs must not block.
    let t = Instant::now();
    drop(m);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn works_inside_another_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = MockModel::start(Script::new().rule(Rule::text("ok"))).unwrap();
        let r = post(&m, "/v1/messages", json!({"messages": []}));
        assert_eq!(r.status, 200);
    });
}
