//! The graph of a recorded run as it last was: the one it began with (or was reloaded with),
//! grown by every planner's answer in the order they were recorded.

use baton_graph::Graph;
use baton_model::{Event, EventKind, EventName, RunId, TaskId};
use baton_store::{RunReader, StoreError};

/// Why a run's graph cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum RecordedGraphError {
    #[error("cannot read the run from the store")]
    Store(#[from] StoreError),
    #[error("no run `{0}` is recorded")]
    UnknownRun(RunId),
    #[error("the graph recorded with run {run} cannot be read")]
    Graph {
        run: RunId,
        #[source]
        source: serde_json::Error,
    },
    #[error("run {run} has no task `{task}`")]
    UnknownTask { run: RunId, task: TaskId },
}

/// The graph the run last stood on before its planners added to it: the one it started
/// with, or the last one `--reload` gave it.
pub fn base_graph(store: &dyn RunReader, run: &RunId) -> Result<Graph, RecordedGraphError> {
    let bad = |source| RecordedGraphError::Graph {
        run: run.clone(),
        source,
    };
    let reloaded = store.last_event_of_kind(run, EventName::GraphReloaded)?;
    if let Some(Event {
        kind: EventKind::GraphReloaded { graph, .. },
        ..
    }) = reloaded
    {
        return Graph::from_stored_json(&graph).map_err(bad);
    }
    let json = store
        .graph_json(run)?
        .ok_or_else(|| RecordedGraphError::UnknownRun(run.clone()))?;
    Graph::from_stored_json(&json).map_err(bad)
}

/// The graph of a recorded run as it last was: the one it began with, grown by every planner's
/// answer in the order they were recorded (each answer's tasks are stored with `needs` into
/// the graph as it was then, which replaying in order makes again).
pub fn recorded_graph(store: &dyn RunReader, run: &RunId) -> Result<Graph, RecordedGraphError> {
    let base = base_graph(store, run)?;
    grown(store, run, base)
}

/// `base` (a run's graph file, read again) grown by what the run's planners added to it, as
/// [`recorded_graph`] grows the graph it recorded.
pub fn grown(store: &dyn RunReader, run: &RunId, base: Graph) -> Result<Graph, RecordedGraphError> {
    let bad = |source| RecordedGraphError::Graph {
        run: run.clone(),
        source,
    };
    let mut graph = base;
    for event in store.events_of_kind(run, EventName::GraphExpanded)? {
        let EventKind::GraphExpanded {
            task,
            tasks,
            replaces,
            ..
        } = event.kind
        else {
            continue;
        };
        let tasks: Vec<baton_graph::Task> = serde_json::from_value(tasks).map_err(bad)?;
        let planner =
            graph
                .index_of(task.as_str())
                .ok_or_else(|| RecordedGraphError::UnknownTask {
                    run: run.clone(),
                    task: task.clone(),
                })?;
        graph = if replaces.is_empty() {
            graph.extended(planner, tasks)
        } else {
            let dropped: Vec<u32> = replaces
                .iter()
                .filter_map(|id| graph.index_of(id.as_str()))
                .collect();
            graph.replanned(planner, tasks, &dropped)
        };
    }
    Ok(graph)
}
