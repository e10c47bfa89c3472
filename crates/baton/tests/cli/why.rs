//! Every way a run can stop short says what happened and what to type next, in the summary,
//! `status` and `status --json` alike (issue #15, "How to know it is done"): the shapes not
//! covered beside their features — a budget stop (soft and hard), a task waiting for
//! approval, an agent's infrastructure failure.

use std::path::Path;

use baton_mock_model::{MockModel, Reply, Rule, Script};
use baton_model::TaskState;

use crate::agents::{expensive_model, expensive_work_model, with_claude};
use crate::test::{Output, RUN_LIMIT, Store, Test, baton_in};

/// `text` with what changes from run to run masked: the run id made `RUN`, the start's date
/// `DATE`, every duration `TIME`, the concurrency bars
/// and the mock model's port.
fn normalized(text: &str, run: &str) -> String {
    let text = text.replace(run, "RUN");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("concurrency ") {
            let peak = rest.find(" (peak").map_or("", |at| &rest[at..]);
            out.push_str(&format!("concurrency BARS{peak}\n"));
            continue;
        }
        if line.starts_with("driven by pid ") {
            out.push_str("driven by pid PID on HOST\n");
            continue;
        }
        let line = match line.find(", started ") {
            Some(at) if line.starts_with("run ") => format!("{}, started DATE", &line[..at]),
            _ => line.to_owned(),
        };
        out.push_str(&mask_durations(&mask_port(&line)));
        out.push('\n');
    }
    out
}

fn mask_port(line: &str) -> String {
    match line.find("127.0.0.1:") {
        Some(at) => {
            let start = at + "127.0.0.1:".len();
            let digits = line[start..].bytes().take_while(u8::is_ascii_digit).count();
            format!("{}PORT{}", &line[..start], &line[start + digits..])
        }
        None => line.to_owned(),
    }
}

/// Every duration (`473ms`, `1.0s`, `1m24s`) made `TIME`, with one space before it.
fn mask_durations(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        // Digits (with a point), a unit, and again for `1m24s`; a duration only if it ends
        // at a unit followed by no letter or digit.
        let mut j = i;
        let mut end = None;
        loop {
            let digits = bytes[j..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'.')
                .count();
            if digits == 0 {
                break;
            }
            j += digits;
            let unit = if bytes[j..].starts_with(b"ms") {
                2
            } else if bytes[j..].first().is_some_and(|b| b"smh".contains(b)) {
                1
            } else {
                0
            };
            if unit == 0 {
                break;
            }
            j += unit;
            if bytes.get(j).is_none_or(|b| !b.is_ascii_alphanumeric()) {
                end = Some(j);
                break;
            }
            if !bytes[j].is_ascii_digit() {
                break;
            }
        }
        match end {
            Some(end) => {
                spans.push((i, end));
                i = end;
            }
            None => i += 1,
        }
    }
    // Each duration becomes `TIME`, and the spaces that right-align it in a column one: a
    // task that took 1.2s under load and one that took 473ms read the same.
    let mut out = String::with_capacity(line.len());
    let mut at = 0;
    for (start, end) in spans {
        let kept = line[at..start].trim_end_matches(' ');
        out.push_str(kept);
        if kept.len() < start - at {
            out.push(' ');
        }
        out.push_str("TIME");
        at = end;
    }
    out.push_str(&line[at..]);
    out
}

#[test]
fn durations_and_ports_are_masked() {
    assert_eq!(
        mask_durations("first 473ms in 1.0s, 1m24s; 2 tasks, v1.2, 5m"),
        "first TIME in TIME, TIME; 2 tasks, v1.2, TIME"
    );
    assert_eq!(
        mask_durations("a      1.2s  b"),
        mask_durations("a     473ms  b")
    );
    assert_eq!(
        mask_port("gateway (127.0.0.1:34139)."),
        "gateway (127.0.0.1:PORT)."
    );
}

fn run_id(out: &Output) -> String {
    out.store().run().id.to_string()
}

/// The summary and `status`, masked, one after the other.
fn summary_and_status(out: &Output) -> String {
    let run = run_id(out);
    let status = baton_in(out.path(), &["status"]).stdout;
    format!(
        "$ baton run graph.toml\n{}\n$ baton status\n{}",
        normalized(&out.stdout, &run),
        normalized(&status, &run)
    )
}

/// `next` of `status --json`, the run id made `RUN`.
fn json_next(root: &Path, run: &str) -> Vec<String> {
    let side = baton_in(root, &["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&side.stdout).unwrap();
    doc["next"]
        .as_array()
        .unwrap_or_else(|| panic!("no next in {doc}"))
        .iter()
        .map(|c| c.as_str().unwrap().replace(run, "RUN"))
        .collect()
}

const THREE_AGENTS: &str = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = BUDGET

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"
"#;

#[test]
fn a_soft_budget_stop_says_what_was_spent_and_how_to_go_on() {
    let model = expensive_model();
    let graph = THREE_AGENTS.replace("BUDGET", "{ usd = 100.0, soft_usd = 2.0 }");
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(4);
    insta::assert_snapshot!(summary_and_status(&out));
    let run = run_id(&out);
    insta::assert_debug_snapshot!(json_next(out.path(), &run));
}

#[test]
fn a_hard_budget_stop_says_what_was_spent_and_how_to_go_on() {
    let model = expensive_work_model();
    let graph = THREE_AGENTS.replace("BUDGET", "{ usd = 1.0 }");
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    insta::assert_snapshot!(summary_and_status(&out));
    let run = run_id(&out);
    insta::assert_debug_snapshot!(json_next(out.path(), &run));
    // Typed as told, with room for both tasks ($3 each, beside the $3 already spent).
    let retried = out
        .then()
        .args(&["retry", &run, "--raise-budget", "20", "--json"])
        .run()
        .status(0);
    assert_eq!(retried.json_task("second")["state"], "succeeded");
}

#[test]
fn an_agent_s_infrastructure_failure_says_so_and_how_to_go_on() {
    // Overloaded past the CLI's own retry and baton's: the machinery's fault, not the task's.
    let model = MockModel::start(Script::new().rule(Rule::reply(Reply::overloaded()))).unwrap();
    let graph =
        "[[task]]\nid = \"work\"\nprompt = \"do the work\"\nretries = 1\nbackoff = \"50ms\"\n";
    let out = with_claude(Test::new(), &model)
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    insta::assert_snapshot!(summary_and_status(&out));
    let run = run_id(&out);
    insta::assert_debug_snapshot!(json_next(out.path(), &run));
}

#[test]
fn a_task_waiting_for_approval_says_what_to_type() {
    let graph = "[[task]]\nid = \"deploy\"\napproval = true\nrun = \"echo deployed\"\n";
    let mut running = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .spawn();
    let run = running.await_that("deploy waiting", RUN_LIMIT, |root: &Path| {
        let store = Store::once_a_run_is_in(root)?;
        let run = store.try_run()?;
        let waiting = store
            .tasks()
            .iter()
            .any(|t| t.task.as_str() == "deploy" && t.status == TaskState::Waiting);
        waiting.then(|| run.id.to_string())
    });
    let status = baton_in(running.path(), &["status"]).stdout;
    insta::assert_snapshot!(normalized(&status, &run));
    insta::assert_debug_snapshot!(json_next(running.path(), &run));
    let approved = baton_in(running.path(), &["approve", &run, "deploy"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    let out = running.wait(RUN_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

/// A run whose driver died is recorded as running; `status` sees it interrupted and says to
/// resume it.
#[test]
fn an_interrupted_run_says_to_resume_it() {
    let mut running = Test::new()
        .graph(
            "graph.toml",
            "[[task]]\nid = \"long\"\nrun = \"touch started; sleep 300\"\n",
        )
        .args(&["run", "graph.toml", "--quiet"])
        .spawn();
    running.await_that("the task to start", RUN_LIMIT, |root: &Path| {
        root.join("started").exists().then_some(())
    });
    let killed = running.kill();
    let run = run_id(&killed);
    assert_eq!(json_next(killed.path(), &run), ["baton resume RUN"]);
    let status = normalized(&baton_in(killed.path(), &["status"]).stdout, &run);
    assert!(status.contains("\nnext:\n  baton resume RUN\n"), "{status}");
}

/// The newcomer's pytest run ended with a test server's access-log line on stderr, and that was
/// the failed task's detail; a make recipe's is `Error 1`. The detail is now the tool's own
/// summary and first failure (real pytest output, replayed), and for make the line before its
/// `***` (a real make).
#[test]
fn a_failed_task_s_detail_is_its_tool_s_reason_not_its_last_line() {
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../baton-report/tests/fixtures/failures");
    let graph = format!(
        r#"
[[task]]
id = "tests"
run = "cat '{fixtures}/pytest.stdout'; cat '{fixtures}/pytest.stderr' >&2; exit 1"

[[task]]
id = "build"
run = "make --no-print-directory build"

[[task]]
id = "plain"
run = "echo first; echo the last line says it >&2; exit 2"
"#,
        fixtures = fixtures.canonicalize().unwrap().display()
    );
    let out = Test::new()
        .graph("graph.toml", &graph)
        .file(
            "Makefile",
            "build:\n\t@echo 'config.h: No such file' >&2; exit 1\n",
        )
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    let row = |task: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{task} ")))
            .unwrap_or_else(|| panic!("{}", out.stdout))
            .to_owned()
    };
    assert!(
        row("tests")
            .ends_with("“2 failed, 1 passed: test_sample.py::test_add - assert (2 + 2) == 5”"),
        "{}",
        row("tests")
    );
    assert!(
        row("build").ends_with("“config.h: No such file (make: [Makefile:2: build] Error 1)”"),
        "{}",
        row("build")
    );
    assert!(
        row("plain").ends_with("“the last line says it”"),
        "{}",
        row("plain")
    );
    // Under the table, the end of what each failed task printed, stdout then stderr: here
    // pytest's summary, then the server's line.
    let run = out.store().run().id.to_string();
    let tail = format!(
        "  │ FAILED test_sample.py::test_add - assert (2 + 2) == 5\n  │ FAILED test_sample.py::test_more - assert [1, 2] == [1, 3]\n  │ ========================= 2 failed, 1 passed in 0.03s ==========================\n  │ 127.0.0.1 - - [03/Dec/2026 04:41:00] \"GET /health HTTP/1.1\" 200 -\n  all of it: `baton logs {run} tests`\n"
    );
    assert!(
        out.stdout
            .contains("tests: the end of what it printed:\n  │ …\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&tail), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("plain: the end of what it printed:\n  │ first\n  │ the last line says it\n"),
        "{}",
        out.stdout
    );
}
