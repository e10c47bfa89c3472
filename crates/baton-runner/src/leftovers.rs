//! Processes a dead driver left behind.
//!
//! When the process driving a run is killed outright (SIGKILL, OOM, power cut of a remote
//! terminal), its attempts' process groups live on, re-parented to init. Whoever takes the run
//! over (`baton resume`, `baton cancel`) ends them first. The recorded pid of an attempt is its
//! process group id; to be sure a group is still that attempt's and not a stranger's that
//! reused the number, a member must carry `BATON_RUN_ID=<run>` in its environment, which every
//! attempt's processes inherit.
//!
//! An attempt that ran in a cgroup of its own left that cgroup too, named `baton-RUN-…`
//! (see `baton_exec::kill_leftover_cgroups`): it is killed whole, which reaches the
//! descendants that left the process group with `setsid`, and removed.

use baton_model::RunId;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Kills the process groups among `groups` that still hold processes of `run`, and the run's
/// leftover cgroups. Returns how many groups and cgroups were killed.
pub fn kill_leftovers(run: &RunId, groups: &[u32]) -> usize {
    // Every attempt's cgroup, even one whose pid was never recorded (a task in its setup).
    let cgroups = baton_exec::kill_leftover_cgroups(run.as_str());
    if groups.is_empty() {
        return cgroups;
    }
    let marker = format!("BATON_RUN_ID={run}");
    let mut killed = 0;
    for &group in groups {
        if group_belongs_to(group, marker.as_bytes()) {
            let Ok(id) = i32::try_from(group) else {
                continue;
            };
            if killpg(Pid::from_raw(id), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed + cgroups
}

/// Whether some live process in process group `group` has `marker` in its environment.
fn group_belongs_to(group: u32, marker: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if process_group(pid) != Some(group) {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ.split(|&b| b == 0).any(|var| var == marker) {
            return true;
        }
    }
    false
}

/// The process group of `pid` (field 5 of `/proc/PID/stat`).
fn process_group(pid: u32) -> Option<u32> {
    crate::driver::stat_fields(pid)?.get(2)?.parse().ok()
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
        assert_eq!(killed, 1);
        assert!(ours.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(
            stranger.try_wait().unwrap().is_none(),
            "the stranger still runs"
        );
        stranger.kill().unwrap();
        stranger.wait().unwrap();
    }
}
