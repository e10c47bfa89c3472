//! Gemini CLI's `--output-format stream-json`: `init{session_id, model}`,
//! `message{role, content, delta}`, `tool_use`, `tool_result`, `error{severity, message}`, and
//! last `result{status, error, stats}`. Gemini reports no cost: it is priced from the table.

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
            if let Some(model) = str_at(value, "model") {
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
        "tool_use" => report.tool_calls = report.tool_calls.saturating_add(1),
        "error" => {
            if let Some(message) = str_at(value, "message") {
                report.errors.push(short(message, 1000));
            }
        }
        "result" => {
            report.finished = true;
            let status = str_at(value, "status").unwrap_or("success");
            report.is_error = status != "success";
            report.subtype = Some(status.to_owned());
            if let Some(error) = value.get("error").filter(|e| e.is_object()) {
                if let Some(message) = str_at(error, "message") {
                    report.errors.push(short(message, 1000));
                }
                if let Some(code) = error.get("code").and_then(Value::as_u64) {
                    report.api_status = u16::try_from(code).ok().filter(|c| *c >= 400);
                }
            }
            if let Some(stats) = value.get("stats").filter(|s| s.is_object()) {
                let cached = u64_at(stats, "cached");
                report.usage = Usage {
                    input: u64_at(stats, "input_tokens").saturating_sub(cached),
                    output: u64_at(stats, "output_tokens"),
                    cache_read: cached,
                    cache_write: 0,
                };
            }
            report.result = Some(std::mem::take(&mut state.text));
            return Some(LineSignal::Finished);
        }
        _ => {}
    }
    Some(LineSignal::Continue)
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
