//! What holds an attempt's processes: its own cgroup where cgroup v2 is writable, else its
//! process group. Real processes; the cgroup case needs root (or a delegated cgroup), as on CI,
//! and checks the fallback instead where that is missing.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use baton_exec::{Attempt, AttemptReport, AttemptSpec, Program, StopLevel, cgroups_available};
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
    spec.cgroup = Some("test-run".into());
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
    let grandchild = read_pid(&pidfile);
    if !cgroups_available() {
        // No writable cgroup v2 here (not root, no delegation): the fallback.
        eprintln!("note: no writable cgroup v2; checked the process group fallback only");
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
    let name = path.rsplit('/').next().unwrap();
    assert!(
        name.starts_with(&format!("baton-test-run-{}-", std::process::id())),
        "{path}"
    );
    assert!(
        !cgroup_dir(&path).exists(),
        "the attempt's cgroup {path} was not removed"
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
    if !cgroups_available() {
        eprintln!("note: no writable cgroup v2; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 1000000' </dev/null >/dev/null 2>&1 & sleep 1000",
        pidfile.display()
    );
    let mut spec = AttemptSpec::new(Program::Shell(script), dir.path(), dir.path().join("log"));
    spec.cgroup = Some("test-run".into());
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
