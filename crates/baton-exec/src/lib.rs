//! Runs one attempt of a task as a supervised child process.
//!
//! Each attempt gets its own process group (and, where cgroup v2 is writable and the caller asks,
//! its own cgroup, which holds even descendants that call `setsid`), reads stdout and stderr concurrently in the same loop
//! that waits on the child, streams every byte to a log file while keeping a bounded head and
//! tail in memory, and stops with TERM, a grace period, then KILL of the whole group. The
//! [`handoff`] module holds the pure functions that cap what a task hands to its dependents.
//!
//! Everything here runs on the caller's tokio runtime (IO and time drivers enabled): no thread
//! is spawned per attempt. The spawn itself is a clone of baton's own that does not wait for
//! the child's exec (`clone_exec`; std's `Command`, which forks and execs, for an attempt in a
//! [`WriteSandbox`] or a cgroup, which must be set up between the two, and for every attempt
//! when [`SPAWN_ENV`] is `std`), and the child is waited on through a pidfd.
//!
//! How an attempt's [`Outcome`](baton_model::Outcome) is decided:
//! - baton stopped it (timeout, or a stop request): `TimedOut` or `Cancelled`, whichever came
//!   first, however the process then ended;
//! - its leader exited but its pipes stayed open for [`EOF_GRACE`]: `Leaked`, after baton killed
//!   the group; a leader killed by a signal is reported as `Signaled` even if it also leaked,
//!   since the crash is the news;
//! - otherwise `Exited` or `Signaled` from the leader's status;
//! - the child could not be started, or (never seen in practice) something else reaped it:
//!   `SpawnFailed`, the machinery's failure, which is retried.

mod attempt;
mod capture;
mod cgroup;
mod child;
#[cfg(target_os = "linux")]
mod clone_exec;
mod direct;
pub mod handoff;
mod platform;
mod process_group;
pub mod processes;
mod report;
mod sandbox;
#[cfg(any(target_os = "macos", test))]
mod seatbelt;
mod sink;
mod spawn;
mod spec;
mod subreaper;
mod supervise;
mod utf8;
mod watch;

pub use attempt::Attempt;
pub use capture::Captured;
pub use cgroup::{
    CgroupPool, NO_CGROUP_ENV, cgroups_are_cheap, cgroups_available, kill_leftover_cgroups,
};
#[cfg(target_os = "linux")]
pub use clone_exec::refresh_handled_signals;
pub use platform::{PLATFORM_ENV, Platform, platform};
pub use report::AttemptReport;
pub use sandbox::{
    NO_LANDLOCK_ENV, SandboxKind, WriteSandbox, landlock_abi, landlock_support, write_sandbox,
};
pub use sink::LOG_TAIL;
pub use spawn::{SPAWN_ENV, spawns_with_std};
pub use spec::{AttemptSpec, Program, StopLevel};
pub use subreaper::{become_subreaper, is_subreaper, own_children};
pub use supervise::EOF_GRACE;
pub use watch::{LineWatcher, MAX_WATCHED_LINE, WatchSignal};

/// Asks again which signals have a handler of baton's, for the children to reset: only baton's
/// own clone needs it (std's `Command` resets what it must itself).
#[cfg(not(target_os = "linux"))]
pub fn refresh_handled_signals() -> u64 {
    0
}
