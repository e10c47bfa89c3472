//! What the dispatcher asks for: the program, where and how long to run it, and where its output
//! goes.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The program an attempt runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A script for `/bin/sh -c`. A command the script names but that does not exist is the
    /// script's own failure (exit 127), not a spawn failure.
    Shell(String),
    /// A program run directly, looked up in `PATH` when it has no slash.
    Exec {
        program: PathBuf,
        args: Vec<OsString>,
    },
}

/// How one attempt is run.
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    pub program: Program,
    pub cwd: PathBuf,
    /// The child's environment: on top of baton's own when `inherit_env`, else all of it.
    pub env: Vec<(OsString, OsString)>,
    /// Whether the child starts from baton's own environment (`env` on top) or from `env`
    /// alone.
    pub inherit_env: bool,
    /// At this age the process group gets TERM, then KILL after `kill_grace`.
    pub timeout: Option<Duration>,
    /// How long a stopped attempt may take between TERM and KILL.
    pub kill_grace: Duration,
    /// Receives every byte of stdout and stderr, interleaved as they arrive. Created (mode
    /// 0600, missing parent directories 0700) when the first byte arrives: an attempt that
    /// prints nothing leaves no log file, because creating one can cost more than running a
    /// quick task. Should be unique per attempt, so that no stale log is mistaken for its own.
    pub log_path: PathBuf,
    /// Bytes of stdout kept in memory: half from the start, half from the end.
    pub output_limit: usize,
    /// Bytes of stderr kept in memory, all from the end.
    pub stderr_limit: usize,
    /// Bytes the log file may hold: past it, the log keeps its start as it comes and its end
    /// (at most [`LOG_TAIL`](crate::LOG_TAIL), in memory meanwhile), with a line between them
    /// saying how much was cut. The child runs on regardless.
    pub log_limit: u64,
    /// What every byte the child prints passes through before it is logged, captured or
    /// handed on. `None` turns redaction off (for tests of the machinery itself).
    pub redactor: Option<baton_redact::Redactor>,
    /// Written to the child's stdin, which is then closed; `None`: stdin is `/dev/null`.
    /// How an agent gets its prompt: never in argv, where a large one fails with E2BIG.
    pub stdin: Option<Vec<u8>>,
    /// At this much time without a byte on stdout or stderr, the attempt is stopped like at
    /// its timeout, and ends as [`Outcome::IdleTimeout`](baton_model::Outcome::IdleTimeout).
    pub idle_timeout: Option<Duration>,
    /// After a [`LineWatcher`](crate::LineWatcher) saw the final result, how long the child
    /// may take to exit by itself before its group gets TERM (then KILL after `kill_grace`).
    pub finish_grace: Duration,
    /// Confines the child's writes (and its descendants') to these places; `None`: it may
    /// write wherever its user may. A sandbox that cannot be set up fails the spawn.
    pub sandbox: Option<crate::WriteSandbox>,
    /// `Some(pool)`: the attempt runs in a cgroup of its own from `pool` (made for the run,
    /// named after its id, so that whoever takes over after a crash finds what is left),
    /// where cgroup v2 is available and writable (see [`cgroups_available`](crate::cgroups_available)),
    /// so that even a descendant that called `setsid` is killed when it ends. `None`, or no
    /// usable cgroup: its process group only. [`AttemptReport::containment`](crate::AttemptReport)
    /// says which.
    pub cgroup: Option<crate::CgroupPool>,
    /// What runs a [`Program::Shell`] script: the program and its arguments, the script after
    /// `-c` (`["bash", "-eo", "pipefail"]`). Empty: `/bin/sh -c`. A script that is one plain
    /// command runs directly either way.
    pub shell: Vec<OsString>,
}

impl AttemptSpec {
    /// The grace between TERM and KILL when the caller has no opinion.
    pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(10);
    /// Stdout kept in memory when the caller has no opinion.
    pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;
    /// Stderr kept in memory when the caller has no opinion.
    pub const DEFAULT_STDERR_LIMIT: usize = 64 * 1024;
    /// Time to exit after the final result when the caller has no opinion: enough for an
    /// agent CLI to flush its session file.
    pub const DEFAULT_FINISH_GRACE: Duration = Duration::from_secs(5);

    /// A spec with no timeout, no extra environment and the default limits.
    pub fn new(program: Program, cwd: impl Into<PathBuf>, log_path: impl Into<PathBuf>) -> Self {
        Self {
            program,
            cwd: cwd.into(),
            env: Vec::new(),
            inherit_env: true,
            timeout: None,
            kill_grace: Self::DEFAULT_KILL_GRACE,
            log_path: log_path.into(),
            output_limit: Self::DEFAULT_OUTPUT_LIMIT,
            stderr_limit: Self::DEFAULT_STDERR_LIMIT,
            log_limit: u64::MAX,
            redactor: None,
            stdin: None,
            idle_timeout: None,
            finish_grace: Self::DEFAULT_FINISH_GRACE,
            sandbox: None,
            cgroup: None,
            shell: Vec::new(),
        }
    }
}

/// What the dispatcher wants a running attempt to do, sent through a
/// [`tokio::sync::watch`] channel. Levels are ordered and a running attempt only ever escalates:
/// a `Graceful` followed by `Immediate` kills at once; `Run` after a stop changes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopLevel {
    /// Keep running.
    #[default]
    Run,
    /// TERM to the process group, `kill_grace`, then KILL.
    Graceful,
    /// KILL the process group now.
    Immediate,
}
