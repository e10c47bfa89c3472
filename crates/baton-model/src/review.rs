//! A reviewer agent's judgement of a task's work against its `acceptance` criteria.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a reviewer concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// The work meets every criterion.
    Verified,
    /// It meets them, with reservations worth reading: the run succeeds with warnings.
    VerifiedWithWarnings,
    /// It does not: the attempt fails (a fix round is sent the reasons, while there is one).
    Rejected,
    /// The reviewer could not tell: a person decides.
    Inconclusive,
    /// The reviewer says a person must decide.
    NeedsHuman,
}

impl ReviewVerdict {
    pub const NAMES: &[&str] = &[
        "verified",
        "verified_with_warnings",
        "rejected",
        "inconclusive",
        "needs_human",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verified => "verified",
            Self::VerifiedWithWarnings => "verified_with_warnings",
            Self::Rejected => "rejected",
            Self::Inconclusive => "inconclusive",
            Self::NeedsHuman => "needs_human",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "verified" => Self::Verified,
            "verified_with_warnings" => Self::VerifiedWithWarnings,
            "rejected" => Self::Rejected,
            "inconclusive" => Self::Inconclusive,
            "needs_human" => Self::NeedsHuman,
            _ => return None,
        })
    }

    /// Whether the task's work is accepted.
    pub fn accepts(self) -> bool {
        matches!(self, Self::Verified | Self::VerifiedWithWarnings)
    }

    /// Whether a person must decide.
    pub fn asks_a_person(self) -> bool {
        matches!(self, Self::Inconclusive | Self::NeedsHuman)
    }
}

impl fmt::Display for ReviewVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict with the reviewer's reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub verdict: ReviewVerdict,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}
