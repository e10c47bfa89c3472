//! What models cost, for engines that report tokens but no dollars (Codex, Gemini) and for
//! live accounting before an agent's own total arrives.
//!
//! Prices are US dollars per million tokens, as published by the providers when this table was
//! written; a config file can override or extend them. A model matches the longest entry that
//! its name starts with (`gpt-5-codex-2026-01` matches `gpt-5-codex`, then `gpt-5`).

use serde::{Deserialize, Serialize};

use crate::report::Usage;

/// Dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Reading cached input; `None`: a tenth of `input`.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Writing the cache; `None`: 1.25 × `input`.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    const fn new(input: f64, output: f64) -> Self {
        Self {
            input,
            output,
            cache_read: None,
            cache_write: None,
        }
    }

    pub fn cost(&self, usage: &Usage) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(usage.input, self.input)
            + per(usage.output, self.output)
            + per(
                usage.cache_read,
                self.cache_read.unwrap_or(self.input / 10.0),
            )
            + per(
                usage.cache_write,
                self.cache_write.unwrap_or(self.input * 1.25),
            )
    }
}

/// Model-name prefixes and their prices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    entries: Vec<(String, Price)>,
}

/// Shipped prices. Order does not matter: the longest matching prefix wins.
const BUILTIN: &[(&str, Price)] = &[
    ("claude-opus-4", Price::new(15.0, 75.0)),
    ("claude-opus-4-5", Price::new(5.0, 25.0)),
    ("claude-sonnet-4", Price::new(3.0, 15.0)),
    ("claude-haiku-4", Price::new(1.0, 5.0)),
    ("claude-3-5-haiku", Price::new(0.8, 4.0)),
    ("claude-3-7-sonnet", Price::new(3.0, 15.0)),
    ("gpt-5", Price::new(1.25, 10.0)),
    ("gpt-5-mini", Price::new(0.25, 2.0)),
    ("gpt-5-nano", Price::new(0.05, 0.4)),
    ("gpt-4.1", Price::new(2.0, 8.0)),
    ("gpt-4.1-mini", Price::new(0.4, 1.6)),
    ("gpt-4o", Price::new(2.5, 10.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.6)),
    ("o3", Price::new(2.0, 8.0)),
    ("o4-mini", Price::new(1.1, 4.4)),
    ("gemini-2.5-pro", Price::new(1.25, 10.0)),
    ("gemini-2.5-flash", Price::new(0.3, 2.5)),
    ("gemini-2.5-flash-lite", Price::new(0.1, 0.4)),
    ("gemini-3-pro", Price::new(2.0, 12.0)),
];

impl PriceTable {
    /// The prices shipped with baton.
    pub fn builtin() -> Self {
        Self {
            entries: BUILTIN
                .iter()
                .map(|(model, price)| ((*model).to_owned(), *price))
                .collect(),
        }
    }

    /// Adds or replaces the price of models starting with `prefix`.
    pub fn set(&mut self, prefix: &str, price: Price) {
        match self.entries.iter_mut().find(|(p, _)| p == prefix) {
            Some(entry) => entry.1 = price,
            None => self.entries.push((prefix.to_owned(), price)),
        }
    }

    /// The price of `model`, ignoring a provider prefix (`anthropic/claude-…`).
    pub fn price(&self, model: &str) -> Option<&Price> {
        let model = model.rsplit('/').next().unwrap_or(model);
        self.entries
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, price)| price)
    }

    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|price| price.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        let table = PriceTable::builtin();
        assert_eq!(table.price("gpt-5-mini-2026-01").unwrap().input, 0.25);
        assert_eq!(table.price("gpt-5-codex").unwrap().input, 1.25);
        assert_eq!(table.price("openai/gpt-5").unwrap().input, 1.25);
        assert_eq!(table.price("claude-opus-4-5-20251101").unwrap().input, 5.0);
        assert_eq!(table.price("claude-opus-4-1").unwrap().input, 15.0);
        assert!(table.price("llama-3").is_none());
    }

    #[test]
    fn cache_reads_cost_a_tenth() {
        let usage = Usage {
            input: 1_000_000,
            output: 1_000_000,
            cache_read: 1_000_000,
            cache_write: 0,
        };
        let cost = Price::new(3.0, 15.0).cost(&usage);
        assert!((cost - 18.3).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn config_overrides() {
        let mut table = PriceTable::builtin();
        table.set("gpt-5", Price::new(1.0, 1.0));
        table.set("local-", Price::new(0.0, 0.0));
        assert_eq!(table.price("gpt-5").unwrap().output, 1.0);
        assert_eq!(table.price("local-qwen").unwrap().output, 0.0);
    }
}
