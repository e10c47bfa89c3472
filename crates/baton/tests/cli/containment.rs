//! Every task's processes end with its attempt, whatever they did to get away (#14 item 3):
//! a daemon in a session of its own, a double fork into one, a child that ignores TERM, one
//! that keeps the pipes open. Under each way an attempt ends: it exits, it times out, the run
//! is cancelled, the driver dies and the run is resumed. No `contain` is set anywhere: this is
//! the default, a cgroup per attempt wherever a child can be born in one.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::procs;
use crate::test::Test;

/// Starts the escapes, each writing its pid to `NAME.pid`, and waits until all have.
const ESCAPES: &str = r#"
setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
( ( setsid sh -c 'echo $$ > double.pid; exec sleep 300' </dev/null >/dev/null 2>&1 & ) & )
sh -c 'trap "" TERM; echo $$ > stubborn.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ ! -s daemon.pid ] || [ ! -s double.pid ] || [ ! -s stubborn.pid ]; do sleep 0.01; done
"#;

/// The same, and one that holds the attempt's pipes.
const ESCAPES_WITH_PIPES: &str = r#"
setsid sh -c 'echo $$ > piped.pid; exec sleep 300' &
while [ ! -s piped.pid ]; do sleep 0.01; done
"#;

const PIDS: [&str; 3] = ["daemon.pid", "double.pid", "stubborn.pid"];

/// Whether this machine contains tasks by default; if not, says so past the harness's capture
/// (a skip is never silent).
fn contained_by_default(test: &str) -> bool {
    if baton_exec::cgroups_are_cheap() {
        return true;
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{test}: skipped: no writable cgroup v2 with clone3 here (or BATON_NO_CGROUP is set)"
    );
    false
}

fn pid(dir: &Path, name: &str) -> i32 {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    text.trim().parse().unwrap()
}

fn assert_all_gone(dir: &Path, names: &[&str], when: &str) {
    for name in names {
        let pid = pid(dir, name);
        assert!(
            procs::gone_within(pid, Duration::from_secs(5)),
            "{when}: {name} ({pid}) outlived its attempt"
        );
    }
}

fn script(body: &str) -> String {
    format!("'''{body}'''")
}

/// Runs a task that starts the escapes and exits 0, and one that leaves a pipe holder, in
/// `test`; checks they were held by `containment` and that nothing of them is left.
fn exits_leave_nothing(test: Test, containment: &str) {
    let graph = format!(
        "[[task]]\nid = \"daemons\"\nrun = {}\n\n[[task]]\nid = \"piped\"\nrun = {}\n",
        script(&format!("{ESCAPES}exit 0\n")),
        script(&format!("{ESCAPES_WITH_PIPES}exit 0\n")),
    );
    let out = test
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    let daemons = out.json_task("daemons");
    assert_eq!(daemons["state"], "succeeded", "{daemons}");
    assert_eq!(daemons["containment"], containment);
    // Holding the pipes past the end is still a fault of the task's, said as before.
    assert_eq!(out.json_task("piped")["outcome"]["kind"], "leaked");
    assert_all_gone(
        out.path(),
        &PIDS,
        &format!("after a clean exit ({containment})"),
    );
    assert_all_gone(
        out.path(),
        &["piped.pid"],
        &format!("after a leak ({containment})"),
    );
}

#[test]
fn what_a_task_left_running_ends_when_it_exits() {
    if !contained_by_default("what_a_task_left_running_ends_when_it_exits") {
        return;
    }
    exits_leave_nothing(Test::new(), "cgroup");
}

#[test]
fn what_a_task_left_running_ends_with_its_timeout() {
    if !contained_by_default("what_a_task_left_running_ends_with_its_timeout") {
        return;
    }
    let graph = format!(
        "[[task]]\nid = \"slow\"\ntimeout = \"2s\"\nrun = {}\n",
        script(&format!("{ESCAPES}{ESCAPES_WITH_PIPES}sleep 30\n")),
    );
    let out = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--json", "--kill-grace", "200ms"])
        .run()
        .status(1);
    assert_eq!(out.json_task("slow")["state"], "timed_out");
    assert_all_gone(out.path(), &PIDS, "after a timeout");
    assert_all_gone(out.path(), &["piped.pid"], "after a timeout");
}

#[test]
fn what_a_task_left_running_ends_when_the_run_is_cancelled() {
    if !contained_by_default("what_a_task_left_running_ends_when_the_run_is_cancelled") {
        return;
    }
    let graph = format!(
        "[[task]]\nid = \"long\"\nrun = {}\n",
        script(&format!(
            "{ESCAPES}{ESCAPES_WITH_PIPES}touch started; sleep 300\n"
        )),
    );
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--quiet", "--kill-grace", "200ms"])
        .spawn();
    running.await_that("the escapes to start", Duration::from_secs(30), |root| {
        root.join("started").exists().then_some(())
    });
    running.signal(Signal::SIGINT);
    let out = running.wait(Duration::from_secs(20));
    assert_all_gone(out.path(), &PIDS, "after a cancel");
    assert_all_gone(out.path(), &["piped.pid"], "after a cancel");
}

#[test]
fn what_a_task_left_running_ends_when_a_dead_driver_s_run_is_resumed() {
    if !contained_by_default("what_a_task_left_running_ends_when_a_dead_driver_s_run_is_resumed") {
        return;
    }
    let graph = format!(
        "[[task]]\nid = \"long\"\nrun = {}\n",
        script(&format!(
            "if [ -e started ]; then echo again; exit 0; fi\n{ESCAPES}{ESCAPES_WITH_PIPES}touch started; sleep 300\n"
        )),
    );
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "--quiet"])
        .spawn();
    running.await_that("the escapes to start", Duration::from_secs(30), |root| {
        root.join("started").exists().then_some(())
    });
    let killed = running.kill();
    // The driver's death alone ends none of them: nothing is left to.
    std::thread::sleep(Duration::from_millis(200));
    for name in PIDS {
        assert!(
            procs::alive(pid(killed.path(), name)),
            "{name} died with the driver"
        );
    }
    let (_, resumed) = killed.resumed();
    assert_eq!(resumed.json_task("long")["output"], "again");
    assert_all_gone(resumed.path(), &PIDS, "after the resume");
    assert_all_gone(resumed.path(), &["piped.pid"], "after the resume");
}

/// A driver that was SIGKILLed cannot remove its run's cgroups. The next baton to make a pool
/// removes those left empty by dead processes, and leaves those of live ones alone.
#[test]
fn empty_cgroups_a_dead_driver_left_are_swept_by_the_next_run() {
    if !contained_by_default("empty_cgroups_a_dead_driver_left_are_swept_by_the_next_run") {
        return;
    }
    let graph = "[[task]]\nid = \"where\"\nrun = \"grep ^0:: /proc/self/cgroup\"\n";
    let out = Test::new()
        .graph("g.toml", graph)
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let output = out.json_task("where")["output"]
        .as_str()
        .unwrap()
        .to_owned();
    let slot = crate::kill::cgroup_dir(output.trim().strip_prefix("0::").unwrap());
    // `…/baton-RUN-PID-N/aK`: pools are made beside that run's.
    let beside = slot.parent().unwrap().parent().unwrap().to_owned();
    let dead = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let crashed = beside.join(format!("baton-crashed-{dead}-1"));
    let live = beside.join(format!("baton-live-{}-1", std::process::id()));
    for pool in [&crashed, &live] {
        std::fs::create_dir_all(pool.join("a1")).unwrap();
    }
    out.then()
        .args(&["run", "g.toml", "--quiet"])
        .run()
        .status(0);
    let live_left = live.is_dir();
    let _ = std::fs::remove_dir(live.join("a1"));
    let _ = std::fs::remove_dir(&live);
    assert!(!crashed.exists(), "{} was left", crashed.display());
    assert!(live_left, "the pool of a live process was removed");
}

/// Where no cgroup can hold an attempt (`BATON_NO_CGROUP`, as without a writable cgroup v2),
/// baton is its tasks' subreaper: what a task left running that left its process group comes
/// back to baton as an orphan and ends when the task exits, and is reaped, not left a zombie.
#[test]
fn without_cgroups_orphans_come_back_to_baton_and_end_with_their_attempt() {
    exits_leave_nothing(Test::new().env("BATON_NO_CGROUP", "1"), "process_group");
}

/// Where tasks that would each get a cgroup cannot (here: `BATON_NO_CGROUP`, as on a machine
/// without a writable cgroup v2), the run says so once, on stderr, and goes on with process
/// groups; a graph with no such task, or a machine with cgroups, says nothing (#32 item 5).
#[test]
fn a_run_without_cgroups_says_once_that_its_tasks_are_held_by_process_groups() {
    const NOTE: &str = "baton: note: no cgroup for tasks here (BATON_NO_CGROUP is set): each is \
                        held by its process group instead";
    let graph = r#"
[[task]]
id = "one"
contain = "cgroup"
run = "true"

[[task]]
id = "two"
contain = "cgroup"
run = "true"
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .env("BATON_NO_CGROUP", "1")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.stderr.matches(NOTE).count(), 1, "{}", out.stderr);
    assert!(!out.stdout.contains("cgroup for tasks"), "{}", out.stdout);
    assert_eq!(out.json_task("one")["containment"], "process_group");
    // Tasks that do not ask for one (shell tasks without `contain`, where no child can be born
    // in a cgroup anyway) are not told about.
    let plain = Test::new()
        .graph("graph.toml", "[[task]]\nid = \"one\"\nrun = \"true\"\n")
        .env("BATON_NO_CGROUP", "1")
        .args(&["run", "graph.toml"])
        .run()
        .status(0);
    assert!(
        !plain.stderr.contains("cgroup for tasks"),
        "{}",
        plain.stderr
    );
    if !crate::test::cgroups_here("the cgroup part of this test") {
        return;
    }
    let contained = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert!(
        !contained.stderr.contains("cgroup for tasks"),
        "{}",
        contained.stderr
    );
    assert_eq!(contained.json_task("one")["containment"], "cgroup");
}
