//! The read model: what a recorded run is, as `status`, `report`, `watch`, `events`, the
//! dashboard, the OTLP export and the MCP server show it. Everything here reads the store
//! (and the run's files under `.baton/`); nothing drives a run, so none of those readers
//! links the dispatcher, the attempt unit or git.
//!
//! - [`build_result`]: the run result document (`status --json`, the summary, the report).
//! - [`recorded_graph`]: the run's graph as it last was, grown by its planners.
//! - [`Gathered`]: everything a page about one run is drawn from, read in one pass.
//! - [`describe`]: one line per event, for `baton events`.

mod describe;
mod gathered;
mod recorded;
mod result;

pub use describe::describe;
pub use gathered::Gathered;
pub use recorded::{RecordedGraphError, base_graph, grown, recorded_graph};
pub use result::{build_observed_result, build_result};

/// The graph's best-of tasks, each with how many candidates it runs at once: what the
/// reporters need to show their attempts as candidates.
pub fn best_of(graph: &baton_graph::Graph) -> std::collections::HashMap<baton_model::TaskId, u32> {
    graph
        .tasks()
        .iter()
        .filter(|t| t.candidate_count() > 1)
        .map(|t| (t.id.clone(), t.candidate_count()))
        .collect()
}
