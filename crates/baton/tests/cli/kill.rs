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
        let store = crate::test::Store::once_a_run_is_in(root)?;
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

[[task]]
id = "grouped"
run = "true"
contain = "process-group"
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
    assert_eq!(status.json_task("grouped")["containment"], "process_group");
    // Every task is contained where a child can be born in its cgroup (#14 item 3).
    let by_default = if baton_exec::cgroups_are_cheap() {
        "cgroup"
    } else {
        "process_group"
    };
    assert_eq!(status.json_task("plain")["containment"], by_default);
    let daemon = status.json_task("daemon");
    // The table says the same, in words.
    let table = status.then().args(&["status"]).run().status(0).stdout;
    let row = |id: &str| {
        let row = table.lines().find(|l| l.starts_with(id));
        row.unwrap_or_else(|| panic!("no row for {id}:\n{table}"))
            .to_owned()
    };
    assert!(table.contains("CONTAINMENT"), "{table}");
    assert!(row("grouped ").contains(" process group "), "{table}");
    if crate::test::cgroups_here("the daemon's cgroup") {
        assert_eq!(daemon["containment"], "cgroup");
        assert!(row("daemon ").contains(" cgroup "), "{table}");
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

/// baton SIGKILLed while a task runs in a cgroup of its own: the grandchild that task started
/// in a session of its own (out of reach of any process group) outlives the driver, and the
/// takeover (`baton resume`) kills it with the cgroup the dead driver left, and removes that.
#[test]
fn a_resume_kills_what_a_dead_driver_left_in_its_attempts_cgroup() {
    if !crate::test::cgroups_here("a_resume_kills_what_a_dead_driver_left_in_its_attempts_cgroup") {
        return;
    }
    let fixture = crate::test::fixture("setsid-grandchild.sh");
    let graph = format!(
        r#"[[task]]
id = "daemon"
contain = "cgroup"
run = "if [ -e first.pid ]; then echo again; exit 0; fi; {fixture} first.pid >/dev/null; touch started; sleep 300"
"#
    );
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--quiet"])
        .spawn();
    running.await_that("the grandchild to start", Duration::from_secs(30), |root| {
        root.join("started").exists().then_some(())
    });
    let out = running.kill();
    let pid: i32 = String::from_utf8(out.read("first.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // It is in the attempt's cgroup, and the driver's death alone did not end it.
    let cgroup = attempt_cgroup(pid);
    assert!(cgroup.is_dir(), "{}", cgroup.display());
    std::thread::sleep(Duration::from_millis(200));
    assert!(procs::alive(pid), "the grandchild died with the driver");

    let run = out.store().run().id.to_string();
    let resumed = out.then().args(&["resume", &run, "--json"]).run().status(0);
    assert_eq!(resumed.json_task("daemon")["output"], "again");
    assert!(
        procs::gone_within(pid, Duration::from_secs(2)),
        "the resume left the setsid grandchild running"
    );
    assert!(!cgroup.exists(), "{} is left", cgroup.display());
}

/// The directory of the `baton-…` cgroup `pid` is in (cgroup v2, as `/proc/PID/cgroup` and the
/// `cgroup2` mount in `/proc/self/mountinfo` say).
fn attempt_cgroup(pid: i32) -> std::path::PathBuf {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line: {own}"));
    assert!(
        path.contains("/baton-"),
        "not in an attempt's cgroup: {path}"
    );
    cgroup_dir(path)
}

/// The directory of cgroup v2 `path` (as `/proc/PID/cgroup` prints it) under the `cgroup2`
/// mount of the hierarchy's root.
pub(crate) fn cgroup_dir(path: &str) -> std::path::PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = mountinfo
        .lines()
        .find_map(|line| {
            let (fields, fs) = line.split_once(" - ")?;
            let fields: Vec<&str> = fields.split(' ').collect();
            (fs.starts_with("cgroup2 ") && fields.get(3) == Some(&"/")).then(|| fields[4])
        })
        .expect("a cgroup2 mount of the hierarchy's root");
    std::path::Path::new(mount).join(path.trim_start_matches('/'))
}
