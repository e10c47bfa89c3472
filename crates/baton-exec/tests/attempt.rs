//! Real processes, including the misbehaving fixture programs in `tests/fixtures/`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use baton_exec::{Attempt, AttemptReport, AttemptSpec, Program, StopLevel};
use baton_model::Outcome;
use common::gone_soon;
use tempfile::TempDir;
use tokio::sync::watch;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// A temporary directory to run in and log to, and a spec builder on top of it.
struct Setup {
    dir: TempDir,
}

impl Setup {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> PathBuf {
        self.path("logs/attempt.log")
    }

    fn shell(&self, script: &str) -> AttemptSpec {
        AttemptSpec::new(Program::Shell(script.into()), self.dir.path(), self.log())
    }

    fn fixture(&self, name: &str, args: &[&str]) -> AttemptSpec {
        let program = Program::Exec {
            program: fixture(name),
            args: args.iter().map(OsString::from).collect(),
        };
        AttemptSpec::new(program, self.dir.path(), self.log())
    }
}

async fn run(spec: AttemptSpec) -> AttemptReport {
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    Attempt::spawn(spec).wait(stop_rx).await
}

/// Runs `spec`, sending `level` after `after`.
async fn run_and_stop(spec: AttemptSpec, stops: &[(Duration, StopLevel)]) -> AttemptReport {
    let (stop, stop_rx) = watch::channel(StopLevel::Run);
    let attempt = Attempt::spawn(spec);
    let stops = stops.to_vec();
    tokio::spawn(async move {
        for (after, level) in stops {
            tokio::time::sleep(after).await;
            let _ = stop.send(level);
        }
        // Keep the sender alive: a dropped sender must not read as a stop.
        std::future::pending::<()>().await;
    });
    attempt.wait(stop_rx).await
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn exit_codes_are_reported() {
    let setup = Setup::new();
    assert_eq!(
        run(setup.shell("true")).await.outcome,
        Outcome::Exited { code: 0 }
    );
    assert_eq!(
        run(setup.shell("exit 3")).await.outcome,
        Outcome::Exited { code: 3 }
    );
    // The shell starts fine; the command it cannot find is the script's failure.
    let report = run(setup.shell("no-such-command-anywhere")).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 127 });
    assert!(
        report.stderr.text.contains("not found"),
        "{:?}",
        report.stderr
    );
}

#[tokio::test]
async fn cwd_and_env_are_applied() {
    let setup = Setup::new();
    let mut spec = setup.shell(r#"printf '%s %s' "$BATON_TEST_VAR" "$(pwd)""#);
    spec.env.push(("BATON_TEST_VAR".into(), "hello".into()));
    let report = run(spec).await;
    let cwd = setup.dir.path().canonicalize().unwrap();
    assert_eq!(report.stdout.text, format!("hello {}", cwd.display()));
}

#[tokio::test]
async fn the_child_leads_its_own_group_with_no_signal_blocked_and_sigpipe_default() {
    // This test's process ignores SIGPIPE (Rust does) and has handlers (SIGSEGV): none of it
    // may reach the task. The masks are read by the task process itself (`exec`, and
    // /proc/self): a child the shell forks would show the shell's fork, around which dash
    // blocks every signal, not what baton's spawn gave the task.
    let setup = Setup::new();
    let report = run(setup.shell(
        r#"ps -o pgid= -p $$ | tr -d ' '; echo $$; exec grep -E '^(SigBlk|SigIgn|SigCgt):' /proc/self/status"#,
    ))
    .await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    let lines: Vec<&str> = report.stdout.text.lines().collect();
    assert_eq!(lines[0], lines[1], "the shell leads a group of its own");
    let mask = |name: &str| {
        let line = lines.iter().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "{lines:?}");
    let sigpipe = 1 << (libc::SIGPIPE - 1);
    assert_eq!(mask("SigIgn:") & sigpipe, 0, "{lines:?}");
}

#[tokio::test]
async fn stdout_and_stderr_are_captured_apart_and_logged_together() {
    let setup = Setup::new();
    let script = "echo out1; sleep 0.1; echo err1 >&2; sleep 0.1; echo out2; sleep 0.1; \
                  echo err2 >&2";
    let report = run(setup.shell(script)).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.text, "out1\nout2\n");
    assert_eq!(report.stderr.text, "err1\nerr2\n");
    let log = std::fs::read_to_string(setup.log()).unwrap();
    assert_eq!(log, "out1\nerr1\nout2\nerr2\n");
    assert_eq!(report.log_bytes, log.len() as u64);
    assert_eq!(report.log_error, None);
}

#[tokio::test]
async fn the_log_shows_progress_while_the_task_runs() {
    let setup = Setup::new();
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let attempt = Attempt::spawn(setup.shell("echo first; sleep 0.6; echo second"));
    let waiting = tokio::spawn(attempt.wait(stop_rx));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(std::fs::read_to_string(setup.log()).unwrap(), "first\n");
    let report = waiting.await.unwrap();
    assert_eq!(
        std::fs::read_to_string(setup.log()).unwrap(),
        "first\nsecond\n"
    );
    assert_eq!(report.stdout.text, "first\nsecond\n");
}

#[tokio::test]
async fn timeout_kills_the_whole_group_including_grandchildren() {
    let setup = Setup::new();
    let pidfile = setup.path("grandchild.pid");
    let mut spec = setup.fixture(
        "grandchild.sh",
        &[pidfile.to_str().unwrap(), "keep", "wait"],
    );
    spec.timeout = Some(Duration::from_millis(400));
    spec.kill_grace = Duration::from_secs(5);
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::TimedOut);
    // TERM was enough: nobody waited for the grace.
    assert!(
        report.duration < Duration::from_secs(3),
        "{:?}",
        report.duration
    );
    assert!(
        report.stdout.text.starts_with("grandchild "),
        "{:?}",
        report.stdout
    );
    assert!(
        gone_soon(read_pid(&pidfile)),
        "the grandchild outlived its attempt"
    );
}

#[tokio::test]
async fn a_process_that_ignores_term_is_killed_after_the_grace() {
    let setup = Setup::new();
    let mut spec = setup.fixture("ignore-term.sh", &[]);
    spec.timeout = Some(Duration::from_millis(200));
    spec.kill_grace = Duration::from_millis(300);
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::TimedOut);
    assert!(
        report.duration >= Duration::from_millis(500),
        "{:?}",
        report.duration
    );
    assert!(
        report.duration < Duration::from_secs(3),
        "{:?}",
        report.duration
    );
    assert_eq!(report.stdout.text, "ignoring TERM\n");
}

#[tokio::test]
async fn a_descendant_holding_the_pipes_is_a_leak() {
    let setup = Setup::new();
    let pidfile = setup.path("grandchild.pid");
    let spec = setup.fixture(
        "grandchild.sh",
        &[pidfile.to_str().unwrap(), "keep", "exit"],
    );
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::Leaked { code: 0 });
    assert!(
        report.duration < Duration::from_secs(2),
        "{:?}",
        report.duration
    );
    assert!(
        gone_soon(read_pid(&pidfile)),
        "the leaked grandchild was not killed"
    );
}

#[tokio::test]
async fn a_descendant_left_behind_is_killed_when_the_attempt_ends() {
    let setup = Setup::new();
    let pidfile = setup.path("grandchild.pid");
    let spec = setup.fixture(
        "grandchild.sh",
        &[pidfile.to_str().unwrap(), "close", "exit"],
    );
    let report = run(spec).await;
    // It let go of the pipes, so it is no leak; it still does not outlive the attempt.
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert!(
        gone_soon(read_pid(&pidfile)),
        "the grandchild outlived its attempt"
    );
}

#[tokio::test]
async fn a_background_job_that_finishes_within_the_grace_is_no_leak() {
    let setup = Setup::new();
    let report = run(setup.shell("(sleep 0.02; echo late) & echo early")).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.text, "early\nlate\n");
}

#[tokio::test]
async fn dropping_the_wait_kills_the_group() {
    let setup = Setup::new();
    let pidfile = setup.path("grandchild.pid");
    let spec = setup.fixture(
        "grandchild.sh",
        &[pidfile.to_str().unwrap(), "keep", "wait"],
    );
    let attempt = Attempt::spawn(spec);
    let leader = attempt.pid().unwrap() as i32;
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let waiting = tokio::time::timeout(Duration::from_millis(300), attempt.wait(stop_rx)).await;
    assert!(waiting.is_err(), "the fixture waits for its grandchild");
    assert!(
        gone_soon(read_pid(&pidfile)),
        "the grandchild outlived a dropped attempt"
    );
    assert!(gone_soon(leader), "the leader outlived a dropped attempt");
}

#[tokio::test]
async fn a_flood_stays_bounded_in_memory_and_whole_in_the_log() {
    const FLOOD: u64 = 200_000_000;
    let setup = Setup::new();
    let mut spec = setup.fixture("flood.sh", &[&FLOOD.to_string()]);
    spec.output_limit = 64 * 1024;
    let started = Instant::now();
    let report = run(spec).await;
    eprintln!("200 MB flood took {:?}", started.elapsed());
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.total_bytes, FLOOD);
    assert_eq!(report.stdout.cut_bytes, FLOOD - 64 * 1024);
    assert!(
        report.stdout.text.len() < 64 * 1024 + 64,
        "{}",
        report.stdout.text.len()
    );
    assert!(report.stdout.text.contains("\n[… 190.7MiB cut …]\n"));
    assert_eq!(report.log_bytes, FLOOD);
    assert_eq!(std::fs::metadata(setup.log()).unwrap().len(), FLOOD);
}

#[tokio::test]
async fn stderr_keeps_its_tail() {
    let setup = Setup::new();
    let mut spec = setup.shell(&format!(
        "{} 100000 stderr; echo the end >&2",
        fixture("flood.sh").display()
    ));
    spec.stderr_limit = 100;
    let report = run(spec).await;
    assert_eq!(report.stderr.total_bytes, 100_008);
    assert_eq!(report.stderr.cut_bytes, 100_008 - 100);
    assert!(
        report
            .stderr
            .text
            .ends_with(&format!("{}the end\n", "x".repeat(92)))
    );
    assert!(report.stderr.text.starts_with("\n[… 97.6KiB cut …]\n"));
}

#[tokio::test]
async fn invalid_utf8_becomes_lossy_text() {
    let setup = Setup::new();
    let report = run(setup.fixture("invalid-utf8.sh", &[])).await;
    assert_eq!(report.stdout.text, "before \u{FFFD}\u{FFFD} after\n");
    assert_eq!(report.stderr.text, "err \u{FFFD} end\n");
    // The log keeps the raw bytes.
    let log = std::fs::read(setup.log()).unwrap();
    assert!(log.windows(2).any(|pair| pair == b"\xff\xfe"));
}

#[tokio::test]
async fn a_crash_is_reported_with_the_signal_name() {
    let setup = Setup::new();
    let report = run(setup.fixture("crash.sh", &[])).await;
    assert_eq!(
        report.outcome,
        Outcome::Signaled {
            signal: 11,
            name: "SEGV".into()
        }
    );
    assert_eq!(report.stdout.text, "about to crash\n");
}

#[tokio::test]
async fn a_missing_working_directory_is_a_spawn_failure() {
    let setup = Setup::new();
    let mut spec = setup.shell("true");
    spec.cwd = setup.path("no/such/dir");
    // The child is cloned (it has a pid) and fails before its exec: baton does not wait for
    // the exec, and learns of the failure when the child exits.
    let attempt = Attempt::spawn(spec);
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let report = attempt.wait(stop_rx).await;
    let Outcome::SpawnFailed { error } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(error.contains("working directory"), "{error}");
    assert!(error.contains("no/such/dir"), "{error}");
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_failure() {
    let setup = Setup::new();
    let spec = setup.fixture("no-such-fixture.sh", &[]);
    let report = run(spec).await;
    let Outcome::SpawnFailed { error } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(error.contains("no-such-fixture.sh"), "{error}");
    assert!(error.contains("No such file"), "{error}");
}

#[tokio::test]
async fn graceful_cancellation_terminates_the_group() {
    let setup = Setup::new();
    let mut spec = setup.fixture("hang.sh", &[]);
    spec.kill_grace = Duration::from_secs(5);
    let report = run_and_stop(spec, &[(Duration::from_millis(100), StopLevel::Graceful)]).await;
    assert_eq!(report.outcome, Outcome::Cancelled);
    assert!(
        report.duration < Duration::from_secs(3),
        "{:?}",
        report.duration
    );
    assert_eq!(report.stdout.text, "hanging\n");
}

#[tokio::test]
async fn immediate_cancellation_kills_the_group() {
    let setup = Setup::new();
    let spec = setup.fixture("ignore-term.sh", &[]);
    let report = run_and_stop(spec, &[(Duration::from_millis(100), StopLevel::Immediate)]).await;
    assert_eq!(report.outcome, Outcome::Cancelled);
    assert!(
        report.duration < Duration::from_secs(3),
        "{:?}",
        report.duration
    );
}

#[tokio::test]
async fn immediate_escalates_a_graceful_stop() {
    let setup = Setup::new();
    let mut spec = setup.fixture("ignore-term.sh", &[]);
    spec.kill_grace = Duration::from_secs(60);
    let stops = [
        (Duration::from_millis(100), StopLevel::Graceful),
        (Duration::from_millis(200), StopLevel::Immediate),
    ];
    let report = run_and_stop(spec, &stops).await;
    assert_eq!(report.outcome, Outcome::Cancelled);
    assert!(
        report.duration < Duration::from_secs(3),
        "{:?}",
        report.duration
    );
}

#[tokio::test]
async fn a_stop_requested_before_waiting_is_obeyed() {
    let setup = Setup::new();
    let (_stop, stop_rx) = watch::channel(StopLevel::Immediate);
    let report = Attempt::spawn(setup.fixture("hang.sh", &[]))
        .wait(stop_rx)
        .await;
    assert_eq!(report.outcome, Outcome::Cancelled);
}

#[tokio::test]
async fn a_dropped_stop_sender_is_not_a_stop() {
    let setup = Setup::new();
    let (stop, stop_rx) = watch::channel(StopLevel::Run);
    drop(stop);
    let report = Attempt::spawn(setup.shell("sleep 0.1; echo done"))
        .wait(stop_rx)
        .await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.text, "done\n");
}

#[tokio::test]
async fn a_flaky_task_fails_then_succeeds() {
    let setup = Setup::new();
    let state = setup.path("flaky.state");
    let spec = || setup.fixture("flaky.sh", &[state.to_str().unwrap(), "1"]);
    assert_eq!(run(spec()).await.outcome, Outcome::Exited { code: 1 });
    assert_eq!(run(spec()).await.outcome, Outcome::Exited { code: 0 });
}

#[tokio::test]
async fn a_full_disk_is_recorded_not_fatal() {
    let setup = Setup::new();
    let mut spec = setup.shell("echo hello");
    spec.log_path = "/dev/full".into();
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.text, "hello\n");
    let error = report.log_error.unwrap();
    assert!(error.contains("No space left on device"), "{error}");
}

#[test]
fn attempts_can_move_between_threads() {
    fn assert_send<T: Send>(_: &T) {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let setup = Setup::new();
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let attempt = Attempt::spawn(setup.shell("true"));
    assert_send(&attempt);
    let waiting = attempt.wait(stop_rx);
    assert_send(&waiting);
    runtime.block_on(waiting);
}

/// Not an assertion: prints what an attempt of `true` costs, to keep an eye on it. See also
/// `cargo run --release -p baton-exec --example overhead`.
#[tokio::test]
async fn overhead_of_true() {
    const ATTEMPTS: u32 = 100;
    let setup = Setup::new();
    let started = Instant::now();
    for _ in 0..ATTEMPTS {
        let mut spec = setup.fixture("flaky.sh", &[]);
        spec.program = Program::Exec {
            program: "/bin/true".into(),
            args: Vec::new(),
        };
        assert_eq!(run(spec).await.outcome, Outcome::Exited { code: 0 });
    }
    eprintln!(
        "one attempt of /bin/true, one at a time: {:?}",
        started.elapsed() / ATTEMPTS
    );
}

#[tokio::test]
async fn stdin_carries_a_large_input_whole_and_is_closed() {
    let setup = Setup::new();
    let mut spec = setup.shell("wc -c; cat >/dev/null; echo done");
    // Far over the kernel's argv limit (and a pipe's buffer): only stdin can carry it.
    spec.stdin = Some(vec![b'-'; 3 * 1024 * 1024]);
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.text.trim(), "3145728\ndone");
}

#[tokio::test]
async fn silence_past_the_idle_timeout_stops_the_attempt() {
    let setup = Setup::new();
    let mut spec = setup.shell("echo one; sleep 0.2; echo two; sleep 30");
    spec.idle_timeout = Some(Duration::from_millis(500));
    spec.kill_grace = Duration::from_millis(200);
    let started = Instant::now();
    let report = run(spec).await;
    assert_eq!(report.outcome, Outcome::IdleTimeout { after_ms: 500 });
    assert_eq!(report.stdout.text, "one\ntwo\n");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Stops at a line saying `RESULT`.
struct UntilResult(Vec<String>);

impl baton_exec::LineWatcher for UntilResult {
    fn line(&mut self, line: &[u8]) -> baton_exec::WatchSignal {
        self.0.push(String::from_utf8_lossy(line).into_owned());
        if line == b"RESULT" {
            baton_exec::WatchSignal::Finished
        } else {
            baton_exec::WatchSignal::Continue
        }
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

#[tokio::test]
async fn a_child_that_lingers_after_its_result_is_reaped() {
    let setup = Setup::new();
    let mut spec = setup.shell("echo working; echo RESULT; exec sleep 30");
    spec.finish_grace = Duration::from_millis(300);
    spec.kill_grace = Duration::from_millis(300);
    spec.timeout = Some(Duration::from_secs(20));
    let started = Instant::now();
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let (report, watcher) = Attempt::spawn_watched(spec, Some(Box::new(UntilResult(Vec::new()))))
        .wait_watched(stop_rx)
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(report.reaped_after_result);
    assert_eq!(report.outcome, Outcome::signaled(15));
    let watcher = watcher
        .unwrap()
        .into_any()
        .downcast::<UntilResult>()
        .unwrap();
    assert_eq!(watcher.0, ["working", "RESULT"]);
}

#[tokio::test]
async fn a_child_that_exits_after_its_result_is_not_reaped() {
    let setup = Setup::new();
    let mut spec = setup.shell("echo RESULT; sleep 0.1; echo after");
    spec.finish_grace = Duration::from_secs(5);
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let (report, watcher) = Attempt::spawn_watched(spec, Some(Box::new(UntilResult(Vec::new()))))
        .wait_watched(stop_rx)
        .await;
    assert!(!report.reaped_after_result);
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    let watcher = watcher
        .unwrap()
        .into_any()
        .downcast::<UntilResult>()
        .unwrap();
    assert_eq!(watcher.0, ["RESULT", "after"]);
}

/// Asks to stop at a line saying `STOP`.
struct StopAt;

impl baton_exec::LineWatcher for StopAt {
    fn line(&mut self, line: &[u8]) -> baton_exec::WatchSignal {
        if line == b"STOP" {
            baton_exec::WatchSignal::Stop
        } else {
            baton_exec::WatchSignal::Continue
        }
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

#[tokio::test]
async fn a_watcher_can_stop_the_attempt() {
    let setup = Setup::new();
    let mut spec = setup.shell("echo spending; echo STOP; exec sleep 30");
    spec.kill_grace = Duration::from_millis(300);
    let started = Instant::now();
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let (report, _) = Attempt::spawn_watched(spec, Some(Box::new(StopAt)))
        .wait_watched(stop_rx)
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(report.outcome, Outcome::Cancelled);
    assert!(report.stopped_by_watcher);
    assert!(!report.reaped_after_result);
}
