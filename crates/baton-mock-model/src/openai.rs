//! OpenAI Responses (`POST …/responses`, what Codex speaks) and Chat Completions
//! (`POST …/chat/completions`).

use crate::{Answer, Ctx, Rendered, split_text, sse};
use serde_json::{Value, json};

/// How the request declared a tool: Codex declares `apply_patch` as a freeform `custom` tool for
/// some models and as a `function` for others, and the call must come back in the same form.
fn declared_type<'a>(body: &'a Value, name: &str) -> Option<&'a str> {
    body.get("tools")?
        .as_array()?
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|t| t.get("type").and_then(Value::as_str))
}

/// Arguments of a function call as the JSON string the APIs carry. A string input that is not
/// itself a JSON object is wrapped as `{"input": …}` (the parameter name of Codex's function-style
/// `apply_patch`).
fn arguments_string(input: &Value) -> String {
    match input {
        Value::String(s) if serde_json::from_str::<serde_json::Map<String, Value>>(s).is_ok() => {
            s.clone()
        }
        Value::String(s) => json!({"input": s}).to_string(),
        other => other.to_string(),
    }
}

/// A freeform (custom) tool's input: the string itself, or an object's `input` / `patch` field.
fn freeform_input(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        Value::Object(m) => match m.get("input").or_else(|| m.get("patch")) {
            Some(Value::String(s)) => s.clone(),
            _ => input.to_string(),
        },
        other => other.to_string(),
    }
}

pub(crate) fn render_responses(a: &Answer, cx: &Ctx) -> Rendered {
    let resp_id = format!("resp_mock_{}", cx.seq);
    let (input_tokens, output_tokens) = a.tokens();
    let usage = json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens});
    // Each item: (item as first announced, text deltas, finished item).
    let mut items: Vec<(Value, Vec<String>, Value)> = Vec::new();
    let message = |id: String, text: &str| {
        (
            json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []}),
            split_text(text, 3),
            json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        )
    };
    match a {
        Answer::Text { text, .. } => items.push(message(format!("msg_mock_{}", cx.seq), text)),
        Answer::ToolUse {
            name, input, text, ..
        } => {
            if let Some(t) = text {
                items.push(message(format!("msg_mock_{}", cx.seq), t));
            }
            let call_id = format!("call_mock_{}", cx.seq);
            let done = match declared_type(cx.body, name) {
                Some("custom") => {
                    json!({"type": "custom_tool_call", "id": format!("ctc_mock_{}", cx.seq),
                    "status": "completed", "call_id": call_id, "name": name, "input": freeform_input(input)})
                }
                Some("local_shell") => {
                    json!({"type": "local_shell_call", "id": format!("lsh_mock_{}", cx.seq),
                    "status": "completed", "call_id": call_id, "action": input})
                }
                _ => {
                    json!({"type": "function_call", "id": format!("fc_mock_{}", cx.seq), "status": "completed",
                    "call_id": call_id, "name": name, "arguments": arguments_string(input)})
                }
            };
            let mut added = done.clone();
            added["status"] = json!("in_progress");
            items.push((added, Vec::new(), done));
        }
    }
    let response = |status: &str, output: Vec<Value>, usage: Value| {
        json!({"id": resp_id, "object": "response", "created_at": 0, "status": status, "model": cx.model,
            "output": output, "usage": usage})
    };
    let finished: Vec<Value> = items.iter().map(|i| i.2.clone()).collect();
    if !cx.stream {
        return Rendered::Json(response("completed", finished, usage));
    }
    let mut seq = 0u64;
    let mut ev = Vec::new();
    let mut push = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        ev.push(sse(Some(kind), &data));
    };
    push(
        "response.created",
        json!({"response": response("in_progress", vec![], Value::Null)}),
    );
    push(
        "response.in_progress",
        json!({"response": response("in_progress", vec![], Value::Null)}),
    );
    for (i, (added, deltas, done)) in items.into_iter().enumerate() {
        push(
            "response.output_item.added",
            json!({"output_index": i, "item": added}),
        );
        let item_id = done["id"].clone();
        if !deltas.is_empty() {
            push(
                "response.content_part.added",
                json!({"output_index": i, "item_id": item_id, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            for d in &deltas {
                push(
                    "response.output_text.delta",
                    json!({"output_index": i, "item_id": item_id, "content_index": 0, "delta": d}),
                );
            }
            push(
                "response.output_text.done",
                json!({"output_index": i, "item_id": item_id, "content_index": 0,
                "text": deltas.concat()}),
            );
            push(
                "response.content_part.done",
                json!({"output_index": i, "item_id": item_id, "content_index": 0,
                "part": done["content"][0].clone()}),
            );
        }
        push(
            "response.output_item.done",
            json!({"output_index": i, "item": done}),
        );
    }
    push(
        "response.completed",
        json!({"response": response("completed", finished, usage)}),
    );
    Rendered::Sse(ev)
}

pub(crate) fn render_chat(a: &Answer, cx: &Ctx) -> Rendered {
    let id = format!("chatcmpl-mock-{}", cx.seq);
    let (input_tokens, output_tokens) = a.tokens();
    let usage = json!({"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens});
    let (text, tool, finish) = match a {
        Answer::Text { text, .. } => (Some(*text), None, "stop"),
        Answer::ToolUse {
            name, input, text, ..
        } => (
            *text,
            Some(
                json!({"id": format!("call_mock_{}", cx.seq), "type": "function",
                "function": {"name": name, "arguments": arguments_string(input)}}),
            ),
            "tool_calls",
        ),
    };
    if !cx.stream {
        let mut message = json!({"role": "assistant", "content": text});
        if let Some(t) = &tool {
            message["tool_calls"] = json!([t]);
        }
        return Rendered::Json(
            json!({"id": id, "object": "chat.completion", "created": 0, "model": cx.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": cx.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut ev = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in text.map(|t| split_text(t, 3)).unwrap_or_default() {
        ev.push(chunk(json!({"content": piece}), Value::Null));
    }
    if let Some(mut t) = tool {
        t["index"] = json!(0);
        ev.push(chunk(json!({"tool_calls": [t]}), Value::Null));
    }
    ev.push(chunk(json!({}), json!(finish)));
    let include_usage = cx
        .body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    if include_usage {
        ev.push(sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": cx.model,
            "choices": [], "usage": usage}),
        ));
    }
    ev.push("data: [DONE]\n\n".to_string());
    Rendered::Sse(ev)
}

/// OpenAI's error shape: `{"error":{"message","type","code"}}`.
pub(crate) fn error_body(status: u16) -> Value {
    let (kind, code) = match status {
        400 => ("invalid_request_error", "invalid_request"),
        401 => ("invalid_request_error", "invalid_api_key"),
        429 => ("rate_limit_exceeded", "rate_limit_exceeded"),
        503 | 529 => ("server_error", "server_is_overloaded"),
        _ => ("server_error", "server_error"),
    };
    json!({"error": {"message": format!("mock model: scripted HTTP {status}"), "type": kind, "param": null, "code": code}})
}
