//! Where no cgroup can hold an attempt's processes, baton makes itself their child subreaper:
//! a descendant orphaned by its parent's exit (a `setsid` daemon, a double fork) is reparented
//! to baton instead of to init, so that baton finds it among its own children, by the
//! attempt's marks in its environment, and ends it with its attempt.
//!
//! Only ever on: a process cannot tell afterwards which orphans it would have had. Reaping
//! stays the caller's, pid by pid (never `wait(-1)`, which would take the children baton
//! waits for through pidfds and std's `Child`s).

use std::sync::atomic::{AtomicBool, Ordering};

static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes this process the child subreaper of everything it starts from now on; whether it is.
pub fn become_subreaper() -> bool {
    if SUBREAPER.load(Ordering::Relaxed) {
        return true;
    }
    // Linux's alone: elsewhere an orphan goes to init (or launchd), as it would anyway.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments; it changes only this process's own attribute.
    let done = crate::platform::linux()
        && unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
    #[cfg(not(target_os = "linux"))]
    let done = false;
    SUBREAPER.store(done, Ordering::Relaxed);
    done
}

/// Whether [`become_subreaper`] made this process a subreaper.
pub fn is_subreaper() -> bool {
    SUBREAPER.load(Ordering::Relaxed)
}

/// The pids of the children of this process's main thread, from
/// `/proc/self/task/PID/children`: where the kernel puts an orphan reparented to a subreaper
/// (its first live thread, the main one while it lives), and, under a current-thread runtime,
/// every attempt's child too. One small read: cheap enough for the end of every attempt.
pub fn own_children() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/self/task/{me}/children"))
        .map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
