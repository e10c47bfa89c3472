use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a task is in its life.
///
/// `pending → ready → running → succeeded | failed | timed_out | cancelled`, plus `blocked` (a
/// dependency failed under `on_failure = "block"`), `skipped` (the run stopped before the task
/// could start), `waiting` (approval) and `needs_human`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Pending,
    Ready,
    Running,
    Waiting,
    Succeeded,
    /// Succeeded, and its acceptance reviewer had reservations (`verified_with_warnings`).
    /// What a run's result says of such a task; to the scheduler and the record it succeeded.
    SucceededWithWarnings,
    Failed,
    TimedOut,
    Cancelled,
    Blocked,
    Skipped,
    NeedsHuman,
}

impl TaskState {
    pub const ALL: [TaskState; 12] = [
        Self::Pending,
        Self::Ready,
        Self::Running,
        Self::Waiting,
        Self::Succeeded,
        Self::SucceededWithWarnings,
        Self::Failed,
        Self::TimedOut,
        Self::Cancelled,
        Self::Blocked,
        Self::Skipped,
        Self::NeedsHuman,
    ];

    /// A terminal state never changes again within one run attempt.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            Self::Pending | Self::Ready | Self::Running | Self::Waiting
        )
    }

    /// Terminal and not a success: what `on_failure` reacts to.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::TimedOut | Self::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Ready => "ready",
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Succeeded => "succeeded",
            Self::SucceededWithWarnings => "succeeded_with_warnings",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::Blocked => "blocked",
            Self::Skipped => "skipped",
            Self::NeedsHuman => "needs_human",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Submitted (`baton run --detach`) and not yet taken by a worker: no process drives it
    /// and none has to; the first worker free to coordinate it starts it.
    Queued,
    Running,
    Succeeded,
    SucceededWithWarnings,
    Failed,
    Blocked,
    NeedsHuman,
    Cancelled,
    /// The process driving the run died; `baton resume` continues it.
    Interrupted,
    /// Paused for a person: its spend reached the budget's soft limit. `baton approve RUN`
    /// (or `baton resume RUN --raise-budget USD`) continues it.
    Waiting,
}

impl RunState {
    pub const ALL: [RunState; 10] = [
        Self::Queued,
        Self::Running,
        Self::Succeeded,
        Self::SucceededWithWarnings,
        Self::Failed,
        Self::Blocked,
        Self::NeedsHuman,
        Self::Cancelled,
        Self::Interrupted,
        Self::Waiting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::SucceededWithWarnings => "succeeded_with_warnings",
            Self::Failed => "failed",
            Self::Blocked => "blocked",
            Self::NeedsHuman => "needs_human",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
            Self::Waiting => "waiting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }

    pub fn is_success(self) -> bool {
        matches!(self, Self::Succeeded | Self::SucceededWithWarnings)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for state in TaskState::ALL {
            assert_eq!(TaskState::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_string(&state).unwrap(),
                format!("\"{}\"", state.as_str())
            );
        }
        for state in RunState::ALL {
            assert_eq!(RunState::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_string(&state).unwrap(),
                format!("\"{}\"", state.as_str())
            );
        }
    }
}
