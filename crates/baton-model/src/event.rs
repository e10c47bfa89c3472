//! The append-only event log's record type.
//!
//! Wire format (also what `baton events --json` prints, one object per line):
//!
//! ```json
//! {"schema":2,"seq":7,"at_ms":1764474000123,"run":"20261130-034512-ab12",
//!  "kind":"attempt-finished","task":"build","attempt":1,
//!  "outcome":{"kind":"exited","code":0},"duration_ms":812}
//! ```
//!
//! `schema` changes only when an existing field changes meaning or disappears; new kinds and new
//! fields may be added within a version, so readers must ignore what they do not know.

use serde::{Deserialize, Serialize};

use crate::{
    AgentUsage, CheckResult, Containment, Evidence, Outcome, RunState, StopCause, TaskId, TaskState,
};

/// Version of the event wire format.
///
/// - 2 (2026-12-03): `run-stopping` carries `cause` and an `over-budget` outcome `scope`, so
///   that no reader parses their words. Version 1 logs lack them; [`StopCause::of`] and
///   [`crate::BudgetScope::of`] read those. Later the same day, `run-resumed` may carry the
///   `worker` that took the run over (absent: a person's command); optional, so no new version.
pub const EVENT_SCHEMA_VERSION: u32 = 2;

/// One recorded state change of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the run's log, assigned by the store; 0 before it is stored.
    pub seq: u64,
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub at_ms: i64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EventKind {
    RunStarted {
        name: String,
        tasks: u32,
        concurrency: u32,
    },
    /// The run stops launching tasks, for the reason given.
    RunStopping {
        /// In words, for people.
        reason: String,
        /// Why, for baton: always written since event schema 2; read an older event's with
        /// [`StopCause::of`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<StopCause>,
    },
    RunFinished {
        state: RunState,
    },
    /// Another process took the run over: `baton resume` (`retry: false`) or `baton retry`,
    /// or `worker`, a worker that found its coordinator gone.
    RunResumed {
        retry: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker: Option<String>,
    },
    /// A task that had ended goes back to `pending`, to run again after a takeover.
    TaskReset {
        task: TaskId,
    },
    /// A task with `approval = true` is ready and waits for a person (`baton approve RUN
    /// TASK` or `baton reject`).
    TaskWaiting {
        task: TaskId,
    },
    /// A person decided about a waiting task; a rejection fails it (`task-finished` follows).
    TaskDecided {
        task: TaskId,
        approved: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// What an attempt changed in its task's worktree, committed on the task's branch.
    WorkspaceCommitted(WorkspaceCommit),
    /// Acceptance checks ran: a task's (`task`, `attempt`) in its workspace after the attempt,
    /// or the run's (no task) on the merged result.
    Checked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<TaskId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        checks: Vec<CheckResult>,
        /// The run's checks failed: the task whose merge made them fail, found by bisecting
        /// the merge order (`None` when the base fails already, or it could not be told).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blamed: Option<String>,
    },
    /// The run's consolidation: the branches of the tasks that succeeded, merged into
    /// `branch`. On a conflict, `conflict_task` is the task whose branch did not merge, in
    /// `conflict_files`, with what was merged before it.
    ResultMerged {
        branch: String,
        /// The run's base commit, which the result is measured from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conflict_task: Option<String>,
        /// The tasks merged before `conflict_task` whose changes it collides with.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflict_with: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflict_files: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The run's budget from here on (`baton approve`, `baton resume --raise-budget`),
    /// replacing the graph file's. `None`: no limit of that kind.
    BudgetChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usd: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        soft_usd: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        soft_tokens: Option<u64>,
    },
    AttemptStarted {
        task: TaskId,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    AttemptFinished {
        task: TaskId,
        attempt: u32,
        outcome: Outcome,
        duration_ms: u64,
        /// An agent attempt's tokens, cost, model and session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<Box<AgentUsage>>,
        /// What held the attempt's processes: absent where no process ran, and in events
        /// written before baton recorded it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        containment: Option<Containment>,
    },
    RetryScheduled {
        task: TaskId,
        attempt: u32,
        delay_ms: u64,
    },
    /// The worker running attempt `attempt` of `task` stopped renewing its lease on it (it
    /// died, lost its connection, or was paused): the attempt is over for the run (its
    /// `attempt-finished`, interrupted, follows) and runs again on whichever worker claims it.
    AttemptLost {
        task: TaskId,
        attempt: u32,
        worker: String,
    },
    /// What a running agent attempt is doing, read from its stream as it goes: its latest tool
    /// call or edit (`doing`), and what it has spent so far. Sent when what it does changes (at
    /// most about once a second per attempt) and now and then as its tokens grow; the attempt's
    /// `attempt-finished` carries the exact accounting. For the live views; no state changes.
    AgentActivity {
        task: TaskId,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        doing: Option<String>,
        #[serde(default)]
        tokens: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// A task reached a terminal state. `reason` says why it failed, was blocked or skipped.
    TaskFinished {
        task: TaskId,
        state: TaskState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A reviewer judged attempt `attempt` of `task` against its `acceptance` criteria (after
    /// each round whose checks passed).
    Reviewed {
        task: TaskId,
        attempt: u32,
        #[serde(flatten)]
        review: crate::Review,
    },
    /// A best-of task's candidates (attempts run at once) all ended: which won and why
    /// (`winner: None`: none passed). Its winner's work is the task's branch now.
    Picked {
        task: TaskId,
        candidates: Vec<crate::Candidate>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        winner: Option<u32>,
        why: String,
    },
    /// `failed`, one of planner `task`'s tasks, failed for good, and the planner is asked again
    /// (`on_failure = "replan"`): its next attempt answers with a plan for what is left.
    Replanning {
        task: TaskId,
        failed: TaskId,
    },
    /// Planner `task`'s answer (from attempt `attempt`) added tasks to the run: `added` are
    /// their ids, in the order they join the graph, after every task before them; `tasks` are
    /// those tasks as the graph stores them, which a takeover splices in again
    /// (`baton_graph::Graph::extended`). Recorded before the planner's `attempt-finished`.
    GraphExpanded {
        task: TaskId,
        attempt: u32,
        added: Vec<TaskId>,
        tasks: serde_json::Value,
        /// A re-plan's: the planner's tasks the new ones replace (they failed or had not
        /// started); what waited for the planner waits for them no longer.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        replaces: Vec<TaskId>,
    },
    /// `baton retry --reload` (or `resume --reload`): from here on the run's tasks are defined
    /// as its graph file defines them now (`graph`, in the stored form), not as when it
    /// started; `changed` names the tasks whose definitions differ. Planners' tasks are added
    /// to it as before.
    GraphReloaded {
        graph: String,
        changed: Vec<TaskId>,
    },
}

/// What an attempt changed in its task's worktree, committed on the task's branch
/// (`workspace-committed`). `commit` is `None` when it changed nothing. `scope_violations` are
/// changed paths the task's `scope` does not cover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceCommit {
    pub task: TaskId,
    pub attempt: u32,
    pub branch: String,
    /// The commit the task's worktree started from: its changes are measured from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub evidence: Evidence,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_violations: Vec<String>,
    /// Symbolic links the task made that point out of its worktree (to the user's own
    /// files, say): left uncommitted, so that no result ever carries them to the user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links_left_out: Vec<String>,
}

impl EventKind {
    /// The attempt a `picked` event made its task's result (its winner's), if it picked one,
    /// and the last attempt of the round it picked from.
    pub fn picked_attempt(&self) -> Option<(u32, u32)> {
        let Self::Picked {
            candidates,
            winner: Some(winner),
            ..
        } = self
        else {
            return None;
        };
        let won = candidates.iter().find(|c| c.candidate == *winner)?;
        let last = candidates.iter().map(|c| c.attempt).max()?;
        Some((won.attempt, last))
    }

    /// The task the event is about, if any.
    pub fn task(&self) -> Option<&TaskId> {
        match self {
            Self::AttemptStarted { task, .. }
            | Self::AttemptFinished { task, .. }
            | Self::RetryScheduled { task, .. }
            | Self::AttemptLost { task, .. }
            | Self::AgentActivity { task, .. }
            | Self::TaskFinished { task, .. }
            | Self::TaskReset { task }
            | Self::WorkspaceCommitted(WorkspaceCommit { task, .. })
            | Self::TaskWaiting { task }
            | Self::TaskDecided { task, .. }
            | Self::GraphExpanded { task, .. }
            | Self::Reviewed { task, .. }
            | Self::Picked { task, .. }
            | Self::Replanning { task, .. } => Some(task),
            Self::Checked { task, .. } => task.as_ref(),
            Self::RunStarted { .. }
            | Self::RunStopping { .. }
            | Self::RunFinished { .. }
            | Self::RunResumed { .. }
            | Self::BudgetChanged { .. }
            | Self::GraphReloaded { .. }
            | Self::ResultMerged { .. } => None,
        }
    }

    /// The kebab-case tag, as stored in the `kind` column.
    pub fn name(&self) -> &'static str {
        self.event_name().as_str()
    }

    /// Which kind of event it is, without its fields: what the store is asked for.
    pub fn event_name(&self) -> EventName {
        match self {
            Self::RunStarted { .. } => EventName::RunStarted,
            Self::RunStopping { .. } => EventName::RunStopping,
            Self::RunFinished { .. } => EventName::RunFinished,
            Self::RunResumed { .. } => EventName::RunResumed,
            Self::TaskReset { .. } => EventName::TaskReset,
            Self::BudgetChanged { .. } => EventName::BudgetChanged,
            Self::WorkspaceCommitted(WorkspaceCommit { .. }) => EventName::WorkspaceCommitted,
            Self::ResultMerged { .. } => EventName::ResultMerged,
            Self::Checked { .. } => EventName::Checked,
            Self::TaskWaiting { .. } => EventName::TaskWaiting,
            Self::TaskDecided { .. } => EventName::TaskDecided,
            Self::AttemptStarted { .. } => EventName::AttemptStarted,
            Self::AttemptFinished { .. } => EventName::AttemptFinished,
            Self::RetryScheduled { .. } => EventName::RetryScheduled,
            Self::AttemptLost { .. } => EventName::AttemptLost,
            Self::AgentActivity { .. } => EventName::AgentActivity,
            Self::TaskFinished { .. } => EventName::TaskFinished,
            Self::GraphExpanded { .. } => EventName::GraphExpanded,
            Self::GraphReloaded { .. } => EventName::GraphReloaded,
            Self::Reviewed { .. } => EventName::Reviewed,
            Self::Picked { .. } => EventName::Picked,
            Self::Replanning { .. } => EventName::Replanning,
        }
    }
}

/// The kinds of [`EventKind`], without their fields: what a reader asks the store for
/// (`events_of_kind(run, EventName::Checked)`), so that a misspelt kind does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventName {
    RunStarted,
    RunStopping,
    RunFinished,
    RunResumed,
    TaskReset,
    BudgetChanged,
    WorkspaceCommitted,
    ResultMerged,
    Checked,
    TaskWaiting,
    TaskDecided,
    AttemptStarted,
    AttemptFinished,
    RetryScheduled,
    AgentActivity,
    TaskFinished,
    GraphExpanded,
    GraphReloaded,
    Reviewed,
    Picked,
    Replanning,
    AttemptLost,
}

impl EventName {
    /// Every kind.
    pub const ALL: [Self; 22] = [
        Self::RunStarted,
        Self::RunStopping,
        Self::RunFinished,
        Self::RunResumed,
        Self::TaskReset,
        Self::BudgetChanged,
        Self::WorkspaceCommitted,
        Self::ResultMerged,
        Self::Checked,
        Self::TaskWaiting,
        Self::TaskDecided,
        Self::AttemptStarted,
        Self::AttemptFinished,
        Self::RetryScheduled,
        Self::AgentActivity,
        Self::TaskFinished,
        Self::GraphExpanded,
        Self::GraphReloaded,
        Self::Reviewed,
        Self::Picked,
        Self::Replanning,
        Self::AttemptLost,
    ];

    /// The kebab-case tag, as serialized and stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RunStarted => "run-started",
            Self::RunStopping => "run-stopping",
            Self::RunFinished => "run-finished",
            Self::RunResumed => "run-resumed",
            Self::TaskReset => "task-reset",
            Self::BudgetChanged => "budget-changed",
            Self::WorkspaceCommitted => "workspace-committed",
            Self::ResultMerged => "result-merged",
            Self::Checked => "checked",
            Self::TaskWaiting => "task-waiting",
            Self::TaskDecided => "task-decided",
            Self::AttemptStarted => "attempt-started",
            Self::AttemptFinished => "attempt-finished",
            Self::RetryScheduled => "retry-scheduled",
            Self::AgentActivity => "agent-activity",
            Self::TaskFinished => "task-finished",
            Self::GraphExpanded => "graph-expanded",
            Self::GraphReloaded => "graph-reloaded",
            Self::Reviewed => "reviewed",
            Self::Picked => "picked",
            Self::Replanning => "replanning",
            Self::AttemptLost => "attempt-lost",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `workspace-committed` holds a [`WorkspaceCommit`]; in the log it is flat, as it was
    /// when the variant held the fields itself: a log written before reads the same.
    #[test]
    fn a_workspace_commit_is_flat_in_the_log() {
        let line = r#"{"kind":"workspace-committed","task":"a","attempt":2,"branch":"baton/r/a","commit":"abc","evidence":{"files":[],"lines_added":1,"lines_removed":0}}"#;
        let kind: EventKind = serde_json::from_str(line).unwrap();
        let EventKind::WorkspaceCommitted(commit) = &kind else {
            panic!("{kind:?}");
        };
        assert_eq!((commit.task.as_str(), commit.attempt), ("a", 2));
        assert_eq!(commit.commit.as_deref(), Some("abc"));
        assert_eq!(serde_json::to_string(&kind).unwrap(), line);
    }

    /// serde tags the kinds in kebab-case (`rename_all`): each name is its variant's.
    #[test]
    fn every_event_name_is_its_kinds_serialized_tag() {
        for name in EventName::ALL {
            let mut kebab = String::new();
            for (i, c) in format!("{name:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            assert_eq!(name.as_str(), kebab);
        }
    }

    #[test]
    fn wire_shape() {
        let event = Event {
            seq: 7,
            at_ms: 1_764_474_000_123,
            kind: EventKind::AttemptFinished {
                task: TaskId::new("build").unwrap(),
                attempt: 1,
                outcome: Outcome::Exited { code: 0 },
                duration_ms: 812,
                agent: None,
                containment: None,
            },
        };
        let json = serde_json::to_string(&event).unwrap();
        assert_eq!(
            json,
            r#"{"seq":7,"at_ms":1764474000123,"kind":"attempt-finished","task":"build","attempt":1,"outcome":{"kind":"exited","code":0},"duration_ms":812}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), event);
        assert_eq!(event.kind.name(), "attempt-finished");
    }

    #[test]
    fn containment_is_optional_on_the_wire() {
        let json = r#"{"seq":1,"at_ms":5,"kind":"attempt-finished","task":"t","attempt":1,"outcome":{"kind":"exited","code":0},"duration_ms":3,"containment":"cgroup"}"#;
        let event: Event = serde_json::from_str(json).unwrap();
        let EventKind::AttemptFinished { containment, .. } = &event.kind else {
            panic!("{event:?}");
        };
        assert_eq!(*containment, Some(Containment::Cgroup));
        assert_eq!(serde_json::to_string(&event).unwrap(), json);
    }
}
