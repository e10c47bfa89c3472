//! What a person sees of a run while it goes: the live view on a terminal (a real one: tmux),
//! for `baton run` and for `baton watch` of a run driven elsewhere, and the plain lines baton
//! prints when its standard error is not a terminal.

use regex::Regex;

use crate::test::Test;
use crate::workspaces::{git, repo_with};

/// A Claude Code stand-in that speaks its stream-json: it starts, edits `notes.txt`, then says
/// nothing until `release` appears beside the repository, then answers.
fn quiet_claude(test: &Test) -> String {
    let dir = test.path().parent().unwrap();
    let release = dir.join("release");
    let script = dir.join("fake-claude");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.332 (Claude Code)"; exit 0; fi
echo '{{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5"}}'
echo '{{"type":"assistant","message":{{"id":"m1","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","name":"Edit","input":{{"file_path":"notes.txt"}}}}],"usage":{{"input_tokens":1200,"output_tokens":300}}}}}}'
echo edited > notes.txt
while [ ! -e '{release}' ]; do sleep 0.1; done
echo '{{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1","total_cost_usd":0.05,"usage":{{"input_tokens":1200,"output_tokens":300}}}}'
"#,
            release = release.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("[engines.claude]\ncommand = \"{}\"\n", script.display())
}

const GRAPH: &str = r#"
[run]
budget = { usd = 5.0 }

[[task]]
id = "api"
prompt = "Change the api"

[[task]]
id = "build"
run = "true"

[[task]]
id = "deploy"
needs = ["build"]
approval = true
run = "echo deployed"
"#;

/// The line of `screen` that contains `text`.
#[track_caller]
fn line<'s>(screen: &'s str, text: &str) -> &'s str {
    screen
        .lines()
        .find(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no line with {text:?} in\n{screen}"))
}

/// Where the section headed `title` starts.
#[track_caller]
fn heading(screen: &str, title: &str) -> usize {
    screen
        .lines()
        .position(|l| l == title)
        .unwrap_or_else(|| panic!("no heading {title:?} in\n{screen}"))
}

#[track_caller]
fn row(screen: &str, text: &str) -> usize {
    screen
        .lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no line with {text:?} in\n{screen}"))
}

#[test]
fn the_live_view_puts_what_waits_for_a_person_first_and_flags_a_quiet_agent() {
    let test = repo_with(GRAPH);
    let engines = quiet_claude(&test);
    let release = test.path().parent().unwrap().join("release");
    let test = test.file("baton.toml", engines);
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "the engine"]);
    let mut screen = test
        .env("BATON_QUIET_AFTER", "1s")
        .args(&["run", "graph.toml"])
        .on_terminal(110, 24);
    let seen = |screen: &str| {
        screen.contains("needs you") && screen.contains("quiet for") && screen.contains("· 1.5k")
    };
    let shown = screen.wait_until("w0", "an approval and a quiet agent", seen);
    let run = Regex::new(r"baton: run (\S+) of")
        .unwrap()
        .captures(&shown)
        .unwrap_or_else(|| panic!("no run id in\n{shown}"))[1]
        .to_owned();

    // The header: progress by state, the person it waits for, tokens and cost of the budget.
    let header = line(&shown, &format!("baton {run} · "));
    assert!(
        header.contains("1/3 done (1 ok) · 1 running · 1 needs you · "),
        "{header}"
    );
    assert!(
        header.ends_with(" · 1.5k tokens · $0.0081 of $5.00"),
        "{header}"
    );
    // What waits for a person comes before what runs, with what to type.
    let waits = line(&shown, "⏸ deploy");
    assert!(waits.contains("waits for approval for "), "{waits}");
    assert!(
        waits.contains(&format!("baton approve {run} deploy")),
        "{waits}"
    );
    assert!(
        heading(&shown, "needs you") < heading(&shown, "running"),
        "{shown}"
    );
    // The agent: what it did last, that it went quiet, what it spent so far.
    let api = line(&shown, " api ");
    assert!(api.contains("Edit notes.txt  · quiet for "), "{api}");
    assert!(api.ends_with("· 1.5k tokens $0.0081"), "{api}");
    // Finished tasks scrolled above.
    assert!(
        row(&shown, "✓ build: succeeded") < heading(&shown, "needs you"),
        "{shown}"
    );
    assert!(shown.lines().all(|l| l.chars().count() <= 110), "{shown}");

    // Another terminal watches the same run: the same picture, from the store.
    let watch = screen.open(&["watch", &run]);
    let watched = screen.wait_until(&watch, "the same picture", seen);
    assert!(line(&watched, "⏸ deploy").contains("waits for approval for "));
    assert!(line(&watched, " api ").contains("Edit notes.txt  · quiet for "));
    assert!(row(&watched, "✓ build: succeeded") < heading(&watched, "needs you"));

    // Approved and answered, the run ends: the picture gives way to the summary, here and
    // in the watcher, which then shows the run's status.
    let approved = screen.baton(&["approve", &run, "deploy"]);
    assert!(approved.status.success(), "{approved:?}");
    let decided = screen.wait_until("w0", "deploy gone from needs you", |s| {
        !s.contains("⏸ deploy") && s.contains("✓ deploy: succeeded")
    });
    assert!(!decided.contains("needs you"), "{decided}");
    std::fs::write(&release, "").unwrap();
    let done = screen.wait_for("w0", "[exit 0]");
    assert!(done.contains("✓ api: succeeded"), "{done}");
    assert!(!done.contains("running\n"), "{done}");
    assert!(done.contains("succeeded in"), "{done}");
    let watched = screen.wait_for(&watch, "[exit 0]");
    assert!(watched.contains("✓ api: succeeded"), "{watched}");
    assert!(
        watched.contains(&format!("run {run} of `graph` (graph.toml), started")),
        "{watched}"
    );
}

/// A shell task says what it is doing by what it prints: its row shows its latest line, here
/// and in `baton watch` from another terminal (#32 item 7).
#[test]
fn a_running_shell_task_shows_the_latest_line_it_printed() {
    let test = Test::new();
    let release = test.path().join("release");
    let graph = format!(
        r#"
[[task]]
id = "migrate"
run = "echo 'connecting'; echo 'migrating table 3 of 7'; while [ ! -e '{}' ]; do sleep 0.1; done; echo 'all 7 migrated'"
"#,
        release.display()
    );
    let mut screen = test
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml"])
        .on_terminal(100, 20);
    let shown = screen.wait_until("w0", "the task's latest line", |s| {
        s.contains("› migrating table 3 of 7")
    });
    let row = line(&shown, " migrate ");
    assert!(row.contains("› migrating table 3 of 7"), "{shown}");
    assert!(!row.contains("connecting"), "{shown}");
    let run = Regex::new(r"baton: run (\S+) of")
        .unwrap()
        .captures(&shown)
        .unwrap_or_else(|| panic!("no run id in\n{shown}"))[1]
        .to_owned();
    let watch = screen.open(&["watch", &run]);
    screen.wait_until(&watch, "the same line in the watcher", |s| {
        s.contains("› migrating table 3 of 7")
    });
    std::fs::write(&release, "").unwrap();
    let done = screen.wait_for("w0", "[exit 0]");
    assert!(done.contains("✓ migrate: succeeded"), "{done}");
}

#[test]
fn without_a_terminal_the_run_is_told_in_plain_lines() {
    let out = Test::new()
        .graph(
            "graph.toml",
            r#"
[defaults]
backoff = "10ms"

[[task]]
id = "ok"
run = "true"

[[task]]
id = "flaky"
needs = ["ok"]
retries = 1
run = 'test "$BATON_ATTEMPT" -gt 1'

[[task]]
id = "broken"
needs = ["flaky"]
run = "echo it broke >&2; exit 3"

[[task]]
id = "after"
needs = ["broken"]
run = "true"
"#,
        )
        .args(&["run", "graph.toml", "-j", "1"])
        .run()
        .status(1);
    let times = Regex::new(r"\b\d+(\.\d+)?(ms|s)\b").unwrap();
    let ids = Regex::new(r"\d{8}-\d{6}-[0-9a-f]{4}").unwrap();
    let named = ids.replace_all(&out.stderr, "RUN").into_owned();
    let plain = times.replace_all(&named, "T");
    let lines: Vec<&str> = plain
        .lines()
        .take_while(|l| !l.starts_with("TASK"))
        .collect();
    assert_eq!(
        lines,
        [
            "baton: run RUN of `graph`: 4 tasks, concurrency 1",
            "  ✓ ok: succeeded in T",
            "  ↻ flaky: retrying in T (attempt 2)",
            "  ✓ flaky: succeeded in T (2 attempts)",
            "  ✗ broken: failed in T: exit 3",
            "  ⊘ after: blocked: needs `broken`, which failed",
        ],
        "{}",
        out.stderr
    );
    // No cursor movement, no colour: lines for a log.
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
}
