//! Starting an attempt, and the handle the dispatcher waits on.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::process::Stdio;

use baton_model::Outcome;
use tokio::process::Command;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cgroup::CgroupScope;
use crate::process_group::ProcessGroup;
use crate::report::AttemptReport;
use crate::sandbox::WriteSandbox;
use crate::sink::OutputSink;
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
            spec.output_limit,
            spec.stderr_limit,
            spec.redactor.as_ref(),
        );
        if let Some(watcher) = watcher {
            sink.watch(watcher);
        }
        // Built here, where failing is ordinary; only enforced in the child. Held until the
        // spawn is done, then closed: the child's copy closes at its exec.
        let ruleset = match spec.sandbox.as_ref().map(WriteSandbox::ruleset).transpose() {
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
        let mut cgroup = spec.cgroup.as_deref().and_then(CgroupScope::create);
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
        let mut child = match spawned {
            Ok(child) => child,
            Err(error) => {
                return Attempt {
                    started,
                    pid: None,
                    sink,
                    child: Err(describe_spawn_error(&spec, &error)),
                };
            }
        };
        // A child that has not been waited on has a pid, and both pipes were asked for.
        let (Some(pid), Some(stdout), Some(stderr)) =
            (child.id(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("a fresh child with piped output has a pid and both pipes");
        };
        let group = ProcessGroup::led_by(pid, cgroup);
        if let (Some(input), Some(mut pipe)) = (spec.stdin.take(), child.stdin.take()) {
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

/// stdin for every attempt. `/dev/null` is opened once and duplicated per spawn: a `dup` costs
/// less than resolving the path again for each of thousands of small tasks.
fn dev_null() -> Stdio {
    static DEV_NULL: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    DEV_NULL
        .get_or_init(|| std::fs::File::open("/dev/null").ok())
        .as_ref()
        .and_then(|file| file.try_clone().ok())
        .map_or_else(Stdio::null, Stdio::from)
}

/// Spawns the attempt's child, which first joins `cgroup` and then restricts itself to
/// `ruleset`, if given, between fork and exec.
fn spawn_child(
    spec: &AttemptSpec,
    ruleset: Option<RawFd>,
    cgroup: Option<&CgroupScope>,
) -> io::Result<tokio::process::Child> {
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
    command.spawn()
}

fn command(spec: &AttemptSpec) -> Command {
    let mut command = match &spec.program {
        // An absolute path: no PATH search, and the same shell whatever PATH the task sets.
        Program::Shell(script) => {
            let mut command = Command::new("/bin/sh");
            command.arg("-c").arg(script);
            command
        }
        Program::Exec { program, args } => {
            let mut command = Command::new(program);
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
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A new group lets one signal reach every descendant. Unlike a `pre_exec` hook, it keeps
        // std on its posix_spawn path: no fork of baton's address space per attempt (only an
        // attempt in a sandbox or a cgroup pays for one).
        .process_group(0);
    command
}

/// Names what could not be found: the OS says ENOENT for a missing program and for a missing
/// working directory alike. Checked only after a failure, so a good spawn pays nothing.
fn describe_spawn_error(spec: &AttemptSpec, error: &io::Error) -> String {
    if !spec.cwd.is_dir() {
        return format!(
            "working directory `{}` does not exist or is not a directory",
            spec.cwd.display()
        );
    }
    let program = match &spec.program {
        Program::Shell(_) => "/bin/sh".into(),
        Program::Exec { program, .. } => program.display().to_string(),
    };
    if spec.sandbox.is_some() {
        return format!("cannot run `{program}` in its write sandbox: {error}");
    }
    format!("cannot run `{program}`: {error}")
}
