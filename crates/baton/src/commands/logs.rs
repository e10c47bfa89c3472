use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use baton_model::TaskId;

use super::records;
use crate::cli::LogsArgs;
use crate::exit::{self, Failure};
use crate::out;

/// How often `--follow` looks for more output.
const POLL: Duration = Duration::from_millis(100);

pub fn logs(args: LogsArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let dirs = baton_runner::RunDirs::new(&project.state_dir, &run.id);
    let task = TaskId::new(args.task.clone())
        .map_err(|e| Failure::BadInput(format!("`{}` is not a task id: {e}", args.task)))?;
    let find =
        |store: &dyn baton_store::Store| -> Result<Option<baton_store::AttemptRecord>, Failure> {
            let attempts = store.attempts(&run.id, &task)?;
            Ok(match args.attempt {
                Some(n) => attempts.into_iter().find(|a| a.attempt == n),
                None => attempts.into_iter().max_by_key(|a| a.attempt),
            })
        };
    let mut attempt = find(&*store)?;
    if attempt.is_none() {
        let known = store.tasks(&run.id)?.iter().any(|t| t.task == task);
        if !known {
            return Err(Failure::BadInput(format!(
                "run {} has no task `{task}`; `baton status {}` lists its tasks",
                run.id, run.id
            )));
        }
        if !args.follow {
            return Err(Failure::BadInput(match args.attempt {
                Some(n) => format!("task `{task}` of run {} has no attempt {n}", run.id),
                None => format!("task `{task}` of run {} has not started", run.id),
            }));
        }
    }

    let mut out = out::Stdout::new("the task's log");
    let mut offset = 0u64;
    loop {
        let Some(current) = attempt.as_ref() else {
            // --follow on a task that has not started: wait for its first attempt.
            if records::effective_state(&store.run(&run.id)?.unwrap_or_else(|| run.clone()))
                == baton_model::RunState::Running
            {
                std::thread::sleep(POLL);
                attempt = find(&*store)?;
                continue;
            }
            return Ok(exit::SUCCESS);
        };
        let ended = current.ended_at_ms.is_some();
        // The path is recorded when the attempt ends; while it runs, it is where the layout
        // puts it.
        let path = current
            .log_path
            .clone()
            .unwrap_or_else(|| dirs.log(&task, current.attempt).display().to_string());
        offset = copy_from(&path, offset, &mut out)?;
        if !args.follow || ended {
            if ended && args.follow {
                // The attempt ended after the last read: print what it wrote in between.
                copy_from(&path, offset, &mut out)?;
            }
            return Ok(exit::SUCCESS);
        }
        std::thread::sleep(POLL);
        attempt = find(&*store)?;
    }
}

/// Copies the file from `offset` to `out` and returns the new offset. A file that does not exist
/// yet is an attempt that has printed nothing (log files are created on the first byte). On a
/// terminal, what a task printed is shown, never played: no escape sequence of the task's
/// reaches the user's terminal.
fn copy_from(path: &str, offset: u64, out: &mut out::Stdout) -> Result<u64, Failure> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(offset),
        Err(e) => {
            return Err(Failure::Internal(
                anyhow::Error::new(e).context(format!("cannot read {path}")),
            ));
        }
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(anyhow::Error::from)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(anyhow::Error::from)?;
    out.task_output(&bytes)?;
    Ok(offset + bytes.len() as u64)
}
