//! Where a run keeps its files under `.baton/runs/RUN/` and its scratch directory, and what
//! its logs are named: one type for the attempt that writes them and every command that reads
//! them (`baton logs`, `report`, the dashboard).

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use baton_model::{RunId, TaskId};

/// Where a run keeps its files.
///
/// ```text
/// .baton/runs/RUN/logs/TASK.ATTEMPT.log     everything an attempt printed (kept)
///                   TASK.ATTEMPT.KIND-N.log  its setup, check, review and fix rounds
///                   +run.KIND-N.log          the run's checks on its merged result
/// SCRATCH/RUN/handoff/PID.N.json            what a running task's predecessors handed it (reused)
/// SCRATCH/RUN/out/TASK.ATTEMPT.json         structured output a task may write ($BATON_OUTPUT)
/// SCRATCH/RUN/launched                      the attempts launched, noted before they start
///                                            (kept until the run ends, for a takeover)
/// SCRATCH/RUN/tmp/TASK/                     a confined task's $TMPDIR; a file-prompted
///                                            agent's prompt and record (aider)
/// ```
///
/// SCRATCH holds files that only live while a task runs: their content is recorded in the store
/// (outputs) or can be rebuilt from it (handoffs). It is a private directory on tmpfs
/// (`$XDG_RUNTIME_DIR/baton`, else `/dev/shm/baton-UID`) when there is one, because creating a
/// file on a disk file system costs far more than the rest of launching a small task (0.6 ms on
/// ext4 here, against ~6 µs on tmpfs); otherwise `.baton/runs/RUN/`.
#[derive(Debug, Clone)]
pub struct RunDirs {
    pub run: PathBuf,
    pub logs: PathBuf,
    pub scratch: PathBuf,
    pub handoff: PathBuf,
    pub out: PathBuf,
    /// Per confined task, a directory of its own for its `$BATON_OUTPUT`: its sandbox lets it
    /// write there and not into `out/`, where it could pass for another task's output.
    pub own: PathBuf,
    pub tmp: PathBuf,
}

impl RunDirs {
    pub fn new(state_dir: &Path, run: &RunId) -> Self {
        let run_dir = state_dir.join("runs").join(run.as_str());
        let scratch = private_tmpfs_root()
            .map(|root| root.join(run.as_str()))
            .unwrap_or_else(|| run_dir.clone());
        Self {
            logs: run_dir.join("logs"),
            run: run_dir,
            handoff: scratch.join("handoff"),
            out: scratch.join("out"),
            own: scratch.join("own"),
            tmp: scratch.join("tmp"),
            scratch,
        }
    }

    /// Creates the directories, private to the user, for a run recorded in the store at
    /// `store` (its location): the note of which store records it ([`RunDirs::keep_store`])
    /// goes in first, so that a process killed at any point after leaves nothing `baton
    /// prune` cannot sweep (a directory without the note is never swept as a stray).
    pub fn create(&self, store: &str) -> std::io::Result<()> {
        create_private_dir(&self.run)?;
        // Best effort: without it, the directory is never swept as a stray.
        let _ = self.keep_store(store);
        for dir in [&self.logs, &self.handoff, &self.out] {
            create_private_dir(dir)?;
        }
        Ok(())
    }

    /// Notes in the run's directory which store records it: `.baton/runs/` is shared by every
    /// store of the project (`--store`), and a directory is only ever swept as a stray (see
    /// `baton prune`) by the store that should have its record.
    pub fn keep_store(&self, location: &str) -> std::io::Result<()> {
        write_private(&self.run.join(STORE_FILE), location.as_bytes())
    }

    /// The store that records the run, as [`RunDirs::keep_store`] noted it.
    pub fn store_of(&self) -> Option<String> {
        std::fs::read_to_string(self.run.join(STORE_FILE)).ok()
    }

    /// Removes everything of a run that was never recorded.
    pub fn remove(&self) {
        self.remove_scratch();
        let _ = std::fs::remove_dir_all(&self.run);
    }

    /// Where the attempts launched are noted before they start (`launch_log.rs`).
    pub fn launched(&self) -> PathBuf {
        self.scratch.join("launched")
    }

    /// Removes the scratch files once the run is over.
    pub fn remove_scratch(&self) {
        let _ = std::fs::remove_file(self.launched());
        let _ = std::fs::remove_dir_all(&self.handoff);
        let _ = std::fs::remove_dir_all(&self.out);
        let _ = std::fs::remove_dir_all(&self.own);
        let _ = std::fs::remove_dir_all(&self.tmp);
        if self.scratch != self.run {
            let _ = std::fs::remove_dir(&self.scratch);
        }
    }

    /// Bytes of logs the run has written, as recorded by [`RunDirs::add_log_bytes`] (a walk
    /// of the log directory when no record exists). Retention reads this for every run it
    /// keeps, so it must not walk thousands of files each time.
    pub fn log_bytes(&self) -> u64 {
        std::fs::read_to_string(self.run.join(LOG_BYTES_FILE))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| dir_size(&self.run))
    }

    /// Adds `bytes` to the recorded size of the run's logs.
    pub fn add_log_bytes(&self, bytes: u64) {
        let before = std::fs::read_to_string(self.run.join(LOG_BYTES_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let total = format!("{}\n", before.saturating_add(bytes));
        let _ = write_private(&self.run.join(LOG_BYTES_FILE), total.as_bytes());
    }

    /// The git driver settings trusted when the run first started (see
    /// `baton_workspace::Drivers`), if they were kept.
    pub fn trusted_git_drivers(&self) -> Option<String> {
        std::fs::read_to_string(self.run.join(GIT_DRIVERS_FILE)).ok()
    }

    /// Keeps the git driver settings trusted when the run first started, for its takeovers.
    pub fn keep_trusted_git_drivers(&self, text: &str) -> std::io::Result<()> {
        write_private(&self.run.join(GIT_DRIVERS_FILE), text.as_bytes())
    }

    /// Keeps the commit `task`'s worktree started from, so that a takeover measures its
    /// evidence from there, not from its last checkpoint. Best effort: the takeover then
    /// measures from the branch as it finds it.
    pub fn keep_worktree_start(&self, task: &TaskId, commit: &str) {
        let dir = self.run.join(WORKTREE_STARTS_DIR);
        let _ = std::fs::create_dir_all(&dir)
            .and_then(|()| write_private(&dir.join(&*task.file_name()), commit.as_bytes()));
    }

    /// The commit `task`'s worktree started from, if it was kept.
    pub fn worktree_start(&self, task: &TaskId) -> Option<String> {
        let text =
            std::fs::read_to_string(self.run.join(WORKTREE_STARTS_DIR).join(&*task.file_name()));
        text.ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
    }

    /// The log of one phase of attempt `attempt` of `task`.
    pub fn log(&self, task: &TaskId, attempt: u32, log: AttemptLog) -> PathBuf {
        self.logs.join(log.file_name(task, attempt))
    }

    /// The log of the run's check `n` (from 1) on its merged result: a `verify` check, or a
    /// rerun of one to find the task that broke it (each rerun replaces the last one's log).
    pub fn run_check_log(&self, kind: RunCheck, n: usize) -> PathBuf {
        // `+` is never in a task id: these names cannot be a task's.
        self.logs.join(format!("+run.{}-{n}.log", kind.as_str()))
    }

    /// What a shell task's fix round is told failed (`$BATON_FIX_FEEDBACK`).
    pub fn fix_feedback(&self, task: &TaskId) -> PathBuf {
        self.handoff.join(format!("{}.fix.txt", task.file_name()))
    }

    /// The prompt of an agent that reads it from a file (aider), `name` being `prompt` for
    /// the task's own and `review` for its reviewer's. In the task's temporary directory
    /// (made when the prompt is written): aider writes its record beside it, and a confined
    /// task may write there.
    pub fn prompt(&self, task: &TaskId, name: &str) -> PathBuf {
        self.tmp
            .join(&*task.file_name())
            .join(format!("{name}.txt"))
    }

    /// A confined task's own temporary directory (`$TMPDIR`), created private to the user:
    /// the shared `/tmp` is outside its sandbox.
    pub fn task_tmp(&self, task: &TaskId) -> std::io::Result<PathBuf> {
        let dir = self.tmp.join(&*task.file_name());
        create_private_dir(&dir)?;
        Ok(dir)
    }

    /// The directory of a confined task's own `$BATON_OUTPUT`, made private.
    pub fn own_output_dir(&self, task: &TaskId) -> std::io::Result<PathBuf> {
        create_private_dir(&self.own)?;
        let dir = self.own.join(&*task.file_name());
        create_private_dir(&dir)?;
        Ok(dir)
    }

    pub fn structured_output(&self, task: &TaskId, attempt: u32) -> PathBuf {
        self.out.join(structured_output_name(task, attempt))
    }
}

/// Where a run's directory names the store that records it.
const STORE_FILE: &str = "store";

pub fn structured_output_name(task: &TaskId, attempt: u32) -> String {
    format!("{}.{attempt}.json", task.file_name())
}

/// A directory on tmpfs that only this user can use, or `None`. An existing directory is used
/// only if this user owns it and nobody else can enter it: `/dev/shm` is shared, and a
/// directory planted there by someone else must not receive our files.
fn private_tmpfs_root() -> Option<PathBuf> {
    let uid = nix::unistd::getuid().as_raw();
    let candidates = [
        std::env::var_os("XDG_RUNTIME_DIR").map(|d| PathBuf::from(d).join("baton")),
        Some(PathBuf::from(format!("/dev/shm/baton-{uid}"))),
    ];
    for dir in candidates.into_iter().flatten() {
        if !dir.parent().is_some_and(Path::is_dir) {
            continue;
        }
        let _ = create_private_dir(&dir);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0 => {
                return Some(dir);
            }
            _ => continue,
        }
    }
    None
}

/// The file holding the size of a run's logs.
const LOG_BYTES_FILE: &str = "log-bytes";

/// The file holding the git driver settings trusted when the run first started.
const GIT_DRIVERS_FILE: &str = "git-drivers";

/// Where [`RunDirs::keep_worktree_start`] keeps each task's start, a file per task.
const WORKTREE_STARTS_DIR: &str = "worktree-starts";

/// Writes `path` whole, readable only by the user, like everything else under `.baton/`.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(contents)
}

/// Bytes of the files under `dir` (0 if it does not exist). Does not follow symlinks.
fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

/// Creates `dir` and its missing parents, private to the user.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// One of an attempt's logs: the task itself, or the `n`th (from 1) command or round of one
/// of its other phases. Its file is `TASK.ATTEMPT.log` or `TASK.ATTEMPT.KIND-N.log`; this type
/// is the one place that name is written and read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptLog {
    /// The worktree's `setup` commands, one log each.
    Setup(u32),
    /// The task's command or agent.
    Task,
    /// A reviewer's round, judging the work against the task's acceptance criteria.
    Review(u32),
    /// A fix round: the task again, told what failed.
    Fix(u32),
    /// The task's `verify` checks, one log each (the last round's).
    Check(u32),
}

/// The phases an attempt's logs belong to, in the order they first run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogPhase {
    Setup,
    Task,
    Review,
    Fix,
    Check,
}

impl AttemptLog {
    pub fn phase(self) -> LogPhase {
        match self {
            Self::Setup(_) => LogPhase::Setup,
            Self::Task => LogPhase::Task,
            Self::Review(_) => LogPhase::Review,
            Self::Fix(_) => LogPhase::Fix,
            Self::Check(_) => LogPhase::Check,
        }
    }

    /// Its number within its phase (0 for the task's own log).
    pub fn n(self) -> u32 {
        match self {
            Self::Task => 0,
            Self::Setup(n) | Self::Review(n) | Self::Fix(n) | Self::Check(n) => n,
        }
    }

    /// What the log's file is named: `TASK.ATTEMPT.log` or `TASK.ATTEMPT.KIND-N.log`.
    pub fn file_name(self, task: &TaskId, attempt: u32) -> String {
        let task = task.file_name();
        match self.kind() {
            None => format!("{task}.{attempt}.log"),
            Some(kind) => format!("{task}.{attempt}.{kind}-{}.log", self.n()),
        }
    }

    /// The prefix of every log file of attempt `attempt` of `task`.
    pub fn prefix(task: &TaskId, attempt: u32) -> String {
        format!("{}.{attempt}.", task.file_name())
    }

    /// The log a file named `name` is of attempt `attempt` of `task`; `None` for any other
    /// file (another attempt's, another task's, not a log).
    pub fn parse(task: &TaskId, attempt: u32, name: &str) -> Option<Self> {
        let rest = name.strip_prefix(&Self::prefix(task, attempt))?;
        if rest == "log" {
            return Some(Self::Task);
        }
        let (kind, n) = rest.strip_suffix(".log")?.split_once('-')?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = n.parse().ok()?;
        Some(match kind {
            "setup" => Self::Setup(n),
            "review" => Self::Review(n),
            "fix" => Self::Fix(n),
            "check" => Self::Check(n),
            _ => return None,
        })
    }

    fn kind(self) -> Option<&'static str> {
        Some(match self {
            Self::Task => return None,
            Self::Setup(_) => "setup",
            Self::Review(_) => "review",
            Self::Fix(_) => "fix",
            Self::Check(_) => "check",
        })
    }
}

/// Which of the run's checks on its merged result a log is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunCheck {
    /// The run's `verify` checks.
    Verify,
    /// A rerun of a failed one on part of the merge, to find the task that broke it.
    Bisect,
}

impl RunCheck {
    fn as_str(self) -> &'static str {
        match self {
            Self::Verify => "verify",
            Self::Bisect => "bisect",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_log_name_reads_back_as_what_wrote_it() {
        let task = TaskId::new("build/web.ui").unwrap();
        for log in [
            AttemptLog::Task,
            AttemptLog::Setup(1),
            AttemptLog::Review(2),
            AttemptLog::Fix(3),
            AttemptLog::Check(12),
        ] {
            let name = log.file_name(&task, 4);
            assert_eq!(AttemptLog::parse(&task, 4, &name), Some(log), "{name}");
            assert_eq!(AttemptLog::parse(&task, 3, &name), None, "{name}");
        }
    }

    #[test]
    fn other_files_are_not_an_attempts_logs() {
        let task = TaskId::new("t").unwrap();
        for name in [
            "t.1.json",
            "t.1.fix-.log",
            "t.1.fix-x.log",
            "t.1.lint-1.log",
            "t.10.log",
            "+run.verify-1.log",
        ] {
            assert_eq!(AttemptLog::parse(&task, 1, name), None, "{name}");
        }
        // Task `a.1`'s attempt 2 is not task `a`'s attempt 1, though its names start alike.
        let a = TaskId::new("a").unwrap();
        let a1 = TaskId::new("a.1").unwrap();
        for log in [AttemptLog::Task, AttemptLog::Check(1)] {
            let name = log.file_name(&a1, 2);
            assert_eq!(AttemptLog::parse(&a, 1, &name), None, "{name}");
        }
    }
}
