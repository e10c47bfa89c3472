//! Who drives a run: this process, identified so that a later process can tell whether it is
//! still alive (pid plus start time, since pids are reused).

use baton_model::RunId;
use baton_store::{Claim, Driver, LEASE_TERM, Liveness, Store, StoreError};

/// This process as a run's driver.
pub fn me() -> Driver {
    let pid = std::process::id();
    Driver {
        pid,
        start_time: process_start_time(pid).unwrap_or(0),
        host: hostname(),
    }
}

/// Makes this process the driver of `run`: refused, naming the holder, while a live process
/// (or, on another host, one whose lease holds) drives it.
pub fn claim(store: &dyn Store, run: &RunId) -> Result<Claim, StoreError> {
    store.claim(run, &me(), crate::stamp::now_ms(), LEASE_TERM, &liveness)
}

/// Whether `driver` is a live process on this host. A driver recorded on another host is
/// taken as alive: this process cannot see it.
pub fn is_alive(driver: &Driver) -> bool {
    liveness(driver) != Liveness::Dead
}

/// What this process can tell of `driver`: alive or dead on this host; on another, unknown
/// (its lease decides).
pub fn liveness(driver: &Driver) -> Liveness {
    if driver.host != hostname() {
        return Liveness::Unknown;
    }
    if process_start_time(driver.pid) == Some(driver.start_time) {
        Liveness::Alive
    } else {
        Liveness::Dead
    }
}

/// The start time of a live process in clock ticks since boot (field 22 of `/proc/PID/stat`);
/// `None` for a process that is gone or a zombie (dead, only not yet reaped by its parent).
fn process_start_time(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    if matches!(fields.first().map(String::as_str), Some("Z" | "X")) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name, starting with the state (field 3).
pub(crate) fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: skip past it.
    Some(
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = me();
        assert!(me.start_time > 0);
        assert!(is_alive(&me));
        let impostor = Driver {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!is_alive(&impostor));
    }
}
