//! The loop that supervises one running attempt: it reads both pipes, waits on the child, keeps
//! the timers and obeys stop requests, all in one `select!`, and decides how the attempt ended.

use std::future::{Future, pending, poll_fn};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::pin::pin;
use std::process::ExitStatus;
use std::task::Poll;
use std::time::Duration;

use baton_model::Outcome;
use nix::errno::Errno;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep, sleep_until};

use crate::child::Child;
use crate::process_group::ProcessGroup;
use crate::sink::{OutputSink, Stream};
use crate::spec::StopLevel;

/// How long the pipes may stay open after the leader exits before baton concludes that a
/// descendant inherited them, kills the group and reports `Leaked`. A process that left nothing
/// behind has closed its pipes by the time its exit is seen, so this delays only attempts that
/// leak. Long enough for a descendant that is itself exiting to finish; short enough not to hold
/// a concurrency slot noticeably.
pub const EOF_GRACE: Duration = Duration::from_millis(100);

/// The most one read takes: the size of a default Linux pipe buffer, so a flooding child is
/// drained in one syscall per fill.
const READ_CHUNK: usize = 64 * 1024;

/// What one read takes until a read fills it: most tasks print little, and a small buffer
/// spares the allocator from growing and trimming its heap on every attempt.
const FIRST_READ_CHUNK: usize = 4 * 1024;

/// The deadlines fixed at spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) timeout_at: Option<Instant>,
    pub(crate) kill_grace: Duration,
    /// Silence this long stops the attempt.
    pub(crate) idle_timeout: Option<Duration>,
    /// Time to exit after the watcher saw the final result.
    pub(crate) finish_grace: Duration,
}

/// A running attempt and everything needed to see it to its end.
#[derive(Debug)]
pub(crate) struct Supervisor {
    child: Child,
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
    group: ProcessGroup,
    limits: Limits,
    progress: Progress,
}

/// Who ended an attempt that baton ended, beyond its outcome.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ended {
    pub(crate) reaped_after_result: bool,
    pub(crate) stopped_by_watcher: bool,
    pub(crate) containment: Option<baton_model::Containment>,
}

/// Why baton is stopping an attempt; the first reason is the one reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    TimedOut,
    Cancelled,
    /// Nothing printed for `idle_timeout`.
    Idle,
    /// The final result was seen `finish_grace` ago and the child is still there.
    AfterResult,
    /// The line watcher asked to stop.
    Watcher,
}

/// What has happened so far. Only the loop in [`Supervisor::run`] changes it.
#[derive(Debug)]
struct Progress {
    stopping: Option<StopReason>,
    /// When KILL follows the TERM already sent; `None` if the grace is too long to represent.
    kill_at: Option<Instant>,
    killed_at: Option<Instant>,
    exit: Option<(io::Result<ExitStatus>, Instant)>,
    leaked: bool,
    stdout_open: bool,
    stderr_open: bool,
    /// When the child last printed (or started).
    last_output: Instant,
    /// When the watcher saw the final result.
    result_at: Option<Instant>,
}

/// The timer that fires next, and what baton does when it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// The attempt ran out of time: TERM, then KILL after the grace.
    Timeout,
    /// The attempt printed nothing for too long: TERM, then KILL after the grace.
    Idle,
    /// The result is in and the child lingers: TERM, then KILL after the grace.
    Reap,
    /// The grace after TERM is over.
    Kill,
    /// The leader exited and its pipes are still open: a descendant holds them.
    Leak,
    /// The group was killed and the pipes are still open: whoever holds them left the group
    /// (setsid), and baton stops reading rather than wait for it.
    Abandon,
    /// A stream that holds output back has been quiet for `sink::HOLD_BACK`: what can be
    /// decided of it is released.
    Release,
}

/// What woke the loop.
enum Wake {
    Read(Stream, io::Result<usize>),
    Exited(io::Result<ExitStatus>),
    Due,
    /// The stop level changed (`true`) or the sender is gone (`false`).
    Stop(bool),
}

impl Progress {
    fn finished(&self) -> bool {
        self.exit.is_some() && !self.stdout_open && !self.stderr_open
    }

    fn next_due(&self, limits: &Limits) -> Option<(Instant, Due)> {
        let pipes_open = self.stdout_open || self.stderr_open;
        if let Some(killed_at) = self.killed_at {
            // A killed leader always exits; then only the pipes are left to wait for.
            return match &self.exit {
                Some((_, exited_at)) if pipes_open => {
                    Some((killed_at.max(*exited_at) + EOF_GRACE, Due::Abandon))
                }
                _ => None,
            };
        }
        if self.stopping.is_some() {
            return self.kill_at.map(|at| (at, Due::Kill));
        }
        match &self.exit {
            Some((_, exited_at)) => pipes_open.then(|| (*exited_at + EOF_GRACE, Due::Leak)),
            None => {
                let idle = limits
                    .idle_timeout
                    .filter(|_| self.result_at.is_none())
                    .and_then(|idle| self.last_output.checked_add(idle));
                let reap = self
                    .result_at
                    .and_then(|at| at.checked_add(limits.finish_grace));
                [
                    limits.timeout_at.map(|at| (at, Due::Timeout)),
                    idle.map(|at| (at, Due::Idle)),
                    reap.map(|at| (at, Due::Reap)),
                ]
                .into_iter()
                .flatten()
                .min_by_key(|(at, _)| *at)
            }
        }
    }
}

impl Supervisor {
    pub(crate) fn new(
        child: Child,
        stdout: pipe::Receiver,
        stderr: pipe::Receiver,
        group: ProcessGroup,
        limits: Limits,
    ) -> Self {
        Self {
            child,
            stdout,
            stderr,
            group,
            limits,
            progress: Progress {
                stopping: None,
                kill_at: None,
                killed_at: None,
                exit: None,
                leaked: false,
                stdout_open: true,
                stderr_open: true,
                last_output: Instant::now(),
                result_at: None,
            },
        }
    }

    /// Runs the attempt to its end. Never returns early on an error: whatever goes wrong is
    /// recorded and the child is still seen to its end.
    pub(crate) async fn run(
        mut self,
        sink: &mut OutputSink,
        mut stop: watch::Receiver<StopLevel>,
    ) -> (Outcome, Ended) {
        let level = *stop.borrow_and_update();
        self.obey(level);
        let mut stop_open = true;
        let mut out_buf = Vec::with_capacity(FIRST_READ_CHUNK);
        let mut err_buf = Vec::with_capacity(FIRST_READ_CHUNK);
        // Created on first use: most attempts finish before any timer is due, and an armed
        // timer is only reset, never re-created, as deadlines move.
        let mut timer = pin!(None::<Sleep>);

        while !self.progress.finished() {
            if !self.progress.stdout_open
                && !self.progress.stderr_open
                && self.progress.exit.is_none()
                && let Some(status) = self.child.try_wait()
            {
                // Both pipes closed: the leader is most likely exiting as they did. Looking
                // costs one syscall; waiting for its pidfd costs another trip through epoll
                // (a sleep and a wakeup), which the pipes' EOF often comes just before.
                self.progress.exit = Some((status, Instant::now()));
                continue;
            }
            let due = self.progress.next_due(&self.limits);
            // Output held back is released on its own timer, whatever else is due.
            let due = match (due, sink.next_release()) {
                (Some((at, due)), Some(release)) if at <= release => Some((at, due)),
                (_, Some(release)) => Some((release, Due::Release)),
                (due, None) => due,
            };
            if let Some((at, _)) = due {
                match timer.as_mut().as_pin_mut() {
                    Some(sleep) if sleep.deadline() == at => {}
                    Some(sleep) => sleep.reset(at),
                    None => timer.set(Some(sleep_until(at))),
                }
            }

            let wake = {
                let stdout_open = self.progress.stdout_open;
                let stderr_open = self.progress.stderr_open;
                let running = self.progress.exit.is_none();
                let (child, stdout, stderr) = (&mut self.child, &mut self.stdout, &mut self.stderr);
                let (out_buf, err_buf, stop) = (&mut out_buf, &mut err_buf, &mut stop);
                let armed = due.and(timer.as_mut().as_pin_mut());
                // Each branch's future is created even when its precondition is false (select!
                // only skips polling it), so none of them may do anything on creation.
                let mut next = pin!(async move {
                    tokio::select! {
                        read = stdout.read_buf(out_buf), if stdout_open => {
                            Wake::Read(Stream::Stdout, read)
                        }
                        read = stderr.read_buf(err_buf), if stderr_open => {
                            Wake::Read(Stream::Stderr, read)
                        }
                        status = child.wait(), if running => Wake::Exited(status),
                        () = or_pending(armed) => Wake::Due,
                        changed = stop.changed(), if stop_open => Wake::Stop(changed.is_ok()),
                    }
                });
                // Flush the log only when nothing is ready: a reader tailing the file sees
                // every chunk promptly, and a flood of chunks costs no extra syscalls.
                match poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await {
                    Poll::Ready(wake) => wake,
                    Poll::Pending => {
                        if sink.has_unflushed() {
                            sink.flush();
                        }
                        next.await
                    }
                }
            };

            match wake {
                Wake::Read(stream, read) => {
                    let (buf, open) = match stream {
                        Stream::Stdout => (&mut out_buf, &mut self.progress.stdout_open),
                        Stream::Stderr => (&mut err_buf, &mut self.progress.stderr_open),
                    };
                    match read {
                        Ok(0) => *open = false,
                        Ok(_) => {
                            // Liveness is judged on the bytes received, not on those the
                            // redactor has let through yet.
                            self.progress.last_output = Instant::now();
                            sink.accept(stream, buf);
                            self.watched(sink, self.progress.last_output);
                            if buf.len() == buf.capacity() && buf.capacity() < READ_CHUNK {
                                // A full read means more is coming: read in bigger chunks.
                                buf.reserve_exact(READ_CHUNK - buf.len());
                            }
                            buf.clear();
                        }
                        Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                        Err(error) => {
                            *open = false;
                            sink.record_error(format!(
                                "reading the child's {}: {error}",
                                stream.name()
                            ));
                        }
                    }
                }
                Wake::Exited(status) => self.progress.exit = Some((status, Instant::now())),
                Wake::Due => {
                    if let Some((_, Due::Release)) = due {
                        let now = Instant::now();
                        sink.release_quiet(now);
                        self.watched(sink, now);
                    } else if let Some((_, due)) = due {
                        if matches!(due, Due::Leak | Due::Abandon) {
                            // A runtime that stalled (a slow disk, a busy dispatcher) sees the
                            // timer and the pipes' last bytes and EOF at the same time, and
                            // select! may pick the timer: look at the pipes before judging.
                            self.drain_ready_output(sink);
                        }
                        if !self.progress.finished() {
                            self.act(due, sink);
                        }
                    }
                }
                Wake::Stop(true) => {
                    let level = *stop.borrow_and_update();
                    self.obey(level);
                }
                Wake::Stop(false) => stop_open = false,
            }
        }

        // Whatever is left of the group and the cgroup: a descendant that closed or never
        // held the pipes (`cmd >/dev/null &`), or one that left the group with `setsid`.
        let how = Ended {
            reaped_after_result: self.progress.stopping == Some(StopReason::AfterResult),
            stopped_by_watcher: self.progress.stopping == Some(StopReason::Watcher),
            containment: Some(self.group.containment()),
        };
        self.group.end().await;
        (self.outcome(), how)
    }

    /// What the line watcher made of the output it was just given.
    fn watched(&mut self, sink: &OutputSink, now: Instant) {
        if self.progress.result_at.is_none() && sink.result_seen() {
            self.progress.result_at = Some(now);
        }
        if sink.stop_requested() {
            self.terminate(StopReason::Watcher, now);
        }
    }

    /// Reads whatever the pipes hold right now, without waiting, and notes those at EOF. Reads
    /// the file descriptors directly: tokio's readiness may not have caught up, and only the
    /// kernel knows for sure.
    fn drain_ready_output(&mut self, sink: &mut OutputSink) {
        // Enough for what a leader can leave behind in both pipes, not a loop that a
        // descendant writing on and on could keep going.
        const MOST_READS: usize = 16;
        let mut scratch = vec![0; READ_CHUNK];
        for stream in [Stream::Stdout, Stream::Stderr] {
            for _ in 0..MOST_READS {
                let (fd, open) = match stream {
                    Stream::Stdout => (self.stdout.as_fd(), &mut self.progress.stdout_open),
                    Stream::Stderr => (self.stderr.as_fd(), &mut self.progress.stderr_open),
                };
                if !*open {
                    break;
                }
                match nix::unistd::read(fd, &mut scratch) {
                    Ok(0) => *open = false,
                    Ok(read) => sink.accept(stream, &scratch[..read]),
                    Err(Errno::EINTR) => {}
                    Err(Errno::EAGAIN) => break,
                    Err(error) => {
                        *open = false;
                        sink.record_error(format!(
                            "reading the child's {}: {error}",
                            stream.name()
                        ));
                    }
                }
            }
        }
    }

    fn act(&mut self, due: Due, sink: &mut OutputSink) {
        let now = Instant::now();
        match due {
            Due::Timeout => self.terminate(StopReason::TimedOut, now),
            Due::Idle => self.terminate(StopReason::Idle, now),
            Due::Reap => self.terminate(StopReason::AfterResult, now),
            Due::Kill => self.kill(now),
            Due::Leak => {
                self.progress.leaked = true;
                self.kill(now);
            }
            Due::Release => sink.release_quiet(now),
            Due::Abandon => {
                self.progress.stdout_open = false;
                self.progress.stderr_open = false;
                sink.record_error(
                    "stopped reading output: a process that left the attempt's process group \
                     still holds its pipes"
                        .to_owned(),
                );
            }
        }
    }

    /// Stop levels only escalate: `Run` never undoes a stop, and a stop already under way is
    /// only ever made harsher.
    fn obey(&mut self, level: StopLevel) {
        let now = Instant::now();
        match level {
            StopLevel::Run => {}
            StopLevel::Graceful => self.terminate(StopReason::Cancelled, now),
            StopLevel::Immediate => {
                self.progress.stopping.get_or_insert(StopReason::Cancelled);
                self.kill(now);
            }
        }
    }

    fn terminate(&mut self, reason: StopReason, now: Instant) {
        let progress = &mut self.progress;
        if progress.stopping.is_some() || progress.killed_at.is_some() {
            return;
        }
        progress.stopping = Some(reason);
        progress.kill_at = now.checked_add(self.limits.kill_grace);
        self.group.terminate();
    }

    fn kill(&mut self, now: Instant) {
        if self.progress.killed_at.is_none() {
            self.progress.killed_at = Some(now);
            self.progress.kill_at = None;
            self.group.kill();
        }
    }

    fn outcome(&self) -> Outcome {
        match self.progress.stopping {
            Some(StopReason::TimedOut) => return Outcome::TimedOut,
            Some(StopReason::Cancelled | StopReason::Watcher) => return Outcome::Cancelled,
            Some(StopReason::Idle) => {
                let after = self.limits.idle_timeout.unwrap_or_default();
                return Outcome::IdleTimeout {
                    after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
                };
            }
            // Whatever the status says: the caller judges by the result it saw.
            Some(StopReason::AfterResult) | None => {}
        }
        if let Some(failed) = self.child.spawn_error() {
            // Its exec failed (baton's spawn does not wait for it): no command ever ran.
            return Outcome::SpawnFailed {
                error: crate::attempt::describe_exec_error(
                    &failed.cwd,
                    &failed.program,
                    false,
                    &failed.error,
                ),
            };
        }
        let status = match &self.progress.exit {
            Some((Ok(status), _)) => *status,
            // Only possible if something else reaped our child. The attempt may well have
            // succeeded, but nobody can tell: report it as the machinery's failure, which is
            // retried.
            Some((Err(error), _)) => {
                return Outcome::SpawnFailed {
                    error: format!("lost track of the child process: {error}"),
                };
            }
            None => unreachable!("the loop ends only after the leader exited"),
        };
        match (status.code(), status.signal()) {
            (Some(code), _) if self.progress.leaked => Outcome::Leaked { code },
            (Some(code), _) => Outcome::Exited { code },
            // A crash says more than the leak it left behind.
            (None, Some(signal)) => Outcome::signaled(signal),
            (None, None) => unreachable!("a reaped child either exited or was killed by a signal"),
        }
    }
}

/// Awaits `future` if there is one, otherwise never completes.
async fn or_pending<F: Future>(future: Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress() -> Progress {
        Progress {
            stopping: None,
            kill_at: None,
            killed_at: None,
            exit: None,
            leaked: false,
            stdout_open: true,
            stderr_open: true,
            last_output: Instant::now(),
            result_at: None,
        }
    }

    fn exited(at: Instant) -> Option<(io::Result<ExitStatus>, Instant)> {
        Some((Ok(ExitStatus::from_raw(0)), at))
    }

    #[test]
    fn timers_follow_the_attempt_through_its_life() {
        let start = Instant::now();
        let limits = Limits {
            timeout_at: Some(start + Duration::from_secs(5)),
            kill_grace: Duration::from_secs(1),
            idle_timeout: None,
            finish_grace: Duration::from_secs(2),
        };
        let mut p = progress();
        assert_eq!(
            p.next_due(&limits),
            Some((start + Duration::from_secs(5), Due::Timeout))
        );

        let term_at = start + Duration::from_secs(5);
        p.stopping = Some(StopReason::TimedOut);
        p.kill_at = Some(term_at + Duration::from_secs(1));
        assert_eq!(
            p.next_due(&limits),
            Some((term_at + Duration::from_secs(1), Due::Kill))
        );

        // The leader died of the TERM but a descendant holds the pipes: still the grace.
        p.exit = exited(term_at);
        assert_eq!(p.next_due(&limits).map(|(_, due)| due), Some(Due::Kill));

        let killed_at = term_at + Duration::from_secs(1);
        p.killed_at = Some(killed_at);
        p.kill_at = None;
        assert_eq!(
            p.next_due(&limits),
            Some((killed_at + EOF_GRACE, Due::Abandon))
        );

        p.stdout_open = false;
        p.stderr_open = false;
        assert!(p.finished());
    }

    #[test]
    fn open_pipes_after_exit_are_a_leak_not_a_timeout() {
        let start = Instant::now();
        let limits = Limits {
            timeout_at: Some(start + Duration::from_secs(5)),
            kill_grace: Duration::from_secs(1),
            idle_timeout: None,
            finish_grace: Duration::from_secs(2),
        };
        let mut p = progress();
        p.exit = exited(start);
        p.stdout_open = false;
        assert_eq!(p.next_due(&limits), Some((start + EOF_GRACE, Due::Leak)));
        p.stderr_open = false;
        assert_eq!(p.next_due(&limits), None);
    }

    #[test]
    fn the_earliest_of_timeout_idle_and_reap_is_due() {
        let start = Instant::now();
        let limits = Limits {
            timeout_at: Some(start + Duration::from_secs(60)),
            kill_grace: Duration::from_secs(1),
            idle_timeout: Some(Duration::from_secs(10)),
            finish_grace: Duration::from_secs(2),
        };
        let mut p = progress();
        p.last_output = start;
        assert_eq!(
            p.next_due(&limits),
            Some((start + Duration::from_secs(10), Due::Idle))
        );
        // Output moves the idle deadline.
        p.last_output = start + Duration::from_secs(55);
        assert_eq!(
            p.next_due(&limits),
            Some((start + Duration::from_secs(60), Due::Timeout))
        );
        // Once the result is in, silence is expected: only the reap deadline counts.
        p.result_at = Some(start + Duration::from_secs(56));
        assert_eq!(
            p.next_due(&limits),
            Some((start + Duration::from_secs(58), Due::Reap))
        );
    }

    #[test]
    fn no_timeout_means_no_timer() {
        let limits = Limits {
            timeout_at: None,
            kill_grace: Duration::from_secs(1),
            idle_timeout: None,
            finish_grace: Duration::from_secs(2),
        };
        assert_eq!(progress().next_due(&limits), None);
    }
}
