//! A scripted model server on loopback, for driving the REAL agent CLIs (Claude Code, Codex,
//! Gemini CLI) in tests: only the model is fake.
//!
//! A [`Script`] is a list of [`Rule`]s; each request is answered by the first rule whose
//! [`Match`] holds and that has uses left, rendered in the dialect of the API that asked
//! (Anthropic Messages, OpenAI Responses / Chat Completions, Gemini). Requests no rule matches
//! get a 500 naming that fact, so a test fails fast instead of hanging. Every request is
//! recorded ([`MockModel::requests`]).
//!
//! A few requests are answered by the server itself, without a rule (recorded with
//! `rule: None`), because they are CLI bookkeeping rather than conversation:
//! Anthropic `count_tokens`, Gemini `countTokens`, and Gemini requests that demand structured
//! JSON (`generationConfig.responseJsonSchema` / `responseSchema`: the Gemini CLI's model router
//! and its other classifiers), which get a value satisfying the schema.

mod anthropic;
mod gemini;
mod http;
mod openai;
mod script;

pub use script::{Api, Match, Reply, Rule, Script, conversation_text, last_item_text};

use http::{Conn, Request};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path with the query string.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Null` if it is not JSON.
    pub body: Value,
    pub api: Api,
    /// Index of the rule that answered; `None` if no rule matched (answered 500) or the server
    /// answered a bookkeeping request itself.
    pub rule: Option<usize>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// See [`conversation_text`].
    pub fn text(&self) -> String {
        conversation_text(self.api, &self.body, &self.body.to_string())
    }
    /// See [`last_item_text`].
    pub fn last_text(&self) -> String {
        last_item_text(self.api, &self.body, &self.body.to_string())
    }
}

struct State {
    rules: Vec<Rule>,
    used: Vec<u32>,
    recorded: Vec<Recorded>,
    seq: u64,
}

/// The running server. Dropping it stops the server and closes every connection.
pub struct MockModel {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockModel {
    /// Binds 127.0.0.1:0 and serves on a background thread with its own current-thread tokio
    /// runtime, so it works from sync tests and from inside other runtimes alike.
    pub fn start(script: Script) -> std::io::Result<MockModel> {
        MockModel::start_on(script, 0)
    }

    /// Like [`MockModel::start`] on a chosen port (0 = any).
    pub fn start_on(script: Script, port: u16) -> std::io::Result<MockModel> {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let n = script.rules.len();
        let state = Arc::new(Mutex::new(State {
            rules: script.rules,
            used: vec![0; n],
            recorded: Vec::new(),
            seq: 0,
        }));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop_tx, stop_rx) = oneshot::channel();
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-model-{}", addr.port()))
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => return eprintln!("baton-mock-model: {e}"),
                    };
                    let accept = async {
                        loop {
                            if let Ok((stream, _)) = listener.accept().await {
                                let _ = stream.set_nodelay(true);
                                tokio::spawn(serve(Conn::new(stream), st.clone()));
                            }
                        }
                    };
                    tokio::select! {
                        _ = accept => {}
                        _ = stop_rx => {}
                    }
                });
                // Dropping the runtime here cancels every connection task, hung ones included.
                drop(rt);
            })?;
        Ok(MockModel {
            addr,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request seen so far, in arrival order (recorded before it is answered, so a hung
    /// request is here too).
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).recorded.clone()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // A panic elsewhere must not turn every later request into a second panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(mut conn: Conn, state: Arc<Mutex<State>>) {
    while let Ok(Some(req)) = conn.read_request().await {
        let close = req.wants_close();
        if answer(&mut conn, req, &state, close).await.is_err() || close {
            return;
        }
    }
}

/// A successful reply, independent of dialect.
pub(crate) enum Answer<'a> {
    Text {
        text: &'a str,
        input_tokens: u64,
        output_tokens: u64,
    },
    ToolUse {
        name: &'a str,
        input: &'a Value,
        text: Option<&'a str>,
        input_tokens: u64,
        output_tokens: u64,
    },
}

impl Answer<'_> {
    fn tokens(&self) -> (u64, u64) {
        match self {
            Answer::Text {
                input_tokens,
                output_tokens,
                ..
            } => (*input_tokens, *output_tokens),
            Answer::ToolUse {
                input_tokens,
                output_tokens,
                ..
            } => (*input_tokens, *output_tokens),
        }
    }
}

/// What the dialect renderers need to know about the request.
pub(crate) struct Ctx<'a> {
    model: String,
    seq: u64,
    stream: bool,
    body: &'a Value,
}

pub(crate) enum Rendered {
    Json(Value),
    /// Complete SSE frames (`event: …\ndata: …\n\n`).
    Sse(Vec<String>),
}

pub(crate) fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// `text` in up to `n` pieces (on char boundaries), so streams carry more than one delta.
pub(crate) fn split_text(text: &str, n: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// How a request is answered.
enum Plan {
    Rule(Reply),
    /// Bookkeeping the server answers itself.
    Builtin(Value),
    BuiltinText(String),
    Unmatched,
}

fn plan(req: &Request, api: Api, body: &Value, raw: &str, st: &mut State) -> (Plan, Option<usize>) {
    let path = req.path();
    if path.ends_with("/messages/count_tokens") {
        return (Plan::Builtin(anthropic::count_tokens(raw.len())), None);
    }
    if path.contains(":countTokens") {
        return (
            Plan::Builtin(json!({"totalTokens": (raw.len() / 4).max(1)})),
            None,
        );
    }
    if matches!(api, Api::GeminiGenerate | Api::GeminiStream)
        && let Some(schema) = gemini::response_schema(body)
    {
        return (Plan::BuiltinText(gemini::satisfy(schema).to_string()), None);
    }
    for (i, rule) in st.rules.iter().enumerate() {
        if rule.times.is_none_or(|t| st.used[i] < t) && rule.when.matches(api, body, raw) {
            st.used[i] += 1;
            return (Plan::Rule(rule.reply.clone()), Some(i));
        }
    }
    (Plan::Unmatched, None)
}

fn error_body(api: Api, status: u16) -> Value {
    match api {
        Api::AnthropicMessages => anthropic::error_body(status),
        Api::GeminiGenerate | Api::GeminiStream => gemini::error_body(status),
        _ => openai::error_body(status),
    }
}

async fn answer(
    conn: &mut Conn,
    req: Request,
    state: &Mutex<State>,
    close: bool,
) -> std::io::Result<()> {
    let api = if req.method == "POST" {
        Api::from_path(req.path())
    } else {
        Api::Other
    };
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let raw = String::from_utf8_lossy(&req.body).into_owned();
    let (plan, seq) = {
        let mut st = lock(state);
        let (plan, rule) = plan(&req, api, &body, &raw, &mut st);
        st.seq += 1;
        st.recorded.push(Recorded {
            method: req.method.clone(),
            path: req.target.clone(),
            headers: req.headers.clone(),
            body: body.clone(),
            api,
            rule,
        });
        (plan, st.seq)
    };
    let stream = match api {
        Api::GeminiStream => true,
        Api::GeminiGenerate => false,
        _ => body.get("stream").and_then(Value::as_bool) == Some(true),
    };
    let model = match api {
        // …/models/MODEL:method
        Api::GeminiGenerate | Api::GeminiStream => {
            let p = req.path();
            p.rsplit('/')
                .next()
                .and_then(|s| s.split(':').next())
                .unwrap_or("mock")
                .to_string()
        }
        _ => body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("mock-model")
            .to_string(),
    };
    let cx = Ctx {
        model,
        seq,
        stream,
        body: &body,
    };

    let reply = match plan {
        Plan::Builtin(v) => {
            return conn
                .respond(
                    200,
                    "application/json",
                    &[],
                    v.to_string().as_bytes(),
                    close,
                )
                .await;
        }
        Plan::BuiltinText(text) => Reply::Text {
            text,
            input_tokens: 1,
            output_tokens: 1,
        },
        Plan::Unmatched => {
            let mut b = error_body(api, 500);
            let msg = format!(
                "baton-mock-model: no rule matched this request ({} {})",
                req.method, req.target
            );
            // All three error shapes keep their message at /error/message.
            if let Some(m) = b.pointer_mut("/error/message") {
                *m = json!(msg);
            }
            // `x-should-retry: false` asks SDK clients not to retry: an unmatched request is a
            // broken test, and retrying it only makes the test slower to fail.
            let extra = [("x-should-retry".to_string(), "false".to_string())];
            return conn
                .respond(
                    500,
                    "application/json",
                    &extra,
                    b.to_string().as_bytes(),
                    close,
                )
                .await;
        }
        Plan::Rule(r) => r,
    };
    // Slow wraps another reply; nested delays add up.
    let mut delay = 0;
    let mut reply = &reply;
    while let Reply::Slow { inner, delay_ms } = reply {
        delay += delay_ms;
        reply = inner;
    }
    let pause = || tokio::time::sleep(Duration::from_millis(delay));
    let a = match reply {
        Reply::Text {
            text,
            input_tokens,
            output_tokens,
        } => Answer::Text {
            text,
            input_tokens: *input_tokens,
            output_tokens: *output_tokens,
        },
        Reply::ToolUse {
            name,
            input,
            text,
            input_tokens,
            output_tokens,
        } => Answer::ToolUse {
            name,
            input,
            text: text.as_deref(),
            input_tokens: *input_tokens,
            output_tokens: *output_tokens,
        },
        Reply::Error {
            status,
            body,
            retry_after,
        } => {
            pause().await;
            let b = if body.is_null() {
                error_body(api, *status)
            } else {
                body.clone()
            };
            let extra: Vec<(String, String)> = retry_after
                .iter()
                .map(|s| ("retry-after".to_string(), s.to_string()))
                .collect();
            return conn
                .respond(
                    *status,
                    "application/json",
                    &extra,
                    b.to_string().as_bytes(),
                    close,
                )
                .await;
        }
        Reply::Hang => {
            let ct = if stream {
                "text/event-stream"
            } else {
                "application/json"
            };
            conn.start_chunked(200, ct, close).await?;
            conn.wait_for_eof().await;
            return Err(std::io::ErrorKind::ConnectionAborted.into());
        }
        Reply::Slow { .. } => unreachable!("unwrapped above"),
    };
    let rendered = match api {
        Api::AnthropicMessages => anthropic::render(&a, &cx),
        Api::OpenAiResponses => openai::render_responses(&a, &cx),
        Api::OpenAiChat => openai::render_chat(&a, &cx),
        Api::GeminiGenerate | Api::GeminiStream => gemini::render(&a, &cx),
        Api::Other => Rendered::Json(match a {
            Answer::Text { text, .. } => json!({"text": text}),
            Answer::ToolUse { name, input, .. } => json!({"tool": name, "input": input}),
        }),
    };
    match rendered {
        Rendered::Json(v) => {
            pause().await;
            conn.respond(
                200,
                "application/json",
                &[],
                v.to_string().as_bytes(),
                close,
            )
            .await
        }
        Rendered::Sse(frames) => {
            conn.start_chunked(200, "text/event-stream", close).await?;
            for (i, f) in frames.iter().enumerate() {
                if i > 0 && delay > 0 {
                    pause().await;
                }
                conn.chunk(f.as_bytes()).await?;
            }
            conn.end_chunks().await
        }
    }
}
