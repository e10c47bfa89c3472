//! `baton report`: a run as one HTML page, opened in a real browser (Debian's Chromium, driven
//! by playwright-core from tests/browser) that is refused every request leaving the file.

use std::path::{Path, PathBuf};
use std::process::Command;

use baton_model::Outcome;

use crate::test::{Test, baton_in};
use crate::workspaces::{git, repo_with};

/// A Claude Code stand-in: it edits the file the prompt names (its last word), taking
/// `FAKE_SECONDS` to, and answers.
pub(crate) fn fake_claude(test: &Test) -> String {
    let script = test.path().parent().unwrap().join("fake-claude");
    std::fs::write(
        &script,
        r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.332 (Claude Code)"; exit 0; fi
prompt="$(cat)"
file="${prompt##* }"
echo '{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5"}'
echo '{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","name":"Edit","input":{"file_path":"'"$file"'"}}],"usage":{"input_tokens":12000,"output_tokens":900}}}'
echo "changed by the agent" >> "$file"
sleep 0.6
echo '{"type":"result","subtype":"success","is_error":false,"result":"Done: '"$file"' changed.","session_id":"s-1","total_cost_usd":0.0412,"usage":{"input_tokens":12000,"output_tokens":900,"cache_read_input_tokens":3000}}'
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("[engines.claude]\ncommand = \"{}\"\n", script.display())
}

/// A release: fetch, two agents, a fan-out of lints, a flaky step retried, a check that fails
/// once and is fixed, a benchmark that fails and the publish it blocks.
const GRAPH: &str = r#"
name = "release"

[run]
budget = { usd = 2.0 }

[defaults]
backoff = "50ms"

[[task]]
id = "fetch"
run = "sleep 0.3; echo fetched"

[[task]]
id = "api"
needs = ["fetch"]
prompt = "Add rate limiting to src/api.rs"

[[task]]
id = "docs"
needs = ["fetch"]
prompt = "Document the limits in README.md"

[[task]]
id = "lint"
needs = ["fetch"]
for_each = ["core", "cli", "web"]
run = "sleep 0.2; echo lint {{ item }} clean"

[[task]]
id = "flaky"
needs = ["fetch"]
retries = 2
run = 'sleep 0.2; test "$BATON_ATTEMPT" -gt 2 || { echo "network blip" >&2; exit 1; }'

[[task]]
id = "test"
needs = ["api", "lint"]
workspace = "worktree"
run = 'sleep 0.2; if [ -n "$BATON_FIX_FEEDBACK" ]; then echo ok > tested; fi'
verify = ["test -e tested"]
fix_attempts = 1

[[task]]
id = "bench"
needs = ["flaky"]
run = "sleep 0.3; echo 'p99 latency 412ms over the 300ms budget' >&2; exit 1"

[[task]]
id = "publish"
needs = ["test", "bench", "docs"]
run = "echo published"
"#;

fn browser_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/report.mjs")
}

#[test]
fn the_report_is_one_page_with_a_bar_per_attempt_and_looks_right_in_a_browser() {
    let test = repo_with(GRAPH).file("src/api.rs", "pub fn api() {}\n");
    let engines = fake_claude(&test);
    let test = test.file("baton.toml", engines);
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "the project"]);
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let report = out.path().parent().unwrap().join("report.html");
    let written = out
        .then()
        .args(&["report", &run, "-o", report.to_str().unwrap()])
        .run()
        .status(0)
        .stdout_contains("wrote the report of run");
    let html = std::fs::read_to_string(&report).unwrap();
    // Kept for a person to open: target/tmp/report/report.html.
    std::fs::copy(&report, out_dir().join("report.html")).unwrap();
    // Self-contained: no script, style, image or font from anywhere else.
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(fetch), "the page fetches something: {fetch}");
    }
    // Every attempt the store recorded, and how it ended.
    let store = written.store();
    let mut recorded: Vec<(String, u32, &str)> = Vec::new();
    for task in store.tasks() {
        for attempt in store.attempts(task.task.as_str()) {
            let status = match attempt.outcome {
                Some(ref o) if o.is_success() => "ok",
                Some(Outcome::TimedOut) => "slow",
                Some(_) => "bad",
                None => "run",
            };
            recorded.push((task.task.to_string(), attempt.attempt, status));
        }
    }
    recorded.sort();
    assert!(recorded.len() >= 11, "{recorded:?}");

    let screenshot = match std::env::var_os("BATON_UPDATE_SCREENSHOTS") {
        Some(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.png"),
        None => out_dir().join("report.png"),
    };
    let browser = Command::new("node")
        .arg(browser_script())
        .arg(&report)
        .arg(&screenshot)
        .output()
        .expect("node (the test command installs playwright-core)");
    assert!(
        browser.status.success(),
        "{}",
        String::from_utf8_lossy(&browser.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&browser.stdout).unwrap();
    assert_eq!(seen["external"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["title"], "baton · release · failed");
    let mut bars: Vec<(String, u32, String)> = seen["bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["task"].as_str().unwrap().to_owned(),
                b["attempt"].as_u64().unwrap() as u32,
                b["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    bars.sort();
    let recorded: Vec<(String, u32, String)> = recorded
        .into_iter()
        .map(|(t, a, s)| (t, a, s.to_owned()))
        .collect();
    assert_eq!(bars, recorded);
    // The retries are there: flaky failed twice, then succeeded.
    let flaky: Vec<&str> = bars
        .iter()
        .filter(|b| b.0 == "flaky")
        .map(|b| b.2.as_str())
        .collect();
    assert_eq!(flaky, ["bad", "bad", "ok"]);
    // A click on a bar opens that task's details.
    assert_eq!(seen["opened"]["open"], true, "{seen}");
    assert!(std::fs::metadata(&screenshot).unwrap().len() > 20_000);

    // What the page says: the outcome and why, the blocked publish, the fan-out grouped under
    // its task, the check that failed before its fix, the spend by model.
    assert!(html.contains("bench"), "{html}");
    assert!(html.contains("p99 latency 412ms over the 300ms budget"));
    assert!(html.contains("tasks of lint"), "the fan-out is not grouped");
    assert!(html.contains("claude-sonnet-4-5"));
    assert!(html.contains("test -e tested"));
    assert!(html.contains("blocked"));
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Red-team finding 17: the page of a 50,000-task run was 52 MB (a card a task). A run of more
/// tasks than a page shows gets a page of cards, those that need a look first (a failure last
/// in the file is on the first page); the report file says where the rest are, and the
/// dashboard pages through them.
#[test]
fn a_large_run_s_page_shows_a_page_of_tasks_those_that_need_a_look_first() {
    let mut graph = String::from("[run]\nconcurrency = 16\non_failure = \"continue\"\n\n");
    for i in 0..700 {
        graph.push_str(&format!("[[task]]\nid = \"t{i}\"\nrun = \"true\"\n\n"));
    }
    graph.push_str("[[task]]\nid = \"broken\"\nrun = \"exit 3\"\n");
    let out = Test::new()
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let file = out.path().join("report.html");
    let made = baton_in(out.path(), &["report", &run, "-o", file.to_str().unwrap()]);
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let page = std::fs::read_to_string(&file).unwrap();
    assert_eq!(page.matches("<details class=\"task ").count(), 300);
    assert!(
        page.contains("Tasks 1–300 of 701, those that need a look first."),
        "paging note"
    );
    assert!(page.contains(&format!("baton status {run} --json</code> lists them all")));
    let first_card = page.find("<details class=\"task ").unwrap();
    assert!(page[first_card..].starts_with("<details class=\"task bad\" id=\"t-broken\""));
}
