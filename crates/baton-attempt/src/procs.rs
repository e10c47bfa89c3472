//! What this host's kernel says of a process (`/proc`): its start time, which tells a live
//! process from a reused pid, its state, group and parent, and the host's name.

/// The start time of a live process in clock ticks since boot (field 22 of `/proc/PID/stat`);
/// `None` for a process that is gone or a zombie (dead, only not yet reaped by its parent).
pub fn start_time(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    if matches!(fields.first().map(String::as_str), Some("Z" | "X")) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name, starting with the state (field 3).
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: skip past it.
    Some(
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// This host's name, as drivers and workers record it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}
