//! `baton serve`: a web dashboard over the store. The runs list; a run page that is the
//! report's, following the run's event log as it grows (server-sent events, so it works for a
//! run driven by any process); a task page with its card, its diff and its log as it grows; and
//! buttons that do what the CLI does — they run the CLI's own commands (`approve`, `reject`,
//! `cancel`, `retry`, `resume`), so what they record is recorded exactly as the CLI records it.
//! The streams: the run's event log read from the store in-process (as `baton events --follow
//! --json` prints it), and a task's log from `baton logs --follow`.
//!
//! Bound to loopback unless `--allow-remote`. Every page is under a path of the instance's
//! own, random (`/3f9c…/`), and every request needs the token printed at start: the link
//! carries it once, then a cookie does, scoped to that path. Cookies are scoped by host, not
//! by port, so a cookie for `/` would go to every other server on the machine (a dev server an
//! agent started); one for the instance's path goes to no other, and two dashboards keep
//! theirs apart. A request that acts also carries the instance's act key in a header, which
//! another site's page cannot send; pages hold that key, never the token. Every value from a
//! request that reaches a command line is checked as what it is (a run, a task) and passed
//! after `--`. At most [`MAX_STREAMS`] streams are open at once.
//!
//! - `auth`: the token, the cookie, the act key: all the security code, in one file.
//! - `pages`: the runs list, a run's page, a task's page.
//! - `stream`: the event log and a task's log as they grow.
//! - `act`: the buttons, each one of the CLI's own commands.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_store::Store;

use crate::cli::ServeArgs;
use crate::commands::records;
use crate::exit::{self, Failure};
use crate::project::Project;

mod act;
mod auth;
mod pages;
mod stream;

use auth::{guard, not_here, random_hex};
use pages::{run_page, runs_page, task_page};
use stream::{MAX_STREAMS, run_events, task_log};

struct App {
    store: Box<dyn Store>,
    project: Project,
    token: String,
    /// The path every page is under: `/` and 32 random hex digits.
    base: String,
    /// What a request that acts carries in [`ACT_HEADER`] beside the cookie.
    act_key: String,
    streams: Arc<tokio::sync::Semaphore>,
    /// `--store`, passed on to the commands the dashboard runs.
    store_url: Option<String>,
    exe: PathBuf,
}

type Shared = Arc<App>;

pub(crate) fn serve(args: ServeArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let addr = address(&args.addr)?;
    if !addr.ip().is_loopback() && !args.allow_remote {
        return Err(Failure::BadInput(format!(
            "refusing to serve on {addr}: it is not a loopback address, so anyone who can reach \
             this machine could ask for the dashboard, and with the token (which travels in the \
             clear over plain HTTP) approve, reject, cancel and retry runs; serve on 127.0.0.1 \
             and reach it through an SSH tunnel, or pass --allow-remote behind a proxy that adds \
             TLS"
        )));
    }
    let (project, store) = records::open_with_project(store_url)?;
    let app = Arc::new(App {
        store,
        project,
        token: random_hex()?,
        base: format!("/{}", random_hex()?),
        act_key: random_hex()?,
        streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
        store_url: store_url.map(str::to_owned),
        exe: std::env::current_exe().context("cannot find baton's own executable")?,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    runtime.block_on(run(app, addr))
}

/// `127.0.0.1:7878`, `localhost:7878`, `[::1]:7878`.
fn address(text: &str) -> Result<SocketAddr, Failure> {
    let mut addrs = text.to_socket_addrs().map_err(|e| {
        Failure::BadInput(format!(
            "--addr {text}: {e}; give an address and a port, like 127.0.0.1:7878"
        ))
    })?;
    addrs
        .next()
        .ok_or_else(|| Failure::BadInput(format!("--addr {text}: names no address")))
}

async fn run(app: Shared, addr: SocketAddr) -> Result<i32, Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::BadInput(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let base = &app.base;
    let router = Router::new()
        .route(base, get(runs_page))
        .route(&format!("{base}/"), get(runs_page))
        .route(&format!("{base}/runs/{{id}}"), get(run_page))
        .route(&format!("{base}/runs/{{id}}/events"), get(run_events))
        .route(&format!("{base}/runs/{{id}}/task"), get(task_page))
        .route(&format!("{base}/runs/{{id}}/log"), get(task_log))
        .route(&format!("{base}/runs/{{id}}/act"), post(act::act))
        .fallback(not_here)
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard))
        .with_state(Arc::clone(&app));
    if !bound.ip().is_loopback() {
        crate::out::line(
            "the remote warning",
            &format!(
                "baton: warning: serving on {bound}, which other machines can reach: whoever has \
                 the link can read every run of {} (tasks' output, logs, diffs) and approve, \
                 reject, cancel, retry and resume them; over plain HTTP the token travels in the \
                 clear, so put a proxy that adds TLS in front",
                app.project.root.display()
            ),
        )?;
    }
    crate::out::line(
        "where the dashboard is",
        &format!(
            "baton: the dashboard of {} is at http://{bound}{base}/ (Ctrl-C stops it)\nbaton: open http://{bound}{base}/?token={}",
            app.project.root.display(),
            app.token
        ),
    )?;
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the server failed")?;
    Ok(exit::SUCCESS)
}

/// A page's error: what went wrong, as text.
struct PageError(StatusCode, String);

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        (self.0, format!("{}\n", self.1)).into_response()
    }
}

impl From<Failure> for PageError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::BadInput(text) => Self(StatusCode::NOT_FOUND, text),
            Failure::Internal(err) => Self(StatusCode::INTERNAL_SERVER_ERROR, format!("{err:#}")),
            Failure::Reported(code) => Self(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed (exit {code})"),
            ),
            Failure::Closed => Self(StatusCode::INTERNAL_SERVER_ERROR, "closed".to_owned()),
        }
    }
}

/// Runs `work` with the store off the server's thread (the store's calls block).
async fn blocking<T: Send + 'static>(
    app: &Shared,
    work: impl FnOnce(&App) -> Result<T, Failure> + Send + 'static,
) -> Result<T, PageError> {
    let app = Arc::clone(app);
    tokio::task::spawn_blocking(move || work(&app))
        .await
        .map_err(|e| PageError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(PageError::from)
}

fn resolve(app: &App, id: &str) -> Result<baton_store::RunRecord, Failure> {
    records::resolve(&*app.store, Some(id))
}

/// `baton ARGS` as the user would run it here, with the same store; its output.
async fn cli(app: &App, args: &[&str]) -> std::io::Result<std::process::Output> {
    command(app, args).output().await
}

fn command(app: &App, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(std_command(app, args));
    command.kill_on_drop(true);
    command
}

/// `baton ARGS` in the project, with the dashboard's store.
fn std_command(app: &App, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(&app.exe);
    if let Some(url) = &app.store_url {
        command.arg("--store").arg(url);
    }
    command
        .args(args)
        .current_dir(&app.project.root)
        .stdin(std::process::Stdio::null())
        .env("NO_COLOR", "1");
    command
}

/// The run `id` names (an id, a prefix of one, `latest`), or the page's error.
async fn run_of(app: &Shared, id: String) -> Result<baton_store::RunRecord, PageError> {
    blocking(app, move |app| resolve(app, &id)).await
}

/// `name` as a task id, or why it is not one.
fn task_id(name: &str) -> Result<baton_model::TaskId, String> {
    baton_model::TaskId::new(name).map_err(|e| format!("`{name}` is not a task id: {e}"))
}
