//! What goes into the store and what comes out of it.

use std::collections::BTreeMap;

use baton_model::{Outcome, RunId, RunState, TaskId, TaskState};

use crate::StoreError;
use serde::Serialize;

/// A run about to start: the run row and one `pending` row per task.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub id: RunId,
    pub name: String,
    pub graph_path: String,
    /// The frozen graph, so that `resume` and `retry` run exactly what was started. The store
    /// has it written as JSON where it goes, a part at a time: a 100,000-task graph is 13 MB
    /// of JSON, never held whole (`docs/PERFORMANCE.md`).
    pub graph: &'a dyn GraphJson,
    pub concurrency: u32,
    pub started_at_ms: i64,
    /// Every task with its index in the graph.
    pub tasks: Vec<(TaskId, u32)>,
}

/// A run's graph, as the JSON the store keeps ([`crate::RunReader::graph_json`] gives it
/// back).
pub trait GraphJson: std::fmt::Debug + Sync {
    /// Writes the graph's JSON to `out`, in as many writes as it likes.
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()>;
}

/// JSON already written out (tests, small graphs): `graph: &"{}"`.
impl GraphJson for &str {
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(self.as_bytes())
    }
}

impl GraphJson for String {
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(self.as_bytes())
    }
}

/// The whole JSON of `graph`, for a store that sends it in one piece.
pub(crate) fn graph_json_text(graph: &dyn GraphJson) -> Result<String, StoreError> {
    let mut json = Vec::new();
    graph.write_json(&mut json).map_err(StoreError::GraphJson)?;
    String::from_utf8(json).map_err(|err| StoreError::GraphJson(std::io::Error::other(err)))
}

/// What an attempt produced, stored with the turn that records its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptOutput {
    pub task: TaskId,
    pub attempt: u32,
    /// The task's result as handed downstream: redacted and capped.
    pub output: String,
    /// Size of the whole output before it was capped.
    pub output_bytes: u64,
    /// What the task wrote to `BATON_OUTPUT`, if anything.
    pub output_json: Option<String>,
    pub stderr_tail: String,
    pub log_path: String,
}

/// The process driving a run. The start time tells a live process from a later one that reused
/// its pid; its unit is the caller's (say, clock ticks since boot from `/proc/PID/stat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Driver {
    pub pid: u32,
    pub start_time: u64,
    pub host: String,
}

/// One run as recorded. `status` is `running` for a run whose driver died: whether it is in fact
/// `interrupted` depends on whether `driver` is alive, which only the caller can check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    pub id: RunId,
    pub name: String,
    pub graph_path: String,
    pub status: RunState,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub concurrency: u32,
    pub task_count: u32,
    /// Why the run stopped launching tasks, once it has.
    pub stop: Option<baton_model::Stop>,
    pub driver: Option<Driver>,
}

/// A log file an attempt wrote, as a store that keeps logs holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLog {
    /// Its name in the run's `logs/` directory.
    pub file: String,
    pub size: u64,
    /// When the worker last changed it: how the phases of an attempt are ordered.
    pub modified_ms: i64,
}

/// A run with the number of its tasks in each state (states with no task are absent).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    #[serde(flatten)]
    pub run: RunRecord,
    pub counts: BTreeMap<TaskState, u32>,
    /// Tokens agent attempts used, `None` when the run had no agent attempt.
    pub tokens: Option<u64>,
    /// Dollars agent attempts cost (reported or priced), `None` when none was priced.
    pub cost_usd: Option<f64>,
}

impl RunSummary {
    pub fn count(&self, state: TaskState) -> u32 {
        self.counts.get(&state).copied().unwrap_or(0)
    }
}

/// One task of a run: where it is, and the result of its latest attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskRecord {
    pub task: TaskId,
    pub idx: u32,
    pub status: TaskState,
    /// The highest attempt number started.
    pub attempts: u32,
    /// Set while a retry waits for its backoff: the attempt that will run, and when.
    pub next_attempt: Option<u32>,
    pub retry_at_ms: Option<i64>,
    /// Start of the first attempt.
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    /// The exit code of the latest attempt, once it has exited.
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    /// The latest attempt that stored an output, and that output.
    pub output_attempt: Option<u32>,
    pub output: Option<String>,
    pub output_bytes: Option<u64>,
    pub output_json: Option<String>,
    pub stderr_tail: Option<String>,
}

/// One attempt of a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptRecord {
    pub task: TaskId,
    /// The task's index in the run (its [`TaskRecord::idx`]).
    pub task_idx: u32,
    pub attempt: u32,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub pid: Option<u32>,
    pub outcome: Option<Outcome>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub output: Option<String>,
    pub output_bytes: Option<u64>,
    pub output_json: Option<String>,
    pub stderr_tail: Option<String>,
    pub log_path: Option<String>,
    /// An agent attempt's tokens, cost, model and session.
    pub agent: Option<baton_model::AgentUsage>,
    /// What held the attempt's processes; `None` where none ran or it was not recorded.
    pub containment: Option<baton_model::Containment>,
}
