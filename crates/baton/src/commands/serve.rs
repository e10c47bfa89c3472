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

use std::convert::Infallible;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use baton_model::{RunId, RunState};
use baton_store::Store;
use futures_util::stream;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::records;
use crate::cli::ServeArgs;
use crate::exit::{self, Failure};
use crate::project::Project;
use baton_view::Gathered;

/// The cookie the link's token becomes.
const COOKIE: &str = "baton_token";
/// The header a request that acts carries the act key in.
const ACT_HEADER: &str = "x-baton-token";
/// Most streams (`events --follow`, `logs --follow`, a process each) open at once.
const MAX_STREAMS: usize = 16;

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

pub fn serve(args: ServeArgs, store_url: Option<&str>) -> Result<i32, Failure> {
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

/// 128 bits from the kernel's generator, as hex.
fn random_hex() -> Result<String, Failure> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").context("cannot open /dev/urandom")?,
        &mut bytes,
    )
    .context("cannot read /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
        .route(&format!("{base}/runs/{{id}}/act"), post(act))
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

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// A path outside the instance's: nothing of the dashboard is there.
async fn not_here() -> Response {
    (
        StatusCode::NOT_FOUND,
        "404: not a page of this dashboard: open the link `baton serve` printed\n",
    )
        .into_response()
}

/// Every request needs the token: in the link (then it becomes a cookie), the cookie, or an
/// `Authorization: Bearer` header. One that acts also carries the act key in [`ACT_HEADER`].
/// No response tells another site where it came from (the path is the instance's).
async fn guard(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let mut response = checked(&app, request, next).await;
    response.headers_mut().insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn checked(app: &App, request: Request, next: Next) -> Response {
    let query = request.uri().query().unwrap_or("");
    let in_link = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="));
    if let Some(given) = in_link {
        if !same(given, &app.token) {
            return unauthorized();
        }
        let rest: Vec<&str> = query
            .split('&')
            .filter(|pair| !pair.starts_with("token="))
            .collect();
        let path = request.uri().path();
        let to = if rest.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", rest.join("&"))
        };
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path={}",
            app.token, app.base
        );
        return ([(header::SET_COOKIE, cookie)], Redirect::to(&to)).into_response();
    }
    let headers = request.headers();
    let known = cookie_token(headers)
        .or_else(|| bearer_token(headers))
        .is_some_and(|given| same(given, &app.token));
    if !known {
        return unauthorized();
    }
    if request.method() == axum::http::Method::POST {
        let carried = headers
            .get(ACT_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|given| same(given, &app.act_key));
        if !carried {
            return (
                StatusCode::FORBIDDEN,
                "403: a request that acts carries the page's act key in the X-Baton-Token header\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "401: this dashboard needs its token: open the link `baton serve` printed \
         (http://ADDRESS/?token=…)\n",
    )
        .into_response()
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

async fn runs_page(State(app): State<Shared>) -> Result<Html<String>, PageError> {
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
struct PageQuery {
    /// Which page of the task cards, from 1.
    page: Option<usize>,
}

async fn run_page(
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
struct TaskQuery {
    name: String,
}

async fn task_page(
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

/// A command's standard output (`baton logs --follow`) as server-sent `chunk` events of whole
/// characters, then an `end` event; the command is killed when the page goes away.
fn follow(app: &App, args: &[&str]) -> Response {
    // A process each: a bounded number, whoever asks.
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return too_many_streams();
    };
    let child = command(app, args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    struct Following {
        child: Option<tokio::process::Child>,
        stdout: Option<tokio::process::ChildStdout>,
        pending: Vec<u8>,
        done: bool,
        /// Held while the stream is open.
        _permit: tokio::sync::OwnedSemaphorePermit,
    }
    let mut state = Following {
        stdout: None,
        child: None,
        pending: Vec::new(),
        done: false,
        _permit: permit,
    };
    if let Ok(mut child) = child {
        state.stdout = child.stdout.take();
        state.child = Some(child);
    }
    let events = stream::unfold(state, move |mut state| async move {
        if state.done {
            return None;
        }
        let mut buf = vec![0u8; 16 * 1024];
        let read = match state.stdout.as_mut() {
            Some(stdout) => stdout.read(&mut buf).await.unwrap_or(0),
            None => 0,
        };
        if read == 0 {
            state.done = true;
            if let Some(mut child) = state.child.take() {
                let _ = child.wait().await;
            }
            // Not empty: a browser drops an event without data.
            return Some((
                Ok::<_, Infallible>(Event::default().event("end").data("end")),
                state,
            ));
        }
        state.pending.extend_from_slice(&buf[..read]);
        // Whole characters only: the rest waits for the next read.
        let cut = match std::str::from_utf8(&state.pending) {
            Ok(_) => state.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => state.pending.len(),
        };
        let chunk: Vec<u8> = state.pending.drain(..cut).collect();
        let text = String::from_utf8_lossy(&chunk).into_owned();
        let data = serde_json::to_string(&text).unwrap_or_default();
        Some((Ok(Event::default().event("chunk").data(data)), state))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The run `id` names (an id, a prefix of one, `latest`), or the page's error.
async fn run_of(app: &Shared, id: String) -> Result<baton_store::RunRecord, PageError> {
    blocking(app, move |app| resolve(app, &id)).await
}

/// `name` as a task id, or why it is not one.
fn task_id(name: &str) -> Result<baton_model::TaskId, String> {
    baton_model::TaskId::new(name).map_err(|e| format!("`{name}` is not a task id: {e}"))
}

/// The run's event log as it grows, as `baton events --follow --json` prints it, read from
/// the store here: a stream costs a task of the server's, not a process.
async fn run_events(State(app): State<Shared>, Path(id): Path<String>) -> Response {
    let run = match run_of(&app, id).await {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return too_many_streams();
    };
    struct Reading {
        app: Shared,
        run: RunId,
        after: u64,
        pending: std::collections::VecDeque<String>,
        ended: bool,
        _permit: tokio::sync::OwnedSemaphorePermit,
    }
    let reading = Reading {
        app: Arc::clone(&app),
        run: run.id,
        after: 0,
        pending: std::collections::VecDeque::new(),
        ended: false,
        _permit: permit,
    };
    let events = stream::unfold(reading, |mut reading| async move {
        loop {
            if let Some(line) = reading.pending.pop_front() {
                let event = Event::default().event("baton").data(line);
                return Some((Ok::<_, Infallible>(event), reading));
            }
            if reading.ended {
                return None;
            }
            let (app, run, after) = (Arc::clone(&reading.app), reading.run.clone(), reading.after);
            let read = tokio::task::spawn_blocking(move || {
                let events = app.store.events(&run, after, EVENTS_PAGE)?;
                let goes_on = app.store.run(&run)?.is_some_and(|r| records::goes_on(&r));
                Ok::<_, baton_store::StoreError>((events, goes_on))
            })
            .await;
            let Ok(Ok((events, goes_on))) = read else {
                // The store failed: the page is told the stream ended, as at a run's end.
                reading.ended = true;
                return Some((Ok(Event::default().event("end").data("end")), reading));
            };
            let full = events.len() as u32 == EVENTS_PAGE;
            for event in &events {
                reading.after = event.seq;
                let line =
                    serde_json::to_string(&super::events::JsonEvent::of(event)).unwrap_or_default();
                reading.pending.push_back(line);
            }
            if reading.pending.is_empty() && !full {
                if !goes_on {
                    reading.ended = true;
                    // Not empty: a browser drops an event without data.
                    return Some((Ok(Event::default().event("end").data("end")), reading));
                }
                tokio::time::sleep(EVENTS_POLL).await;
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// How often a followed run's log is read for more.
const EVENTS_POLL: Duration = Duration::from_millis(200);
/// Most events read at once.
const EVENTS_PAGE: u32 = 1000;

fn too_many_streams() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "5")],
        format!("503: {MAX_STREAMS} streams are open already; close a page and try again\n"),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LogQuery {
    name: String,
    attempt: Option<u32>,
}

async fn task_log(
    State(app): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<LogQuery>,
) -> Response {
    let run = match run_of(&app, id).await {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let task = match task_id(&query.name) {
        Ok(task) => task,
        Err(reason) => return PageError(StatusCode::BAD_REQUEST, reason).into_response(),
    };
    let attempt = query.attempt.map(|n| n.to_string());
    let mut args = vec!["logs", "--follow"];
    if let Some(n) = &attempt {
        args.extend(["--attempt", n.as_str()]);
    }
    args.extend(["--", run.id.as_str(), task.as_str()]);
    follow(&app, &args)
}

#[derive(Deserialize)]
struct Action {
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
async fn act(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "theme=dark; baton_token=f00d; other=1".parse().unwrap(),
        );
        assert_eq!(cookie_token(&headers), Some("f00d"));
    }
}
