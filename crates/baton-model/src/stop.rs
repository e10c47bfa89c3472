//! Why a run stopped launching tasks, and whose budget an agent went past: facts recorded as
//! types beside the words people read, so that nothing has to parse the words back.

use serde::{Deserialize, Serialize};

/// Why a run stopped launching tasks. Recorded with `run-stopping` (event schema 2) beside
/// its words, and on the run's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopCause {
    /// A task failed under `on_failure = "stop"`.
    TaskFailed,
    /// A hard budget of the run was spent, or the next task could not fit in what was left:
    /// the run goes on when a person gives it more (`baton resume --raise-budget`).
    BudgetSpent,
    /// The run's soft budget was reached: what runs finishes, and the run waits for a person
    /// to approve it or raise the budget.
    SoftBudget,
    /// A person stopped it: Ctrl-C, `baton cancel`, or a stop while the run's checks ran.
    Cancelled,
    /// A person insisted (a second Ctrl-C): running attempts were killed at once.
    Killed,
    /// Its driver died, and the run was cancelled rather than resumed.
    DriverDied,
    /// The run's remote could not be fetched from or published to.
    Remote,
}

impl StopCause {
    /// Every cause.
    pub const ALL: [Self; 7] = [
        Self::TaskFailed,
        Self::BudgetSpent,
        Self::SoftBudget,
        Self::Cancelled,
        Self::Killed,
        Self::DriverDied,
        Self::Remote,
    ];

    /// Its name in the event log and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TaskFailed => "task-failed",
            Self::BudgetSpent => "budget-spent",
            Self::SoftBudget => "soft-budget",
            Self::Cancelled => "cancelled",
            Self::Killed => "killed",
            Self::DriverDied => "driver-died",
            Self::Remote => "remote",
        }
    }

    /// The cause named `name` ([`StopCause::as_str`]).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|cause| cause.as_str() == name)
    }

    /// The cause of a `run-stopping` event: the one it records, or, for an event written
    /// before event schema 2 (which recorded only words), the one its words give. This is the
    /// only place words are read back, and only for those old logs.
    pub fn of(reason: &str, recorded: Option<Self>) -> Self {
        recorded.unwrap_or_else(|| Self::from_words(reason))
    }

    fn from_words(reason: &str) -> Self {
        if reason.starts_with("budget spent") {
            Self::BudgetSpent
        } else if reason.contains("baton approve") {
            Self::SoftBudget
        } else if reason.starts_with("a task failed") {
            Self::TaskFailed
        } else if reason == "killed" {
            Self::Killed
        } else if reason.contains("driver died") {
            Self::DriverDied
        } else if reason.starts_with("cancelled") {
            Self::Cancelled
        } else {
            // The only other words a schema-1 log holds: a remote's git error.
            Self::Remote
        }
    }
}

/// Why a run stopped launching tasks, in words and as a fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    pub cause: StopCause,
    /// For people: what ran out, what to type.
    pub reason: String,
}

/// Whose hard budget an agent went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetScope {
    /// The task's own `budget`.
    Task,
    /// The run's `budget`: what all its agents spent together.
    Run,
}

impl BudgetScope {
    /// The scope of an `over-budget` outcome: the one it records, or, for one recorded before
    /// event schema 2, the one its `limit` words give (a run's began with `run `).
    pub fn of(limit: &str, recorded: Option<Self>) -> Self {
        recorded.unwrap_or(if limit.starts_with("run ") {
            Self::Run
        } else {
            Self::Task
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_reads_back_by_its_name() {
        for cause in StopCause::ALL {
            assert_eq!(StopCause::parse(cause.as_str()), Some(cause));
            assert_eq!(
                serde_json::to_value(cause).unwrap(),
                serde_json::Value::from(cause.as_str())
            );
        }
    }

    /// The words schema-1 logs hold, as the dispatcher of that time wrote them.
    #[test]
    fn an_old_logs_words_give_its_cause() {
        for (words, cause) in [
            ("budget spent: $0.30 of $0.30", StopCause::BudgetSpent),
            (
                "budget spent: `b` needs about $0.20, and $0.10 is left",
                StopCause::BudgetSpent,
            ),
            (
                "soft budget $0.20 reached ($0.21); the run waits for `baton approve r` or \
                 `baton resume r --raise-budget USD`",
                StopCause::SoftBudget,
            ),
            (
                "a task failed and on_failure is \"stop\"",
                StopCause::TaskFailed,
            ),
            ("cancelled", StopCause::Cancelled),
            ("cancelled while the run's checks ran", StopCause::Cancelled),
            ("killed", StopCause::Killed),
            ("cancelled after its driver died", StopCause::DriverDied),
            ("cannot fetch from origin: …", StopCause::Remote),
        ] {
            assert_eq!(StopCause::of(words, None), cause, "{words}");
            assert_eq!(
                StopCause::of(words, Some(StopCause::Killed)),
                StopCause::Killed
            );
        }
        assert_eq!(
            BudgetScope::of("run budget $1.00 reached ($1.02)", None),
            BudgetScope::Run
        );
        assert_eq!(
            BudgetScope::of("task budget $0.50 reached", None),
            BudgetScope::Task
        );
        assert_eq!(
            BudgetScope::of("run budget", Some(BudgetScope::Task)),
            BudgetScope::Task
        );
    }
}
