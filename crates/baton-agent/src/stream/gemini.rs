//! Gemini CLI's `--output-format stream-json`: `init{session_id, model}`,
//! `message{role, content, delta}`, `tool_use`, `tool_result`, `error{severity, message}`, and
//! last `result{status, error{type, message}, stats{…, models{NAME: {…}}}}`. Gemini reports no
//! cost: it is priced from the table, each model's tokens at that model's price.

use serde_json::Value;

use super::{LineSignal, State, short, str_at, u64_at};
use crate::report::{AgentReport, Usage};

pub(super) fn line(
    report: &mut AgentReport,
    state: &mut State,
    value: &Value,
) -> Option<LineSignal> {
    match str_at(value, "type")? {
        "init" => {
            if let Some(id) = str_at(value, "session_id") {
                report.session_id = Some(id.to_owned());
            }
            // `auto` (the default) lets a router pick the model per request: not a model, and
            // not what the task may have asked for. The result's stats name the real ones.
            if let Some(model) = str_at(value, "model").filter(|m| !is_alias(m)) {
                report.model = Some(model.to_owned());
            }
        }
        "message" => {
            if str_at(value, "role") == Some("assistant")
                && let Some(content) = str_at(value, "content")
            {
                // Deltas add up to the answer; a whole message replaces it.
                if value.get("delta").and_then(Value::as_bool) != Some(true) {
                    state.text.clear();
                }
                if state.text.len() < super::MAX_LINE {
                    state.text.push_str(content);
                }
            }
        }
        "tool_use" => {
            report.tool_calls = report.tool_calls.saturating_add(1);
            report.doing = Some(super::doing::tool(
                str_at(value, "tool_name").unwrap_or("a tool"),
                value.get("parameters"),
            ));
        }
        "error" => {
            // `severity: warning` is a notice the run goes on after (a retry, a blocked
            // sub-agent): kept out of `errors` so that it is not blamed for a failure.
            if str_at(value, "severity") != Some("warning")
                && let Some(message) = str_at(value, "message")
            {
                report.errors.push(short(message, 1000));
                if report.api_status.is_none() {
                    report.api_status = api_status(message);
                }
            }
        }
        "result" => {
            report.finished = true;
            let status = str_at(value, "status").unwrap_or("success");
            report.is_error = status != "success";
            report.subtype = Some(status.to_owned());
            if let Some(error) = value.get("error").filter(|e| e.is_object()) {
                let message = str_at(error, "message");
                if let Some(message) = message {
                    report.errors.push(short(message, 1000));
                }
                let code = error
                    .get("code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
                    .filter(|c| (400..600).contains(c));
                if let Some(status) = code.or_else(|| message.and_then(api_status)) {
                    report.api_status = Some(status);
                }
            }
            if let Some(stats) = value.get("stats").filter(|s| s.is_object()) {
                report.usage = usage_of(stats);
                state.model_usage.clear();
                if let Some(models) = stats.get("models").and_then(Value::as_object) {
                    for (model, usage) in models.iter().filter(|(_, u)| u.is_object()) {
                        let usage = usage_of(usage);
                        if !usage.is_zero() && state.model_usage.len() < MAX_MODELS {
                            state.model_usage.push((model.clone(), usage));
                        }
                    }
                }
                // The model that did the work: the one that used most tokens (the router's
                // classifier runs on a small model on the side).
                if let Some((model, _)) = state
                    .model_usage
                    .iter()
                    .max_by_key(|(_, usage)| usage.total())
                {
                    report.model = Some(model.clone());
                }
            }
            let text = std::mem::take(&mut state.text);
            report.result = (!text.is_empty()).then_some(text);
            return Some(LineSignal::Finished);
        }
        _ => {}
    }
    Some(LineSignal::Continue)
}

/// Models kept apart for pricing; a run uses two or three.
const MAX_MODELS: usize = 16;

/// Gemini CLI's names that pick a model rather than name one.
fn is_alias(model: &str) -> bool {
    model == "auto" || model.starts_with("auto-") || matches!(model, "pro" | "flash" | "flash-lite")
}

/// `stats` (or one model's entry in it): `input_tokens` includes the `cached` ones.
fn usage_of(stats: &Value) -> Usage {
    let cached = u64_at(stats, "cached");
    Usage {
        input: u64_at(stats, "input_tokens").saturating_sub(cached),
        output: u64_at(stats, "output_tokens"),
        cache_read: cached,
        cache_write: 0,
    }
}

/// The HTTP status of the model API's error in Gemini CLI's text for it. It prints
/// `[API Error: {"error":{"code":500,…,"status":"INTERNAL"}}]` for an error body it could not
/// take apart, `[API Error: MESSAGE (Status: UNAVAILABLE)]` for one it could, and appends
/// "Please wait and try again later…" to a 429's.
fn api_status(message: &str) -> Option<u16> {
    const CODE: &str = "\"code\":";
    if let Some(at) = message.find(CODE) {
        let digits: String = message[at + CODE.len()..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .take(3)
            .collect();
        if let Some(code) = digits
            .parse::<u16>()
            .ok()
            .filter(|c| (400..600).contains(c))
        {
            return Some(code);
        }
    }
    if message.contains("Please wait and try again later") {
        return Some(429);
    }
    // google.rpc.Code names, as `"status":"NAME"` or `(Status: NAME)`.
    const STATUSES: &[(&str, u16)] = &[
        ("RESOURCE_EXHAUSTED", 429),
        ("UNAVAILABLE", 503),
        ("INTERNAL", 500),
        ("DEADLINE_EXCEEDED", 504),
        ("INVALID_ARGUMENT", 400),
        ("FAILED_PRECONDITION", 400),
        ("UNAUTHENTICATED", 401),
        ("PERMISSION_DENIED", 403),
        ("NOT_FOUND", 404),
    ];
    if !message.contains("API Error") {
        return None;
    }
    STATUSES
        .iter()
        .find(|(name, _)| {
            message.contains(&format!("\"status\":\"{name}\""))
                || message.contains(&format!("(Status: {name})"))
        })
        .map(|(_, code)| *code)
}

#[cfg(test)]
mod tests {
    use crate::{EngineKind, LineSignal, PriceTable, StreamParser, Verdict};

    #[test]
    fn a_successful_stream() {
        let mut parser = StreamParser::new(EngineKind::Gemini, "gemini", PriceTable::builtin());
        for line in [
            r#"{"type":"init","timestamp":"t","session_id":"g-1","model":"gemini-2.5-pro"}"#,
            r#"{"type":"message","role":"user","content":"hi"}"#,
            r#"{"type":"message","role":"assistant","content":"Hel","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"lo.","delta":true}"#,
            r#"{"type":"tool_use","tool_name":"write_file","tool_id":"x","parameters":{}}"#,
        ] {
            assert_eq!(parser.line(line.as_bytes()), LineSignal::Continue);
        }
        let last = r#"{"type":"result","status":"success","stats":{"total_tokens":1500,"input_tokens":1000,"output_tokens":500,"cached":0}}"#;
        assert_eq!(parser.line(last.as_bytes()), LineSignal::Finished);
        let report = parser.finish();
        assert_eq!(report.result.as_deref(), Some("Hello."));
        assert_eq!(report.session_id.as_deref(), Some("g-1"));
        assert_eq!(report.tool_calls, 1);
        assert_eq!(report.usage.input, 1000);
        // $1.25 per million in, $10 per million out.
        let cost = report.cost_usd().unwrap();
        assert!((cost - 0.00625).abs() < 1e-9, "{cost}");
        assert_eq!(report.verdict(Some(0), false), Verdict::Succeeded);
    }
}
