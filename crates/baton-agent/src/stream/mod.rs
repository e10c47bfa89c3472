//! Parsers of what each agent CLI prints on stdout, one line at a time.
//!
//! Every parser is total: any bytes in, a report out. A line that is not what the engine prints
//! is counted as malformed (and the first one kept, shortened) instead of ending the parse, so
//! a stray log line or a truncated stream still leaves whatever was learned before it.

mod aider;
mod claude;
mod codex;
mod doing;
mod gemini;
mod http;
#[cfg(test)]
mod recorded;

use serde_json::Value;

use crate::engine::EngineKind;
use crate::price::PriceTable;
use crate::report::{AgentReport, Usage};

/// What a line told the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineSignal {
    /// Keep reading.
    Continue,
    /// The agent printed its final result: the attempt's work is done, and a process that
    /// lingers after it may be reaped (some CLIs hang after their result).
    Finished,
}

/// Reads one attempt's stdout.
#[derive(Debug)]
pub struct StreamParser {
    kind: EngineKind,
    report: AgentReport,
    state: State,
    prices: PriceTable,
}

/// What a parser must remember between lines beyond the report itself.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Claude: ids of assistant messages whose usage was counted (one message can arrive as
    /// several lines, each carrying the same usage).
    pub(crate) counted_messages: Vec<String>,
    /// Claude: text of the last assistant message, for a stream cut before its `result`.
    pub(crate) last_text: Option<String>,
    /// Claude: the latest assistant message said something and called no tool, and no tool
    /// result came after it: unless a call follows, the next thing printed is the result.
    pub(crate) answering: bool,
    /// Gemini: the assistant's streamed text.
    pub(crate) text: String,
    /// Gemini: tokens per model (its router's classifier runs on a cheaper model than the
    /// conversation), each priced at its own model's price.
    pub(crate) model_usage: Vec<(String, Usage)>,
    pub(crate) aider: aider::State,
}

/// The longest line parsed; longer ones are counted as malformed. An agent's final message
/// rides on one line, so this is generous.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most bytes of a malformed line kept for the record.
const MALFORMED_SAMPLE: usize = 200;

impl StreamParser {
    /// Whether the answer is the program's whole stdout (a `command` engine reading plain
    /// text) rather than something the parser found in it.
    pub fn plain_text(&self) -> bool {
        self.kind == EngineKind::Command
    }

    pub fn new(kind: EngineKind, engine_name: &str, prices: PriceTable) -> Self {
        Self {
            kind,
            report: AgentReport {
                engine: engine_name.to_owned(),
                ..AgentReport::default()
            },
            state: State::default(),
            prices,
        }
    }

    /// The model the task asked for, until the stream names one (Codex never does).
    pub fn assume_model(&mut self, model: &str) {
        self.report.model.get_or_insert_with(|| model.to_owned());
    }

    /// Reads one line of stdout (without its newline).
    pub fn line(&mut self, line: &[u8]) -> LineSignal {
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return LineSignal::Continue;
        }
        if self.kind == EngineKind::Command {
            // Plain text: stdout is the answer, read whole from the capture.
            return LineSignal::Continue;
        }
        if self.kind == EngineKind::Aider {
            let line = String::from_utf8_lossy(trimmed);
            return aider::line(&mut self.report, &mut self.state.aider, &line);
        }
        if trimmed.len() > MAX_LINE {
            self.malformed(trimmed);
            return LineSignal::Continue;
        }
        let value: Value = match serde_json::from_slice(trimmed) {
            Ok(value @ Value::Object(_)) => value,
            _ => {
                self.malformed(trimmed);
                return LineSignal::Continue;
            }
        };
        let report = &mut self.report;
        let signal = match self.kind {
            EngineKind::Claude => claude::line(report, &mut self.state, &value),
            EngineKind::Codex => codex::line(report, &value),
            EngineKind::Gemini => gemini::line(report, &mut self.state, &value),
            EngineKind::Http => http::line(report, &mut self.state, &value),
            EngineKind::Aider | EngineKind::Command => unreachable!("handled above"),
        };
        match signal {
            Some(signal) => signal,
            None => {
                self.malformed(trimmed);
                LineSignal::Continue
            }
        }
    }

    /// What is known so far, with the cost estimated where the agent reports none: for live
    /// accounting while the attempt runs.
    pub fn snapshot(&self) -> AgentReport {
        let mut report = self.report.clone();
        self.estimate(&mut report);
        report
    }

    /// What the agent is doing now, in a few words: waiting for its model API while it
    /// retries one, else its latest tool call or edit.
    pub fn doing(&self) -> Option<String> {
        match &self.report.api_retrying {
            Some(error) => Some(doing::waiting_for_the_api(error)),
            None => self.report.doing.clone(),
        }
    }

    /// Whether the agent's latest message is its answer: text with no tool call after it, so
    /// that unless a call still follows, its work is done and its result is on its way. Only
    /// Claude Code's stream tells this before the result; for the other engines it is never
    /// true (they report what they spent only with their result).
    pub fn answering(&self) -> bool {
        self.kind == EngineKind::Claude && self.state.answering && !self.report.finished
    }

    /// What the attempt has cost so far (the agent's own figure once it gave one, else the
    /// table's) and its tokens: for live budgets, cheaper than a snapshot.
    pub fn spent(&self) -> (Option<f64>, crate::Usage) {
        let report = &self.report;
        let cost = report
            .reported_cost_usd
            .or_else(|| self.estimated_cost(report));
        (cost, report.usage)
    }

    /// Reads what a CLI that prints no JSON wrote to its own files once it has exited
    /// ([`RecordFiles`](crate::RecordFiles): aider's analytics log and chat history), each
    /// `None` where the file is missing.
    pub fn records(&mut self, analytics: Option<&str>, chat: Option<&str>) {
        if self.kind != EngineKind::Aider {
            return;
        }
        if let Some(text) = analytics {
            aider::analytics(&mut self.report, &mut self.state.aider, text);
        }
        if let Some(text) = chat {
            aider::chat(&mut self.report, text);
        }
    }

    /// The report, once the stream is over.
    pub fn finish(mut self) -> AgentReport {
        if self.kind == EngineKind::Aider {
            aider::finish(&mut self.report, &self.state.aider);
        }
        if self.kind == EngineKind::Command {
            // Plain text has no result line: the program is done when it exits, and its exit
            // code is its verdict. Its answer is its stdout, which the caller holds.
            self.report.finished = true;
        }
        if self.report.result.is_none() {
            // A stream cut before its result: the last thing the agent said is still worth
            // keeping as output, though it is not a result.
            self.report.result = match self.kind {
                EngineKind::Claude => self.state.last_text.take(),
                EngineKind::Gemini | EngineKind::Http if !self.state.text.is_empty() => {
                    Some(std::mem::take(&mut self.state.text))
                }
                _ => None,
            };
        }
        let mut report = std::mem::take(&mut self.report);
        self.estimate(&mut report);
        report
    }

    fn estimate(&self, report: &mut AgentReport) {
        if report.reported_cost_usd.is_none() && !report.usage.is_zero() {
            report.estimated_cost_usd = self.estimated_cost(report);
        }
    }

    /// The table's price of what `report` used: per model where the stream gave tokens per
    /// model (a model missing from the table priced as the main one), else all at the main
    /// model's price.
    fn estimated_cost(&self, report: &AgentReport) -> Option<f64> {
        let main = report
            .model
            .as_deref()
            .and_then(|model| self.prices.price(model));
        if self.state.model_usage.is_empty() {
            return main.map(|price| price.cost(&report.usage));
        }
        self.state
            .model_usage
            .iter()
            .map(|(model, usage)| {
                self.prices
                    .price(model)
                    .or(main)
                    .map(|price| price.cost(usage))
            })
            .sum()
    }

    fn malformed(&mut self, line: &[u8]) {
        self.report.malformed_lines = self.report.malformed_lines.saturating_add(1);
        if self.report.first_malformed.is_none() {
            let sample = &line[..line.len().min(MALFORMED_SAMPLE)];
            self.report.first_malformed = Some(String::from_utf8_lossy(sample).into_owned());
        }
    }
}

/// `value[key]` as a string.
pub(crate) fn str_at<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// `value[key]` as a count (a negative or fractional number counts as nothing).
pub(crate) fn u64_at(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Keeps the first `max` bytes of an agent's text for an error message, at a char boundary.
pub(crate) fn short(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_bytes_parse_without_panicking(
            lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20),
            kind in prop_oneof![
                Just(EngineKind::Claude), Just(EngineKind::Codex),
                Just(EngineKind::Gemini), Just(EngineKind::Aider)
            ],
        ) {
            let mut parser = StreamParser::new(kind, "x", PriceTable::builtin());
            for line in &lines {
                parser.line(line);
            }
            let report = parser.finish();
            prop_assert!(report.malformed_lines as usize <= lines.len());
        }

        #[test]
        fn json_shaped_noise_parses_without_panicking(
            kind in prop_oneof![Just(EngineKind::Claude), Just(EngineKind::Codex), Just(EngineKind::Gemini)],
            ty in prop_oneof![
                Just("result"), Just("assistant"), Just("system"), Just("turn.completed"),
                Just("item.completed"), Just("thread.started"), Just("turn.failed"), Just("error"),
                Just("init"), Just("message"), Just("tool_use")
            ],
            field in prop_oneof![Just("usage"), Just("message"), Just("item"), Just("stats"), Just("error"), Just("result")],
            inner in prop_oneof![
                Just(serde_json::json!(null)), Just(serde_json::json!(-1)), Just(serde_json::json!("s")),
                Just(serde_json::json!([1, {"type": "text"}])), Just(serde_json::json!({"type": "tool_use", "usage": 5})),
                Just(serde_json::json!({"input_tokens": -3, "content": "x", "text": 7}))
            ],
        ) {
            let line = serde_json::json!({ "type": ty, field: inner }).to_string();
            let mut parser = StreamParser::new(kind, "x", PriceTable::builtin());
            parser.line(line.as_bytes());
            parser.finish();
        }
    }

    /// Token counts are whatever the stream says: adding them up saturates instead of
    /// overflowing (a panic in debug builds, a wrapped total in release ones).
    #[test]
    fn huge_token_counts_saturate() {
        let max = u64::MAX;
        let streams: [(EngineKind, Vec<String>); 3] = [
            (
                EngineKind::Claude,
                (1..=2)
                    .map(|i| {
                        format!(
                            r#"{{"type":"assistant","message":{{"id":"m{i}","model":"claude-sonnet-4-5","content":[],"usage":{{"input_tokens":{max},"output_tokens":{max},"cache_read_input_tokens":{max}}}}}}}"#
                        )
                    })
                    .collect(),
            ),
            (
                EngineKind::Codex,
                vec![format!(
                    r#"{{"type":"turn.completed","usage":{{"input_tokens":{max},"output_tokens":{max}}}}}"#
                ); 2],
            ),
            (
                EngineKind::Aider,
                vec!["Tokens: 1e300 sent, 1e300M received. Cost: $0.01 message, $0.01 session.".to_owned(); 2],
            ),
        ];
        for (kind, lines) in streams {
            let mut parser = StreamParser::new(kind, "x", PriceTable::builtin());
            parser.assume_model("gpt-5");
            for line in &lines {
                parser.line(line.as_bytes());
            }
            let snapshot = parser.snapshot();
            let report = parser.finish();
            assert_eq!(report.usage.input, max, "{kind}");
            assert_eq!(report.usage.output, max, "{kind}");
            assert_eq!(report.usage.total(), max, "{kind}");
            assert_eq!(snapshot.usage, report.usage, "{kind}");
            let cost = report.cost_usd().unwrap();
            assert!(cost.is_finite() && cost > 0.0, "{kind}: {cost}");
        }
    }

    #[test]
    fn malformed_lines_are_counted_and_sampled() {
        let mut parser = StreamParser::new(EngineKind::Codex, "codex", PriceTable::builtin());
        assert_eq!(
            parser.line(b"Reading prompt from stdin..."),
            LineSignal::Continue
        );
        assert_eq!(parser.line(b"[1,2]"), LineSignal::Continue);
        assert_eq!(parser.line(b"   "), LineSignal::Continue);
        let report = parser.finish();
        assert_eq!(report.malformed_lines, 2);
        assert_eq!(
            report.first_malformed.as_deref(),
            Some("Reading prompt from stdin...")
        );
    }
}
