//! Looking at processes through `/proc`: whether one still lives, which ones a test started, and
//! how much memory baton holds.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Whether `pid` is a live process. A zombie (killed, not yet reaped by whoever inherited it)
/// counts as gone: it runs nothing and holds nothing but its table entry.
pub(crate) fn alive(pid: i32) -> bool {
    match kill(Pid::from_raw(pid), None) {
        Err(Errno::ESRCH) => false,
        _ => !matches!(state(pid), Some('Z' | 'X') | None),
    }
}

/// The state letter from `/proc/PID/stat`.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything; the state follows it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// Waits up to `limit` for `pid` to be gone.
pub(crate) fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !alive(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes whose environment has `key=value`.
pub(crate) fn with_env(key: &str, value: &OsStr) -> Vec<i32> {
    let mut wanted = key.as_bytes().to_vec();
    wanted.push(b'=');
    wanted.extend_from_slice(value.as_bytes());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != std::process::id() as i32)
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == wanted.as_slice()))
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// SIGKILLs every live process marked with `key=dir`.
pub(crate) fn kill_marked(key: &str, dir: &Path) {
    for pid in with_env(key, dir.as_os_str()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Peak resident memory of `pid` so far (`VmHWM`), in KiB.
pub(crate) fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
