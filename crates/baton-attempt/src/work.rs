//! What a unit run by a worker is assembled from besides the run's recorded graph: what its
//! coordinator decided for the attempt, sent through the queue as JSON.

use serde::{Deserialize, Serialize};

use crate::launch::Continue;

/// What a worker needs to assemble an attempt's unit besides the run's recorded graph and
/// store: what the coordinator decided for this attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Work {
    /// Tasks in the graph when it was queued: a worker whose copy of the graph has fewer
    /// reads the grown one from the store.
    pub graph_len: u32,
    /// The engine of the task's chain it runs on (0: its own).
    pub engine: u32,
    /// A planner asked again: the tasks of its plan its answer replaces.
    pub dropped: Vec<u32>,
    /// The session it continues, or what it is told.
    pub resume: Option<Continue>,
    pub agent: bool,
    /// The run's base commit, when its tasks work in worktrees.
    pub base: Option<String>,
    /// What the run's agents had spent when it was queued, finished and running, and what the
    /// task's earlier attempts had: where the attempt's budgets start.
    #[serde(default)]
    pub run_spent: crate::budget::Spent,
    #[serde(default)]
    pub task_spent: crate::budget::Spent,
}
