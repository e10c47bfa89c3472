//! `baton worker` and `baton workers`: running the attempts of runs shared through PostgreSQL,
//! and seeing who does.

use anyhow::Context;
use baton_model::parse_duration;
use baton_runner::{AgentConfig, RunConfig};
use baton_worker::{WorkerNews, WorkerOptions};
use serde::Serialize;
use tokio::sync::mpsc;

use super::records;
use crate::cli::{WorkerArgs, WorkersArgs};
use crate::exit::{self, Failure};
use crate::out;
use crate::project::Project;

/// Shortest lease a worker may hold: its heartbeat comes every third of it.
const MIN_LEASE_MS: u128 = 1_000;

pub(super) fn worker(args: WorkerArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let lease =
        parse_duration(&args.lease).map_err(|e| Failure::BadInput(format!("--lease: {e}")))?;
    if lease.as_millis() < MIN_LEASE_MS {
        return Err(Failure::BadInput(format!(
            "--lease {}: a lease shorter than 1s would lapse between heartbeats on a busy machine",
            args.lease
        )));
    }
    let kill_grace = parse_duration(&args.kill_grace)
        .map_err(|e| Failure::BadInput(format!("--kill-grace: {e}")))?;
    if args.slots == Some(0) {
        return Err(Failure::BadInput("--slots must be at least 1".into()));
    }
    let slots = args
        .slots
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    let project = Project::discover()?;
    let store = records::postgres_for(&project, store_url, "`baton worker`")?;
    let agents = AgentConfig::load(&project.root).map_err(|e| Failure::BadInput(e.to_string()))?;
    project.prepare_state_dir()?;
    let config = RunConfig {
        root: project.root.clone(),
        state_dir: project.state_dir.clone(),
        kill_grace,
        seed: super::run::fastrand_seed(),
        agents,
        worker: None,
    };
    let options = WorkerOptions {
        slots,
        engines: args.engines,
        labels: args.labels,
        lease,
        coordinate: !args.no_coordinate,
    };
    // Attempts run on a pool of threads; the coordinating of runs (whose parts are not
    // `Send`) and the worker's own loop on this one. Calls to the store block the thread that
    // makes them: on one thread, every attempt would wait for every call.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let server = store.server();
    let local = tokio::task::LocalSet::new();
    let worked = local.block_on(&runtime, async {
        let (stop_tx, stop_rx) = mpsc::unbounded_channel();
        // The worker says what a stop does itself.
        super::run::forward_signals_saying(stop_tx, None)?;
        let mut say = |news: WorkerNews| out::err(&describe(&news, &server, slots));
        anyhow::Ok(baton_worker::work(store, options, config, stop_rx, &mut say).await)
    })?;
    worked.map_err(|e| Failure::Internal(anyhow::Error::new(e).context("the worker stopped")))?;
    Ok(exit::SUCCESS)
}

/// `baton worker-watchdog`: watches the worker that started it (see
/// `baton_worker::watchdog`), saying on stderr (the worker's) what it did.
pub(super) fn watchdog(args: &crate::cli::WorkerWatchdogArgs) -> Result<i32, Failure> {
    let silence = std::time::Duration::from_millis(args.silence_ms);
    baton_worker::watchdog::watch(&args.worker, silence, &mut |watched| match watched {
        baton_worker::watchdog::Watched::Silent { silence, killed } => out::err(&format!(
            "baton worker: not heard from for {} (paused or stuck): its attempts' {killed} \
             process(es) ended before their leases lapse, to run again elsewhere",
            baton_model::format_duration(silence)
        )),
    });
    Ok(exit::SUCCESS)
}

/// A worker's news as the line it prints.
fn describe(news: &WorkerNews, server: &str, slots: u32) -> String {
    match news {
        WorkerNews::Started { id } => {
            format!("baton worker {id}: working for {server} ({slots} slots)")
        }
        WorkerNews::Claimed { run, task, attempt } => {
            format!("baton worker: {run} {task} attempt {attempt} started")
        }
        WorkerNews::Ended {
            run,
            task,
            attempt,
            outcome,
        } => format!("baton worker: {run} {task} attempt {attempt} ended: {outcome}"),
        WorkerNews::Lost { run, task, attempt } => format!(
            "baton worker: {run} {task} attempt {attempt} is no longer this worker's (its lease \
             lapsed, or the run was taken over): stopped, its end not recorded"
        ),
        WorkerNews::Coordinating { run } => format!("baton worker: coordinating run {run}"),
        WorkerNews::Coordinated { run, state } => {
            format!("baton worker: run {run} coordinated: {state}")
        }
        WorkerNews::Refused { run, why } => {
            format!("baton worker: leaves run {run} to other workers: {why}")
        }
        WorkerNews::Stopping { now: false, held } => format!(
            "baton worker: stopping: taking no more work; waiting for the {held} attempt(s) it \
             runs to end (again to stop them at once and give them back)"
        ),
        WorkerNews::Stopping { now: true, held } => format!(
            "baton worker: stopping now: {held} attempt(s) stopped and given back, to run again \
             on another worker"
        ),
        WorkerNews::GivenBack { run, task, attempt } => {
            format!("baton worker: {run} {task} attempt {attempt} given back")
        }
        WorkerNews::Swept { processes } => format!(
            "baton worker: stopped {processes} process(es) a worker that died on this host had \
             left running (their attempts run again elsewhere)"
        ),
        WorkerNews::Problem(problem) => format!("baton worker: warning: {problem}"),
    }
}

/// A worker not heard from for this long is not listed (and its record is removed).
const STALE_AFTER_MS: i64 = 120_000;

#[derive(Serialize)]
struct Listed {
    id: String,
    host: String,
    pid: u32,
    slots: u32,
    engines: Vec<String>,
    labels: Vec<String>,
    started_at_ms: i64,
    heartbeat_at_ms: i64,
    /// `alive`, or `lost`: a worker not heard from for longer than its lease (dead, cut off
    /// or paused, on any host), or one of this host whose process is gone (killed, crashed) —
    /// its row stays until it is stale, and its attempts run again once their leases lapse.
    state: &'static str,
    /// Since it was last heard from, on the store's clock.
    heard_ms_ago: i64,
    running: Vec<Running>,
}

#[derive(Serialize)]
struct Running {
    run: String,
    task: String,
    attempt: u32,
}

pub(super) fn workers(args: WorkersArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let project = Project::discover()?;
    let store = records::postgres_for(&project, store_url, "`baton workers`")?;
    let found = store
        .workers(STALE_AFTER_MS)
        .map_err(|e| Failure::Internal(anyhow::Error::new(e).context("cannot list the workers")))?;
    let here = baton_attempt::procs::hostname();
    let listed: Vec<Listed> = found
        .into_iter()
        .map(|w| Listed {
            state: if w.silent_past_its_lease()
                || (w.host == here && baton_attempt::procs::start_time(w.pid).is_none())
            {
                "lost"
            } else {
                "alive"
            },
            heard_ms_ago: w.heard_ms_ago,
            running: w
                .running
                .iter()
                .map(|key| Running {
                    run: key.run.to_string(),
                    task: task_name(&*store, &key.run, key.task),
                    attempt: key.attempt,
                })
                .collect(),
            id: w.id,
            host: w.host,
            pid: w.pid,
            slots: w.slots,
            engines: w.engines,
            labels: w.labels,
            started_at_ms: w.started_at_ms,
            heartbeat_at_ms: w.heartbeat_at_ms,
        })
        .collect();
    let mut out = out::Stdout::new("the list of workers");
    if args.json {
        out.json(&listed)?;
        return Ok(exit::SUCCESS);
    }
    if listed.is_empty() {
        out.line(&format!(
            "no worker has been heard from in the last {}s on {}: start one with `baton worker`",
            STALE_AFTER_MS / 1000,
            store.server()
        ))?;
        return Ok(exit::SUCCESS);
    }
    let mut text = format!(
        "{:<28} {:<5} {:>5}  {:<16} {:<12} {:>9}  RUNNING\n",
        "WORKER", "STATE", "SLOTS", "ENGINES", "LABELS", "HEARD"
    );
    for w in &listed {
        let held = w
            .running
            .iter()
            .map(|r| format!("{} {}#{}", short(&r.run), r.task, r.attempt))
            .collect::<Vec<_>>()
            .join(", ");
        let running = match (held.is_empty(), w.state) {
            (true, _) => "-".to_owned(),
            // Claimed still, by a process that is gone: they run again once their leases lapse.
            (false, "lost") => format!("{held} (run again elsewhere when their leases lapse)"),
            (false, _) => held,
        };
        text.push_str(&format!(
            "{:<28} {:<5} {:>2}/{:<2}  {:<16} {:<12} {:>8}s  {running}\n",
            w.id,
            w.state,
            w.running.len(),
            w.slots,
            or_any(&w.engines),
            if w.labels.is_empty() {
                "-".to_owned()
            } else {
                w.labels.join(",")
            },
            (w.heard_ms_ago.max(0) / 1000),
        ));
    }
    out.text(&text)?;
    Ok(exit::SUCCESS)
}

fn or_any(list: &[String]) -> String {
    if list.is_empty() {
        "any".to_owned()
    } else {
        list.join(",")
    }
}

/// A run id's first part, as `baton runs` shows it.
fn short(run: &str) -> &str {
    run.get(..15).unwrap_or(run)
}

/// The task at `idx` of `run`, by its id.
fn task_name(store: &dyn baton_store::Store, run: &baton_model::RunId, idx: u32) -> String {
    store
        .tasks(run)
        .ok()
        .and_then(|tasks| tasks.into_iter().find(|t| t.idx == idx))
        .map_or_else(|| format!("#{idx}"), |t| t.task.to_string())
}
