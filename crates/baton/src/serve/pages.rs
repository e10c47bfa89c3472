//! The pages: the runs list, a run's page (the report's, live), a task's page.

use std::time::Duration;

use anyhow::Context;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use baton_model::RunState;
use baton_view::Gathered;
use serde::{Deserialize, Serialize};

use super::{App, PageError, Shared, blocking, cli, records, resolve, task_id};
use crate::exit::Failure;

#[derive(Serialize)]
struct RunRow {
    id: String,
    name: String,
    state: String,
    class: &'static str,
    started: String,
    duration: String,
    tasks: u32,
    ok: u32,
    failed: u32,
    cost: Option<String>,
}

pub(super) async fn runs_page(State(app): State<Shared>) -> Result<Html<String>, PageError> {
    blocking(&app, |app| {
        let rows: Vec<RunRow> = app
            .store
            .runs(200)?
            .into_iter()
            .map(|summary| {
                let state = records::effective_state(&summary.run);
                let end = summary.run.ended_at_ms.unwrap_or_else(baton_model::now_ms);
                // A run that goes on while a task of it waits for approval waits for a person:
                // that is what its row says, not `running`.
                let waits = state == RunState::Running
                    && summary.count(baton_model::TaskState::Waiting) > 0;
                RunRow {
                    id: summary.run.id.to_string(),
                    name: summary.run.name.clone(),
                    state: match waits {
                        true => "needs you".to_owned(),
                        false => state.to_string(),
                    },
                    class: match waits {
                        true => "human",
                        false => run_class(state),
                    },
                    started: baton_model::format_utc(summary.run.started_at_ms),
                    duration: baton_model::format_duration(Duration::from_millis(
                        end.saturating_sub(summary.run.started_at_ms).max(0) as u64,
                    )),
                    tasks: summary.run.task_count,
                    ok: summary.count(baton_model::TaskState::Succeeded)
                        + summary.count(baton_model::TaskState::SucceededWithWarnings),
                    failed: summary.count(baton_model::TaskState::Failed)
                        + summary.count(baton_model::TaskState::TimedOut),
                    cost: summary.cost_usd.map(baton_report::format_usd),
                }
            })
            .collect();
        let mut env = minijinja::Environment::new();
        env.add_template("runs.html", include_str!("serve_runs.html"))
            .context("the runs page's template")?;
        let page = env
            .get_template("runs.html")
            .and_then(|t| {
                t.render(minijinja::context! {
                    runs => rows,
                    base => app.base,
                    root => app.project.root.display().to_string(),
                })
            })
            .context("cannot lay out the runs page")?;
        Ok(Html(page))
    })
    .await
}

fn run_class(state: RunState) -> &'static str {
    match state {
        RunState::Succeeded => "ok",
        RunState::SucceededWithWarnings => "warn",
        RunState::Running => "run",
        RunState::Waiting | RunState::NeedsHuman => "human",
        RunState::Cancelled | RunState::Interrupted => "off",
        _ => "bad",
    }
}

fn live_of(app: &App, gathered: &Gathered, page: usize) -> baton_report::Live {
    let state = gathered.state;
    let failed_some = gathered.result.tasks.iter().any(|t| {
        t.state.is_failure()
            || matches!(
                t.state,
                baton_model::TaskState::Blocked | baton_model::TaskState::Skipped
            )
    });
    baton_report::Live {
        run: gathered.result.run.id.clone(),
        page,
        base: app.base.clone(),
        act_key: app.act_key.clone(),
        finished: !matches!(state, RunState::Running | RunState::Queued),
        resumable: matches!(state, RunState::Interrupted | RunState::Cancelled),
        retryable: !matches!(state, RunState::Running | RunState::Queued) && failed_some,
        soft_paused: state == RunState::Waiting
            && gathered
                .view
                .run()
                .stop
                .as_ref()
                .is_some_and(|stop| stop.cause == baton_model::StopCause::SoftBudget),
    }
}

#[derive(Deserialize)]
pub(super) struct PageQuery {
    /// Which page of the task cards, from 1.
    page: Option<usize>,
}

pub(super) async fn run_page(
    State(app): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Html<String>, PageError> {
    blocking(&app, move |app| {
        let run = resolve(app, &id)?;
        let gathered = Gathered::of(
            &*app.store,
            &app.project.state_dir,
            &run,
            records::effective_state(&run),
        )?;
        let page = query.page.unwrap_or(1).saturating_sub(1);
        let live = live_of(app, &gathered, page);
        let page = gathered
            .render(Some(live))
            .context("cannot lay out the run's page")?;
        Ok(Html(page))
    })
    .await
}

#[derive(Deserialize)]
pub(super) struct TaskQuery {
    name: String,
}

pub(super) async fn task_page(
    State(app): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<TaskQuery>,
) -> Result<Html<String>, PageError> {
    let (run, attempt) = blocking(&app, {
        let name = query.name.clone();
        move |app| {
            let run = resolve(app, &id)?;
            let attempt = baton_model::TaskId::new(name.as_str())
                .ok()
                .and_then(|task| app.store.attempts(&run.id, &task).ok())
                .and_then(|attempts| attempts.last().map(|a| a.attempt));
            Ok((run, attempt))
        }
    })
    .await?;
    let task = task_id(&query.name).map_err(|r| PageError(StatusCode::BAD_REQUEST, r))?;
    // What `baton diff RUN TASK` says; a task without a branch has none to show.
    let diff = cli(&app, &["diff", "--", run.id.as_str(), task.as_str()])
        .await
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned());
    blocking(&app, move |app| {
        let gathered = Gathered::of(
            &*app.store,
            &app.project.state_dir,
            &run,
            records::effective_state(&run),
        )?;
        let live = live_of(app, &gathered, 0);
        let extras = baton_report::TaskExtras { diff, attempt };
        let page = baton_report::render_task(&gathered.input(Some(live)), &query.name, &extras)
            .context("cannot lay out the task's page")?
            .ok_or_else(|| {
                Failure::BadInput(format!("run {} has no task `{}`", run.id, query.name))
            })?;
        Ok(Html(page))
    })
    .await
}
