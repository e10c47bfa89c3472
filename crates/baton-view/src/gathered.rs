//! Everything a page about one run is drawn from, read from the store in one pass: the report,
//! the dashboard and the OTLP export share it.

use std::path::Path;

use baton_graph::{Action, Graph};
use baton_model::RunState;
use baton_report::{GraphTask, ReportInput};
use baton_store::{Store, StoreError};

/// What a report of a run is made from, read from the store.
pub struct Gathered {
    pub result: baton_report::RunResult,
    pub view: baton_model::RunView,
    pub events: Vec<baton_model::Event>,
    pub graph: Vec<GraphTask>,
    pub state: RunState,
    /// The run's graph as it last was, when it can be read back.
    pub recorded: Option<Graph>,
}

impl Gathered {
    /// Reads run `run` whole. `state` is what the caller observed it to be (a run recorded
    /// as running whose driver is dead is interrupted); `state_dir` is the project's `.baton/`.
    pub fn of(
        store: &dyn Store,
        state_dir: &Path,
        run: &baton_store::RunRecord,
        state: RunState,
    ) -> Result<Self, StoreError> {
        let result = crate::build_observed_result(store, &run.id, state_dir, Some(state))?;
        // The log, read once: kept for the checks and reviews, folded for the attempts.
        let mut view = baton_store::initial_view(store, &run.id)?;
        let mut events = Vec::new();
        let mut after = 0;
        loop {
            let page = store.events(&run.id, after, 10_000)?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for event in &page {
                view.apply(event);
            }
            events.extend(page);
        }
        let recorded = crate::recorded_graph(store, &run.id).ok();
        // A graph that cannot be read back (a run of an older baton) is drawn without edges.
        let graph = recorded.as_ref().map(shape).unwrap_or_else(|| {
            view.tasks()
                .map(|(id, _)| GraphTask {
                    id: id.clone(),
                    needs: Vec::new(),
                    planner: None,
                    kind: "task",
                })
                .collect()
        });
        Ok(Self {
            result,
            view,
            events,
            graph,
            state,
            recorded,
        })
    }

    pub fn input(&self, live: Option<baton_report::Live>) -> ReportInput<'_> {
        ReportInput {
            result: &self.result,
            view: &self.view,
            events: &self.events,
            graph: &self.graph,
            now_ms: baton_model::now_ms(),
            live,
        }
    }

    pub fn render(&self, live: Option<baton_report::Live>) -> Result<String, minijinja::Error> {
        baton_report::render_html(&self.input(live))
    }
}

/// The graph as the report draws it: each task with the ids of what it needs and of the
/// planner that added it.
fn shape(graph: &Graph) -> Vec<GraphTask> {
    graph
        .tasks()
        .iter()
        .map(|task| GraphTask {
            id: task.id.clone(),
            needs: task
                .needs
                .iter()
                .map(|&n| graph.task(n).id.clone())
                .collect(),
            planner: task.parent.map(|p| graph.task(p).id.clone()),
            kind: if task.plan.is_some() {
                "planner"
            } else {
                match task.action {
                    Action::Agent { .. } => "agent",
                    Action::Shell { .. } => "shell",
                    Action::Noop => "noop",
                }
            },
        })
        .collect()
}
