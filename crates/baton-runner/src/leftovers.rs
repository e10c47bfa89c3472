//! Processes a dead driver left behind.
//!
//! When the process driving a run is killed outright (SIGKILL, OOM, power cut of a remote
//! terminal), its attempts' processes live on, re-parented to init. Whoever takes the run over
//! (`baton resume`, `baton cancel`, `baton prune`) ends them first — all of them, recorded or
//! not: an attempt started in the last moments before the crash may have no `attempt-started`
//! in the store yet (launches are committed in batches), and running its task again beside it
//! would run it twice at once. Every process of a run carries `BATON_RUN_ID=<run>` in its
//! environment (every attempt's processes inherit it), so they are found by looking at every
//! process's environment, and each is ended with its whole process group. A reused pid is
//! never hit: a process is only touched if its own environment says it is the run's.
//!
//! An attempt that ran in a cgroup of its own left that cgroup too, named `baton-RUN-…`
//! (see `baton_exec::kill_leftover_cgroups`): it is killed whole, which reaches descendants
//! that cleared their environment as well, and removed.

use baton_model::RunId;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Kills every process of `run` still alive (found by its environment) with its process
/// group, the recorded process groups among `groups` that still hold one, and the run's
/// leftover cgroups. Returns how many processes and cgroups were killed. Call it only while
/// no attempt of the run is running: before a takeover starts anything.
pub fn kill_leftovers(run: &RunId, groups: &[u32]) -> usize {
    // Every attempt's cgroup, even one whose pid was never recorded (a task in its setup).
    let cgroups = baton_exec::kill_leftover_cgroups(run.as_str());
    let marker = format!("BATON_RUN_ID={run}");
    let found = processes_marked(marker.as_bytes());
    let mut killed = 0;
    for &(pid, group) in &found {
        if let Some(group) = group.and_then(|g| i32::try_from(g).ok()) {
            let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
        if let Ok(pid) = i32::try_from(pid)
            && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok()
        {
            killed += 1;
        }
    }
    // A recorded group whose members cleared their environment is still the run's if one of
    // them was found above; otherwise it is left alone (its number may have been reused).
    for &group in groups {
        if !found.iter().any(|&(_, g)| g == Some(group)) {
            continue;
        }
        if let Ok(id) = i32::try_from(group) {
            let _ = killpg(Pid::from_raw(id), Signal::SIGKILL);
        }
    }
    killed + cgroups
}

/// Every live process (not a zombie) whose environment holds `marker`, with its process group.
fn processes_marked(marker: &[u8]) -> Vec<(u32, Option<u32>)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|&b| b == 0).any(|var| var == marker) {
            continue;
        }
        let Some(fields) = crate::driver::stat_fields(pid) else {
            continue;
        };
        if matches!(fields.first().map(String::as_str), Some("Z" | "X")) {
            continue;
        }
        found.push((pid, fields.get(2).and_then(|g| g.parse().ok())));
    }
    found
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn kills_a_group_of_the_run_and_spares_a_stranger() {
        let run = RunId::new("20261130-000000-beef").unwrap();
        let mut ours = Command::new("sleep")
            .arg("30")
            .env("BATON_RUN_ID", run.as_str())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut stranger = Command::new("sleep")
            .arg("30")
            .env("BATON_RUN_ID", "20261130-000000-other")
            .process_group(0)
            .spawn()
            .unwrap();
        let killed = kill_leftovers(&run, &[ours.id(), stranger.id()]);
        assert!(killed >= 1, "{killed}");
        assert!(ours.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(
            stranger.try_wait().unwrap().is_none(),
            "the stranger still runs"
        );
        stranger.kill().unwrap();
        stranger.wait().unwrap();
    }

    #[test]
    fn finds_a_process_of_the_run_that_was_never_recorded_even_in_a_session_of_its_own() {
        let run = RunId::new("20261201-000000-cafe").unwrap();
        // Not in any recorded group, and out of its parent's process group and session.
        let mut unrecorded = Command::new("setsid")
            .args(["sleep", "30"])
            .env("BATON_RUN_ID", run.as_str())
            .spawn()
            .unwrap();
        let pid = unrecorded.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read(format!("/proc/{pid}/environ"))
            .map_or(true, |env| !env.windows(12).any(|w| w == b"BATON_RUN_ID"))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(kill_leftovers(&run, &[]) >= 1);
        assert!(
            unrecorded.wait().unwrap().code().is_none(),
            "killed by a signal"
        );
    }
}
