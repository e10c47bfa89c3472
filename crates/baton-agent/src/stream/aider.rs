//! Aider prints text, not JSON.
//!
//! While it runs, its stdout says enough for live accounting and for telling an API failure:
//! its token lines (`Tokens: 2.1k sent, 1.2k cache hit, 310 received. Cost: $0.01 message,
//! $0.03 session.`; no cost where it has no price for the model), its model (`Model: gpt-4o
//! with diff edit format`, `Main model:` before 0.60) and the model API's errors
//! (`litellm.RateLimitError: …`, then `Retrying in 0.5 seconds...` while it retries them).
//!
//! Once it has exited, its own record is exact (see [`RecordFiles`](crate::RecordFiles)): the
//! analytics log's `message_send` events carry each message's tokens and the session's cost,
//! and whether the last message it started was answered; the chat history holds its answer.
//! Aider exits 0 whether or not the model ever answered, so "answered" is its verdict.

use serde_json::Value;

use super::{LineSignal, short, u64_at};
use crate::report::{AgentReport, Usage};

/// What aider's stdout has said so far beyond the report.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// A message got an answer (a token line).
    answered: bool,
    /// An API error came after the last answer: unless a later answer clears it, the message
    /// it was sending was never answered.
    failing: bool,
    /// Cache tokens per message, which the analytics log does not carry.
    cache: Usage,
    /// The analytics log was read: its word on "answered" stands.
    logged: bool,
}

pub(super) fn line(report: &mut AgentReport, state: &mut State, line: &str) -> LineSignal {
    if let Some(rest) = line.strip_prefix("Tokens:") {
        tokens(report, state, rest, line);
    } else if let Some(rest) = line
        .strip_prefix("Model:")
        .or_else(|| line.strip_prefix("Main model:"))
        && let Some(model) = rest.split_whitespace().next()
    {
        report.model = Some(model.to_owned());
    } else if let Some(rest) = line.strip_prefix("litellm.") {
        api_error(report, state, rest);
    } else if let Some(path) = line.strip_prefix("Applied edit to ") {
        report.doing = Some(super::doing::edit(path.trim()));
    } else if line.starts_with("Retrying in ") {
        // It is retrying the error it just printed: an attempt whose time runs out now was
        // cut short by the API.
        report.api_retrying = report.errors.last().cloned();
    }
    // Aider has no result line: it is done when it exits.
    LineSignal::Continue
}

/// `Tokens: 2.1k sent, 1.2k cache write, 3k cache hit, 310 received. Cost: …`: one message's.
fn tokens(report: &mut AgentReport, state: &mut State, rest: &str, line: &str) {
    let counts = rest.split("Cost:").next().unwrap_or(rest);
    let mut usage = Usage::default();
    let mut sent = 0;
    for part in counts.split(", ") {
        let part = part.trim().trim_end_matches('.');
        let Some((number, label)) = part.split_once(' ') else {
            continue;
        };
        let Some(n) = count(number) else { continue };
        match label.trim() {
            "sent" => sent = n,
            "received" => usage.output = n,
            "cache hit" => usage.cache_read = n,
            "cache write" => usage.cache_write = n,
            _ => {}
        }
    }
    // What it sent includes what the cache served or took: fresh input is the rest.
    usage.input = sent.saturating_sub(usage.cache_read.saturating_add(usage.cache_write));
    state.cache.add(&Usage {
        cache_read: usage.cache_read,
        cache_write: usage.cache_write,
        ..Usage::default()
    });
    report.usage.add(&usage);
    // The session figure after the message's is the running total.
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
    state.answered = true;
    state.failing = false;
    report.api_retrying = None;
}

/// `litellm.RateLimitError: RateLimitError: OpenAIException - …`: the model API refused a
/// message. The status is the one litellm's class stands for, unless the text gives one.
fn api_error(report: &mut AgentReport, state: &mut State, rest: &str) {
    let Some((class, message)) = rest.split_once(':') else {
        return;
    };
    let status = match class {
        "BadRequestError" | "ContextWindowExceededError" | "ContentPolicyViolationError" => 400,
        "AuthenticationError" => 401,
        "PermissionDeniedError" => 403,
        "NotFoundError" => 404,
        "Timeout" => 408,
        "UnprocessableEntityError" => 422,
        "RateLimitError" | "RouterRateLimitError" => 429,
        "BadGatewayError" => 502,
        "ServiceUnavailableError" => 503,
        "APIError" | "APIConnectionError" | "InternalServerError" | "OpenAIError" => 500,
        _ => return,
    };
    let message = message.trim();
    let status = status_in(message).unwrap_or(status);
    // Out of credit is no outage: trying again will not help.
    let status = if message
        .to_ascii_lowercase()
        .contains("insufficient credits")
    {
        402
    } else {
        status
    };
    report.api_status = Some(status);
    report
        .errors
        .push(short(&format!("{class}: {message}"), 2_000));
    state.failing = true;
}

/// `… HTTP 529`, `Error code: 529 - …`, `status code 529`: a status the message names.
fn status_in(message: &str) -> Option<u16> {
    let lower = message.to_ascii_lowercase();
    ["http ", "error code: ", "status code "]
        .iter()
        .filter_map(|marker| {
            let at = lower.find(marker)? + marker.len();
            let digits: String = lower[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .parse::<u16>()
                .ok()
                .filter(|s| (400..600).contains(s))
        })
        .next()
}

/// Whether the stream says the last message was answered (when there is no analytics log).
pub(super) fn finish(report: &mut AgentReport, state: &State) {
    if !state.logged {
        report.finished = state.answered && !state.failing;
    }
}

/// Reads aider's analytics log: its tokens and cost replace the rounded figures its token
/// lines gave (the cache split stays theirs: the log has none), and the last message it
/// started must have been answered.
pub(super) fn analytics(report: &mut AgentReport, state: &mut State, text: &str) {
    state.logged = true;
    let mut usage: Option<Usage> = None;
    let (mut cost, mut answered, mut messages) = (None, false, 0u32);
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match event.get("event").and_then(Value::as_str) {
            Some("message_send_starting") => answered = false,
            Some("message_send") => {
                let props = event.get("properties").unwrap_or(&Value::Null);
                let total = usage.get_or_insert_with(Usage::default);
                total.input = total.input.saturating_add(u64_at(props, "prompt_tokens"));
                total.output = total
                    .output
                    .saturating_add(u64_at(props, "completion_tokens"));
                cost = props.get("total_cost").and_then(Value::as_f64);
                answered = true;
                messages += 1;
            }
            _ => {}
        }
    }
    if let Some(mut usage) = usage {
        let cached = state
            .cache
            .cache_read
            .saturating_add(state.cache.cache_write);
        usage.input = usage.input.saturating_sub(cached);
        usage.cache_read = state.cache.cache_read;
        usage.cache_write = state.cache.cache_write;
        report.usage = usage;
        report.turns = Some(messages);
    }
    // A zero cost for tokens spent is aider not knowing the model's price: baton's table may.
    report.reported_cost_usd = match cost {
        Some(c) if c.is_finite() && c > 0.0 => Some(c),
        _ if report.usage.is_zero() => report.reported_cost_usd,
        _ => None,
    };
    report.finished = answered && messages > 0;
}

/// Reads aider's chat history: the answer is what the assistant wrote after the last user
/// message (`#### ` lines), without aider's own notes (`> ` lines).
pub(super) fn chat(report: &mut AgentReport, text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let Some(last_user) = lines.iter().rposition(|l| l.starts_with("####")) else {
        return;
    };
    let answer: Vec<&str> = lines[last_user + 1..]
        .iter()
        .copied()
        .filter(|l| !(l.starts_with("> ") || *l == ">"))
        .collect();
    let answer = answer.join("\n");
    let answer = answer.trim();
    if !answer.is_empty() {
        report.result = Some(answer.to_owned());
    }
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
    use crate::{AgentReport, EngineKind, PriceTable, StreamParser, Verdict};

    fn parse(lines: &[&str], analytics: Option<&str>, chat: Option<&str>) -> AgentReport {
        let mut parser = StreamParser::new(EngineKind::Aider, "aider", PriceTable::builtin());
        for line in lines {
            parser.line(line.as_bytes());
        }
        parser.records(analytics, chat);
        parser.finish()
    }

    #[test]
    fn cost_lines_add_up() {
        let report = parse(
            &[
                "Model: gpt-4o with diff edit format",
                "Tokens: 2.1k sent, 310 received. Cost: $0.01 message, $0.01 session.",
                "Applied edit to src/lib.rs",
                "Tokens: 1,500 sent, 500 cache hit, 90 received. Cost: $0.004 message, $0.014 session.",
            ],
            None,
            None,
        );
        assert_eq!(report.model.as_deref(), Some("gpt-4o"));
        assert_eq!(report.usage.input, 3100);
        assert_eq!(report.usage.cache_read, 500);
        assert_eq!(report.usage.output, 400);
        assert_eq!(report.reported_cost_usd, Some(0.014));
        assert_eq!(report.malformed_lines, 0);
        assert!(report.finished, "answered, no error after");
        assert_eq!(
            parse(&["Main model: o3 with diff edit format"], None, None)
                .model
                .as_deref(),
            Some("o3")
        );
    }

    #[test]
    fn the_analytics_log_is_exact_and_the_chat_holds_the_answer() {
        let log = r#"{"event": "launched", "properties": {}}
{"event": "message_send_starting", "properties": {}}
{"event": "message_send", "properties": {"prompt_tokens": 1234567, "completion_tokens": 4321, "total_tokens": 1238888, "cost": 3.1, "total_cost": 3.1}}
{"event": "exit", "properties": {"reason": "Completed --message-file"}}"#;
        let chat = "\n# aider chat started at 2026-12-01 15:34:54\n\n> aider --message-file x  \n> Aider v0.86.2  \n\n#### Change it  \n#### please  \n> notes.txt  \n\nDone: notes.txt now says hi.\n\nnotes.txt\n```\nhi\n```\n\n> Tokens: 1.2M sent, 4.3k received.  \n> Applied edit to notes.txt  \n";
        let report = parse(
            &[
                "Tokens: 1.2M sent, 1k cache hit, 4.3k received. Cost: $3.10 message, $3.10 session.",
            ],
            Some(log),
            Some(chat),
        );
        assert_eq!(report.usage.input, 1_233_567);
        assert_eq!(report.usage.cache_read, 1_000);
        assert_eq!(report.usage.output, 4321);
        assert_eq!(report.reported_cost_usd, Some(3.1));
        assert_eq!(report.turns, Some(1));
        assert!(report.finished);
        assert_eq!(
            report.result.as_deref(),
            Some("Done: notes.txt now says hi.\n\nnotes.txt\n```\nhi\n```")
        );
        // No price known to aider: a zero cost is no cost; the table prices gpt-4o.
        let free = log.replace("3.1", "0.0");
        let report = parse(
            &["Model: openai/gpt-4o with diff edit format"],
            Some(&free),
            None,
        );
        assert_eq!(report.reported_cost_usd, None);
        assert!(report.estimated_cost_usd.unwrap() > 3.0);
    }

    #[test]
    fn a_message_the_api_never_answered_is_the_machinery_s_failure() {
        let lines = [
            "litellm.APIError: APIError: OpenAIException - mock model: scripted HTTP 529",
            "Retrying in 0.2 seconds...",
            "litellm.RateLimitError: RateLimitError: OpenAIException - slow down",
            "Retrying in 0.5 seconds...",
        ];
        let log = "{\"event\": \"message_send_starting\", \"properties\": {}}\n";
        let report = parse(&lines, Some(log), None);
        assert!(!report.finished);
        assert_eq!(report.api_status, Some(429));
        assert!(
            report
                .api_retrying
                .as_deref()
                .unwrap()
                .contains("slow down")
        );
        assert!(matches!(
            report.verdict(Some(0), false),
            Verdict::Infrastructure { .. }
        ));
        // The text alone says so too, and names a status it gives.
        let report = parse(&lines[..1], None, None);
        assert_eq!(report.api_status, Some(529));
        assert!(!report.finished);
        // An answer after the error clears it.
        let report = parse(
            &[lines[0], lines[1], "Tokens: 10 sent, 5 received."],
            None,
            None,
        );
        assert!(report.finished);
        assert!(matches!(report.verdict(Some(0), false), Verdict::Succeeded));
        // A refused key is the task's to fix, not an outage; out of credit neither.
        let report = parse(
            &["litellm.AuthenticationError: AuthenticationError: bad key"],
            None,
            None,
        );
        assert_eq!(report.api_status, Some(401));
        assert!(matches!(
            report.verdict(Some(0), false),
            Verdict::Task { .. }
        ));
        let report = parse(
            &["litellm.APIError: APIError: OpenrouterException - Insufficient credits"],
            None,
            None,
        );
        assert_eq!(report.api_status, Some(402));
    }
}
