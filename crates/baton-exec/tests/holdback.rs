//! What the redactor holds back after secret-looking text, with real processes (issue 14,
//! item 10; red team 2026-12-01, §7 and §8): a quiet task's lines reach the log, stdout and
//! stderr are interleaved line by line, and an agent that lingers after its result is reaped
//! after it, not ended as idle.

use std::path::Path;
use std::time::{Duration, Instant};

use baton_exec::{Attempt, AttemptSpec, Program, StopLevel, WatchSignal};
use baton_model::Outcome;
use baton_redact::Redactor;
use tokio::sync::watch;

fn spec(dir: &Path, script: &str) -> AttemptSpec {
    let mut spec = AttemptSpec::new(Program::Shell(script.into()), dir, dir.join("attempt.log"));
    spec.redactor = Some(Redactor::default());
    spec
}

/// The log file while the attempt runs, `after` its start.
async fn log_while_running(spec: AttemptSpec, after: Duration) -> (String, String) {
    let log = spec.log_path.clone();
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let attempt = tokio::spawn(Attempt::spawn(spec).wait(stop_rx));
    tokio::time::sleep(after).await;
    let mid = std::fs::read_to_string(&log).unwrap_or_default();
    attempt.await.unwrap();
    (mid, std::fs::read_to_string(&log).unwrap())
}

#[tokio::test]
async fn a_quiet_task_s_lines_reach_the_log_while_it_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let github = format!("ghp_{}", "aB3dE5gH7jK9mN1pQ3sT".repeat(2));
    for (line, want) in [
        ("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED:password]"),
        (&*format!("ghp: {github}"), "ghp: [REDACTED:github-token]"),
        (
            "Authorization: Bearer abcdef0123456789abcdef",
            "Authorization: Bearer [REDACTED:bearer-token]",
        ),
        (
            "hook: https://hooks.slack.com/services/T11111111/B22222222/YYYYYYYYYYYYYYYYYYYYYYYY",
            "hook: https://hooks.slack.com/services/[REDACTED:slack-webhook]",
        ),
        // An AWS key id at a line's end, whose secret key could follow on the next line: held
        // until the stream has been quiet for a moment.
        ("id AKIAIOSFODNN7EXAMPLE", "id [REDACTED:aws-access-key-id]"),
        // A line without its end: the log takes it once the stream is quiet.
        ("progress 45%\\c", "progress 45%"),
    ] {
        let (script, want_mid) = match line.strip_suffix("\\c") {
            Some(start) => (format!("printf '%s' '{start}'; sleep 1.5"), want.to_owned()),
            None => (
                format!("echo '{line}'; echo next-line; sleep 1.5"),
                format!("{want}\nnext-line\n"),
            ),
        };
        let started = Instant::now();
        let (mid, end) =
            log_while_running(spec(dir.path(), &script), Duration::from_millis(700)).await;
        assert_eq!(
            mid, want_mid,
            "{line}: the log 0.7 s in, while the task sleeps"
        );
        assert_eq!(end, want_mid, "{line}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[tokio::test]
async fn stdout_and_stderr_are_interleaved_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    // stdout's line is unfinished when stderr prints one; then stdout finishes it. Earlier,
    // whole stdout lines were held behind secret-looking text while stderr went ahead, and
    // stderr's text landed in the middle of stdout's lines.
    let script = "printf 'slack hook: https://hooks.slack.com/services/T1111/B2222/'; \
                  echo 'an error' >&2; sleep 0.3; echo 'XXXXXXXXXXXXXXXXXXXXXXXXXXXX done'; \
                  echo 'DB_PASSWORD=hunter2'; echo 'line after'; sleep 0.3; echo 'late error' >&2; \
                  sleep 0.1; echo 'last'";
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let spec = spec(dir.path(), script);
    let log = spec.log_path.clone();
    let report = Attempt::spawn(spec).wait(stop_rx).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "an error\n\
         slack hook: https://hooks.slack.com/services/[REDACTED:slack-webhook] done\n\
         DB_PASSWORD=[REDACTED:password]\n\
         line after\n\
         late error\n\
         last\n"
    );
}

/// Finished at a line holding `"type":"result"`, as an agent's parser is.
struct UntilResult;

impl baton_exec::LineWatcher for UntilResult {
    fn line(&mut self, line: &[u8]) -> WatchSignal {
        match line.windows(15).any(|w| w == br#""type":"result""#) {
            true => WatchSignal::Finished,
            false => WatchSignal::Continue,
        }
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

#[tokio::test]
async fn an_agent_that_printed_a_secret_and_lingers_is_reaped_after_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
echo '{"type":"system","subtype":"init","session_id":"s-1"}'
echo '{"type":"user","message":{"content":[{"type":"tool_result","content":"DB_PASSWORD=hunter2 from env"}]}}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"All done."}'
exec sleep 60
"#;
    let mut spec = spec(dir.path(), script);
    spec.idle_timeout = Some(Duration::from_secs(3));
    spec.finish_grace = Duration::from_millis(300);
    spec.kill_grace = Duration::from_millis(300);
    let started = Instant::now();
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let (report, _) = Attempt::spawn_watched(spec, Some(Box::new(UntilResult)))
        .wait_watched(stop_rx)
        .await;
    assert!(report.reaped_after_result, "{:?}", report.outcome);
    assert_eq!(report.outcome, Outcome::signaled(15));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        report
            .stdout
            .text
            .contains("DB_PASSWORD=[REDACTED:password]")
    );
}

#[tokio::test]
async fn output_held_back_still_counts_as_output_for_the_idle_timer() {
    let dir = tempfile::tempdir().unwrap();
    // The start of a token, then one more of its characters every 0.2 s: held all along (it
    // may go on), yet the task is printing.
    let script =
        "printf 'token ghp_'; for i in 1 2 3 4 5 6 7 8 9 10; do printf a; sleep 0.2; done; echo";
    let mut spec = spec(dir.path(), script);
    spec.idle_timeout = Some(Duration::from_millis(700));
    spec.kill_grace = Duration::from_millis(200);
    let (_stop, stop_rx) = watch::channel(StopLevel::Run);
    let report = Attempt::spawn(spec).wait(stop_rx).await;
    assert_eq!(report.outcome, Outcome::Exited { code: 0 });
    assert_eq!(report.stdout.text, "token ghp_aaaaaaaaaa\n");
}
