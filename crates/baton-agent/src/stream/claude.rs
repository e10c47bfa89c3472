//! Claude Code's `--output-format stream-json --verbose`: one JSON object per line, `type`
//! `system` (init: session, model, tools), `assistant` (a message or part of one, with its
//! usage), `user` (tool results), `stream_event`, `rate_limit_event`, and last `result`.

use serde_json::Value;

use super::{LineSignal, State, short, str_at, u64_at};
use crate::report::{AgentReport, Usage};

/// `None` for a line that is JSON but not a Claude Code event.
pub(super) fn line(
    report: &mut AgentReport,
    state: &mut State,
    value: &Value,
) -> Option<LineSignal> {
    let ty = str_at(value, "type")?;
    if let Some(session) = str_at(value, "session_id")
        && report.session_id.is_none()
    {
        report.session_id = Some(session.to_owned());
    }
    match ty {
        "system" => match str_at(value, "subtype") {
            Some("init") => {
                if let Some(model) = str_at(value, "model") {
                    report.model = Some(model.to_owned());
                }
            }
            // The CLI is retrying its API: unreachable, overloaded, failing.
            Some("api_retry") => {
                let error = str_at(value, "error").unwrap_or("an error");
                let said = match (u64_at(value, "error_status"), u64_at(value, "attempt")) {
                    (0, 0) => error.to_owned(),
                    (0, attempt) => format!("{error}, retry {attempt}"),
                    (status, 0) => format!("{error} ({status})"),
                    (status, attempt) => format!("{error} ({status}), retry {attempt}"),
                };
                report.api_retrying = Some(short(&said, 200));
            }
            _ => {}
        },
        "assistant" => {
            report.api_retrying = None;
            assistant(report, state, value.get("message")?)
        }
        "result" => {
            report.api_retrying = None;
            result(report, value);
            return Some(LineSignal::Finished);
        }
        // A tool's result: the agent's work goes on.
        "user" => state.answering = false,
        // Partial messages, hooks, rate-limit notices: nothing to account.
        _ => {}
    }
    Some(LineSignal::Continue)
}

fn assistant(report: &mut AgentReport, state: &mut State, message: &Value) {
    if let Some(model) = str_at(message, "model")
        && report.model.is_none()
    {
        report.model = Some(model.to_owned());
    }
    let mut text = String::new();
    let mut calls = false;
    if let Some(content) = message.get("content").and_then(Value::as_array) {
        for block in content {
            match str_at(block, "type") {
                Some("tool_use") => {
                    calls = true;
                    report.tool_calls = report.tool_calls.saturating_add(1);
                    report.doing = Some(super::doing::tool(
                        str_at(block, "name").unwrap_or("a tool"),
                        block.get("input"),
                    ));
                }
                Some("text") => text.push_str(str_at(block, "text").unwrap_or_default()),
                _ => {}
            }
        }
    }
    // One message may arrive as several lines (its text, then its tool call): a call on any
    // of them means the work goes on.
    if calls {
        state.answering = false;
    } else if !text.is_empty() {
        state.answering = true;
    }
    if !text.is_empty() {
        state.last_text = Some(text);
    }
    // Live usage: a message split over several lines repeats the same usage on each.
    let Some(usage) = message.get("usage").filter(|u| u.is_object()) else {
        return;
    };
    if let Some(id) = str_at(message, "id") {
        if state.counted_messages.iter().any(|seen| seen == id) {
            return;
        }
        // Bounded: a message id is only ever repeated by the lines right after it.
        if state.counted_messages.len() >= 16 {
            state.counted_messages.remove(0);
        }
        state.counted_messages.push(id.to_owned());
    }
    report.usage.add(&usage_of(usage));
}

fn result(report: &mut AgentReport, value: &Value) {
    report.finished = true;
    report.is_error = value
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    report.subtype = str_at(value, "subtype").map(str::to_owned);
    if let Some(text) = str_at(value, "result") {
        report.result = Some(text.to_owned());
    }
    // The result's totals replace what was summed live: they include what no line showed
    // (subagents, retried requests).
    if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
        report.usage = usage_of(usage);
    }
    if let Some(cost) = value.get("total_cost_usd").and_then(Value::as_f64)
        && cost.is_finite()
        && cost >= 0.0
    {
        report.reported_cost_usd = Some(cost);
    }
    if let Some(turns) = value.get("num_turns").and_then(Value::as_u64) {
        report.turns = Some(u32::try_from(turns).unwrap_or(u32::MAX));
    }
    if let Some(models) = value.get("modelUsage").and_then(Value::as_object) {
        // The model that did the work: the one that cost most (a cheap model may have named
        // the session or summarised a file on the side).
        let main = models.iter().max_by(|(_, a), (_, b)| {
            let cost = |v: &Value| v.get("costUSD").and_then(Value::as_f64).unwrap_or(0.0);
            cost(a).total_cmp(&cost(b))
        });
        if let Some((model, _)) = main {
            report.model = Some(model.clone());
        }
    }
    if let Some(status) = value.get("api_error_status").and_then(Value::as_u64) {
        report.api_status = u16::try_from(status).ok();
    }
    if let Some(errors) = value.get("errors").and_then(Value::as_array) {
        for error in errors {
            let text = match error {
                Value::String(s) => s.clone(),
                other => str_at(other, "message").map_or_else(|| other.to_string(), str::to_owned),
            };
            report.errors.push(short(&text, 1000));
        }
    }
    if let Some(denials) = value.get("permission_denials").and_then(Value::as_array) {
        for denial in denials {
            let tool = str_at(denial, "tool_name").unwrap_or("a tool");
            report.permission_denials.push(tool.to_owned());
        }
    }
}

fn usage_of(usage: &Value) -> Usage {
    Usage {
        input: u64_at(usage, "input_tokens"),
        output: u64_at(usage, "output_tokens"),
        cache_read: u64_at(usage, "cache_read_input_tokens"),
        cache_write: u64_at(usage, "cache_creation_input_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use crate::{EngineKind, LineSignal, PriceTable, StreamParser};

    fn parse(lines: &[&str]) -> (crate::AgentReport, Vec<LineSignal>) {
        let mut parser = StreamParser::new(EngineKind::Claude, "claude", PriceTable::builtin());
        let signals = lines.iter().map(|l| parser.line(l.as_bytes())).collect();
        (parser.finish(), signals)
    }

    #[test]
    fn an_agent_retrying_its_api_says_so_until_the_api_answers() {
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1200,"error_status":529,"error":"overloaded"}"#;
        let (report, _) = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s-1","model":"m"}"#,
            retry,
        ]);
        assert_eq!(
            report.api_retrying.as_deref(),
            Some("overloaded (529), retry 2")
        );
        let answered =
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"ok"}]}}"#;
        let (report, _) = parse(&[retry, answered]);
        assert_eq!(report.api_retrying, None, "the API answered after all");
    }

    #[test]
    fn a_successful_stream() {
        let (report, signals) = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5","tools":["Write"]}"#,
            r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","name":"Write","input":{}}],"usage":{"input_tokens":10,"output_tokens":5}},"session_id":"s-1"}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"ok"}]}}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Wrote it."}],"usage":{"input_tokens":20,"output_tokens":3}}}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Wrote it."}],"usage":{"input_tokens":20,"output_tokens":3}}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Wrote it.","session_id":"s-1","num_turns":2,"total_cost_usd":0.0123,"usage":{"input_tokens":30,"output_tokens":8,"cache_read_input_tokens":100,"cache_creation_input_tokens":7},"modelUsage":{"claude-haiku-4-5":{"costUSD":0.0001},"claude-sonnet-4-5":{"costUSD":0.0122}},"permission_denials":[]}"#,
        ]);
        assert_eq!(signals.last(), Some(&LineSignal::Finished));
        assert!(signals[..5].iter().all(|s| *s == LineSignal::Continue));
        assert_eq!(report.result.as_deref(), Some("Wrote it."));
        assert!(report.finished && !report.is_error);
        assert_eq!(report.session_id.as_deref(), Some("s-1"));
        assert_eq!(report.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(report.turns, Some(2));
        assert_eq!(report.tool_calls, 1);
        assert_eq!(report.usage.input, 30);
        assert_eq!(report.usage.cache_read, 100);
        assert_eq!(report.usage.cache_write, 7);
        assert_eq!(report.cost_usd(), Some(0.0123));
        assert_eq!(report.malformed_lines, 0);
        assert_eq!(report.verdict(Some(0), false), crate::Verdict::Succeeded);
    }

    #[test]
    fn an_answer_is_told_from_work_that_goes_on() {
        let mut parser = StreamParser::new(EngineKind::Claude, "claude", PriceTable::builtin());
        let mut read = |line: &str| {
            parser.line(line.as_bytes());
            parser.answering()
        };
        // A message that says something, then calls a tool on its next line (same id).
        assert!(read(
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Let me look."}]}}"#
        ));
        assert!(!read(
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{}}]}}"#
        ));
        assert!(!read(
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"x"},{"type":"tool_use","name":"Bash","input":{}}]}}"#
        ));
        assert!(!read(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"ok"}]}}"#
        ));
        assert!(read(
            r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":"Done."}]}}"#
        ));
        // The result itself is not "on its way" any more: it is in.
        assert!(!read(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Done."}"#
        ));
    }

    #[test]
    fn live_usage_counts_each_message_once() {
        let mut parser = StreamParser::new(EngineKind::Claude, "claude", PriceTable::builtin());
        let line = r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1000000,"output_tokens":0}}}"#;
        parser.line(line.as_bytes());
        parser.line(line.as_bytes());
        let snapshot = parser.snapshot();
        assert_eq!(snapshot.usage.input, 1_000_000);
        // Priced from the table while no reported cost exists: $3 per million input tokens.
        assert_eq!(snapshot.cost_usd(), Some(3.0));
    }

    #[test]
    fn an_error_result_keeps_the_agent_s_words() {
        let (report, _) = parse(&[
            r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}","session_id":"s","total_cost_usd":0}"#,
        ]);
        assert!(report.is_error);
        assert!(matches!(
            report.verdict(Some(1), false),
            crate::Verdict::Infrastructure { .. }
        ));
    }

    #[test]
    fn a_cut_stream_keeps_the_last_message_as_output() {
        let (report, _) = parse(&[
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"half"}]}}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"te"#,
        ]);
        assert!(!report.finished);
        assert_eq!(report.result.as_deref(), Some("half"));
        assert_eq!(report.malformed_lines, 1);
    }
}
