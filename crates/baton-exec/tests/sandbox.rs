//! The write sandbox on real processes. Each test says on stderr whether it ran, past the test
//! harness's capture (so that `cargo test` shows it, and CI's log says whether the sandbox was
//! tested): it runs where Landlock is enforced, and is skipped with the reason only where it is
//! not (an old kernel, `BATON_NO_LANDLOCK`).

use std::io::Write;
use std::path::Path;

use baton_exec::{Attempt, AttemptReport, AttemptSpec, Program, StopLevel, WriteSandbox};
use baton_model::Outcome;
use tokio::sync::watch;

/// Whether Landlock is enforced here, said on stderr either way.
fn landlock(test: &str) -> bool {
    let support = baton_exec::landlock_support();
    let verdict = match support {
        Ok(abi) => format!("ran (Landlock ABI {abi})"),
        Err(why) => format!("skipped: {why}"),
    };
    // Not `eprintln!`: the harness captures that, and would hide a skip. One write, so that
    // parallel tests do not mix their lines.
    let line = format!("landlock sandbox test {test}: {verdict}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    support.is_ok()
}

/// A shell attempt in `dir` that may write only beneath `allowed`.
async fn confined(dir: &Path, allowed: &Path, script: &str) -> AttemptReport {
    let mut spec = AttemptSpec::new(
        Program::Shell(script.into()),
        dir,
        dir.join("logs/attempt.log"),
    );
    spec.sandbox = Some(WriteSandbox::new([allowed.to_path_buf()]));
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    Attempt::spawn(spec).wait(stop_rx).await
}

#[tokio::test]
async fn a_confined_attempt_writes_inside_and_not_outside() {
    if !landlock("a_confined_attempt_writes_inside_and_not_outside") {
        return;
    }
    let inside = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("readable"), "read me\n").unwrap();
    let script = format!(
        "set -u
         echo kept > '{inside}/made' && mkdir '{inside}/sub' && mv '{inside}/made' '{inside}/sub/'
         cat '{outside}/readable'
         touch '{outside}/escaped' 2>&1 || echo 'touch refused'
         echo over > '{outside}/readable' 2>&1 || echo 'overwrite refused'
         rm '{outside}/readable' 2>&1 || echo 'remove refused'
         echo quiet > /dev/null && echo 'dev null ok'
         echo to-stderr > /dev/stderr",
        inside = inside.path().display(),
        outside = outside.path().display(),
    );
    let report = confined(inside.path(), inside.path(), &script).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
    let out = &report.stdout.text;
    assert!(out.contains("read me"), "reads stay open: {out}");
    for refused in ["touch refused", "overwrite refused", "remove refused"] {
        assert!(out.contains(refused), "{refused}: {out}");
    }
    assert!(out.contains("Permission denied"), "{out}");
    assert!(out.contains("dev null ok"), "{out}");
    assert!(report.stderr.text.contains("to-stderr"), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(inside.path().join("sub/made")).unwrap(),
        "kept\n"
    );
    assert!(!outside.path().join("escaped").exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("readable")).unwrap(),
        "read me\n"
    );
}

#[tokio::test]
async fn children_inherit_the_confinement() {
    if !landlock("children_inherit_the_confinement") {
        return;
    }
    let inside = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // A grandchild in a new session, started by another program: still confined.
    let script = format!(
        "setsid sh -c 'touch \"{outside}/escaped\" || echo refused > \"{inside}/grandchild\"'",
        inside = inside.path().display(),
        outside = outside.path().display(),
    );
    let report = confined(inside.path(), inside.path(), &script).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
    assert_eq!(
        std::fs::read_to_string(inside.path().join("grandchild")).unwrap(),
        "refused\n"
    );
    assert!(!outside.path().join("escaped").exists());
}

#[tokio::test]
async fn an_unconfined_attempt_is_untouched_by_an_earlier_confined_one() {
    if !landlock("an_unconfined_attempt_is_untouched_by_an_earlier_confined_one") {
        return;
    }
    let inside = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let report = confined(inside.path(), inside.path(), "true").await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    // The restriction is the child's alone: baton itself, and what it starts next, write freely.
    let escaped = outside.path().join("free");
    let spec = AttemptSpec::new(
        Program::Shell(format!("touch '{}'", escaped.display())),
        outside.path(),
        outside.path().join("log"),
    );
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let report = Attempt::spawn(spec).wait(stop_rx).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
    assert!(escaped.exists());
}

#[tokio::test]
async fn a_missing_allowed_path_is_left_out() {
    if !landlock("a_missing_allowed_path_is_left_out") {
        return;
    }
    let inside = tempfile::tempdir().unwrap();
    let mut spec = AttemptSpec::new(
        Program::Shell("echo ok".into()),
        inside.path(),
        inside.path().join("log"),
    );
    spec.sandbox = Some(WriteSandbox::new([
        inside.path().to_path_buf(),
        inside.path().join("not-there"),
    ]));
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let report = Attempt::spawn(spec).wait(stop_rx).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 }, "{report:?}");
}

#[tokio::test]
async fn a_confined_attempt_cannot_signal_what_runs_outside_its_sandbox() {
    if !landlock("a_confined_attempt_cannot_signal_what_runs_outside_its_sandbox") {
        return;
    }
    if baton_exec::landlock_abi().is_some_and(|abi| abi < 6) {
        let _ = std::io::stderr()
            .write_all(b"landlock sandbox test signal scoping: skipped: Landlock ABI < 6\n");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A process of baton's, outside the sandbox, and one the task starts itself.
    let mut outsider = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let script = format!(
        "kill -0 {outsider} 2>/dev/null && echo 'signalled outsider' || echo 'outsider refused'
         kill -0 $PPID 2>/dev/null && echo 'signalled baton' || echo 'baton refused'
         sleep 30 & inner=$!
         kill $inner && echo 'own child ok'",
        outsider = outsider.id()
    );
    let report = confined(dir.path(), dir.path(), &script).await;
    let out = &report.stdout.text;
    assert!(out.contains("outsider refused"), "{out}");
    assert!(out.contains("baton refused"), "{out}");
    assert!(
        out.contains("own child ok"),
        "its own processes stay its own: {out}"
    );
    assert!(
        outsider.try_wait().unwrap().is_none(),
        "the outsider still runs"
    );
    outsider.kill().unwrap();
    outsider.wait().unwrap();
}
