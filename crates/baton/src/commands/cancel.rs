use std::time::{Duration, Instant};

use anyhow::Context;
use baton_model::{RunState, parse_duration};
use baton_runner::{RunError, driver};
use baton_store::StoreError;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::records;
use crate::cli::CancelArgs;
use crate::exit::{self, Failure};
use crate::out;

const POLL: Duration = Duration::from_millis(100);

pub fn cancel(args: CancelArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let wait = parse_duration(&args.wait).map_err(|e| Failure::BadInput(format!("--wait: {e}")))?;
    let (project, reader) = records::open_with_project(store_url)?;
    let run = records::resolve(&*reader, Some(&args.run))?;
    if run.status != RunState::Running {
        out::line(
            "the run's state",
            &format!("run {} has already finished: {}", run.id, run.status),
        )?;
        return Ok(exit::SUCCESS);
    }
    match run.driver.as_ref().filter(|d| driver::is_alive(d)) {
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
            let deadline = Instant::now() + wait;
            loop {
                let now = reader.run(&run.id)?.unwrap_or_else(|| run.clone());
                if now.status != RunState::Running {
                    out::line("the run's state", &format!("run {} {}", run.id, now.status))?;
                    return Ok(exit::SUCCESS);
                }
                if Instant::now() >= deadline {
                    out::err(&format!(
                        "baton: run {} has not stopped within {}; it may still be ending its tasks",
                        run.id, args.wait
                    ));
                    return Ok(exit::RUN_FAILED);
                }
                std::thread::sleep(POLL);
            }
        }
        None => {
            // Nobody drives it: record the cancellation ourselves.
            let at = project.store_at(store_url).map_err(Failure::BadInput)?;
            let store = records::open_for_writing(&at)?;
            match baton_runner::cancel_abandoned(store.as_ref(), &run.id) {
                Ok(()) => {
                    out::line(
                        "the run's state",
                        &format!("run {} cancelled (its driver had died)", run.id),
                    )?;
                    Ok(exit::SUCCESS)
                }
                Err(RunError::Store(StoreError::RunHeld { pid, host, .. })) => {
                    Err(Failure::BadInput(format!(
                        "run {} was just taken over by process {pid} on {host}",
                        run.id
                    )))
                }
                Err(err) => Err(Failure::Internal(err.into())),
            }
        }
    }
}
