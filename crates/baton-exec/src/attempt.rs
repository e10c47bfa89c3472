//! Starting an attempt, and the handle the dispatcher waits on.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use baton_model::Outcome;
use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cgroup::CgroupScope;
use crate::child::Child;
use crate::process_group::ProcessGroup;
use crate::report::AttemptReport;
use crate::sandbox::WriteSandbox;
use crate::sink::OutputSink;
use crate::spawn::Spawned;
#[cfg(target_os = "linux")]
use crate::spawn::{Placement, Stdin};
use crate::spec::{AttemptSpec, Program, StopLevel};
use crate::supervise::{Ended, Limits, Supervisor};
use crate::watch::LineWatcher;

/// One attempt of a task: a child process in its own process group.
#[derive(Debug)]
pub struct Attempt {
    started: Instant,
    pid: Option<u32>,
    sink: OutputSink,
    /// The running child, or why it could not be started.
    child: Result<Supervisor, String>,
}

impl Attempt {
    /// Spawns at once. Never fails: a spawn error is reported by [`Attempt::wait`] as
    /// [`Outcome::SpawnFailed`].
    ///
    /// Must be called within a tokio runtime with IO and time enabled. The timeout counts from
    /// here, and nothing reads the child's output until [`Attempt::wait`] runs: call it
    /// promptly, or a chatty child blocks on a full pipe.
    pub fn spawn(spec: AttemptSpec) -> Attempt {
        Self::spawn_watched(spec, None)
    }

    /// Like [`Attempt::spawn`], with `watcher` reading every line of (redacted) stdout; get it
    /// back from [`Attempt::wait_watched`].
    pub fn spawn_watched(mut spec: AttemptSpec, watcher: Option<Box<dyn LineWatcher>>) -> Attempt {
        let started = Instant::now();
        let log_path = std::mem::take(&mut spec.log_path);
        let mut sink = OutputSink::with_redactor(
            log_path,
            (spec.output_limit, spec.stderr_limit, spec.log_limit),
            spec.redactor.as_ref(),
        );
        if let Some(watcher) = watcher {
            sink.watch(watcher);
        }
        // Built here, where failing is ordinary; only enforced in the child. Held until the
        // spawn is done, then closed: the child's copy closes at its exec.
        // Landlock's, on Linux; on macOS the sandbox is Seatbelt's, started with the program
        // (`launcher`).
        let landlock = spec.sandbox.as_ref().filter(|_| cfg!(target_os = "linux"));
        let ruleset = match landlock.map(WriteSandbox::ruleset).transpose() {
            Ok(ruleset) => ruleset,
            Err(error) => {
                return Attempt {
                    started,
                    pid: None,
                    sink,
                    child: Err(format!("cannot set up the write sandbox: {error}")),
                };
            }
        };
        let ruleset_fd = ruleset.as_ref().map(AsRawFd::as_raw_fd);
        let mut cgroup = spec.cgroup.as_ref().and_then(crate::CgroupPool::acquire);
        let mut spawned = spawn_child(&spec, ruleset_fd, cgroup.as_ref());
        if spawned.is_err() && cgroup.is_some() {
            // Perhaps joining the cgroup failed although the probe said it would work (a
            // policy that refuses the move): try once without. If that works, the cgroup was
            // the problem, and this process stops using cgroups.
            let retried = spawn_child(&spec, ruleset_fd, None);
            if retried.is_ok() {
                crate::cgroup::mark_broken();
                cgroup = None;
            }
            spawned = retried;
        }
        drop(ruleset);
        let started_child = spawned.and_then(|spawned| {
            let pid = spawned.pid;
            // From here on the child is baton's to reap; if the runtime cannot take it, KILL
            // it rather than leave it unsupervised.
            let supervised = Supervised::new(spawned);
            if supervised.is_err() {
                ProcessGroup::led_by(pid, None).kill();
            }
            supervised.map(|s| (pid, s))
        });
        let (pid, supervised) = match started_child {
            Ok(started) => started,
            Err(error) => {
                return Attempt {
                    started,
                    pid: None,
                    sink,
                    child: Err(describe_spawn_error(&spec, &error)),
                };
            }
        };
        let Supervised {
            child,
            stdin,
            stdout,
            stderr,
        } = supervised;
        let group = ProcessGroup::led_by(pid, cgroup);
        if let (Some(input), Some(mut pipe)) = (spec.stdin.take(), stdin) {
            // Its own task: a child that reads its input slowly must not stall the loop that
            // drains its output. A child that exits without reading ends the write with EPIPE.
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let _ = pipe.write_all(&input).await;
                let _ = pipe.shutdown().await;
            });
        }
        let limits = Limits {
            timeout_at: spec
                .timeout
                .and_then(|timeout| started.checked_add(timeout)),
            kill_grace: spec.kill_grace,
            idle_timeout: spec.idle_timeout,
            finish_grace: spec.finish_grace,
        };
        Attempt {
            started,
            pid: Some(pid),
            sink,
            child: Ok(Supervisor::new(child, stdout, stderr, group, limits)),
        }
    }

    /// The child's pid, which is also its process group id; `None` if it never started.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Supervises the attempt to its end: reads its output, enforces the timeout, obeys `stop`,
    /// and leaves no process of its group behind.
    pub async fn wait(self, stop: watch::Receiver<StopLevel>) -> AttemptReport {
        self.wait_watched(stop).await.0
    }

    /// [`Attempt::wait`], and the watcher given to [`Attempt::spawn_watched`] back, once it
    /// has seen the last line.
    pub async fn wait_watched(
        self,
        stop: watch::Receiver<StopLevel>,
    ) -> (AttemptReport, Option<Box<dyn LineWatcher>>) {
        let mut sink = self.sink;
        let (outcome, ended) = match self.child {
            Ok(supervisor) => supervisor.run(&mut sink, stop).await,
            Err(error) => (Outcome::SpawnFailed { error }, Ended::default()),
        };
        let output = sink.finish();
        let report = AttemptReport {
            outcome,
            duration: self.started.elapsed(),
            stdout: output.stdout,
            stderr: output.stderr,
            log_bytes: output.log_bytes,
            log_error: output.log_error,
            reaped_after_result: ended.reaped_after_result,
            stopped_by_watcher: ended.stopped_by_watcher,
            containment: ended.containment,
        };
        (report, output.watcher)
    }
}

/// A spawned child and baton's ends of its pipes, registered with the runtime.
struct Supervised {
    child: Child,
    stdin: Option<pipe::Sender>,
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
}

impl Supervised {
    fn new(spawned: Spawned) -> io::Result<Self> {
        Ok(Self {
            child: Child::new(spawned.pid, spawned.pidfd, spawned.launch)?,
            stdin: spawned
                .stdin
                .map(pipe::Sender::from_owned_fd_unchecked)
                .transpose()?,
            stdout: pipe::Receiver::from_owned_fd_unchecked(spawned.stdout)?,
            stderr: pipe::Receiver::from_owned_fd_unchecked(spawned.stderr)?,
        })
    }
}

/// `/dev/null`, opened once: stdin for every attempt that gets no input. Duplicating an open
/// descriptor costs less than resolving the path again for each of thousands of small tasks.
fn dev_null() -> Option<&'static OwnedFd> {
    static DEV_NULL: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    DEV_NULL
        .get_or_init(|| std::fs::File::open("/dev/null").ok().map(OwnedFd::from))
        .as_ref()
}

/// Spawns the attempt's child in `cgroup`, restricted to `ruleset`, if given. With a program
/// named by a path, baton's own clone (see [`crate::spawn`]): the child is born in the
/// cgroup. Otherwise, or where the kernel cannot do that, or where [`crate::SPAWN_ENV`] asks
/// for it, std's `Command`, whose child joins the cgroup and restricts itself between fork
/// and exec.
fn spawn_child(
    spec: &AttemptSpec,
    ruleset: Option<RawFd>,
    cgroup: Option<&CgroupScope>,
) -> io::Result<Spawned> {
    #[cfg(target_os = "linux")]
    if !crate::spawn::spawns_with_std() {
        let stdin = match (&spec.stdin, dev_null()) {
            (Some(_), _) => Some(Stdin::Piped),
            (None, Some(null)) => Some(Stdin::From(null)),
            // No /dev/null to give it: std's `Stdio::null` tries again.
            (None, None) => None,
        };
        if let (Some(stdin), Some(line)) = (stdin, crate::spawn::command_line(spec)) {
            let (argv, envp) = line?;
            let placement = Placement {
                cgroup: cgroup.map(CgroupScope::dir_fd),
                ruleset,
            };
            match crate::spawn::spawn(argv, envp, &spec.cwd, stdin, placement) {
                // Nothing was started: std's child joins the cgroup instead.
                Err(error) if error.kind() == io::ErrorKind::Unsupported && cgroup.is_some() => {}
                spawned => return spawned,
            }
        }
    }
    let mut command = command(spec);
    let procs = cgroup.map(CgroupScope::procs_fd);
    if ruleset.is_some() || procs.is_some() {
        // SAFETY: the hook runs between fork and exec and only makes async-signal-safe
        // syscalls (`cgroup::join`: one write; `restrict_self`: prctl and landlock); both
        // descriptors stay open in the parent until the spawn returns, so the child's copies
        // are valid. The cgroup comes first: nothing the child starts is ever outside it.
        unsafe {
            command.pre_exec(move || {
                if let Some(procs) = procs {
                    crate::cgroup::join(procs)?;
                }
                if let Some(ruleset) = ruleset {
                    crate::sandbox::restrict_self(ruleset)?;
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn()?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        unreachable!("a fresh child with piped output has both pipes");
    };
    let spawned = Spawned {
        pid: child.id(),
        pidfd: None,
        launch: None,
        stdin: child.stdin.take().map(OwnedFd::from),
        stdout: OwnedFd::from(stdout),
        stderr: OwnedFd::from(stderr),
    };
    // Dropping std's handle neither waits for the child nor kills it: `Child` reaps it.
    drop(child);
    for fd in [&spawned.stdout, &spawned.stderr]
        .into_iter()
        .chain(spawned.stdin.as_ref())
    {
        crate::spawn::set_nonblocking(fd)?;
    }
    Ok(spawned)
}

fn command(spec: &AttemptSpec) -> Command {
    let mut command = match &spec.program {
        // An absolute path: no PATH search, and the same shell whatever PATH the task sets.
        Program::Shell(script) => {
            match crate::direct::direct(
                script,
                crate::spawn::child_path(spec).as_deref(),
                &spec.cwd,
            ) {
                Some((program, args)) => {
                    let mut command = launcher(spec, program);
                    command.args(args);
                    command
                }
                None => match spec.shell.split_first() {
                    Some((program, args)) => {
                        let mut command = launcher(spec, program);
                        command.args(args).arg("-c").arg(script);
                        command
                    }
                    None => {
                        let mut command = launcher(spec, "/bin/sh");
                        command.arg("-c").arg(script);
                        command
                    }
                },
            }
        }
        Program::Exec { program, args } => {
            let mut command = launcher(spec, program);
            command.args(args);
            command
        }
    };
    if !spec.inherit_env {
        command.env_clear();
    }
    command
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            dev_null()
                .and_then(|null| null.try_clone().ok())
                .map_or_else(Stdio::null, Stdio::from)
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A new group lets one signal reach every descendant. Unlike a `pre_exec` hook, it keeps
        // std on its posix_spawn path: no fork of baton's address space per attempt (only an
        // attempt in a sandbox or a cgroup pays for one).
        .process_group(0);
    command
}

/// A command that runs `program`: on macOS, for an attempt with a write sandbox, through
/// `sandbox-exec` with its Seatbelt profile ([`crate::seatbelt`]).
fn launcher(spec: &AttemptSpec, program: impl AsRef<std::ffi::OsStr>) -> Command {
    #[cfg(target_os = "macos")]
    if let Some(sandbox) = &spec.sandbox {
        let mut command = Command::new(crate::seatbelt::SANDBOX_EXEC);
        command
            .args(crate::seatbelt::arguments(sandbox))
            .arg(program);
        return command;
    }
    #[cfg(not(target_os = "macos"))]
    let _ = spec;
    Command::new(program)
}

/// Names what could not be found: the OS says ENOENT for a missing program and for a missing
/// working directory alike. Checked only after a failure, so a good spawn pays nothing.
fn describe_spawn_error(spec: &AttemptSpec, error: &io::Error) -> String {
    let program = match &spec.program {
        Program::Shell(_) => match spec.shell.first() {
            Some(shell) => shell.to_string_lossy().into_owned(),
            None => "/bin/sh".into(),
        },
        Program::Exec { program, .. } => program.display().to_string(),
    };
    describe_exec_error(&spec.cwd, &program, spec.sandbox.is_some(), error)
}

/// [`describe_spawn_error`] from what the failed child was to run.
pub(crate) fn describe_exec_error(
    cwd: &Path,
    program: &str,
    sandboxed: bool,
    error: &io::Error,
) -> String {
    if !cwd.is_dir() {
        return format!(
            "working directory `{}` does not exist or is not a directory",
            cwd.display()
        );
    }
    if sandboxed {
        return format!("cannot run `{program}` in its write sandbox: {error}");
    }
    format!("cannot run `{program}`: {error}")
}
