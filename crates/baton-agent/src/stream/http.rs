//! The `http` engine's own lines (printed by `baton agent-http`): `start{api, model}`,
//! `delta{text}` while the answer streams, then `result{text, model, usage, stop_reason}` or
//! `error{message, status, retry_after}`.

use std::time::Duration;

use serde_json::Value;

use super::{LineSignal, State, short, str_at, u64_at};
use crate::report::{AgentReport, Usage};

pub(super) fn line(
    report: &mut AgentReport,
    state: &mut State,
    value: &Value,
) -> Option<LineSignal> {
    match str_at(value, "type")? {
        "start" => {
            if let Some(model) = str_at(value, "model") {
                report.model = Some(model.to_owned());
            }
        }
        "delta" => {
            if let Some(text) = str_at(value, "text")
                && state.text.len() < super::MAX_LINE
            {
                state.text.push_str(text);
            }
        }
        "result" => {
            report.finished = true;
            report.subtype = Some("success".to_owned());
            report.turns = Some(1);
            report.result = Some(str_at(value, "text").unwrap_or_default().to_owned());
            if let Some(model) = str_at(value, "model") {
                report.model = Some(model.to_owned());
            }
            if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
                report.usage = Usage {
                    input: u64_at(usage, "input_tokens"),
                    output: u64_at(usage, "output_tokens"),
                    cache_read: u64_at(usage, "cache_read_input_tokens"),
                    cache_write: u64_at(usage, "cache_creation_input_tokens"),
                };
            }
            return Some(LineSignal::Finished);
        }
        "error" => {
            report.finished = true;
            report.is_error = true;
            report.errors.push(short(
                str_at(value, "message").unwrap_or("the request failed"),
                1000,
            ));
            report.api_status = value
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok());
            report.retry_after = value
                .get("retry_after")
                .and_then(Value::as_u64)
                .map(|s| Duration::from_secs(s.min(86_400)));
            return Some(LineSignal::Finished);
        }
        _ => {}
    }
    Some(LineSignal::Continue)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{EngineKind, LineSignal, PriceTable, StreamParser, Verdict};

    fn parse(lines: &[&str]) -> crate::AgentReport {
        let mut parser = StreamParser::new(EngineKind::Http, "http", PriceTable::builtin());
        for line in lines {
            parser.line(line.as_bytes());
        }
        parser.finish()
    }

    #[test]
    fn a_streamed_answer() {
        let mut parser = StreamParser::new(EngineKind::Http, "http", PriceTable::builtin());
        assert_eq!(
            parser.line(br#"{"type":"start","api":"openai","model":"gpt-5"}"#),
            LineSignal::Continue
        );
        parser.line(br#"{"type":"delta","text":"Hel"}"#);
        assert_eq!(
            parser.line(br#"{"type":"result","text":"Hello.","model":"gpt-5","usage":{"input_tokens":1000000,"output_tokens":0}}"#),
            LineSignal::Finished
        );
        let report = parser.finish();
        assert_eq!(report.result.as_deref(), Some("Hello."));
        assert_eq!(report.cost_usd(), Some(1.25));
        assert_eq!(report.verdict(Some(0), false), Verdict::Succeeded);
    }

    #[test]
    fn errors_are_classed_by_status() {
        let overloaded = parse(&[
            r#"{"type":"error","status":529,"message":"HTTP 529: Overloaded","retry_after":7}"#,
        ]);
        assert_eq!(
            overloaded.verdict(Some(1), false),
            Verdict::Infrastructure {
                message: "HTTP 529: Overloaded; exit 1".into(),
                retry_after: Some(Duration::from_secs(7))
            }
        );
        let bad_key =
            parse(&[r#"{"type":"error","status":401,"message":"HTTP 401: invalid x-api-key"}"#]);
        assert!(matches!(
            bad_key.verdict(Some(1), false),
            Verdict::Task { .. }
        ));
        let refused = parse(&[
            r#"{"type":"error","message":"connection error: io: Connection refused (os error 111)"}"#,
        ]);
        assert!(matches!(
            refused.verdict(Some(1), false),
            Verdict::Infrastructure { .. }
        ));
    }
}
