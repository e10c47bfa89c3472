//! What an agent's attempt used and cost, as recorded with the attempt.

use serde::{Deserialize, Serialize};

/// An agent attempt's accounting. Counts the engine did not report are zero or `None`;
/// nothing is made up, except `cost_usd` priced from baton's table when `cost_estimated`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The agent's session, for a follow-up attempt to continue it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// `cost_usd` comes from baton's price table, not from the agent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    #[serde(default)]
    pub tool_calls: u32,
    /// Tools the agent asked for and was refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<String>,
    /// Lines of the agent's output that were not what its engine prints.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub malformed_lines: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl AgentUsage {
    /// Adds what an earlier part of the same attempt used (a fix round's predecessor): the
    /// counts and costs add up, the model and session stay this part's.
    pub fn add_earlier(&mut self, earlier: &AgentUsage) {
        self.input_tokens += earlier.input_tokens;
        self.output_tokens += earlier.output_tokens;
        self.cache_read_tokens += earlier.cache_read_tokens;
        self.cache_write_tokens += earlier.cache_write_tokens;
        self.cost_usd = match (earlier.cost_usd, self.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.tool_calls += earlier.tool_calls;
        self.cost_estimated |= earlier.cost_estimated;
    }

    /// All tokens, cache reads included.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}
