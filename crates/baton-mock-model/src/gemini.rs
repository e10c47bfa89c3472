//! Gemini `generateContent` / `streamGenerateContent?alt=sse`, as the Gemini CLI reads it.

use crate::{Answer, Ctx, Rendered, split_text, sse};
use serde_json::{Map, Value, json};

fn candidate(parts: Vec<Value>, finish: Option<&str>) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = json!(f);
    }
    c
}

fn usage(input: u64, output: u64) -> Value {
    json!({"promptTokenCount": input, "candidatesTokenCount": output, "totalTokenCount": input + output})
}

pub(crate) fn render(a: &Answer, cx: &Ctx) -> Rendered {
    let (input_tokens, output_tokens) = a.tokens();
    let mut pieces: Vec<Value> = Vec::new(); // parts, one streamed chunk each
    match a {
        Answer::Text { text, .. } => {
            pieces.extend(split_text(text, 3).into_iter().map(|t| json!({"text": t})))
        }
        Answer::ToolUse {
            name, input, text, ..
        } => {
            if let Some(t) = text {
                pieces.push(json!({"text": t}));
            }
            let args = if input.is_object() {
                (*input).clone()
            } else {
                json!({"input": input})
            };
            pieces.push(json!({"functionCall": {"name": name, "args": args}}));
        }
    }
    let envelope = |candidates: Value, usage: Option<Value>| {
        let mut r = json!({"candidates": candidates, "modelVersion": cx.model, "responseId": format!("mock-{}", cx.seq)});
        if let Some(u) = usage {
            r["usageMetadata"] = u;
        }
        r
    };
    if !cx.stream {
        // Adjacent text parts are merged: a non-streamed answer carries whole parts.
        let mut parts: Vec<Value> = Vec::new();
        for p in pieces {
            match (parts.last_mut(), p.get("text").and_then(Value::as_str)) {
                (Some(Value::Object(last)), Some(t)) if last.contains_key("text") => {
                    let joined = format!("{}{t}", last["text"].as_str().unwrap_or(""));
                    last.insert("text".into(), json!(joined));
                }
                _ => parts.push(p),
            }
        }
        return Rendered::Json(envelope(
            json!([candidate(parts, Some("STOP"))]),
            Some(usage(input_tokens, output_tokens)),
        ));
    }
    let n = pieces.len();
    let ev = pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let last = i + 1 == n;
            let c = candidate(vec![p], last.then_some("STOP"));
            sse(
                None,
                &envelope(json!([c]), last.then(|| usage(input_tokens, output_tokens))),
            )
        })
        .collect();
    Rendered::Sse(ev)
}

/// The JSON schema a request asks its answer to satisfy (`generationConfig.responseJsonSchema`
/// or the OpenAPI-flavoured `responseSchema`), if any. The Gemini CLI uses such requests for its
/// own bookkeeping (model routing, next-speaker checks, loop detection …).
pub(crate) fn response_schema(body: &Value) -> Option<&Value> {
    let g = body.get("generationConfig")?;
    g.get("responseJsonSchema")
        .or_else(|| g.get("responseSchema"))
}

/// A value satisfying `schema`: the first enum value, empty strings/arrays, the minimum or 1 for numbers, `false`, and
/// every listed property of an object. Good enough for the CLI's classifiers, which only need a
/// parseable answer of the right shape.
pub(crate) fn satisfy(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            return satisfy(first);
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null")
            .to_ascii_lowercase(),
        _ if schema.get("properties").is_some() => "object".into(),
        _ => "string".into(),
    };
    match ty.as_str() {
        "object" => {
            let mut m = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    m.insert(k.clone(), satisfy(v));
                }
            }
            Value::Object(m)
        }
        "array" => Value::Array(Vec::new()),
        // Classifiers score from 1 and validate that (a 0 made the CLI's router throw).
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => json!("mock"),
    }
}

/// Google's error shape: `{"error":{"code","message","status"}}`.
pub(crate) fn error_body(status: u16) -> Value {
    let s = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    };
    json!({"error": {"code": status, "message": format!("mock model: scripted HTTP {status}"), "status": s}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn satisfies_routing_like_schemas() {
        let s = json!({"type": "OBJECT", "properties": {"reasoning": {"type": "STRING"},
            "model_choice": {"type": "STRING", "enum": ["flash", "pro"]}}, "required": ["reasoning", "model_choice"]});
        assert_eq!(
            satisfy(&s),
            json!({"reasoning": "mock", "model_choice": "flash"})
        );
    }
}
