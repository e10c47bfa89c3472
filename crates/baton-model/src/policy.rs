use serde::{Deserialize, Serialize};

/// What a failed task does to the rest of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Dependents of the failed task become `blocked`; independent branches go on.
    #[default]
    Block,
    /// Dependents run anyway, as if the task had succeeded.
    Continue,
    /// Start nothing more; running tasks are cancelled and the rest `skipped`.
    Stop,
}

impl OnFailure {
    pub const NAMES: &'static [&'static str] = &["block", "continue", "stop"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "block" => Some(Self::Block),
            "continue" => Some(Self::Continue),
            "stop" => Some(Self::Stop),
            _ => None,
        }
    }
}
