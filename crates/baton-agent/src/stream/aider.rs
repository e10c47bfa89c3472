//! Aider prints text, not JSON. What can be read from it: its cost lines,
//! `Tokens: 2.1k sent, 310 received. Cost: $0.01 message, $0.03 session.`, and the model in
//! `Main model: gpt-4o with diff edit format`. The whole of stdout is the task's output.

use super::LineSignal;
use crate::report::{AgentReport, Usage};

pub(super) fn line(report: &mut AgentReport, line: &str) -> LineSignal {
    if let Some(rest) = line.strip_prefix("Tokens:") {
        let words: Vec<&str> = rest.split_whitespace().collect();
        let before = |label: &str| {
            words
                .windows(2)
                .find(|pair| pair[1].trim_end_matches(['.', ',']) == label)
                .and_then(|pair| count(pair[0]))
        };
        let (sent, received) = (before("sent"), before("received"));
        // Each cost line is one message's; the session figure after it is the running total.
        report.usage.add(&Usage {
            input: sent.unwrap_or(0),
            output: received.unwrap_or(0),
            ..Usage::default()
        });
        if let Some(session) = line.split("Cost:").nth(1).and_then(|cost| {
            cost.split(',')
                .find(|p| p.contains("session"))
                .and_then(|p| p.trim().trim_start_matches('$').split(' ').next())
                .and_then(|n| n.parse::<f64>().ok())
        }) && session.is_finite()
            && session >= 0.0
        {
            report.reported_cost_usd = Some(session);
        }
        report.turns = Some(report.turns.unwrap_or(0).saturating_add(1));
    } else if let Some(rest) = line.strip_prefix("Main model:")
        && let Some(model) = rest.split_whitespace().next()
    {
        report.model = Some(model.to_owned());
    }
    // Aider has no result line: it is done when it exits.
    LineSignal::Continue
}

/// `2.1k` → 2100, `310` → 310.
fn count(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, scale) = match text.strip_suffix('k') {
        Some(n) => (n, 1_000.0),
        None => match text.strip_suffix('M') {
            Some(n) => (n, 1_000_000.0),
            None => (text, 1.0),
        },
    };
    let value = number.replace(',', "").parse::<f64>().ok()? * scale;
    (value.is_finite() && value >= 0.0).then(|| value.round() as u64)
}

#[cfg(test)]
mod tests {
    use crate::{EngineKind, PriceTable, StreamParser};

    #[test]
    fn cost_lines_add_up() {
        let mut parser = StreamParser::new(EngineKind::Aider, "aider", PriceTable::builtin());
        for line in [
            "Main model: gpt-4o with diff edit format",
            "Tokens: 2.1k sent, 310 received. Cost: $0.01 message, $0.01 session.",
            "Applied edit to src/lib.rs",
            "Tokens: 1,500 sent, 90 received. Cost: $0.004 message, $0.014 session.",
        ] {
            parser.line(line.as_bytes());
        }
        let report = parser.finish();
        assert_eq!(report.model.as_deref(), Some("gpt-4o"));
        assert_eq!(report.usage.input, 3600);
        assert_eq!(report.usage.output, 400);
        assert_eq!(report.reported_cost_usd, Some(0.014));
        assert_eq!(report.malformed_lines, 0);
    }
}
