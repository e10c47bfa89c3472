//! `baton agent-http`: the `http` engine's agent. It asks a model directly — an OpenAI-compatible
//! chat-completions endpoint or the Anthropic Messages API — with the prompt read from stdin,
//! and prints what happens as JSON lines, one per event, for the engine's parser:
//!
//! ```text
//! {"type":"start","api":"openai","model":"gpt-5"}
//! {"type":"delta","text":"Hel"}                      as the answer streams in
//! {"type":"result","text":"Hello.","model":"gpt-5","usage":{…},"stop_reason":"stop"}
//! {"type":"error","status":529,"message":"…","retry_after":30}   instead of a result
//! ```
//!
//! baton runs it as a child process like any agent CLI, so the http engine gets the same
//! supervision (timeouts, idle timeout, cancellation, redaction, logs) as every other task.
//! It is for tasks that only produce text: planning, review, summaries.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::{AgentHttpArgs, HttpApi};
use crate::exit::Failure;

/// How long connecting may take; reading is bounded by the task's timeouts, which baton
/// enforces from outside.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn agent_http(args: AgentHttpArgs) -> Result<i32, Failure> {
    let mut prompt = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut prompt) {
        emit(
            &json!({"type": "error", "message": format!("cannot read the prompt from stdin: {e}")}),
        );
        return Ok(1);
    }
    let key = std::env::var(&args.key_env).unwrap_or_default();
    emit(&json!({"type": "start", "api": args.api.name(), "model": args.model}));
    match ask(&args, &prompt, &key) {
        Ok(answer) => {
            emit(&json!({
                "type": "result",
                "text": answer.text,
                "model": answer.model.unwrap_or_else(|| args.model.clone()),
                "usage": {
                    "input_tokens": answer.input_tokens,
                    "output_tokens": answer.output_tokens,
                    "cache_read_input_tokens": answer.cache_read,
                    "cache_creation_input_tokens": answer.cache_write,
                },
                "stop_reason": answer.stop_reason,
            }));
            Ok(0)
        }
        Err(error) => {
            let mut line = json!({"type": "error", "message": error.message});
            if let Some(status) = error.status {
                line["status"] = json!(status);
            }
            if let Some(after) = error.retry_after {
                line["retry_after"] = json!(after);
            }
            emit(&line);
            Ok(1)
        }
    }
}

fn emit(value: &Value) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means baton is gone: nothing left to tell.
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

#[derive(Debug, Default)]
struct Answer {
    text: String,
    model: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cache_read: u64,
    cache_write: u64,
    stop_reason: Option<String>,
}

#[derive(Debug)]
struct Failed {
    status: Option<u16>,
    message: String,
    retry_after: Option<u64>,
}

impl Failed {
    fn new(message: impl Into<String>) -> Self {
        Self {
            status: None,
            message: message.into(),
            retry_after: None,
        }
    }
}

fn ask(args: &AgentHttpArgs, prompt: &str, key: &str) -> Result<Answer, Failed> {
    let base = args.base_url.trim_end_matches('/');
    let (url, body) = match args.api {
        HttpApi::Openai => {
            let mut messages = Vec::new();
            if let Some(system) = &args.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": prompt}));
            (
                format!("{base}/chat/completions"),
                json!({
                    "model": args.model,
                    "stream": true,
                    "stream_options": {"include_usage": true},
                    "messages": messages,
                }),
            )
        }
        HttpApi::Anthropic => {
            let mut body = json!({
                "model": args.model,
                "max_tokens": args.max_tokens,
                "stream": true,
                "messages": [{"role": "user", "content": prompt}],
            });
            if let Some(system) = &args.system {
                body["system"] = json!(system);
            }
            (format!("{base}/v1/messages"), body)
        }
    };
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .build();
    let agent: ureq::Agent = config.into();
    let request = agent.post(&url).header("content-type", "application/json");
    let request = match args.api {
        HttpApi::Openai => request.header("authorization", &format!("Bearer {key}")),
        HttpApi::Anthropic => request
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01"),
    };
    let response = request
        .send(body.to_string())
        .map_err(|e| Failed::new(format!("connection error: {e}")))?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut body = response.into_body();
    if status != 200 {
        let text = body
            .read_to_string()
            .unwrap_or_else(|e| format!("(unreadable body: {e})"));
        return Err(Failed {
            status: Some(status),
            message: format!("HTTP {status}: {}", error_message(&text)),
            retry_after,
        });
    }
    let reader = BufReader::new(body.into_reader());
    read_stream(args.api, reader)
}

/// The message of an API's error body (`{"error":{"message":…}}` in both dialects).
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message"))
        .and_then(Value::as_str)
        .map_or_else(|| body.chars().take(500).collect(), str::to_owned)
}

/// Reads a server-sent event stream to its end, printing the answer's pieces as they come.
fn read_stream(api: HttpApi, reader: impl BufRead) -> Result<Answer, Failed> {
    let mut answer = Answer::default();
    let mut done = false;
    for line in reader.lines() {
        let line = line.map_err(|e| Failed::new(format!("stream interrupted: {e}")))?;
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            done = true;
            break;
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let piece = match api {
            HttpApi::Openai => openai_event(&event, &mut answer),
            HttpApi::Anthropic => anthropic_event(&event, &mut answer, &mut done)?,
        };
        if let Some(piece) = piece.filter(|p| !p.is_empty()) {
            emit(&json!({"type": "delta", "text": piece}));
            answer.text.push_str(&piece);
        }
        if done {
            break;
        }
    }
    if !done && answer.stop_reason.is_none() {
        return Err(Failed::new("the stream ended before the answer did"));
    }
    Ok(answer)
}

fn openai_event(event: &Value, answer: &mut Answer) -> Option<String> {
    if let Some(model) = event.get("model").and_then(Value::as_str) {
        answer.model = Some(model.to_owned());
    }
    if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cached = usage
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        answer.input_tokens = count("prompt_tokens").saturating_sub(cached);
        answer.cache_read = cached;
        answer.output_tokens = count("completion_tokens");
    }
    let choice = event.pointer("/choices/0")?;
    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
        answer.stop_reason = Some(reason.to_owned());
    }
    choice
        .pointer("/delta/content")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn anthropic_event(
    event: &Value,
    answer: &mut Answer,
    done: &mut bool,
) -> Result<Option<String>, Failed> {
    let count = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    match event.get("type").and_then(Value::as_str) {
        Some("message_start") => {
            if let Some(message) = event.get("message") {
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    answer.model = Some(model.to_owned());
                }
                if let Some(usage) = message.get("usage") {
                    answer.input_tokens = count(usage, "input_tokens");
                    answer.cache_read = count(usage, "cache_read_input_tokens");
                    answer.cache_write = count(usage, "cache_creation_input_tokens");
                    answer.output_tokens = count(usage, "output_tokens");
                }
            }
        }
        Some("content_block_delta") => {
            return Ok(event
                .pointer("/delta/text")
                .and_then(Value::as_str)
                .map(str::to_owned));
        }
        Some("message_delta") => {
            if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                answer.stop_reason = Some(reason.to_owned());
            }
            if let Some(usage) = event.get("usage") {
                answer.output_tokens = count(usage, "output_tokens").max(answer.output_tokens);
            }
        }
        Some("message_stop") => *done = true,
        Some("error") => {
            let message = event
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("the API reported an error mid-stream");
            let kind = event.pointer("/error/type").and_then(Value::as_str);
            return Err(Failed {
                status: (kind == Some("overloaded_error")).then_some(529),
                message: message.to_owned(),
                retry_after: None,
            });
        }
        _ => {}
    }
    Ok(None)
}
