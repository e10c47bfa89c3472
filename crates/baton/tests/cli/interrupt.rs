//! Ctrl-C: stop launching, terminate what runs, record it as cancelled, exit 130; a second
//! Ctrl-C kills at once.

use std::time::{Duration, Instant};

use baton_model::{Outcome, RunState, TaskState};
use nix::sys::signal::Signal;

use crate::test::{Test, fixture};

#[test]
fn ctrl_c_cancels_running_and_skips_the_rest() {
    stop_with(Signal::SIGINT);
}

#[test]
fn sigterm_and_sighup_stop_like_ctrl_c() {
    stop_with(Signal::SIGTERM);
    stop_with(Signal::SIGHUP);
}

fn stop_with(signal: Signal) {
    let mut running = Test::new()
        .graph(
            "g.toml",
            r#"
[run]
concurrency = 1

[[task]]
id = "long"
run = "touch long.started; sleep 30"

[[task]]
id = "after"
needs = ["long"]
run = "echo never"

[[task]]
id = "other"
run = "echo never"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .spawn();
    running.await_that("`long` to start", Duration::from_secs(30), |root| {
        root.join("long.started").exists().then_some(())
    });
    running.signal(signal);
    let signalled = Instant::now();
    let out = running.wait(Duration::from_secs(60)).status(130);
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "took {:?} to stop after {signal}",
        signalled.elapsed()
    );
    assert_eq!(out.json_task("long")["state"], "cancelled");
    assert_eq!(out.json()["run"]["state"], "cancelled");

    let store = out.store();
    assert_eq!(store.run().status, RunState::Cancelled);
    assert_eq!(store.task("long").status, TaskState::Cancelled);
    assert_eq!(store.attempts("long")[0].outcome, Some(Outcome::Cancelled));
    for id in ["after", "other"] {
        assert_eq!(store.task(id).status, TaskState::Skipped, "{id}");
        assert!(store.attempts(id).is_empty(), "{id} must not have run");
    }
    store.assert_consistent();
}

#[test]
fn second_ctrl_c_kills_a_task_that_ignores_term() {
    let mut running = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "stubborn"
run = "sh {}"
"#,
                fixture("ignore-term.sh")
            ),
        )
        .args(&["run", "g.toml", "--kill-grace", "10s", "--quiet"])
        .spawn();
    // The fixture prints once its TERM trap is set.
    running.await_that("the TERM trap to be set", Duration::from_secs(30), |root| {
        let logs = std::fs::read_dir(root.join(".baton/runs")).ok()?;
        let run = logs.flatten().next()?.path();
        let log = std::fs::read_to_string(run.join("logs/stubborn.1.log")).ok()?;
        log.contains("ignoring TERM").then_some(())
    });
    running.signal(Signal::SIGINT);
    let first = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    running.signal(Signal::SIGINT);
    let out = running.wait(Duration::from_secs(60)).status(130);
    // Without the second Ctrl-C baton would wait out the 10 s grace.
    assert!(
        first.elapsed() < Duration::from_secs(6),
        "took {:?} to stop after two Ctrl-Cs",
        first.elapsed()
    );
    let store = out.store();
    assert_eq!(store.run().status, RunState::Cancelled);
    assert_eq!(store.task("stubborn").status, TaskState::Cancelled);
    store.assert_consistent();
}

#[test]
fn one_ctrl_c_waits_out_the_grace_for_a_task_that_ignores_term() {
    let mut running = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "stubborn"
run = "sh {}"
"#,
                fixture("ignore-term.sh")
            ),
        )
        .args(&["run", "g.toml", "--kill-grace", "1s", "--quiet"])
        .spawn();
    running.await_that("the TERM trap to be set", Duration::from_secs(30), |root| {
        let logs = std::fs::read_dir(root.join(".baton/runs")).ok()?;
        let run = logs.flatten().next()?.path();
        let log = std::fs::read_to_string(run.join("logs/stubborn.1.log")).ok()?;
        log.contains("ignoring TERM").then_some(())
    });
    running.signal(Signal::SIGINT);
    let first = Instant::now();
    let out = running.wait(Duration::from_secs(60)).status(130);
    let took = first.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "TERM was ignored, yet it stopped in {took:?}"
    );
    assert!(took < Duration::from_secs(8), "the 1 s grace took {took:?}");
    assert_eq!(out.store().task("stubborn").status, TaskState::Cancelled);
}
