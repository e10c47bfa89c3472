//! Notifications: a webhook on loopback and a command are told when a task waits for a person
//! and when the run ends; one that cannot be reached fails nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use crate::test::{RUN_LIMIT, Test, baton_in};

/// A loopback HTTP server that answers every request 200 and keeps each body, as JSON.
fn receiver() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut length, mut line) = (0, String::new());
            let mut head = Vec::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                head.push(std::mem::take(&mut line));
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            assert!(head[0].starts_with("POST /hook "), "{head:?}");
            assert!(
                head.iter()
                    .any(|h| h.eq_ignore_ascii_case("content-type: application/json\r\n")),
                "{head:?}"
            );
            kept.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        }
    });
    (url, bodies)
}

#[test]
fn a_webhook_hears_of_a_task_waiting_for_approval_and_of_the_run_s_end() {
    let (url, bodies) = receiver();
    let graph = r#"
[[task]]
id = "gate"
run = "true"
approval = true
"#;
    let mut running = Test::new()
        .file("baton.toml", format!("[notify]\nwebhook = \"{url}\"\n"))
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .spawn();
    // Told while the run waits, before anyone acts.
    let heard = Arc::clone(&bodies);
    let first = running.await_that("the waiting task's notification", RUN_LIMIT, |_| {
        heard.lock().unwrap().first().cloned()
    });
    let run = first["run"].as_str().unwrap().to_owned();
    assert_eq!(
        first,
        serde_json::json!({"event": "task-waiting", "run": run, "name": "graph", "task": "gate",
            "state": "waiting", "reason": "waits for approval",
            "command": format!("baton approve {run} gate")})
    );
    // What it says to type works.
    let approved = baton_in(running.path(), &["approve", &run, "gate"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    running.wait(RUN_LIMIT).status(0);
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert_eq!(bodies[1]["event"], "run-finished");
    assert_eq!(bodies[1]["state"], "succeeded");
    assert_eq!(bodies[1]["run"], run.as_str());
}

#[test]
fn a_command_is_told_how_a_run_failed_and_only_what_it_asked_for() {
    let graph = r#"
[[task]]
id = "gate"
run = "true"
approval = true

[[task]]
id = "broken"
run = "echo the disk is full >&2; exit 3"
"#;
    let mut running = Test::new()
        .file(
            "baton.toml",
            "[notify]\ncommand = \"cat >> heard.jsonl; echo >> heard.jsonl\"\non = [\"run-finished\"]\n",
        )
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .spawn();
    let run = running.await_that("the gate waiting", RUN_LIMIT, |root| {
        let store = crate::test::Store::once_a_run_is_in(root)?;
        let gate = store
            .tasks()
            .into_iter()
            .find(|t| t.task.as_str() == "gate")?;
        (gate.status == baton_model::TaskState::Waiting).then(|| store.run().id.to_string())
    });
    let rejected = baton_in(
        running.path(),
        &["reject", &run, "gate", "--reason", "not today"],
    );
    assert_eq!(rejected.code, Some(0), "{}", rejected.stderr);
    let out = running.wait(RUN_LIMIT).status(1);
    let heard = String::from_utf8(out.read("heard.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = heard
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Only the run's end: `on` left the waiting task out.
    assert_eq!(lines.len(), 1, "{heard}");
    assert_eq!(lines[0]["event"], "run-finished");
    assert_eq!(lines[0]["state"], "failed");
    let reason = lines[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("gate: ") || reason.starts_with("broken: "),
        "{heard}"
    );
}

#[test]
fn a_notification_that_cannot_be_sent_fails_nothing() {
    let out = Test::new()
        .graph("graph.toml", "[[task]]\nid = \"a\"\nrun = \"true\"\n")
        .args(&["run", "graph.toml", "--notify", "http://127.0.0.1:1/hook"])
        .run()
        .status(0)
        .stderr_contains("baton: warning: could not notify http://127.0.0.1:1/hook");
    assert!(out.stderr.contains("succeeded"), "{}", out.stderr);
}
