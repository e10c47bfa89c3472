//! `codex exec --json`: JSONL events `thread.started{thread_id}`, `turn.started`,
//! `item.started|updated|completed{item{type,…}}`, `turn.completed{usage}`,
//! `turn.failed{error{message}}` and `error{message}`. Codex reports no cost: it is priced
//! from the table. Versions before the thread/turn/item shape printed `{"id","msg":{…}}`.

use serde_json::Value;

use super::{LineSignal, short, str_at, u64_at};
use crate::report::{AgentReport, Usage};

pub(super) fn line(report: &mut AgentReport, value: &Value) -> Option<LineSignal> {
    let Some(ty) = str_at(value, "type") else {
        if value.get("msg").is_some() {
            // The old event shape: nothing in it can be read reliably.
            if !report.errors.iter().any(|e| e.contains("older JSON shape")) {
                report.errors.push(
                    "this codex prints the older JSON shape ({\"id\",\"msg\"}); upgrade codex"
                        .to_owned(),
                );
            }
            return Some(LineSignal::Continue);
        }
        return None;
    };
    match ty {
        "thread.started" => {
            if let Some(id) = str_at(value, "thread_id") {
                report.session_id = Some(id.to_owned());
            }
        }
        "turn.started" => {}
        "turn.completed" => {
            if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
                // `input_tokens` includes the cached ones.
                let cached = u64_at(usage, "cached_input_tokens");
                report.usage.add(&Usage {
                    input: u64_at(usage, "input_tokens").saturating_sub(cached),
                    output: u64_at(usage, "output_tokens"),
                    cache_read: cached,
                    cache_write: 0,
                });
            }
            report.turns = Some(report.turns.unwrap_or(0).saturating_add(1));
            report.finished = true;
            report.subtype = Some("success".to_owned());
            return Some(LineSignal::Finished);
        }
        "turn.failed" => {
            let message = value
                .get("error")
                .and_then(|e| str_at(e, "message"))
                .unwrap_or("the turn failed");
            report.errors.push(short(message, 1000));
            report.turns = Some(report.turns.unwrap_or(0).saturating_add(1));
            report.finished = true;
            report.is_error = true;
            report.subtype = Some("turn_failed".to_owned());
            return Some(LineSignal::Finished);
        }
        "error" => {
            // Stream errors and reconnects; a fatal one is followed by `turn.failed`.
            if let Some(message) = str_at(value, "message") {
                report.errors.push(short(message, 1000));
            }
        }
        "item.started" | "item.updated" | "item.completed" => {
            let item = value.get("item")?;
            if ty == "item.started"
                && let Some(doing) = super::doing::codex_item(item)
            {
                report.doing = Some(doing);
            }
            if ty == "item.completed" {
                item_completed(report, item);
            }
        }
        _ => {}
    }
    Some(LineSignal::Continue)
}

fn item_completed(report: &mut AgentReport, item: &Value) {
    match str_at(item, "type") {
        Some("agent_message") => {
            if let Some(text) = str_at(item, "text") {
                report.result = Some(text.to_owned());
            }
        }
        Some(
            "command_execution" | "file_change" | "mcp_tool_call" | "web_search"
            | "collab_tool_call",
        ) => report.tool_calls = report.tool_calls.saturating_add(1),
        // An `error` item is a warning (codex says so about unknown model metadata, for
        // one): the turn goes on. Kept out of `errors` so that it is not blamed for a failure.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::{EngineKind, LineSignal, PriceTable, StreamParser, Verdict};

    fn parse(lines: &[&str]) -> (crate::AgentReport, Vec<LineSignal>) {
        let mut parser = StreamParser::new(EngineKind::Codex, "codex", PriceTable::builtin());
        let signals = lines.iter().map(|l| parser.line(l.as_bytes())).collect();
        let mut report = parser.finish();
        report.model.get_or_insert("gpt-5".into());
        (report, signals)
    }

    #[test]
    fn a_successful_stream() {
        let (report, signals) = parse(&[
            r#"{"type":"thread.started","thread_id":"t-1"}"#,
            r#"{"type":"item.completed","item":{"id":"i0","type":"error","message":"model metadata unknown"}}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"file_change","changes":[{"path":"a.txt","kind":"add"}],"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"Done."}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":30}}"#,
        ]);
        assert_eq!(signals.last(), Some(&LineSignal::Finished));
        assert_eq!(report.session_id.as_deref(), Some("t-1"));
        assert_eq!(report.result.as_deref(), Some("Done."));
        assert_eq!(report.usage.input, 1000);
        assert_eq!(report.usage.cache_read, 200);
        assert_eq!(report.usage.output, 30);
        assert_eq!(report.tool_calls, 1);
        assert!(report.errors.is_empty());
        assert_eq!(report.verdict(Some(0), false), Verdict::Succeeded);
    }

    #[test]
    fn a_failed_turn_is_an_error_with_its_message() {
        let (report, signals) = parse(&[
            r#"{"type":"thread.started","thread_id":"t"}"#,
            r#"{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}"#,
            r#"{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 500 Internal Server Error"}}"#,
        ]);
        assert_eq!(signals.last(), Some(&LineSignal::Finished));
        assert!(report.is_error);
        match report.verdict(Some(1), false) {
            Verdict::Infrastructure { message, .. } => {
                assert!(message.contains("500 Internal Server Error"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_old_shape_is_named() {
        let (report, _) = parse(&[r#"{"id":"0","msg":{"type":"task_started"}}"#]);
        assert!(report.errors[0].contains("upgrade codex"));
    }
}
