//! The buttons: each runs the CLI's own command (`approve`, `reject`, `cancel`, `retry`,
//! `resume`), every value from the request checked as what it is and passed after `--`, so
//! what they record is recorded exactly as the CLI records it.

use std::path::PathBuf;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_model::RunId;
use serde::{Deserialize, Serialize};

use super::{App, Shared, blocking, cli, resolve, std_command, task_id};

#[derive(Deserialize)]
pub(super) struct Action {
    action: String,
    task: Option<String>,
    reason: Option<String>,
}

#[derive(Serialize)]
struct Acted {
    ok: bool,
    message: String,
}

/// Does what the CLI's command does, by running it: `approve RUN [TASK]`, `reject RUN TASK
/// --reason …`, `cancel RUN`, and `retry RUN [TASK]` / `resume RUN`, which drive the run and
/// so are started on their own and left to it.
pub(super) async fn act(
    State(app): State<Shared>,
    Path(id): Path<String>,
    Json(action): Json<Action>,
) -> Response {
    let run = match blocking(&app, {
        let id = id.clone();
        move |app| resolve(app, &id)
    })
    .await
    {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let run_id = run.id.to_string();
    let task = match action.task.as_deref().map(task_id).transpose() {
        Ok(task) => task,
        Err(reason) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(Acted {
                    ok: false,
                    message: reason,
                }),
            )
                .into_response();
        }
    };
    let task = task.as_ref().map(baton_model::TaskId::as_str);
    // Options first, `--`, then the run and the task: nothing from the request is an option.
    let reason = format!(
        "--reason={}",
        action
            .reason
            .as_deref()
            .unwrap_or("rejected in the dashboard")
    );
    let mut args: Vec<&str> = vec![action.action.as_str()];
    let drives = match (action.action.as_str(), task) {
        ("approve", _) | ("retry", _) => {
            args.extend(["--", run_id.as_str()]);
            args.extend(task);
            // Approving a run at its soft budget, and retrying, drive the run.
            action.action == "retry" || task.is_none()
        }
        ("reject", Some(task)) => {
            args.extend([reason.as_str(), "--", run_id.as_str(), task]);
            false
        }
        ("cancel", None) => {
            args.extend(["--", run_id.as_str()]);
            false
        }
        ("resume", None) => {
            args.extend(["--", run_id.as_str()]);
            true
        }
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                Json(Acted {
                    ok: false,
                    message: format!(
                        "`{}` is not something the dashboard does: approve, reject, cancel, retry or resume",
                        action.action
                    ),
                }),
            )
                .into_response();
        }
    };
    if drives {
        return match started(&app, &run.id, &args) {
            Ok(log) => Json(Acted {
                ok: true,
                message: format!(
                    "`baton {}` started; it writes to {}",
                    args.join(" "),
                    log.display()
                ),
            })
            .into_response(),
            Err(e) => Json(Acted {
                ok: false,
                message: format!("cannot start `baton {}`: {e}", args.join(" ")),
            })
            .into_response(),
        };
    }
    match cli(&app, &args).await {
        Ok(out) => {
            let said = if out.status.success() {
                &out.stdout
            } else {
                &out.stderr
            };
            Json(Acted {
                ok: out.status.success(),
                message: String::from_utf8_lossy(said).trim().to_owned(),
            })
            .into_response()
        }
        Err(e) => Json(Acted {
            ok: false,
            message: format!("cannot run `baton {}`: {e}", args.join(" ")),
        })
        .into_response(),
    }
}

/// Starts a command that drives a run in a session of its own, its output to a log beside the
/// run's: it outlives the request and the dashboard.
fn started(app: &App, run: &RunId, args: &[&str]) -> std::io::Result<PathBuf> {
    let dir = app.project.state_dir.join("runs").join(run.as_str());
    std::fs::create_dir_all(&dir)?;
    let log = dir.join(format!("dashboard-{}.log", args[0]));
    let out = std::fs::File::create(&log)?;
    let mut command = std_command(app, args);
    command.stdout(out.try_clone()?).stderr(out);
    // Its own session: a Ctrl-C of the dashboard does not reach it.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command.spawn()?;
    // Reaped by a thread of its own, so that it leaves no zombie while the dashboard runs.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(log)
}
