//! Retries: a failing attempt is run again after an exponential backoff, and a task that
//! succeeds on a later attempt succeeds.

use baton_model::{EventKind, Outcome, TaskState};

use crate::test::{Test, fixture};

#[test]
fn retry_then_success_with_growing_backoff() {
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[defaults]
backoff = "100ms"

[[task]]
id = "flaky"
retries = 3
run = '''
if [ "$BATON_ATTEMPT" -lt 4 ]; then echo "attempt $BATON_ATTEMPT fails" >&2; exit 1; fi
echo "ok on attempt $BATON_ATTEMPT"
'''

[[task]]
id = "fixture"
retries = 2
run = "sh {} state 2"
"#,
                fixture("flaky.sh")
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("flaky")["attempts"], 4);
    assert_eq!(out.json_task("flaky")["output"], "ok on attempt 4");
    assert_eq!(out.json_task("fixture")["attempts"], 3);
    assert_eq!(out.json_task("fixture")["output"], "run 3 succeeded");

    let store = out.store();
    assert_eq!(store.task("flaky").status, TaskState::Succeeded);
    let attempts = store.attempts("flaky");
    let outcomes: Vec<_> = attempts
        .iter()
        .map(|a| a.outcome.clone().unwrap())
        .collect();
    assert_eq!(outcomes, [1, 1, 1, 0].map(|code| Outcome::Exited { code }));
    assert!(
        attempts[2]
            .stderr_tail
            .as_deref()
            .unwrap()
            .contains("attempt 3 fails")
    );

    let delays: Vec<(u32, u64)> = store
        .events_of(
            |k| matches!(k, EventKind::RetryScheduled { task, .. } if task.as_str() == "flaky"),
        )
        .into_iter()
        .map(|k| match k {
            EventKind::RetryScheduled {
                attempt, delay_ms, ..
            } => (attempt, delay_ms),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        delays.iter().map(|d| d.0).collect::<Vec<_>>(),
        [2, 3, 4],
        "{delays:?}"
    );
    // 100 ms doubled per retry, times a jitter factor in [0.5, 1.5).
    for &(attempt, delay) in &delays {
        let base = 100u64 << (attempt - 2);
        assert!(
            (base / 2..base * 3 / 2).contains(&delay),
            "retry before attempt {attempt} waited {delay} ms"
        );
    }
    assert!(
        delays[2].1 > delays[0].1,
        "backoff did not grow: {delays:?}"
    );
    // The wait really happened: each attempt started no sooner than its delay after the last.
    for (pair, &(_, delay)) in attempts.windows(2).zip(&delays) {
        let gap = pair[1].started_at_ms - pair[0].ended_at_ms.unwrap();
        assert!(
            gap + 5 >= delay as i64,
            "attempt started {gap} ms after the last, delay {delay}"
        );
    }
    store.assert_consistent();
}

#[test]
fn retries_exhausted_is_failure() {
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[[task]]
id = "never"
retries = 2
backoff = "10ms"
run = "exit 7"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    let task = out.json_task("never");
    assert_eq!(task["state"], "failed");
    assert_eq!(task["attempts"], 3);
    assert_eq!(task["exit_code"], 7);
    out.store().assert_consistent();
}

#[test]
fn a_task_that_cannot_start_as_written_fails_at_once_and_is_not_retried() {
    // A predecessor's output with a NUL byte makes the dependent's command line impossible:
    // every retry would fail the same way.
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[defaults]
retries = 3
backoff = "10ms"

[[task]]
id = "finds"
run = "printf 'a\\0b'"

[[task]]
id = "uses"
needs = ["finds"]
run = "echo {{ needs.finds.output }}"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    let task = out.json_task("uses");
    assert_eq!(task["state"], "failed");
    assert_eq!(task["attempts"], 1, "{task:#}");
    assert_eq!(task["outcome"]["kind"], "launch-failed");
    let error = task["outcome"]["error"].as_str().unwrap();
    assert!(error.contains("NUL byte"), "{error}");
    let store = out.store();
    assert_eq!(store.attempts("uses").len(), 1);
    assert_eq!(
        store.attempts("uses")[0].pid,
        None,
        "no process was started"
    );
    store.assert_consistent();
    out.then()
        .args(&["status"])
        .run()
        .status(0)
        .stdout_contains("cannot start:");
}

#[test]
fn a_retry_of_a_run_that_succeeded_says_there_is_nothing_to_retry_and_records_nothing() {
    let out = Test::new()
        .graph("g.toml", "[[task]]\nid = \"fine\"\nrun = \"true\"\n")
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let before = out.store().run();
    let events = out.store().events().len();
    let run = before.id.to_string();
    let again = out
        .then()
        .args(&["retry", &run])
        .run()
        .status(0)
        .stdout_contains(&format!(
            "nothing to retry: every task of run {run} succeeded"
        ));
    let after = again.store().run();
    assert_eq!(
        after.ended_at_ms, before.ended_at_ms,
        "the run's times were rewritten"
    );
    assert_eq!(
        again.store().events().len(),
        events,
        "something was recorded"
    );
}

#[test]
fn a_retry_later_counts_the_time_spent_running_not_the_gap_before_it() {
    let out = Test::new()
        .graph("g.toml", "[[task]]\nid = \"fails\"\nrun = \"exit 1\"\n")
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let retried = out.then().args(&["retry", &run, "--json"]).run().status(1);
    let section = &retried.json()["run"];
    let running = section["duration_ms"].as_u64().unwrap();
    let span = section["span_ms"].as_u64().unwrap();
    assert!(span >= 1500, "{section}");
    assert!(running < 1000, "the gap was counted: {section}");
}
