//! What an agent said about its attempt, and what baton concludes from it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Tokens an attempt used. Cache reads are counted apart: they inflate token counts while
/// costing a tenth of fresh input, which is why budgets are kept in dollars first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Fresh input tokens (not read from a cache).
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// Saturating, as is [`Usage::add`]: the counts come from an agent's stream, which may
    /// say anything.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
    }

    pub fn is_zero(&self) -> bool {
        self.total() == 0
    }
}

/// Everything baton learned from one attempt's stream. Fields the engine did not report stay
/// `None` (or empty); nothing is made up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentReport {
    /// The engine's name (`claude`, `codex`, …).
    pub engine: String,
    /// The final message: the task's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The agent said it finished (a `result` line, a completed turn).
    #[serde(default)]
    pub finished: bool,
    /// The agent reported its own run as an error.
    #[serde(default)]
    pub is_error: bool,
    /// How the agent says it ended: `success`, `error_max_turns`, `error_during_execution`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// The agent's own error texts, in order (API errors, failed turns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// The HTTP status of the model API's error, where the agent gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_status: Option<u16>,
    /// How long the API asked to wait before trying again.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub retry_after: Option<Duration>,
    #[serde(default)]
    pub usage: Usage,
    /// What the agent says it cost; `None` when the engine does not say (then the price table
    /// gives [`AgentReport::cost_usd`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_cost_usd: Option<f64>,
    /// The cost priced from the table when the agent reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// Tool calls the agent made.
    #[serde(default)]
    pub tool_calls: u32,
    /// Tools the agent was refused (headless, nobody could say yes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<String>,
    /// Lines that were not what the engine prints: not JSON, or too long to read.
    #[serde(default)]
    pub malformed_lines: u32,
    /// The first malformed line's start, for the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_malformed: Option<String>,
    /// The agent was retrying its model API when its stream last spoke (Claude Code's
    /// `api_retry` lines), with the error it was retrying: an attempt whose time ran out then
    /// was cut short by the API, not by the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_retrying: Option<String>,
    /// The agent's latest tool call or edit, in a few words (`Edit …/src/lib.rs`,
    /// `Bash cargo test`): for the live view, not the record.
    #[serde(skip)]
    pub doing: Option<String>,
}

impl AgentReport {
    /// The attempt's cost: the agent's own figure, else the table's estimate.
    pub fn cost_usd(&self) -> Option<f64> {
        self.reported_cost_usd.or(self.estimated_cost_usd)
    }

    /// Whether the attempt succeeded, given how its process ended (`exit_code`: `Some` when it
    /// exited by itself; `None` when it was killed, including by baton after the result).
    ///
    /// An agent's own word is necessary, not sufficient: success needs a clean result (seen,
    /// not an error, subtype `success` where the engine has subtypes) AND a process that either
    /// exited 0 or was reaped by baton after that result.
    pub fn verdict(&self, exit_code: Option<i32>, reaped_after_result: bool) -> Verdict {
        let clean_exit = exit_code == Some(0) || reaped_after_result;
        let clean_result = self.finished
            && !self.is_error
            && self.subtype.as_deref().is_none_or(|s| s == "success");
        if clean_result && clean_exit {
            return Verdict::Succeeded;
        }
        let message = self.error_text(exit_code);
        if self.is_infrastructure() {
            Verdict::Infrastructure {
                message,
                retry_after: self.retry_after,
            }
        } else {
            Verdict::Task {
                reason: self.reason(),
                message,
            }
        }
    }

    /// Whether a failure is the machinery's: the API could not be reached, was overloaded or
    /// rate-limited, or the agent died without saying why.
    fn is_infrastructure(&self) -> bool {
        if self.out_of_credit() {
            // No outage: waiting will not bring the credit back.
            return false;
        }
        if let Some(status) = self.api_status {
            return status == 408 || status == 429 || status >= 500;
        }
        if !self.finished && self.errors.is_empty() {
            // Died without a word: a crash, an OOM kill, a CLI that could not start.
            return true;
        }
        self.errors.iter().chain(self.result.iter()).any(|text| {
            let text = text.to_ascii_lowercase();
            INFRASTRUCTURE_WORDS.iter().any(|w| text.contains(w))
        })
    }

    /// The account behind the agent is out of credit or quota (HTTP 402, or the providers'
    /// own words: OpenAI answers 429 `insufficient_quota`).
    pub fn out_of_credit(&self) -> bool {
        self.api_status == Some(402)
            || self.errors.iter().chain(self.result.iter()).any(|text| {
                let text = text.to_ascii_lowercase();
                CREDIT_WORDS.iter().any(|w| text.contains(w))
            })
    }

    /// A short name for a task failure.
    fn reason(&self) -> String {
        if self.out_of_credit() {
            // baton_model::OUT_OF_CREDIT: another engine may do it (`fallback`).
            return "out_of_credit".to_owned();
        }
        match self.subtype.as_deref() {
            Some(s) if s != "success" => s.to_owned(),
            _ if !self.permission_denials.is_empty() => "permission_denied".to_owned(),
            _ if self.is_error => "agent_error".to_owned(),
            _ if !self.finished => "no_result".to_owned(),
            _ => "exit_status".to_owned(),
        }
    }

    fn error_text(&self, exit_code: Option<i32>) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(last) = self.errors.last() {
            parts.push(last.clone());
        } else if self.is_error
            && let Some(result) = &self.result
        {
            parts.push(result.clone());
        }
        if let Some(subtype) = self.subtype.as_deref().filter(|s| *s != "success") {
            parts.push(format!("ended as {subtype}"));
        }
        if !self.permission_denials.is_empty() {
            parts.push(format!("denied: {}", self.permission_denials.join(", ")));
        }
        if !self.finished {
            parts.push(match exit_code {
                Some(code) => format!("the agent exited with {code} without a final result"),
                None => "the agent ended without a final result".to_owned(),
            });
        } else if (self.is_error || parts.is_empty())
            && let Some(code) = exit_code.filter(|c| *c != 0)
        {
            parts.push(format!("exit {code}"));
        }
        if self.malformed_lines > 0 {
            parts.push(format!(
                "{} line(s) of its output were not what the engine prints",
                self.malformed_lines
            ));
        }
        if parts.is_empty() {
            parts.push("the agent did not finish cleanly".to_owned());
        }
        let mut text = parts.join("; ");
        if text.len() > MAX_ERROR_TEXT {
            let mut cut = MAX_ERROR_TEXT;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        text
    }
}

/// Longest error text kept: enough for an API error, not a whole transcript.
const MAX_ERROR_TEXT: usize = 2000;

/// Words in an agent's error text that mean its model API failed, not the task.
const INFRASTRUCTURE_WORDS: &[&str] = &[
    "overloaded",
    "rate limit",
    "rate_limit",
    "too many requests",
    "connection error",
    "connection refused",
    "econnrefused",
    "econnreset",
    "etimedout",
    "stream disconnected",
    "service unavailable",
    "internal server error",
    "bad gateway",
    "gateway timeout",
    "api error: 5",
    "api error: 429",
    "request timed out",
    "fetch failed",
    // Codex's own text for any HTTP 500 of the model API.
    "experiencing high demand",
];

/// Words in an agent's error text that mean its account has no credit left.
const CREDIT_WORDS: &[&str] = &[
    "credit balance is too low",
    "insufficient_quota",
    "exceeded your current quota",
    "insufficient credits",
    "out of credits",
];

/// What an attempt amounted to.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Succeeded,
    /// The machinery failed (model API unreachable, overloaded, rate-limited; the agent
    /// crashed): retried with backoff, no sooner than `retry_after`.
    Infrastructure {
        message: String,
        retry_after: Option<Duration>,
    },
    /// The agent finished with an error of its own (hit its turn limit, failed a tool, was
    /// denied permissions): retried only if the task says so.
    Task {
        reason: String,
        message: String,
    },
}

mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_f64(d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let secs = Option::<f64>::deserialize(d)?;
        Ok(secs
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(86_400.0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> AgentReport {
        AgentReport {
            engine: "claude".into(),
            result: Some("done".into()),
            finished: true,
            subtype: Some("success".into()),
            ..AgentReport::default()
        }
    }

    #[test]
    fn success_needs_the_result_and_a_clean_exit() {
        assert_eq!(clean().verdict(Some(0), false), Verdict::Succeeded);
        // Reaped by baton after its result: the hang after `result` is a known CLI bug.
        assert_eq!(clean().verdict(None, true), Verdict::Succeeded);
        // A clean result and a failing exit code: not trusted.
        assert!(matches!(
            clean().verdict(Some(1), false),
            Verdict::Task { .. }
        ));
        let mut unfinished = clean();
        unfinished.finished = false;
        assert!(matches!(
            unfinished.verdict(Some(0), false),
            Verdict::Infrastructure { .. }
        ));
    }

    #[test]
    fn an_error_subtype_is_the_task_s_failure() {
        let mut report = clean();
        report.subtype = Some("error_max_turns".into());
        report.is_error = true;
        match report.verdict(Some(1), false) {
            Verdict::Task { reason, message } => {
                assert_eq!(reason, "error_max_turns");
                assert!(message.contains("error_max_turns"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_account_out_of_credit_is_neither_an_outage_nor_the_task_s_doing() {
        for (status, text) in [
            (
                Some(429),
                "You exceeded your current quota (insufficient_quota)",
            ),
            (
                Some(400),
                "Your credit balance is too low to access the Anthropic API.",
            ),
            (Some(402), "payment required"),
        ] {
            let mut report = clean();
            report.is_error = true;
            report.api_status = status;
            report.result = Some(text.into());
            match report.verdict(Some(1), false) {
                Verdict::Task { reason, .. } => assert_eq!(reason, "out_of_credit", "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn overload_and_rate_limits_are_infrastructure() {
        let mut report = clean();
        report.is_error = true;
        report.result = Some("API Error: 529 {\"type\":\"overloaded_error\"}".into());
        assert!(matches!(
            report.verdict(Some(1), false),
            Verdict::Infrastructure { .. }
        ));
        let mut report = clean();
        report.is_error = true;
        report.api_status = Some(429);
        report.retry_after = Some(Duration::from_secs(7));
        assert_eq!(
            report.verdict(Some(1), false),
            Verdict::Infrastructure {
                message: "done; exit 1".into(),
                retry_after: Some(Duration::from_secs(7))
            }
        );
    }

    #[test]
    fn denials_are_named() {
        let mut report = clean();
        report.is_error = true;
        report.permission_denials = vec!["Bash".into()];
        match report.verdict(Some(0), false) {
            Verdict::Task { reason, message } => {
                assert_eq!(reason, "permission_denied");
                assert!(message.contains("denied: Bash"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
