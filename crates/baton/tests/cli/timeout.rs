//! Stopping an attempt stops all of it: the timeout reaches grandchildren, and a grandchild that
//! outlives its parent while holding the output pipes is found and killed.

use std::time::Duration;

use baton_model::Outcome;

use crate::procs;
use crate::test::{Test, fixture};

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
