use baton_model::{Event, RunId, RunView};

use crate::RunResult;

/// What a reporter is told when a run begins.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub run_id: RunId,
    pub name: String,
    pub tasks: u32,
    pub concurrency: u32,
    /// Tasks that had ended before this process took the run over (resume, retry).
    pub earlier: u32,
    /// The run as its stored events leave it when this process starts reporting: every task
    /// pending for a new run, what happened before for a run taken over or watched. Made only
    /// for a reporter that [wants it](Reporter::wants_view).
    pub view: Option<RunView>,
    /// When the run first started, where known.
    pub started_at_ms: Option<i64>,
    /// The run's hard budget.
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<u64>,
    /// The tasks that are agents': one that says nothing is shown quiet, even before its first
    /// word (those a planner adds are learned from its `graph-expanded`).
    pub agents: std::collections::HashSet<baton_model::TaskId>,
    /// The best-of tasks, each with how many candidates it runs at once: their attempts are
    /// candidates, shown as such.
    pub best_of: std::collections::HashMap<baton_model::TaskId, u32>,
    /// Where the run's attempt logs are on this machine, when they are: the live view shows
    /// a running shell task's latest line from its log (an agent's latest tool call comes in
    /// its events).
    pub logs: Option<std::path::PathBuf>,
}

/// Receives a run's events after they are recorded. Implementations must not block for long:
/// they run on the dispatcher's thread.
pub trait Reporter {
    /// Whether [`RunInfo::view`] is to be made: a reporter that prints lines never reads it,
    /// and a 100,000-task run's is 40 ms made and thrown away.
    fn wants_view(&self) -> bool {
        false
    }
    fn run_started(&mut self, info: &RunInfo);
    /// Events recorded in one dispatcher turn, in order.
    fn events(&mut self, events: &[Event]);
    fn run_finished(&mut self, result: &RunResult);
}

/// Reports nothing (`--quiet`, `--json`, tests).
#[derive(Debug, Default)]
pub struct NullReporter;

impl Reporter for NullReporter {
    fn run_started(&mut self, _: &RunInfo) {}
    fn events(&mut self, _: &[Event]) {}
    fn run_finished(&mut self, _: &RunResult) {}
}
