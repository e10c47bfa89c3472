use std::fmt;

use serde::{Deserialize, Serialize};

/// The `reason` of an agent whose account is out of credit ([`Outcome::is_out_of_credit`]).
pub const OUT_OF_CREDIT: &str = "out_of_credit";

/// How one attempt ended. Each way is its own variant so that nothing downstream has to guess
/// from a bare exit code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    /// The process exited by itself with this code.
    Exited { code: i32 },
    /// The process was killed by a signal that baton did not send.
    Signaled { signal: i32, name: String },
    /// The attempt ran past its timeout; baton terminated its process group.
    TimedOut,
    /// The process could not be started at all (the machinery's failure: retried).
    SpawnFailed { error: String },
    /// The attempt could not be started for a reason another try cannot change: a template
    /// that does not render, an engine that is not defined, a NUL byte in its command line.
    /// Not retried.
    LaunchFailed { error: String },
    /// baton stopped the attempt: Ctrl-C, `baton cancel`, or the run stopping on a failure.
    Cancelled,
    /// The process exited, but a descendant kept its output pipes open afterwards; baton killed
    /// the process group. `code` is the leader's own exit code.
    Leaked { code: i32 },
    /// The process driving the run died while this attempt was in flight.
    Interrupted,
    /// The attempt printed nothing for `after_ms` (its `idle_timeout`); baton terminated its
    /// process group. A hung agent CLI, not a task that failed: retried.
    IdleTimeout { after_ms: u64 },
    /// An agent's attempt that did not end with a clean result. `class` says whose failure it
    /// was: the model API's (unreachable, overloaded, rate-limited) or the agent's own (an
    /// error result, its turn limit). `reason` is short (`error_max_turns`); `message` is the
    /// agent's own words.
    AgentFailed {
        class: FailureClass,
        reason: String,
        message: String,
        /// The wait the API asked for before another try.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// The task's worktree could not start from its dependencies' results: merging them
    /// conflicted. A person must resolve it (`needs_human`); not retried.
    MergeConflict {
        /// The dependency whose result did not merge.
        incoming: String,
        files: Vec<String>,
    },
    /// The attempt itself succeeded, but one of the task's `verify` checks did not.
    VerifyFailed { command: String, detail: String },
    /// The task changed files outside its `scope` under `scope_policy = "enforce"`.
    OutOfScope { files: Vec<String> },
    /// A planner (`expand = true`) answered with a plan baton cannot take: `problems` things
    /// are wrong with it, named in the attempt's output.
    InvalidPlan { problems: u32 },
    /// The task's work was judged against its `acceptance` criteria and rejected, or the
    /// reviewer left it to a person (`verdict` `inconclusive` or `needs_human`: the task then
    /// needs a person). The reasons are in the attempt's `reviewed` event.
    Reviewed { verdict: crate::ReviewVerdict },
    /// baton stopped an agent that spent past a hard budget: the task's own (`limit` says
    /// which) or the run's. Not retried: another attempt would spend more.
    OverBudget {
        /// The limit, in words.
        limit: String,
        /// Whose limit: always written since event schema 2; read an older outcome's with
        /// [`crate::BudgetScope::of`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<crate::BudgetScope>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spent_usd: Option<f64>,
        tokens: u64,
    },
}

impl Outcome {
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Exited { code: 0 })
    }

    /// Whether a failure is the task's own or the machinery's. Infrastructure failures are
    /// retried; task failures are too for shell tasks, whose exit code is all we know.
    pub fn failure_class(&self) -> Option<FailureClass> {
        match self {
            Self::Exited { code: 0 } => None,
            Self::Exited { .. } | Self::Signaled { .. } | Self::TimedOut | Self::Leaked { .. } => {
                Some(FailureClass::Task)
            }
            Self::SpawnFailed { .. } | Self::Interrupted | Self::IdleTimeout { .. } => {
                Some(FailureClass::Infrastructure)
            }
            Self::AgentFailed { class, .. } => Some(*class),
            Self::OverBudget { .. } => Some(FailureClass::Task),
            // Not failures to retry: the same merge conflicts again, the same template fails
            // to render again.
            Self::MergeConflict { .. } | Self::LaunchFailed { .. } => None,
            Self::OutOfScope { .. } | Self::VerifyFailed { .. } | Self::InvalidPlan { .. } => {
                Some(FailureClass::Task)
            }
            // Rejected: the agent's work, which another attempt from scratch may do better (a
            // task's retries say whether it gets one); left to a person: not retried.
            Self::Reviewed { verdict } if verdict.asks_a_person() => None,
            Self::Reviewed { .. } => Some(FailureClass::Task),
            Self::Cancelled => None,
        }
    }

    /// An agent whose account is out of credit: no outage, and not the task's fault either;
    /// waiting will not help, another engine may.
    pub fn is_out_of_credit(&self) -> bool {
        matches!(self, Self::AgentFailed { reason, .. } if reason == OUT_OF_CREDIT)
    }

    /// How long the failure asks to wait before another attempt.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::AgentFailed {
                retry_after_ms: Some(ms),
                ..
            } => Some(std::time::Duration::from_millis(*ms)),
            _ => None,
        }
    }

    /// The exit code, when the process exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Self::Exited { code } | Self::Leaked { code } => Some(*code),
            _ => None,
        }
    }

    pub fn signaled(signal: i32) -> Self {
        Self::Signaled {
            signal,
            name: signal_name(signal).to_owned(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited { code } => write!(f, "exit {code}"),
            Self::Signaled { signal, name } => write!(f, "signal {signal} (SIG{name})"),
            Self::TimedOut => f.write_str("timed out"),
            Self::SpawnFailed { error } => write!(f, "failed to start: {error}"),
            Self::LaunchFailed { error } => write!(f, "cannot start: {error}"),
            Self::Cancelled => f.write_str("cancelled"),
            Self::Leaked { code } => write!(f, "exit {code}, leaked a process holding its output"),
            Self::Interrupted => f.write_str("interrupted"),
            Self::IdleTimeout { after_ms } => write!(
                f,
                "no output for {}",
                crate::format_duration(std::time::Duration::from_millis(*after_ms))
            ),
            Self::AgentFailed {
                class: FailureClass::Infrastructure,
                message,
                ..
            } => write!(f, "the agent could not work: {message}"),
            Self::AgentFailed {
                class: FailureClass::Task,
                reason,
                message,
                ..
            } => write!(f, "agent failed ({reason}): {message}"),
            Self::VerifyFailed { command, detail } => {
                write!(f, "check `{command}` failed: {detail}")
            }
            Self::OutOfScope { files } => {
                write!(f, "changed files outside its scope: {}", files.join(", "))
            }
            Self::Reviewed { verdict } if verdict.asks_a_person() => {
                write!(f, "its reviewer left it to a person ({verdict})")
            }
            Self::Reviewed { verdict } => write!(f, "its reviewer {verdict} its work"),
            Self::InvalidPlan { problems } => write!(
                f,
                "its plan is not valid ({problems} problem{})",
                if *problems == 1 { "" } else { "s" }
            ),
            Self::MergeConflict { incoming, files } => write!(
                f,
                "its dependencies' changes conflict: merging `{incoming}` conflicts in {}",
                files.join(", ")
            ),
            Self::OverBudget {
                limit,
                spent_usd,
                tokens,
                ..
            } => {
                write!(f, "over budget ({limit}): stopped after {tokens} tokens")?;
                match spent_usd {
                    Some(usd) => write!(f, ", ${usd:.4}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Who is to blame for a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The machinery failed (could not spawn, API unreachable, baton crashed): retried.
    Infrastructure,
    /// The task itself failed.
    Task,
}

/// The conventional name of a Linux signal number, without the `SIG` prefix.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "HUP",
        2 => "INT",
        3 => "QUIT",
        4 => "ILL",
        5 => "TRAP",
        6 => "ABRT",
        7 => "BUS",
        8 => "FPE",
        9 => "KILL",
        10 => "USR1",
        11 => "SEGV",
        12 => "USR2",
        13 => "PIPE",
        14 => "ALRM",
        15 => "TERM",
        16 => "STKFLT",
        17 => "CHLD",
        18 => "CONT",
        19 => "STOP",
        20 => "TSTP",
        21 => "TTIN",
        22 => "TTOU",
        23 => "URG",
        24 => "XCPU",
        25 => "XFSZ",
        26 => "VTALRM",
        27 => "PROF",
        28 => "WINCH",
        29 => "IO",
        30 => "PWR",
        31 => "SYS",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_serializes_tagged() {
        let all = vec![
            Outcome::Exited { code: 3 },
            Outcome::signaled(15),
            Outcome::TimedOut,
            Outcome::SpawnFailed {
                error: "No such file or directory".into(),
            },
            Outcome::LaunchFailed {
                error: "cannot expand `run`: undefined value".into(),
            },
            Outcome::Cancelled,
            Outcome::Leaked { code: 0 },
            Outcome::Interrupted,
            Outcome::IdleTimeout { after_ms: 90_000 },
            Outcome::AgentFailed {
                class: FailureClass::Infrastructure,
                reason: "api_error".into(),
                message: "API Error: 529 overloaded".into(),
                retry_after_ms: Some(30_000),
            },
            Outcome::AgentFailed {
                class: FailureClass::Task,
                reason: "error_max_turns".into(),
                message: "ended as error_max_turns".into(),
                retry_after_ms: None,
            },
            Outcome::OverBudget {
                limit: "task budget $0.50".into(),
                scope: Some(crate::BudgetScope::Task),
                spent_usd: Some(0.51),
                tokens: 120_000,
            },
            Outcome::MergeConflict {
                incoming: "schema".into(),
                files: vec!["src/db.rs".into()],
            },
            Outcome::OutOfScope {
                files: vec!["README.md".into()],
            },
            Outcome::VerifyFailed {
                command: "cargo test".into(),
                detail: "exit 101".into(),
            },
        ];
        insta::assert_json_snapshot!(all);
        for outcome in all {
            let json = serde_json::to_string(&outcome).unwrap();
            assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), outcome);
        }
    }
}
