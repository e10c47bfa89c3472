//! `baton watch RUN`: the live view of a run another process drives, read from the store's
//! event log as it grows (the same [`Board`](baton_report::Board) `baton run` draws), then the
//! run's status once it ends.

use std::io::IsTerminal;
use std::time::Duration;

use baton_model::EventKind;
use baton_report::{LiveReporter, NullReporter, PlainReporter, Reporter, RunInfo};

use super::records;
use crate::cli::{EventsArgs, StatusArgs, WatchArgs};
use crate::exit::Failure;

/// How often the store is asked for new events.
const POLL: Duration = Duration::from_millis(200);
const PAGE: u32 = 1000;

pub(super) fn watch(args: WatchArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, args.run.as_deref())?;
    if args.json {
        return super::events::events(
            EventsArgs {
                run: run.id.to_string(),
                follow: true,
                json: true,
            },
            store_url,
        );
    }
    let status = || {
        super::status::status(
            StatusArgs {
                run: Some(run.id.to_string()),
                json: false,
                all: false,
            },
            store_url,
        )
    };
    if !records::goes_on(&run) {
        return status();
    }
    let mut reporter: Box<dyn Reporter> = if args.quiet {
        Box::new(NullReporter)
    } else if std::io::stderr().is_terminal() {
        Box::new(LiveReporter::new())
    } else {
        Box::new(PlainReporter::new(std::io::stderr()))
    };
    // The view starts where the run started, and what happened since is told to it as it is
    // read: tasks that ended scroll by, and it knows since when a task waits.
    let view = baton_store::initial_view(&*store, &run.id)?;
    let mut after = 0;
    let (mut budget_usd, mut budget_tokens) = graph_budget(store.graph_json(&run.id)?);
    if let Some(event) = store.last_event_of_kind(&run.id, baton_model::EventName::BudgetChanged)?
        && let EventKind::BudgetChanged { usd, tokens, .. } = event.kind
    {
        (budget_usd, budget_tokens) = (usd, tokens);
    }
    let tasks = view.tasks().count() as u32;
    let recorded = baton_view::recorded_graph(&*store, &run.id);
    reporter.run_started(&RunInfo {
        run_id: run.id.clone(),
        name: run.name.clone(),
        tasks,
        concurrency: run.concurrency,
        earlier: 0,
        view: Some(view),
        started_at_ms: Some(run.started_at_ms),
        budget_usd,
        budget_tokens,
        // The graph the run began with; a planner's tasks are learned from its events.
        agents: recorded
            .as_ref()
            .map(|graph| {
                graph
                    .tasks()
                    .iter()
                    .filter(|t| matches!(t.action, baton_graph::Action::Agent { .. }))
                    .map(|t| t.id.clone())
                    .collect()
            })
            .unwrap_or_default(),
        best_of: recorded
            .as_ref()
            .map(baton_view::best_of)
            .unwrap_or_default(),
        // A run driven on this machine has its logs here (one driven elsewhere shows none).
        logs: Some(baton_layout::RunDirs::new(&project.state_dir, &run.id).logs),
    });
    loop {
        let page = store.events(&run.id, after, PAGE)?;
        if let Some(last) = page.last() {
            after = last.seq;
        }
        reporter.events(&page);
        let finished = page
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunFinished { .. }));
        if page.len() as u32 == PAGE {
            continue;
        }
        let current = store.run(&run.id)?.unwrap_or_else(|| run.clone());
        if finished || !records::goes_on(&current) {
            // Finished, or its driver died: what is left once more, then the status.
            let rest = store.events(&run.id, after, u32::MAX)?;
            reporter.events(&rest);
            let state = records::effective_state(&current);
            let result = baton_view::build_observed_result(
                &*store,
                &run.id,
                &project.state_dir,
                Some(state),
            )?;
            reporter.run_finished(&result);
            drop(reporter);
            return status();
        }
        std::thread::sleep(POLL);
    }
}

/// The hard budget of the graph the run was started with, from its stored JSON.
fn graph_budget(graph_json: Option<String>) -> (Option<f64>, Option<u64>) {
    let Some(value) =
        graph_json.and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
    else {
        return (None, None);
    };
    let budget = &value["run"]["budget"];
    (budget["usd"].as_f64(), budget["tokens"].as_u64())
}
