//! Stopping an attempt stops all of it: the timeout reaches grandchildren, and a grandchild that
//! outlives its parent while holding the output pipes is found and killed.

use std::time::Duration;

use baton_model::Outcome;

use crate::procs;
use crate::test::{Test, baton_in, fixture};

fn grandchild_pid(out: &crate::test::Output) -> i32 {
    String::from_utf8(out.read("gc.pid"))
        .unwrap()
        .trim()
        .parse()
        .expect("pid file holds a pid")
}

#[test]
fn timeout_kills_a_grandchild() {
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "parent"
timeout = "500ms"
run = "sh {} gc.pid keep wait"
"#,
                fixture("grandchild.sh")
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("parent")["state"], "timed_out");
    assert_eq!(
        out.store().attempts("parent")[0].outcome,
        Some(Outcome::TimedOut)
    );
    let pid = grandchild_pid(&out);
    assert!(
        procs::gone_within(pid, Duration::from_secs(5)),
        "grandchild {pid} survived the timeout"
    );
}

#[test]
fn grandchild_holding_the_pipes_is_killed_and_marked_leaked() {
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "parent"
timeout = "30s"
run = "sh {} gc.pid keep exit"
"#,
                fixture("grandchild.sh")
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    assert!(
        out.elapsed.as_secs() < 20,
        "baton waited on the grandchild: {:?}",
        out.elapsed
    );
    assert_eq!(out.json_task("parent")["state"], "failed");
    assert_eq!(
        out.json_task("parent")["outcome"],
        serde_json::json!({"kind": "leaked", "code": 0})
    );
    let pid = grandchild_pid(&out);
    assert!(
        procs::gone_within(pid, Duration::from_secs(5)),
        "leaked grandchild {pid} is still running"
    );
    out.store().assert_consistent();
}

#[test]
fn timeout_escalates_to_kill_after_the_grace() {
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "stubborn"
timeout = "300ms"
run = "sh {}"
"#,
                fixture("ignore-term.sh")
            ),
        )
        .args(&["run", "g.toml", "--kill-grace", "500ms", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("stubborn")["state"], "timed_out");
    assert!(
        out.elapsed < Duration::from_secs(15),
        "TERM was ignored and KILL never came: {:?}",
        out.elapsed
    );
    let duration = out.json_task("stubborn")["duration_ms"].as_u64().unwrap();
    assert!(
        duration >= 700,
        "stopped after {duration} ms, before timeout + grace"
    );
}

/// Reads the pid a task wrote into `name`, waiting for it to appear.
fn pid_in(root: &std::path::Path, name: &str) -> i32 {
    let path = root.join(name);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "no {name}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn gone(pid: i32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while crate::procs::alive(pid) {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

#[test]
fn what_escaped_a_timed_out_or_leaking_task_s_group_is_ended_with_it() {
    let graph = r#"
[defaults]
contain = "process-group"

[[task]]
id = "slow"
timeout = "1s"
run = '''
setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
( ( setsid sh -c 'echo $$ > double.pid; exec sleep 300' </dev/null >/dev/null 2>&1 & ) & )
sh -c 'trap "" TERM; echo $$ > stubborn.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
sleep 30
'''

[[task]]
id = "leaky"
run = "setsid sh -c 'echo $$ > leak.pid; exec sleep 300' & exit 0"
"#;
    let out = Test::new()
        .graph("g.toml", graph)
        .args(&["run", "g.toml", "--json", "--kill-grace", "200ms"])
        .run()
        .status(1);
    assert_eq!(out.json_task("slow")["state"], "timed_out");
    assert_eq!(out.json_task("leaky")["outcome"]["kind"], "leaked");
    for name in ["daemon.pid", "double.pid", "stubborn.pid", "leak.pid"] {
        let pid = pid_in(out.path(), name);
        assert!(gone(pid), "{name}: {pid} outlived its attempt");
    }
}

/// What the summary and `status` say below the table, the run id made `RUN`: from the first
/// line after the table's rows to the timeline.
fn next_block(text: &str, run: &str) -> String {
    let text = text.replace(run, "RUN");
    let start = text.find("\nnext:").expect("what to type next") + 1;
    let end = text[start..]
        .find("\n\n")
        .map_or(text.len(), |end| start + end);
    text[start..end].to_owned()
}

#[test]
fn a_timed_out_run_says_what_to_type_next() {
    let out = Test::new()
        .graph(
            "g.toml",
            "[[task]]\nid = \"slow\"\ntimeout = \"200ms\"\nrun = \"sleep 5\"\n",
        )
        .args(&["run", "g.toml", "--kill-grace", "100ms"])
        .run()
        .status(1);
    let run = out.store().run().id.to_string();
    let summary = next_block(&out.stdout, &run);
    let status = next_block(&baton_in(out.path(), &["status"]).stdout, &run);
    assert_eq!(summary, status);
    insta::assert_snapshot!(summary, @r"
    next:
      baton logs RUN slow
      baton retry RUN
    ");
}
