//! The run result document: what `baton run --json` prints and `baton status --json` will.
//!
//! ```json
//! {
//!   "schema": 1,
//!   "run": {"id": "20261130-034512-ab12", "name": "quickstart", "state": "succeeded",
//!           "graph": "examples/quickstart.toml", "started_at_ms": 1764474000000,
//!           "ended_at_ms": 1764474003100, "duration_ms": 3100, "concurrency": 4},
//!   "totals": {"tasks": 7, "succeeded": 7, "failed": 0, "timed_out": 0, "cancelled": 0,
//!              "blocked": 0, "skipped": 0, "attempts": 8},
//!   "tasks": [{"id": "fetch", "state": "succeeded", "attempts": 1, "duration_ms": 12,
//!              "outcome": {"kind": "exited", "code": 0}, "exit_code": 0,
//!              "output": "…", "output_bytes": 42, "log": ".baton/runs/…/logs/fetch.1.log"}],
//!   "timeline": {"peak": 3, "bucket_ms": 100, "running": [1.0, 2.5, 3.0]}
//! }
//! ```
//!
//! `schema` changes only when a field changes meaning or disappears; fields may be added.
//! `tasks` are in graph-file order. `output` is the task's captured stdout (head and tail, with
//! a marker where bytes were cut); `output_bytes` is its full length. `run --dry-run --json`
//! prints the plan document instead (see docs/guide/src/json.md): before a run there are no results, and
//! the plan says more about what would happen.

use baton_model::{Outcome, RunState, TaskState};
use serde::{Deserialize, Serialize};

use crate::Timeline;
use crate::spend::{RunSpend, Spend};

pub const RESULT_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: u32,
    pub run: RunSection,
    pub totals: Totals,
    pub tasks: Vec<TaskResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// What agent tasks used and cost, in all and by engine and model; absent when no agent
    /// attempt ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<RunSpend>,
    /// The run's merged result (worktree runs), once it was merged or failed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<MergedResult>,
    /// What to type next, one shell command a line: when the run needs a person, and when it
    /// succeeded with tasks that changed files (where its work is and how to take it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next: Vec<String>,
}

/// The branches of the tasks that succeeded, merged into the run's result branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedResult {
    pub branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The branch that did not merge, when one did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<ResultConflict>,
    /// Why the merge could not be made, other than a conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run's `verify` check that failed on the merged result, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<ResultCheck>,
    /// The run's `verify` checks that ran on the merged result, in order, passed or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified: Vec<VerifiedCheck>,
}

/// One of the run's `verify` checks on its merged result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifiedCheck {
    pub command: String,
    pub passed: bool,
    pub duration_ms: u64,
}

/// A run's check that failed on its merged result, and the task bisection blamed: the one
/// whose merge made it fail (`None` when the base fails it already, or it could not be told).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultCheck {
    #[serde(flatten)]
    pub check: FailedCheck,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blamed: Option<String>,
}

/// A task whose branch did not merge into the result: the tasks merged before it that it
/// collides with, the files, and the task's worktree, where it can be resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultConflict {
    pub task: String,
    #[serde(default)]
    pub with: Vec<String>,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSection {
    pub id: String,
    pub name: String,
    pub state: RunState,
    pub graph: String,
    pub started_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// Time spent driving the run: its start to its end, less the gaps between a finish (or
    /// a crash) and a later `resume` or `retry`.
    pub duration_ms: u64,
    /// Its first start to its end, gaps included.
    #[serde(default)]
    pub span_ms: u64,
    pub concurrency: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub tasks: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub timed_out: u32,
    pub cancelled: u32,
    pub blocked: u32,
    pub skipped: u32,
    pub attempts: u32,
}

impl Totals {
    pub fn from_tasks(tasks: &[TaskResult]) -> Self {
        let mut totals = Totals {
            tasks: tasks.len() as u32,
            ..Totals::default()
        };
        for task in tasks {
            totals.attempts += task.attempts;
            match task.state {
                TaskState::Succeeded | TaskState::SucceededWithWarnings => totals.succeeded += 1,
                TaskState::Failed => totals.failed += 1,
                TaskState::TimedOut => totals.timed_out += 1,
                TaskState::Cancelled => totals.cancelled += 1,
                TaskState::Blocked => totals.blocked += 1,
                TaskState::Skipped => totals.skipped += 1,
                _ => {}
            }
        }
        totals
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub id: String,
    pub state: TaskState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How the last attempt ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the task failed, was blocked or skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default)]
    pub output_bytes: u64,
    /// The end of the last attempt's stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The last attempt's log file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// An agent task's engine, model and session (its last attempt's) and what all its
    /// attempts used and cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Box<TaskAgent>>,
    /// A task in a worktree: its branch and what it changed there (all its attempts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Box<TaskWorkspace>>,
    /// What held the last attempt's processes: `cgroup` (killed whole at its end, setsid'd
    /// descendants included) or `process_group`. Absent when no process ran, or the attempt
    /// was recorded by an older baton.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<baton_model::Containment>,
    /// The `verify` check of the last attempt that failed, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Box<FailedCheck>>,
    /// The last attempt's acceptance review, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<baton_model::Review>,
    /// A planner's: the tasks its answer added (they follow it in the list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planned: Vec<String>,
    /// A planner's re-plans (`on_failure = "replan"`), in order: each the task whose failure
    /// sent it back to plan what was left.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replanned_after: Vec<String>,
    /// A best-of task's: its last attempt's candidates, which won and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Box<TaskCandidates>>,
}

/// A best-of task's candidates, as judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCandidates {
    /// The winning candidate (1 for the first); `None`: none passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<u32>,
    pub why: String,
    pub list: Vec<baton_model::Candidate>,
}

/// A check that failed: which, how, the end of what it printed, and where all of it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedCheck {
    /// Which of the checks (from 1).
    pub number: u32,
    pub command: String,
    pub outcome: Outcome,
    /// The end of what it printed (stdout and stderr), redacted.
    #[serde(default)]
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskWorkspace {
    pub branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub evidence: baton_model::Evidence,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_violations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskAgent {
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    #[serde(default)]
    pub tool_calls: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<String>,
    /// The engine of each attempt, in order, where they were not all the same (the task fell
    /// back to another engine); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<AttemptEngine>,
    #[serde(flatten)]
    pub spend: Spend,
}

/// The engine one attempt ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEngine {
    pub attempt: u32,
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl TaskAgent {
    /// `fell back from claude to codex/gpt-5`: the engines its attempts went through, each
    /// once, where there was more than one.
    pub fn fallbacks(&self) -> Option<String> {
        // One name per stretch of attempts on the same engine, with its last-known model.
        let mut runs: Vec<(&str, Option<&str>)> = Vec::new();
        for a in &self.engines {
            match runs.last_mut() {
                Some((engine, model)) if *engine == a.engine => {
                    *model = a.model.as_deref().or(*model);
                }
                _ => runs.push((&a.engine, a.model.as_deref())),
            }
        }
        let names: Vec<String> = runs
            .iter()
            .map(|(engine, model)| match model {
                Some(model) => format!("{engine}/{model}"),
                None => (*engine).to_owned(),
            })
            .collect();
        let (last, before) = names.split_last()?;
        (!before.is_empty()).then(|| format!("fell back from {} to {last}", before.join(", ")))
    }
}
