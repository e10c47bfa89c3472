use std::time::{Duration, Instant};

use anyhow::Context;
use baton_model::{RunState, parse_duration};
use baton_runner::{RunError, driver};
use baton_store::{Liveness, RunReader, RunRecord, StoreError};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::records;
use crate::cli::CancelArgs;
use crate::exit::{self, Failure};
use crate::out;
use crate::project::StoreAt;

const POLL: Duration = Duration::from_millis(100);

/// How long a worker counts as alive after its last heartbeat, for telling a run a worker
/// drives from one a `baton run` drives.
const WORKER_SEEN_WITHIN_MS: i64 = 60_000;

pub(super) fn cancel(args: CancelArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let wait = parse_duration(&args.wait).map_err(|e| Failure::BadInput(format!("--wait: {e}")))?;
    let (project, reader) = records::open_with_project(store_url)?;
    let run = records::resolve(&*reader, Some(&args.run))?;
    let at = project.store_at(store_url).map_err(Failure::BadInput)?;
    if !matches!(run.status, RunState::Running | RunState::Queued) {
        out::line(
            "the run's state",
            &format!("run {} has already finished: {}", run.id, run.status),
        )?;
        return Ok(exit::SUCCESS);
    }
    let liveness = run.driver.as_ref().map(driver::liveness);
    // A run a worker coordinates (here or elsewhere), or one driven on another machine, is
    // asked through the store: a signal cannot reach another machine, and a worker that is
    // sent one drains itself rather than cancel its runs.
    if let (StoreAt::Postgres(url), Some(d), Some(liveness)) = (&at, &run.driver, liveness)
        && liveness != Liveness::Dead
    {
        let store: &dyn baton_store::WorkQueue = &records::open_postgres(url)?;
        let by_worker = store
            .workers(WORKER_SEEN_WITHIN_MS)
            .map_err(|e| Failure::Internal(e.into()))?
            .iter()
            .any(|w| w.pid == d.pid && w.host == d.host);
        if by_worker || liveness == Liveness::Unknown {
            if !store
                .request_cancel(&run.id)
                .map_err(|e| Failure::Internal(e.into()))?
            {
                return already_ended(&*reader, &run);
            }
            let who = if by_worker {
                "the worker"
            } else {
                "the process"
            };
            out::err(&format!(
                "baton: asked {who} driving run {} (pid {} on {}) to cancel it",
                run.id, d.pid, d.host
            ));
            return await_stop(&*reader, &run, wait, &args.wait);
        }
    }
    match run
        .driver
        .as_ref()
        .filter(|_| liveness == Some(Liveness::Alive))
    {
        Some(d) => {
            // The driver handles SIGTERM exactly as Ctrl-C: stop launching, terminate what
            // runs, record it, finish the run.
            let pid = i32::try_from(d.pid).context("a pid out of range")?;
            kill(Pid::from_raw(pid), Signal::SIGTERM).with_context(|| {
                format!("cannot signal process {} driving run {}", d.pid, run.id)
            })?;
            out::err(&format!(
                "baton: asked process {} to stop run {}",
                d.pid, run.id
            ));
            await_stop(&*reader, &run, wait, &args.wait)
        }
        None => {
            // Nobody drives it (its driver died, or it waits for a worker): record the
            // cancellation ourselves.
            let store = records::open_for_writing(&at)?;
            let queued = run.status == RunState::Queued;
            match baton_runner::cancel_abandoned(store.as_ref(), &run.id) {
                Ok(()) => {
                    let why = if queued {
                        "before a worker took it"
                    } else {
                        "its driver had died"
                    };
                    out::line(
                        "the run's state",
                        &format!("run {} cancelled ({why})", run.id),
                    )?;
                    Ok(exit::SUCCESS)
                }
                Err(RunError::Store(StoreError::RunHeld { pid, host, .. })) => {
                    Err(Failure::BadInput(format!(
                        "run {} was just taken over by process {pid} on {host}: cancel it again",
                        run.id
                    )))
                }
                Err(err) => Err(Failure::Internal(err.into())),
            }
        }
    }
}

/// A run that ended between reading it and asking it to stop.
fn already_ended(reader: &dyn RunReader, run: &RunRecord) -> Result<i32, Failure> {
    let now = reader.run(&run.id)?.unwrap_or_else(|| run.clone());
    out::line(
        "the run's state",
        &format!("run {} has already finished: {}", run.id, now.status),
    )?;
    Ok(exit::SUCCESS)
}

/// Waits up to `wait` for the run to stop, saying how it ended.
fn await_stop(
    reader: &dyn RunReader,
    run: &RunRecord,
    wait: Duration,
    said: &str,
) -> Result<i32, Failure> {
    let deadline = Instant::now() + wait;
    loop {
        let now = reader.run(&run.id)?.unwrap_or_else(|| run.clone());
        if now.status != RunState::Running {
            out::line("the run's state", &format!("run {} {}", run.id, now.status))?;
            return Ok(exit::SUCCESS);
        }
        if Instant::now() >= deadline {
            out::err(&format!(
                "baton: run {} has not stopped within {said}; it may still be ending its tasks",
                run.id
            ));
            return Ok(exit::RUN_FAILED);
        }
        std::thread::sleep(POLL);
    }
}
