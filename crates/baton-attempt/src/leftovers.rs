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

use std::collections::{HashMap, HashSet};

use baton_model::RunId;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The attempts of a run whose processes a dead driver may have left: those recorded as
/// started and not ended, and any numbered past its task's recorded attempts (started in the
/// moments before the crash, before their start was committed). A process of an attempt that
/// ended — a daemon it started, which another run may be using — is not among them.
#[derive(Debug, Default)]
pub struct Unfinished {
    open: HashSet<(String, u32)>,
    recorded: HashMap<String, u32>,
    /// The recorded pids of the open attempts: their process groups.
    groups: Vec<u32>,
    /// Attempts a takeover adopted: they run on (on a live worker) and are not killed.
    adopted: HashSet<(String, u32)>,
}

impl Unfinished {
    /// Task `task` has `attempts` attempts recorded: any numbered past them may have been
    /// started in the moments before a crash.
    pub fn recorded(&mut self, task: &str, attempts: u32) {
        self.recorded.insert(task.to_owned(), attempts);
    }

    /// Attempt `attempt` of `task` is recorded as started and not ended, in process group
    /// `group` when its pid was recorded.
    pub fn open(&mut self, task: &str, attempt: u32, group: Option<u32>) {
        self.groups.extend(group);
        self.open.insert((task.to_owned(), attempt));
    }

    /// Attempt `attempt` of `task` runs on, on a live worker: a takeover adopted it. Its
    /// processes (and the cgroups that hold them) are spared.
    pub fn adopted(&mut self, task: &str, attempt: u32) {
        self.open.remove(&(task.to_owned(), attempt));
        self.adopted.insert((task.to_owned(), attempt));
    }

    /// Whether `process` belongs to an adopted attempt that a live worker runs: one whose
    /// worker died (the coordinator with it, say) is ended now, before its lease lapses and
    /// the attempt runs again.
    fn spares(&self, process: &Marked) -> bool {
        process
            .attempt
            .as_ref()
            .is_some_and(|key| self.adopted.contains(key))
            && process
                .worker
                .is_some_and(|(pid, start_time)| crate::procs::start_time(pid) == Some(start_time))
    }

    /// Whether attempt `attempt` of `task` may still have processes to end.
    fn covers(&self, task: &str, attempt: u32) -> bool {
        let key = (task.to_owned(), attempt);
        !self.adopted.contains(&key)
            && (self.open.contains(&key) || attempt > self.recorded.get(task).copied().unwrap_or(0))
    }
}

/// Kills every process of `run`'s unfinished attempts still alive (found by its environment)
/// with its process group, the recorded groups of those attempts that still hold one, and the
/// run's leftover cgroups. Returns how many processes and cgroups were killed. Call it only
/// while no attempt of the run is running: before a takeover starts anything, holding the run.
pub fn kill_leftovers(run: &RunId, unfinished: &Unfinished) -> usize {
    // Every attempt's cgroup, even one whose pid was never recorded (a task in its setup).
    let marker = format!("BATON_RUN_ID={run}");
    let cgroups = baton_exec::kill_leftover_cgroups(run.as_str(), &|pid| {
        !unfinished.adopted.is_empty()
            && marked(pid, marker.as_bytes()).is_some_and(|p| unfinished.spares(&p))
    });
    let found: Vec<Marked> = processes_marked(marker.as_bytes())
        .into_iter()
        .filter(|p| match &p.attempt {
            Some((task, attempt)) => {
                unfinished.covers(task, *attempt)
                    || (unfinished.adopted.contains(&(task.clone(), *attempt))
                        && !unfinished.spares(p))
            }
            // Marked as the run's but not as any attempt's: not one of baton's.
            None => false,
        })
        .collect();
    let killed = found.iter().filter(|process| process.end()).count();
    // A recorded group whose members cleared their environment is still the run's if one of
    // them was found above; otherwise it is left alone (its number may have been reused).
    for &group in &unfinished.groups {
        if !found.iter().any(|p| p.group == Some(group)) {
            continue;
        }
        if let Ok(id) = i32::try_from(group)
            && id != nix::unistd::getpgrp().as_raw()
        {
            let _ = killpg(Pid::from_raw(id), Signal::SIGKILL);
        }
    }
    killed + cgroups
}

/// Kills what is left of attempt `attempt` of `task` once it was stopped (timed out,
/// cancelled, leaked): its processes that left its process group (`setsid`, a double fork) and
/// so outlived the group's kill, found by their environment. Returns how many were killed.
/// A /proc scan, made only on those paths: an attempt that simply exited pays nothing.
pub fn kill_attempt(run: &RunId, task: &str, attempt: u32) -> usize {
    let marker = format!("BATON_RUN_ID={run}");
    processes_marked(marker.as_bytes())
        .iter()
        .filter(|p| {
            p.attempt
                .as_ref()
                .is_some_and(|(t, a)| t == task && *a == attempt)
        })
        .filter(|p| p.end())
        .count()
}

/// The processes of `task`'s attempt `attempt` that were orphaned and reparented to baton
/// (a subreaper where no cgroup holds attempts: `baton_exec::become_subreaper`), found among
/// baton's own children by their environment: one small read, and one per child, cheap
/// enough for the end of every attempt. [`Adopted::end`] kills and reaps them.
pub fn adopted(run: &RunId, task: &str, attempt: u32) -> Adopted {
    let marker = format!("BATON_RUN_ID={run}");
    Adopted(
        baton_exec::own_children()
            .into_iter()
            .filter_map(|pid| marked(pid, marker.as_bytes()))
            .filter(|p| {
                p.attempt
                    .as_ref()
                    .is_some_and(|(t, a)| t == task && *a == attempt)
            })
            .collect(),
    )
}

/// What [`adopted`] found.
pub struct Adopted(Vec<Marked>);

impl Adopted {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Kills each and reaps it (it waits for the killed: call it off the runtime's thread).
    /// Returns how many were still there to kill.
    pub fn end(self) -> usize {
        self.0.iter().filter(|p| p.end()).count()
    }
}

/// A process marked as a run's.
struct Marked {
    pid: u32,
    group: Option<u32>,
    /// Its parent: baton itself for an orphan reparented to it, which baton then reaps.
    parent: Option<u32>,
    /// Its `BATON_TASK_ID` and `BATON_ATTEMPT`.
    attempt: Option<(String, u32)>,
    /// Its `BATON_WORKER` (`PID:START`): the worker that runs it, if a worker does.
    worker: Option<(u32, u64)>,
}

impl Marked {
    /// Kills it with its process group; whether it was still there to kill.
    fn end(&self) -> bool {
        // Never baton's own group: a marked process caught before it left it (a `setsid` not
        // yet made) would take baton, and whatever started it, down with it.
        let own = nix::unistd::getpgrp().as_raw();
        if let Some(group) = self
            .group
            .and_then(|g| i32::try_from(g).ok())
            .filter(|&g| g != own)
        {
            let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
        let Ok(pid) = i32::try_from(self.pid) else {
            return false;
        };
        let killed = kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok();
        if killed && baton_exec::is_subreaper() && self.parent == Some(std::process::id()) {
            // Adopted by baton (a subreaper): its zombie is baton's to reap. Only this pid,
            // and only as a subreaper: a child baton started itself (an attempt's leader) is
            // waited for where it was started, and has been by the time its attempt ends.
            let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), None);
        }
        killed
    }
}

/// Ends what workers that died on this host left running: processes whose `BATON_WORKER`
/// (`PID:START`, see `RunConfig::worker`) names a process that is gone. Their attempts were
/// given up with the worker's lease and run again elsewhere; left alone they would go on
/// working (and spending) to no end. `is_alive(pid, start_time)` says whether a worker of
/// this host lives. Returns how many were killed.
pub fn kill_dead_workers_leftovers(is_alive: impl Fn(u32, u64) -> bool) -> usize {
    let me = std::process::id();
    let mut dead: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    let mut killed = 0;
    for pid in baton_exec::processes::all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
    {
        let Some(environ) = baton_exec::processes::environment(pid) else {
            continue;
        };
        let Some(worker) = environ
            .split(|&b| b == 0)
            .find_map(|var| var.strip_prefix(b"BATON_WORKER="))
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::to_owned)
        else {
            continue;
        };
        let gone = *dead.entry(worker.clone()).or_insert_with(|| {
            let Some((pid, start)) = worker.split_once(':') else {
                return false;
            };
            let (Ok(pid), Ok(start_time)) = (pid.parse(), start.parse()) else {
                return false;
            };
            !is_alive(pid, start_time)
        });
        if gone && let Some(process) = marked(pid, format!("BATON_WORKER={worker}").as_bytes()) {
            killed += usize::from(process.end());
        }
    }
    killed
}

/// Ends every process of the attempts worker `worker` (`PID:START`, its `BATON_WORKER`) runs
/// on this host, with their process groups: its watchdog's work when the worker stopped
/// renewing its leases (paused, stuck) or died. Returns how many were killed.
pub fn kill_workers_attempts(worker: &str) -> usize {
    processes_marked(format!("BATON_WORKER={worker}").as_bytes())
        .iter()
        .filter(|process| process.end())
        .count()
}

/// Every live process (not a zombie) whose environment holds `marker`, with its process group
/// and the attempt its environment names.
fn processes_marked(marker: &[u8]) -> Vec<Marked> {
    let me = std::process::id();
    baton_exec::processes::all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter_map(|pid| marked(pid, marker))
        .collect()
}

/// Process `pid` if it is live (not a zombie) and its environment holds `marker`, with its
/// process group, its parent and the attempt its environment names.
fn marked(pid: u32, marker: &[u8]) -> Option<Marked> {
    let environ = baton_exec::processes::environment(pid)?;
    let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
    if !vars.contains(&marker) {
        return None;
    }
    let process = baton_exec::processes::process(pid)?;
    if process.zombie {
        return None;
    }
    let value = |name: &[u8]| {
        vars.iter()
            .find_map(|var| var.strip_prefix(name))
            .and_then(|v| std::str::from_utf8(v).ok())
    };
    let attempt = value(b"BATON_TASK_ID=")
        .zip(value(b"BATON_ATTEMPT=").and_then(|a| a.parse().ok()))
        .map(|(task, attempt)| (task.to_owned(), attempt));
    let worker = value(b"BATON_WORKER=")
        .and_then(|w| w.split_once(':'))
        .and_then(|(pid, start)| Some((pid.parse().ok()?, start.parse().ok()?)));
    Some(Marked {
        pid,
        group: Some(process.group),
        parent: Some(process.parent),
        attempt,
        worker,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    use super::*;

    fn spawn(run: &str, task: &str, attempt: u32, setsid: bool) -> Child {
        spawn_for(run, task, attempt, setsid, None)
    }

    /// [`spawn`], run by worker `worker` (`PID:START`) when given.
    fn spawn_for(run: &str, task: &str, attempt: u32, setsid: bool, worker: Option<&str>) -> Child {
        let mut command = if setsid {
            let mut c = Command::new("setsid");
            c.args(["sleep", "30"]);
            c
        } else {
            let mut c = Command::new("sleep");
            c.arg("30").process_group(0);
            c
        };
        if let Some(worker) = worker {
            command.env("BATON_WORKER", worker);
        }
        command
            .env("BATON_RUN_ID", run)
            .env("BATON_TASK_ID", task)
            .env("BATON_ATTEMPT", attempt.to_string())
            .spawn()
            .unwrap()
    }

    /// A takeover adopts attempts that run on live workers: their processes are spared. One
    /// whose worker is gone (it died with the coordinator) is ended at once.
    #[test]
    fn spares_adopted_attempts_that_a_live_worker_runs() {
        let run = "20261203-000000-adop";
        let id = RunId::new(run).unwrap();
        let me = std::process::id();
        let live = format!("{me}:{}", crate::procs::start_time(me).unwrap());
        let dead = format!("{me}:1");
        let mut running = spawn_for(run, "a", 1, false, Some(&live));
        let mut orphan = spawn_for(run, "b", 1, false, Some(&dead));
        for child in [&running, &orphan] {
            settled(child);
        }
        let mut state = unfinished(&[("a", 1), ("b", 1)], &[("a", 1), ("b", 1)]);
        state.adopted("a", 1);
        state.adopted("b", 1);
        kill_leftovers(&id, &state);
        assert!(
            orphan.wait().unwrap().code().is_none(),
            "killed by a signal"
        );
        assert!(
            running.try_wait().unwrap().is_none(),
            "the adopted attempt runs on"
        );
        running.kill().unwrap();
        running.wait().unwrap();
    }

    /// Waits until `child` is `sleep` with its environment (a `setsid` child execs `sleep`
    /// once it has left the test's session: caught before, it would still be in the test's
    /// process group, which killing its group would end).
    fn settled(child: &Child) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let ready = || {
            let env = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap_or_default();
            let comm =
                std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap_or_default();
            comm.trim() == "sleep" && env.windows(13).any(|w| w == b"BATON_ATTEMPT")
        };
        while !ready() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn unfinished(open: &[(&str, u32)], recorded: &[(&str, u32)]) -> Unfinished {
        Unfinished {
            open: open.iter().map(|(t, a)| ((*t).to_owned(), *a)).collect(),
            recorded: recorded
                .iter()
                .map(|(t, a)| ((*t).to_owned(), *a))
                .collect(),
            groups: Vec::new(),
            adopted: HashSet::new(),
        }
    }

    #[test]
    fn ends_the_unfinished_attempts_and_spares_finished_ones_and_strangers() {
        let run = "20261130-000000-beef";
        let id = RunId::new(run).unwrap();
        // Attempt 2 of `a` is open; attempt 1 of `b` ended (its daemon lives on, maybe in use
        // by another run); attempt 1 of `c` was never recorded (the commit window).
        let mut open = spawn(run, "a", 2, false);
        let mut unrecorded = spawn(run, "c", 1, true);
        let mut daemon = spawn(run, "b", 1, true);
        let mut stranger = spawn("20261130-000000-other", "a", 2, false);
        for child in [&open, &unrecorded, &daemon, &stranger] {
            settled(child);
        }
        let state = unfinished(&[("a", 2)], &[("a", 2), ("b", 1), ("c", 0)]);
        assert!(kill_leftovers(&id, &state) >= 2);
        assert!(open.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(
            unrecorded.wait().unwrap().code().is_none(),
            "killed by a signal"
        );
        for (name, child) in [("the daemon", &mut daemon), ("the stranger", &mut stranger)] {
            assert!(child.try_wait().unwrap().is_none(), "{name} still runs");
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}
