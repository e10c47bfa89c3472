//! Anthropic Messages (`POST /v1/messages`), as Claude Code reads it.

use crate::{Answer, Ctx, Rendered, split_text, sse};
use serde_json::{Value, json};

pub(crate) fn render(a: &Answer, cx: &Ctx) -> Rendered {
    let id = format!("msg_mock_{}", cx.seq);
    let (input_tokens, output_tokens) = a.tokens();
    let usage_start = json!({"input_tokens": input_tokens, "output_tokens": 1,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let mut blocks = Vec::new(); // (start block, deltas, final block)
    let stop_reason;
    match a {
        Answer::Text { text, .. } => {
            stop_reason = "end_turn";
            blocks.push(text_block(text));
        }
        Answer::ToolUse {
            name, input, text, ..
        } => {
            stop_reason = "tool_use";
            if let Some(t) = text {
                blocks.push(text_block(t));
            }
            let tool_id = format!("toolu_mock_{}", cx.seq);
            let js = input.to_string();
            // Two input_json_delta pieces, as the real API streams partial JSON.
            let deltas = split_text(&js, 2)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect();
            blocks.push((
                json!({"type": "tool_use", "id": tool_id, "name": name, "input": {}}),
                deltas,
                json!({"type": "tool_use", "id": tool_id, "name": name, "input": input}),
            ));
        }
    }
    if !cx.stream {
        return Rendered::Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": cx.model,
            "content": blocks.iter().map(|b| b.2.clone()).collect::<Vec<_>>(),
            "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }));
    }
    let mut ev = vec![sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": cx.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage_start}}),
    )];
    for (i, (start, deltas, _)) in blocks.into_iter().enumerate() {
        ev.push(sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        for d in deltas {
            ev.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": i, "delta": d}),
            ));
        }
        ev.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": i}),
        ));
    }
    ev.push(sse(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}),
    ));
    ev.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    Rendered::Sse(ev)
}

fn text_block(text: &str) -> (Value, Vec<Value>, Value) {
    (
        json!({"type": "text", "text": ""}),
        split_text(text, 3)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect(),
        json!({"type": "text", "text": text}),
    )
}

/// `{"type":"error","error":{"type":…,"message":…}}` with the type Anthropic uses for `status`.
pub(crate) fn error_body(status: u16) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    let message = match status {
        529 => "Overloaded".to_string(),
        _ => format!("mock model: scripted HTTP {status}"),
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// `POST /v1/messages/count_tokens`: a rough count (4 bytes a token) is all callers use it for.
pub(crate) fn count_tokens(raw_len: usize) -> Value {
    json!({"input_tokens": (raw_len / 4).max(1)})
}
