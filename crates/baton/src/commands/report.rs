//! `baton report [RUN] [-o FILE]`: the run as one HTML page that needs nothing else (see
//! `baton_report::render_html`), from what the store recorded.

use std::path::PathBuf;

use anyhow::Context;
use baton_graph::{Action, Graph};
use baton_report::{GraphTask, ReportInput};

use super::records;
use crate::cli::ReportArgs;
use crate::exit::{self, Failure};
use crate::out;

pub fn report(args: ReportArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, args.run.as_deref())?;
    let page = Gathered::of(&*store, &project, &run)?
        .render(None)
        .context("cannot lay out the report")?;
    let path = match args.output {
        Some(path) if path.as_os_str() == "-" => {
            out::Stdout::new("the report").task_output(page.as_bytes())?;
            return Ok(exit::SUCCESS);
        }
        Some(path) => path,
        None => project
            .state_dir
            .join("reports")
            .join(format!("{}.html", run.id)),
    };
    write(&path, &page)?;
    out::line(
        "where the report went",
        &format!(
            "baton: wrote the report of run {} to {}",
            run.id,
            path.display()
        ),
    )?;
    Ok(exit::SUCCESS)
}

/// What a report of a run is made from, read from the store.
pub struct Gathered {
    pub result: baton_report::RunResult,
    pub view: baton_model::RunView,
    pub events: Vec<baton_model::Event>,
    pub graph: Vec<GraphTask>,
    pub state: baton_model::RunState,
    /// The run's graph as it last was, when it can be read back.
    pub recorded: Option<Graph>,
}

impl Gathered {
    pub fn of(
        store: &dyn baton_store::Store,
        project: &crate::project::Project,
        run: &baton_store::RunRecord,
    ) -> Result<Self, Failure> {
        let state = records::effective_state(run);
        let result =
            baton_runner::build_observed_result(store, &run.id, &project.state_dir, Some(state))?;
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
        let recorded = baton_runner::recorded_graph(store, &run.id).ok();
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

fn write(path: &std::path::Path, page: &str) -> Result<(), Failure> {
    let bad =
        |e: std::io::Error| Failure::BadInput(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(bad)?;
    }
    // Whole or not at all: a page half written is worse than none.
    let tmp: PathBuf = path.with_extension("html.partial");
    std::fs::write(&tmp, page).map_err(bad)?;
    std::fs::rename(&tmp, path).map_err(bad)
}
