//! A simple command runs without `/bin/sh` in between (as make runs one); anything with
//! something in it for a shell, or naming a program that is not there, still runs in the
//! shell. Real processes.

use std::time::Duration;

use baton_exec::{Attempt, AttemptSpec, Program, StopLevel};
use baton_model::Outcome;
use tokio::sync::watch;

/// The command name of the attempt's own process, read while it runs.
async fn own_process(script: &str) -> (String, Outcome) {
    let dir = tempfile::tempdir().unwrap();
    let spec = AttemptSpec::new(
        Program::Shell(script.into()),
        dir.path(),
        dir.path().join("log"),
    );
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let attempt = Attempt::spawn(spec);
    let pid = attempt.pid().expect("started");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap()
        .trim()
        .to_owned();
    let report = attempt.wait(stop_rx).await;
    (comm, report.outcome)
}

#[tokio::test]
async fn a_simple_command_is_the_attempt_s_own_process() {
    let (comm, outcome) = own_process("sleep 0.4").await;
    assert_eq!(comm, "sleep");
    assert_eq!(outcome, Outcome::Exited { code: 0 });
}

#[tokio::test]
async fn a_line_for_the_shell_runs_in_the_shell() {
    let (comm, outcome) = own_process("sleep 0.4; true").await;
    assert_eq!(comm, "sh");
    assert_eq!(outcome, Outcome::Exited { code: 0 });
}

#[tokio::test]
async fn a_program_that_is_not_there_is_the_shell_s_exit_127() {
    let dir = tempfile::tempdir().unwrap();
    let spec = AttemptSpec::new(
        Program::Shell("no-such-program-for-baton --flag".into()),
        dir.path(),
        dir.path().join("log"),
    );
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let report = Attempt::spawn(spec).wait(stop_rx).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 127 });
    assert!(report.stderr.text.contains("not found"), "{report:?}");
}
