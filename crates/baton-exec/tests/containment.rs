//! What holds an attempt's processes: its own cgroup where cgroup v2 is writable, else its
//! process group. Real processes; the cgroup case needs root (or a delegated cgroup), as on CI,
//! and checks the fallback instead where that is missing.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use baton_exec::{
    Attempt, AttemptReport, AttemptSpec, CgroupPool, Program, StopLevel, cgroups_available,
};
use baton_model::{Containment, Outcome};
use common::{gone, gone_soon};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::sync::watch;

fn setsid_fixture(dir: &Path, pidfile: &Path) -> AttemptSpec {
    let program = Program::Exec {
        program: Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/setsid-grandchild.sh"),
        args: vec![pidfile.into()],
    };
    AttemptSpec::new(program, dir, dir.join("attempt.log"))
}

async fn run(spec: AttemptSpec) -> AttemptReport {
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    Attempt::spawn(spec).wait(stop_rx).await
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The directory of the cgroup v2 `path` (as printed in `/proc/self/cgroup`), under the
/// `cgroup2` mount.
fn cgroup_dir(path: &str) -> PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            right
                .starts_with("cgroup2 ")
                .then(|| left.split(' ').nth(4).unwrap().to_owned())
        })
        .expect("a cgroup2 mount");
    Path::new(&mount).join(path.trim_start_matches('/'))
}

#[tokio::test]
async fn a_setsid_grandchild_dies_with_an_attempt_in_a_cgroup() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let mut spec = setsid_fixture(dir.path(), &pidfile);
    spec.cgroup = Some(CgroupPool::new("test-run"));
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
    let grandchild = read_pid(&pidfile);
    if !cgroups_here() {
        // No writable cgroup v2 here (not root, no delegation): the fallback.
        assert_eq!(report.containment, Some(Containment::ProcessGroup));
        let _ = kill(Pid::from_raw(grandchild), Signal::SIGKILL);
        return;
    }
    assert_eq!(report.containment, Some(Containment::Cgroup));
    assert!(
        gone_soon(grandchild),
        "the grandchild that called setsid outlived its attempt"
    );
    let path = report
        .stdout
        .text
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .expect("the fixture prints its cgroup")
        .to_owned();
    // The run's parent, then the attempt's own.
    let parent = path.rsplit('/').nth(1).unwrap();
    assert!(
        parent.starts_with(&format!("baton-test-run-{}-", std::process::id())),
        "{path}"
    );
    // The pool went with the attempt, the last to hold it: nothing is left.
    assert!(
        !cgroup_dir(&path).exists(),
        "the attempt's cgroup {path} was not removed"
    );
    let parent = cgroup_dir(&path).parent().unwrap().to_owned();
    assert!(
        !parent.exists(),
        "the run's cgroup {parent:?} was not removed"
    );
}

#[tokio::test]
async fn without_a_cgroup_the_process_group_is_used_and_said_to_be() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // No cgroup asked for: what baton does where cgroups are missing.
    let spec = setsid_fixture(dir.path(), &pidfile);
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
    assert_eq!(report.containment, Some(Containment::ProcessGroup));
    let grandchild = read_pid(&pidfile);
    // The limit of a process group: the grandchild left it, and lives on.
    assert!(
        !gone(grandchild),
        "a setsid grandchild was expected to escape the process group"
    );
    kill(Pid::from_raw(grandchild), Signal::SIGKILL).unwrap();
}

#[tokio::test]
async fn a_timeout_kills_the_whole_cgroup() {
    if !cgroups_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 1000000' </dev/null >/dev/null 2>&1 & sleep 1000",
        pidfile.display()
    );
    let mut spec = AttemptSpec::new(Program::Shell(script), dir.path(), dir.path().join("log"));
    spec.cgroup = Some(CgroupPool::new("test-run"));
    spec.timeout = Some(Duration::from_millis(300));
    spec.kill_grace = Duration::from_millis(100);
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::TimedOut);
    assert_eq!(report.containment, Some(Containment::Cgroup));
    assert!(
        gone_soon(read_pid(&pidfile)),
        "the setsid grandchild survived the timeout"
    );
}

/// The cgroup (v2 path) a shell attempt ran in, from what it printed.
fn printed_cgroup(report: &AttemptReport) -> String {
    report
        .stdout
        .text
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup printed: {report:?}"))
        .to_owned()
}

/// A run's cgroups are reused: the next attempt gets the cgroup the last one left, alone in it,
/// and two attempts at once get two. One that had to be killed (a daemon was left in it) is
/// not reused: its daemon is killed, not inherited. Dropping the pool removes them all.
#[tokio::test]
async fn a_pool_reuses_emptied_cgroups_and_removes_them_at_the_end() {
    if !cgroups_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pool = CgroupPool::new("pool-test");
    let pidfile = dir.path().join("daemon.pid");
    let shell = |script: String| {
        let mut spec = AttemptSpec::new(Program::Shell(script), dir.path(), dir.path().join("log"));
        spec.cgroup = Some(pool.clone());
        spec
    };
    let clean = run(shell("cat /proc/self/cgroup".into())).await;
    assert_eq!(clean.containment, Some(Containment::Cgroup));
    let reused = printed_cgroup(&clean);
    // This one leaves a daemon that left its group and closed the pipes.
    let first = run(shell(format!(
        "setsid sh -c 'echo $$ > {0}; exec sleep 1000000' </dev/null >/dev/null 2>&1 & \
         while [ ! -s {0} ]; do sleep 0.01; done; cat /proc/self/cgroup",
        pidfile.display()
    )))
    .await;
    assert_eq!(first.containment, Some(Containment::Cgroup));
    let daemon = read_pid(&pidfile);
    assert!(gone_soon(daemon), "the daemon outlived its attempt");
    let first_cgroup = printed_cgroup(&first);
    assert_eq!(first_cgroup, reused, "an emptied cgroup is reused");
    assert!(
        !cgroup_dir(&first_cgroup).exists(),
        "a killed cgroup is removed"
    );
    // The next is given a new cgroup, and is alone in it.
    let second = run(shell("cat /proc/self/cgroup".into())).await;
    assert!(second.outcome.is_success(), "{second:?}");
    let second_cgroup = printed_cgroup(&second);
    assert_ne!(second_cgroup, first_cgroup);
    let again = run(shell(format!(
        "cat /proc/self/cgroup; cat {}/cgroup.procs",
        cgroup_dir(&second_cgroup).display()
    )))
    .await;
    assert_eq!(printed_cgroup(&again), second_cgroup);
    let members: Vec<&str> = again
        .stdout
        .text
        .lines()
        .filter(|line| line.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    // The shell and its `cat`: nothing of an earlier attempt's.
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(!members.contains(&daemon.to_string().as_str()));
    // Two at once: two cgroups.
    let (a, b) = tokio::join!(
        run(shell("cat /proc/self/cgroup; sleep 0.2".into())),
        run(shell("cat /proc/self/cgroup; sleep 0.2".into()))
    );
    assert_ne!(printed_cgroup(&a), printed_cgroup(&b));
    let parent = cgroup_dir(&first_cgroup).parent().unwrap().to_owned();
    assert!(parent.is_dir());
    drop(pool);
    assert!(!parent.exists(), "the pool's cgroups were left: {parent:?}");
}

/// Whether attempts get a cgroup of their own here. The portable process layer has none by
/// design (`BATON_PLATFORM=portable`); on Linux's layer a machine without a writable cgroup v2
/// fails the test, saying so, unless `BATON_TEST_ALLOW_NO_CGROUP` is set (then the test checks
/// what it can without one): CI has cgroups, and a test there never passes without testing
/// them.
fn cgroups_here() -> bool {
    if cgroups_available() {
        return true;
    }
    assert!(
        !baton_exec::platform().is_linux()
            || std::env::var_os("BATON_TEST_ALLOW_NO_CGROUP").is_some(),
        "cgroup v2 is not writable here (or BATON_NO_CGROUP is set); set \
         BATON_TEST_ALLOW_NO_CGROUP=1 to skip what needs it"
    );
    eprintln!("note: no writable cgroup v2; skipped what needs it");
    false
}
