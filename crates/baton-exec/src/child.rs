//! A spawned child, waited on through a pidfd in the runtime's own epoll set.
//!
//! tokio's `Child` does the same, but only for children it spawned itself; baton spawns its
//! own (see [`crate::spawn`]) and needs one way to wait on either kind.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::spawn::Launch;

/// A child process of baton's, not yet reaped until [`Child::wait`] says how it ended.
#[derive(Debug)]
pub(crate) struct Child {
    pid: libc::pid_t,
    exited: Exited,
    /// What the child reads until its exec (baton's own spawn), kept until it has exited.
    launch: Option<Launch>,
    /// What failed in the child before its exec, once it has exited.
    spawn_error: Option<SpawnError>,
}

/// A child that could not exec: what failed, and what it was to run where.
#[derive(Debug)]
pub(crate) struct SpawnError {
    pub(crate) error: io::Error,
    pub(crate) program: String,
    pub(crate) cwd: std::path::PathBuf,
}

/// How baton learns that the child exited, or how it did.
#[derive(Debug)]
enum Exited {
    /// Its pidfd turns readable (Linux 5.3 and later).
    PidFd(AsyncFd<OwnedFd>),
    /// Some child sent SIGCHLD: where pidfds are not available (an older kernel, a seccomp
    /// filter that refuses `pidfd_open`).
    Signal(Signal),
    /// Reaped by [`Child::wait`].
    Reaped(ExitStatus),
    /// Cannot be reaped by baton (something else did), or handed to a task that reaps it.
    Gone,
}

impl Child {
    /// Takes charge of child `pid`, which nothing else waits on, through `pidfd` if its spawn
    /// gave one. Must be called within a tokio runtime with IO enabled.
    pub(crate) fn new(
        pid: u32,
        pidfd: Option<OwnedFd>,
        launch: Option<Launch>,
    ) -> io::Result<Self> {
        let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        let pidfd = pidfd.or_else(|| pidfd_open(pid));
        let exited = if let Some(fd) = pidfd {
            // SAFETY: the descriptor is owned by the `AsyncFd` from here on and stays open
            // until it is dropped.
            let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
            Exited::PidFd(registered.map_err(io::Error::from)?)
        } else {
            // Listening from now on, and `wait` looks before it listens: an exit before this
            // point is not missed.
            Exited::Signal(signal(SignalKind::child())?)
        };
        Ok(Self {
            pid,
            exited,
            launch,
            spawn_error: None,
        })
    }

    /// What failed in the child before its exec, if anything: known once it has exited.
    pub(crate) fn spawn_error(&self) -> Option<&SpawnError> {
        self.spawn_error.as_ref()
    }

    /// Waits for the child to exit and reaps it. Cancel-safe; after it returned a status, it
    /// returns the same again.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let reaped = match &mut self.exited {
            Exited::Reaped(status) => return Ok(*status),
            Exited::Gone => return Err(io::Error::other("the child was already reaped")),
            watching => exit_of(self.pid, watching).await,
        };
        self.settle(reaped)
    }

    /// Reaps the child if it has exited, without waiting; `None` if it has not.
    pub(crate) fn try_wait(&mut self) -> Option<io::Result<ExitStatus>> {
        match &self.exited {
            Exited::Reaped(status) => Some(Ok(*status)),
            Exited::Gone => Some(Err(io::Error::other("the child was already reaped"))),
            Exited::PidFd(_) | Exited::Signal(_) => match reap(self.pid) {
                Ok(None) => None,
                Ok(Some(status)) => Some(self.settle(Ok(status))),
                Err(error) => Some(self.settle(Err(error))),
            },
        }
    }

    fn settle(&mut self, reaped: io::Result<ExitStatus>) -> io::Result<ExitStatus> {
        self.exited = match &reaped {
            Ok(status) => Exited::Reaped(*status),
            Err(_) => Exited::Gone,
        };
        if reaped.is_ok()
            && let Some(launch) = self.launch.take()
        {
            // It has exited: the kernel is done with the launch's memory, and the error, if
            // any, is final.
            self.spawn_error = launch.error().map(|error| SpawnError {
                error,
                program: launch.program().to_string_lossy().into_owned(),
                cwd: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(launch.cwd().to_bytes())),
            });
        }
        reaped
    }
}

/// Waits, the way `exited` says, until child `pid` exits, and reaps it.
async fn exit_of(pid: libc::pid_t, exited: &mut Exited) -> io::Result<ExitStatus> {
    loop {
        match exited {
            Exited::PidFd(fd) => {
                let mut ready = fd.readable().await?;
                match reap(pid)? {
                    Some(status) => return Ok(status),
                    None => ready.clear_ready(),
                }
            }
            Exited::Signal(signal) => match reap(pid)? {
                Some(status) => return Ok(status),
                None => {
                    signal.recv().await;
                }
            },
            Exited::Reaped(status) => return Ok(*status),
            Exited::Gone => return Err(io::Error::other("the child was already reaped")),
        }
    }
}

/// Reaps child `pid` if it has exited. An error means it cannot be reaped by baton (something
/// else reaped it).
fn reap(pid: libc::pid_t) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes only to `status`, a live local `c_int`.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if ret == 0 {
            return Ok(None);
        }
        if ret == pid {
            return Ok(Some(ExitStatus::from_raw(status)));
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

impl Drop for Child {
    /// A child dropped before it was reaped (its supervising future was dropped; its process
    /// group is KILLed by then) is reaped in the background, so that it does not stay a zombie
    /// until baton exits.
    fn drop(&mut self) {
        if !matches!(self.exited, Exited::PidFd(_) | Exited::Signal(_))
            || !matches!(reap(self.pid), Ok(None))
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (pid, mut exited) = (self.pid, std::mem::replace(&mut self.exited, Exited::Gone));
        runtime.spawn(async move {
            let _ = exit_of(pid, &mut exited).await;
        });
    }
}

/// A pidfd for child `pid`, on the Linux layer where the kernel has them (5.3+); elsewhere the
/// child is waited for through `SIGCHLD`.
#[cfg(target_os = "linux")]
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    if !crate::platform::linux() {
        return None;
    }
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes two integers and touches no memory of baton's; the result is
    // checked before it is used as a descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn pidfd_open(_pid: libc::pid_t) -> Option<OwnedFd> {
    None
}
