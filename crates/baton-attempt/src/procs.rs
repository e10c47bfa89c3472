//! What this host's kernel says of a process ([`baton_exec::processes`]): its start time,
//! which tells a live process from a reused pid, and the host's name.

/// The start time of a live process (clock ticks since boot on Linux); `None` for a process
/// that is gone or a zombie (dead, only not yet reaped by its parent).
pub fn start_time(pid: u32) -> Option<u64> {
    baton_exec::processes::process(pid)
        .filter(|process| !process.zombie)
        .map(|process| process.start_time)
}

/// This host's name, as drivers and workers record it.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_default()
}
