//! What agent tasks used and cost, summed per task, per engine and model, and per run.

use baton_model::AgentUsage;
use serde::{Deserialize, Serialize};

/// Tokens and dollars. `cost_usd` sums what was priced; `unpriced_attempts` counts attempts
/// whose model has no price (so the sum is a lower bound), `estimated` says that some of it
/// came from baton's price table rather than the agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub attempts: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced_attempts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Spend {
    pub fn add(&mut self, usage: &AgentUsage) {
        self.attempts += 1;
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cache_read_tokens += usage.cache_read_tokens;
        self.cache_write_tokens += usage.cache_write_tokens;
        match usage.cost_usd {
            Some(cost) => self.cost_usd += cost,
            None => self.unpriced_attempts += 1,
        }
        self.estimated |= usage.cost_estimated;
    }

    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// Whether its attempts reported nothing at all: no tokens, no cost (an engine that does
    /// not say, such as a `kind = "command"` one).
    pub fn reported_nothing(&self) -> bool {
        self.tokens() == 0 && self.cost_usd == 0.0 && self.unpriced_attempts > 0
    }

    /// `$0.42`, `≈$2.25` when estimated, `≥$0.10` when some attempts were not priced.
    pub fn cost_text(&self) -> String {
        let prefix = if self.unpriced_attempts > 0 {
            "≥"
        } else if self.estimated {
            "≈"
        } else {
            ""
        };
        format!("{prefix}{}", format_usd(self.cost_usd))
    }
}

/// A run's spend, in all and by engine and model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSpend {
    #[serde(flatten)]
    pub total: Spend,
    pub by_model: Vec<ModelSpend>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpend {
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(flatten)]
    pub spend: Spend,
}

impl RunSpend {
    pub fn add(&mut self, usage: &AgentUsage) {
        self.total.add(usage);
        let entry = match self
            .by_model
            .iter_mut()
            .position(|m| m.engine == usage.engine && m.model == usage.model)
        {
            Some(i) => &mut self.by_model[i],
            None => {
                self.by_model.push(ModelSpend {
                    engine: usage.engine.clone(),
                    model: usage.model.clone(),
                    spend: Spend::default(),
                });
                self.by_model.last_mut().expect("just pushed")
            }
        };
        entry.spend.add(usage);
    }

    /// One line for the summary: `spent $0.42 on 12.3k tokens: claude/claude-sonnet-4-5 $0.40, …`;
    /// an engine that reported no tokens and no cost says so (`fake: not reported`) rather
    /// than `fake/? ≥$0.00`, and a run of only such engines says that alone.
    pub fn line(&self) -> String {
        let mut parts: Vec<String> = self
            .by_model
            .iter()
            .map(|m| {
                let name = match &m.model {
                    Some(model) => format!("{}/{model}", m.engine),
                    None => m.engine.clone(),
                };
                if m.spend.reported_nothing() {
                    format!("{name}: not reported")
                } else {
                    format!("{name} {}", m.spend.cost_text())
                }
            })
            .collect();
        parts.sort();
        if self.total.reported_nothing() {
            let engines: std::collections::BTreeSet<&str> =
                self.by_model.iter().map(|m| m.engine.as_str()).collect();
            let engines: Vec<&str> = engines.into_iter().collect();
            return format!(
                "spend not reported: {} said nothing of tokens or cost",
                engines.join(", ")
            );
        }
        // What a provider's prompt cache served, and (when any) what was written to it: the
        // shared start of sibling tasks' prompts is what it can serve.
        let writes = match self.total.cache_write_tokens {
            0 => String::new(),
            n => format!(", {} written to the cache", format_tokens(n)),
        };
        format!(
            "spent {} on {} tokens ({} in, {} out, {} cached{writes}): {}",
            self.total.cost_text(),
            format_tokens(self.total.tokens()),
            format_tokens(self.total.input_tokens),
            format_tokens(self.total.output_tokens),
            format_tokens(self.total.cache_read_tokens),
            parts.join(", ")
        )
    }
}

/// `$20.00 and 2M tokens`, `$5.00`, `no limit`.
pub fn budget_text(usd: Option<f64>, tokens: Option<u64>) -> String {
    match (usd, tokens) {
        (Some(usd), Some(tokens)) => {
            format!("{} and {} tokens", format_usd(usd), format_tokens(tokens))
        }
        (Some(usd), None) => format_usd(usd),
        (None, Some(tokens)) => format!("{} tokens", format_tokens(tokens)),
        (None, None) => "no limit".to_owned(),
    }
}

/// `512`, `12.3k`, `4.56M`.
pub fn format_tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => trim(format!("{:.1}", n as f64 / 1e3)) + "k",
        _ => trim(format!("{:.2}", n as f64 / 1e6)) + "M",
    }
}

pub use baton_model::format_usd;

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_tokens(512), "512");
        assert_eq!(format_tokens(12_340), "12.3k");
        assert_eq!(format_tokens(2_000), "2k");
        assert_eq!(format_tokens(4_560_000), "4.56M");
        assert_eq!(format_usd(0.0042), "$0.0042");
        assert_eq!(format_usd(0.42), "$0.42");
        assert_eq!(format_usd(0.0), "$0.00");
    }

    #[test]
    fn the_line_shows_what_the_cache_served_and_took() {
        let mut spend = RunSpend::default();
        spend.add(&AgentUsage {
            engine: "claude".into(),
            model: Some("sonnet".into()),
            input_tokens: 100,
            output_tokens: 10,
            cache_read_tokens: 4_000,
            cache_write_tokens: 1_200,
            cost_usd: Some(0.01),
            ..AgentUsage::default()
        });
        assert_eq!(
            spend.line(),
            "spent $0.01 on 5.3k tokens (100 in, 10 out, 4k cached, 1.2k written to the cache): claude/sonnet $0.01"
        );
    }

    #[test]
    fn sums_by_engine_and_model() {
        let usage = |engine: &str, model: &str, cost: Option<f64>, estimated| AgentUsage {
            engine: engine.into(),
            model: Some(model.into()),
            input_tokens: 100,
            output_tokens: 10,
            cost_usd: cost,
            cost_estimated: estimated,
            ..AgentUsage::default()
        };
        let mut spend = RunSpend::default();
        spend.add(&usage("claude", "sonnet", Some(0.5), false));
        spend.add(&usage("claude", "sonnet", Some(0.25), false));
        spend.add(&usage("codex", "gpt-5", Some(2.0), true));
        spend.add(&usage("codex", "local", None, false));
        assert_eq!(spend.total.attempts, 4);
        assert_eq!(spend.total.cost_usd, 2.75);
        assert_eq!(spend.by_model.len(), 3);
        assert_eq!(spend.by_model[0].spend.cost_text(), "$0.75");
        assert_eq!(spend.by_model[1].spend.cost_text(), "≈$2.00");
        assert_eq!(spend.total.cost_text(), "≥$2.75");
        assert!(
            spend.line().starts_with("spent ≥$2.75 on 440 tokens"),
            "{}",
            spend.line()
        );
    }

    /// An engine that reports nothing (a `kind = "command"` one) is said to, not shown as
    /// `fake/? ≥$0.00 · 0 tokens`; beside one that reports, it is named as not reporting.
    #[test]
    fn an_engine_that_reports_nothing_says_so() {
        let silent = AgentUsage {
            engine: "fake".into(),
            ..AgentUsage::default()
        };
        let mut spend = RunSpend::default();
        spend.add(&silent);
        spend.add(&AgentUsage {
            model: Some("big".into()),
            ..silent.clone()
        });
        assert_eq!(
            spend.line(),
            "spend not reported: fake said nothing of tokens or cost"
        );
        spend.add(&AgentUsage {
            engine: "claude".into(),
            model: Some("sonnet".into()),
            input_tokens: 100,
            cost_usd: Some(0.01),
            ..AgentUsage::default()
        });
        assert_eq!(
            spend.line(),
            "spent ≥$0.01 on 100 tokens (100 in, 0 out, 0 cached): claude/sonnet $0.01, \
             fake/big: not reported, fake: not reported"
        );
    }
}
