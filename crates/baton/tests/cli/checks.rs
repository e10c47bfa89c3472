//! Why a task's checks failed, where people look: `baton logs` shows every phase of an
//! attempt (its checks and fix rounds too), and the summary and `baton status` show the check
//! that failed with the end of its output (issue #15, item 3).

use crate::test::{Test, baton_in};

const CHECKED: &str = r#"
[[task]]
id = "failing-check"
run = "true"
verify = ["echo checking; false"]

[[task]]
id = "talking"
run = "echo main-out"
verify = ["true", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i; done; exit 3"]

[[task]]
id = "fixer"
run = 'if [ -n "$BATON_FIX_FEEDBACK" ]; then echo fixing; touch ok; else echo first; fi'
verify = ["echo check-run; test -e ok"]
fix_attempts = 1
"#;

/// The block the summary and `status` print below the table, the run id made `RUN`.
fn failed_checks_block(text: &str, run: &str) -> String {
    let text = text.replace(run, "RUN");
    let start = text
        .find("\nfailing-check: check")
        .expect("the failed checks")
        + 1;
    let end = text.find("concurrency ").expect("the timeline");
    text[start..end].to_owned()
}

#[test]
fn logs_show_checks_and_fix_rounds_after_the_task() {
    let out = Test::new()
        .graph("g.toml", CHECKED)
        .args(&["run", "g.toml"])
        .run()
        .status(1);
    let root = out.path().to_path_buf();
    let logs = |args: &[&str]| {
        let side = baton_in(&root, args);
        assert_eq!(side.code, Some(0), "{}", side.stderr);
        side.stdout
    };
    // The task printed nothing: its check's output is what `logs` shows.
    assert_eq!(
        logs(&["logs", "latest", "failing-check"]),
        "── check 1 · failing-check.1.check-1.log ──\nchecking\n"
    );
    assert_eq!(
        logs(&["logs", "latest", "fixer"]),
        "first\n── fix round 1 · fixer.1.fix-1.log ──\nfixing\n\
         ── check 1 · fixer.1.check-1.log ──\ncheck-run\n"
    );
    assert_eq!(
        logs(&["logs", "latest", "fixer", "--phase", "task"]),
        "first\n"
    );
    assert_eq!(
        logs(&["logs", "latest", "fixer", "--phase", "check"]),
        "── check 1 · fixer.1.check-1.log ──\ncheck-run\n"
    );
    assert_eq!(
        logs(&[
            "logs",
            "latest",
            "fixer",
            "--phase",
            "fix",
            "--attempt",
            "1"
        ]),
        "── fix round 1 · fixer.1.fix-1.log ──\nfixing\n"
    );
    assert_eq!(logs(&["logs", "latest", "fixer", "--phase", "setup"]), "");
}

#[test]
fn status_and_the_summary_show_the_check_that_failed_with_its_tail() {
    let out = Test::new()
        .graph("g.toml", CHECKED)
        .args(&["run", "g.toml"])
        .run()
        .status(1);
    let run = out.store().run().id.to_string();
    let summary = out.stdout.clone();
    let root = out.path().to_path_buf();
    let status = baton_in(&root, &["status"]).stdout;
    let block = failed_checks_block(&status, &run);
    assert_eq!(block, failed_checks_block(&summary, &run), "{summary}");
    insta::assert_snapshot!(block);
    let row = status
        .lines()
        .find(|l| l.starts_with("talking "))
        .expect("the row");
    assert!(
        row.ends_with("check `for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i; done; exit 3` failed: exit 3 · “line 12”"),
        "{row}"
    );

    let json = out.then().args(&["status", "--json"]).run().status(0);
    let task = |id: &str| json.json_task(id);
    let check = &task("talking")["check"];
    assert_eq!(check["number"], 2, "{check}");
    assert_eq!(check["outcome"]["kind"], "exited", "{check}");
    assert_eq!(check["outcome"]["code"], 3, "{check}");
    assert!(
        check["output"].as_str().unwrap().ends_with("line 12\n"),
        "{check}"
    );
    let log = check["log"].as_str().unwrap();
    assert!(log.ends_with("/logs/talking.1.check-2.log"), "{log}");
    assert!(std::path::Path::new(log).exists(), "{log}");
    // A check that a fix round made pass is no failure.
    assert!(task("fixer").get("check").is_none(), "{}", task("fixer"));
}

#[test]
fn a_failing_run_check_is_shown_with_its_tail_and_the_task_bisection_blamed() {
    let graph = r#"
[run]
verify = ["grep -q 'line one' shared.txt || { echo 'shared.txt lost its first line' >&2; exit 1; }"]

[defaults]
workspace = "worktree"

[[task]]
id = "fine"
run = "echo a > a.txt"

[[task]]
id = "breaks-shared"
run = "echo broken > shared.txt"

[[task]]
id = "also-fine"
needs = ["fine"]
run = "echo b > b.txt"
"#;
    let out = crate::workspaces::repo_with(graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    let run = out.store().run().id.to_string();
    let block = |text: &str| crate::conflicts::block_from(&out, text, "the run's check");
    let summary = block(&out.stdout);
    insta::assert_snapshot!(summary);
    let status = baton_in(out.path(), &["status"]).stdout;
    assert_eq!(block(&status), summary, "{status}");

    let json = out.then().args(&["status", "--json"]).run().status(0);
    let doc = json.json();
    let check = &doc["result"]["check"];
    assert_eq!(check["number"], 1, "{doc}");
    assert_eq!(check["blamed"], "breaks-shared", "{doc}");
    assert_eq!(check["outcome"]["code"], 1, "{doc}");
    assert_eq!(check["output"], "shared.txt lost its first line\n", "{doc}");
    let log = check["log"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(log).unwrap(),
        "shared.txt lost its first line\n"
    );
    assert_eq!(
        doc["next"],
        serde_json::json!([format!("baton diff {run} breaks-shared")]),
        "{doc}"
    );
}
