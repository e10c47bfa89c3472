use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_layout::AttemptLog;
use baton_model::TaskId;

use super::records;
use crate::cli::LogsArgs;
use crate::exit::{self, Failure};
use crate::out;

/// How often `--follow` looks for more output.
const POLL: Duration = Duration::from_millis(100);

pub(super) fn logs(args: LogsArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let dirs = baton_runner::RunDirs::new(&project.state_dir, &run.id);
    let task = match &args.task {
        Some(task) => TaskId::new(task.clone())
            .map_err(|e| Failure::BadInput(format!("`{task}` is not a task id: {e}")))?,
        // A run of one task: that one.
        None => match store.tasks(&run.id)?.as_slice() {
            [only] => only.task.clone(),
            tasks => {
                let shown: Vec<&str> = tasks.iter().take(8).map(|t| t.task.as_str()).collect();
                return Err(Failure::BadInput(format!(
                    "run {} has {} tasks: name one (`baton logs {} TASK`): {}{}",
                    run.id,
                    tasks.len(),
                    run.id,
                    shown.join(", "),
                    if tasks.len() > shown.len() {
                        ", …"
                    } else {
                        ""
                    }
                )));
            }
        },
    };
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
    let mut shown = Shown::default();
    loop {
        let Some(current) = attempt.as_ref() else {
            // --follow on a task that has not started: wait for its first attempt.
            if records::goes_on(&store.run(&run.id)?.unwrap_or_else(|| run.clone())) {
                std::thread::sleep(POLL);
                attempt = find(&*store)?;
                continue;
            }
            return Ok(exit::SUCCESS);
        };
        let ended = current.ended_at_ms.is_some();
        // The path is recorded when the attempt ends; while it runs, it is where the layout
        // puts it.
        let main = current
            .log_path
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or_else(|| dirs.log(&task, current.attempt, AttemptLog::Task));
        let dir = main
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or(dirs.logs.clone());
        let read = || -> Result<Vec<PhaseLog>, Failure> {
            let mut logs = phase_logs(&dir, &task, current.attempt)?;
            if logs.is_empty() {
                // Run by a worker on another machine: its logs are in the store.
                let cache = dirs.run.join("shipped-logs");
                let prefix = AttemptLog::prefix(&task, current.attempt);
                if fetch_shipped(&*store, &run.id, &prefix, &cache)? {
                    logs = phase_logs(&cache, &task, current.attempt)?;
                }
            }
            Ok(logs
                .into_iter()
                .filter(|log| args.phase.is_none_or(|p| p.is(log.log.phase())))
                .collect())
        };
        shown.print(&read()?, &mut out)?;
        if !args.follow || ended {
            if ended && args.follow {
                // The attempt ended after the last read: print what it wrote in between.
                shown.print(&read()?, &mut out)?;
            }
            return Ok(exit::SUCCESS);
        }
        std::thread::sleep(POLL);
        attempt = find(&*store)?;
    }
}

/// Brings the log files a worker shipped to the store (those of `run` named `prefix…`) into
/// `cache`, a directory of this machine's own: what is new is appended, a file rewritten
/// since is fetched whole. Each keeps its time of last change, which orders the phases.
/// Whether the store had any.
fn fetch_shipped(
    store: &dyn baton_store::Store,
    run: &baton_model::RunId,
    prefix: &str,
    cache: &Path,
) -> Result<bool, Failure> {
    use std::io::Write;
    let files = store.log_files(run, prefix)?;
    if files.is_empty() {
        return Ok(false);
    }
    let cannot = |e: std::io::Error| {
        Failure::Internal(
            anyhow::Error::new(e).context(format!("cannot write {}", cache.display())),
        )
    };
    std::fs::create_dir_all(cache).map_err(cannot)?;
    for stored in files {
        // Names come from the store: nothing but a plain file name is written.
        if stored.file.contains('/') || stored.file.starts_with('.') {
            continue;
        }
        let path = cache.join(&stored.file);
        let when = std::time::UNIX_EPOCH + Duration::from_millis(stored.modified_ms.max(0) as u64);
        let (have, changed) =
            std::fs::metadata(&path).map_or((0, None), |m| (m.len(), m.modified().ok()));
        // Shorter, or as long but changed since: rewritten (a check's log, each round).
        let rewritten = have > stored.size || (have == stored.size && changed != Some(when));
        let from = if rewritten { 0 } else { have };
        if from < stored.size || rewritten {
            let bytes = store.log_bytes(run, &stored.file, from)?;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(from > 0)
                .truncate(from == 0)
                .open(&path)
                .map_err(cannot)?;
            file.write_all(&bytes).map_err(cannot)?;
        }
        if let Ok(file) = std::fs::File::options().write(true).open(&path) {
            let _ = file.set_modified(when);
        }
    }
    Ok(true)
}

/// One phase's log file of an attempt.
#[derive(Debug)]
struct PhaseLog {
    path: PathBuf,
    log: AttemptLog,
}

impl PhaseLog {
    fn title(&self) -> String {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match self.log {
            AttemptLog::Task => format!("── the task · {name} ──"),
            AttemptLog::Setup(n) => format!("── setup {n} · {name} ──"),
            AttemptLog::Check(n) => format!("── check {n} · {name} ──"),
            AttemptLog::Review(n) => format!("── review {n} · {name} ──"),
            AttemptLog::Fix(n) => format!("── fix round {n} · {name} ──"),
        }
    }
}

/// The log files of attempt `attempt` of `task` in `dir`, in the order they were last written:
/// the phases of an attempt run one after another (setup, the task, then checks and fix rounds
/// in turn; each round's checks rewrite the last round's logs). A phase that printed nothing
/// has no file (log files are created on the first byte).
fn phase_logs(dir: &Path, task: &TaskId, attempt: u32) -> Result<Vec<PhaseLog>, Failure> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Failure::Internal(
                anyhow::Error::new(e).context(format!("cannot read {}", dir.display())),
            ));
        }
    };
    let mut logs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(log) = name
            .to_str()
            .and_then(|n| AttemptLog::parse(task, attempt, n))
        else {
            continue;
        };
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        logs.push((
            modified,
            PhaseLog {
                path: entry.path(),
                log,
            },
        ));
    }
    logs.sort_by_key(|(modified, log)| (*modified, log.log.phase(), log.log.n()));
    Ok(logs.into_iter().map(|(_, log)| log).collect())
}

/// What has been printed of each log, so that `--follow` prints only what is new.
#[derive(Default)]
struct Shown {
    offsets: Vec<(PathBuf, u64)>,
    /// Whether anything was printed, and whether it ended a line.
    printed: bool,
    at_line_start: bool,
}

impl Shown {
    /// Prints what is new in `logs`, each log after a line naming its phase (but the task's
    /// own log when it is the first thing printed: `baton logs` of a task without setup or
    /// checks prints its output alone, as it was).
    fn print(&mut self, logs: &[PhaseLog], out: &mut out::Stdout) -> Result<(), Failure> {
        for log in logs {
            let path = log.path.display().to_string();
            let known = self.offset(&log.path);
            let Some((anew, new)) = read_from(&path, known)? else {
                continue;
            };
            let read = match known {
                Some(_) => anew.then_some(0),
                None => Some(0),
            };
            self.offsets.retain(|(p, _)| *p != log.path);
            self.offsets.push((
                log.path.clone(),
                read.or(known).unwrap_or(0) + new.len() as u64,
            ));
            let rewritten = read.is_some();
            if rewritten && (self.printed || log.log != AttemptLog::Task) {
                if self.printed && !self.at_line_start {
                    out.text("\n")?;
                }
                out.line(&log.title())?;
                self.printed = true;
                self.at_line_start = true;
            }
            if !new.is_empty() {
                out.task_output(&new)?;
                self.printed = true;
                self.at_line_start = new.ends_with(b"\n");
            }
        }
        Ok(())
    }

    fn offset(&self, path: &Path) -> Option<u64> {
        self.offsets
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, offset)| *offset)
    }
}

/// What `path` holds past `offset` (from the start when `offset` is `None`, the file not
/// read before), and whether it is read from the start: a log shorter than what was read of
/// it was written anew (a check of a later round). `None` when the file does not exist.
fn read_from(path: &str, offset: Option<u64>) -> Result<Option<(bool, Vec<u8>)>, Failure> {
    let cannot = |e: std::io::Error| {
        Failure::Internal(anyhow::Error::new(e).context(format!("cannot read {path}")))
    };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot(e)),
    };
    let len = file.metadata().map_err(cannot)?.len();
    let (anew, from) = match offset {
        Some(offset) if offset <= len => (false, offset),
        _ => (true, 0),
    };
    file.seek(SeekFrom::Start(from)).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(cannot)?;
    Ok(Some((anew, bytes)))
}
