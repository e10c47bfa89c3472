//! baton killed with SIGKILL mid-run: the store must hold every completion it recorded, intact.

use std::time::Duration;

use baton_model::{Outcome, RunState, TaskState};

use crate::procs;
use crate::test::Test;

#[test]
fn sigkill_mid_run_leaves_a_consistent_store() {
    let mut graph = String::from("name = \"many\"\n");
    for i in 0..60 {
        graph.push_str(&format!(
            "\n[[task]]\nid = \"t{i:02}\"\nrun = \"sleep 0.1\"\n"
        ));
    }
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "-j", "4", "--quiet"])
        .spawn();
    let done_before = running.await_that("10 tasks to succeed", Duration::from_secs(30), |root| {
        let store = crate::test::Store::try_open(root)?;
        store.try_run()?;
        let done = store
            .tasks()
            .iter()
            .filter(|t| t.status == TaskState::Succeeded)
            .count();
        (done >= 10).then_some(done)
    });
    let out = running.kill();
    assert_eq!(out.code, None, "baton exited by itself before the kill");

    let store = out.store();
    store.assert_consistent();
    let run = store.run();
    assert_eq!(
        run.status,
        RunState::Running,
        "a killed run cannot have finished"
    );
    assert_eq!(run.ended_at_ms, None);
    let tasks = store.tasks();
    assert_eq!(tasks.len(), 60);
    let succeeded: Vec<_> = tasks
        .iter()
        .filter(|t| t.status == TaskState::Succeeded)
        .collect();
    assert!(succeeded.len() >= done_before, "completions were lost");
    assert!(succeeded.len() < 60, "the run finished before the kill");
    for task in &succeeded {
        let attempts = store.attempts(task.task.as_str());
        let last = attempts.last().expect("a succeeded task has an attempt");
        assert!(
            last.ended_at_ms.is_some(),
            "{}: attempt not ended",
            task.task
        );
        assert_eq!(
            last.outcome,
            Some(Outcome::Exited { code: 0 }),
            "{}",
            task.task
        );
        assert_eq!(last.exit_code, Some(0));
        assert_eq!(task.exit_code, Some(0));
        assert!(task.ended_at_ms.is_some());
    }
    // Attempts in flight stay open, each with the pid (and so process group) that a resume
    // needs to find what the dead driver left running.
    for attempt in store
        .all_attempts()
        .iter()
        .filter(|a| a.ended_at_ms.is_none())
    {
        assert!(
            attempt.pid.is_some(),
            "open attempt {} of {} has no pid",
            attempt.attempt,
            attempt.task
        );
        assert_eq!(attempt.outcome, None);
    }
    // Whatever was in flight ends by itself (each task sleeps 0.1 s), orphaned or not.
    let run_id = std::ffi::OsString::from(run.id.as_str());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut strays = procs::with_env("BATON_RUN_ID", &run_id);
    while !strays.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        strays = procs::with_env("BATON_RUN_ID", &run_id);
    }
    assert!(
        strays.is_empty(),
        "processes of the killed run remain: {strays:?}"
    );
}

/// A task that asks for a cgroup: its grandchild that left the process group with `setsid`
/// dies with the attempt, and `status --json` says how the attempt was held. Where cgroup v2
/// is not writable (not root), the fallback is checked instead.
#[test]
fn a_setsid_grandchild_does_not_outlive_its_attempt_in_a_cgroup() {
    let fixture = crate::test::fixture("setsid-grandchild.sh");
    let graph = format!(
        r#"name = "setsid"

[[task]]
id = "daemon"
run = "{fixture} grandchild.pid"
contain = "cgroup"

[[task]]
id = "plain"
run = "true"
"#
    );
    let out = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--quiet"])
        .run()
        .status(0);
    let pid: i32 = String::from_utf8(out.read("grandchild.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let status = out.then().args(&["status", "--json"]).run().status(0);
    assert_eq!(status.json_task("plain")["containment"], "process_group");
    let daemon = status.json_task("daemon");
    if baton_exec::cgroups_available() {
        assert_eq!(daemon["containment"], "cgroup");
        assert!(
            procs::gone_within(pid, Duration::from_secs(2)),
            "the setsid grandchild outlived its attempt"
        );
    } else {
        // The process group is all there is: the grandchild escaped it (the test's marker
        // kills it when the test ends).
        assert_eq!(daemon["containment"], "process_group");
    }
}
