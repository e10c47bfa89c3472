//! Command-line flags: what they override, what they print, and the exit codes.

use crate::test::Test;

const OK: &str = r#"
[[task]]
id = "hello"
run = "echo hello"
"#;

#[test]
fn quiet_prints_exactly_one_line() {
    let out = Test::new()
        .graph("g.toml", OK)
        .args(&["run", "g.toml", "--quiet"])
        .run()
        .status(0);
    assert_eq!(out.stdout.lines().count(), 1, "{:?}", out.stdout);
    assert!(out.stdout.ends_with('\n'));
    assert!(out.stdout.starts_with("baton: "), "{:?}", out.stdout);
    assert!(out.stdout.contains("succeeded"), "{:?}", out.stdout);
    assert!(out.stderr.is_empty(), "{:?}", out.stderr);
}

#[test]
fn exit_codes_for_success_failure_and_bad_input() {
    Test::new()
        .graph("g.toml", OK)
        .args(&["run", "g.toml", "-q"])
        .run()
        .status(0);
    Test::new()
        .graph("g.toml", "[[task]]\nid = \"no\"\nrun = \"exit 1\"\n")
        .args(&["run", "g.toml", "-q"])
        .run()
        .status(1)
        .stdout_contains("failed");
    Test::new()
        .graph("g.toml", "[[task]]\nid = \"no\"\nrun = 1\n")
        .args(&["run", "g.toml", "-q"])
        .run()
        .status(2);
    Test::new()
        .graph("g.toml", OK)
        .args(&["run", "g.toml", "--no-such-flag"])
        .run()
        .status(2);
}

#[test]
fn timeout_flag_overrides_the_file() {
    let out = Test::new()
        .graph(
            "g.toml",
            "[defaults]\ntimeout = \"60s\"\n\n[[task]]\nid = \"slow\"\ntimeout = \"60s\"\nrun = \"sleep 30\"\n",
        )
        .args(&["run", "g.toml", "--timeout", "300ms", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("slow")["state"], "timed_out");
    assert!(out.elapsed.as_secs() < 20, "{:?}", out.elapsed);
}

#[test]
fn retries_flag_overrides_the_file() {
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[defaults]
retries = 0
backoff = "10ms"

[[task]]
id = "third-time-lucky"
retries = 0
run = '[ "$BATON_ATTEMPT" -ge 3 ] || exit 1'
"#,
        )
        .args(&["run", "g.toml", "--retries", "2", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("third-time-lucky")["attempts"], 3);
}

#[test]
fn concurrency_flag_overrides_the_file() {
    let mut graph = String::from("[run]\nconcurrency = 1\n");
    for i in 0..4 {
        graph.push_str(&format!("\n[[task]]\nid = \"t{i}\"\nrun = \"sleep 0.5\"\n"));
    }
    let out = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "-j", "4", "--json"])
        .run()
        .status(0);
    let json = out.json();
    assert_eq!(json["run"]["concurrency"], 4);
    assert_eq!(json["timeline"]["peak"], 4);
    assert_eq!(out.store().run().concurrency, 4);
}

#[test]
fn zero_concurrency_is_bad_input() {
    let out = Test::new()
        .graph("g.toml", OK)
        .args(&["run", "g.toml", "-j", "0"])
        .run()
        .status(2)
        .stderr_contains("--concurrency must be at least 1");
    assert!(!out.state_dir_exists());
}

#[test]
fn missing_file_is_bad_input_naming_it() {
    let out = Test::new()
        .args(&["run", "no-such-graph.toml"])
        .run()
        .status(2)
        .stderr_contains("no-such-graph.toml");
    assert!(!out.state_dir_exists());
    Test::new()
        .args(&["plan", "no-such-graph.toml"])
        .run()
        .status(2)
        .stderr_contains("no-such-graph.toml");
}

#[test]
fn bad_flag_values_are_bad_input() {
    for (args, message) in [
        (["--timeout", "soon"], "--timeout"),
        (["--kill-grace", "later"], "--kill-grace"),
    ] {
        let out = Test::new()
            .graph("g.toml", OK)
            .args(&["run", "g.toml"])
            .args(&args)
            .run()
            .status(2)
            .stderr_contains(message);
        assert!(!out.state_dir_exists());
    }
}

#[test]
fn store_flag_and_environment() {
    let out = Test::new()
        .graph("g.toml", OK)
        .env("BATON_STORE", "sqlite:records/runs.db")
        .args(&["run", "g.toml", "-q"])
        .run()
        .status(0);
    let store = baton_store::SqliteStore::open_readonly(&out.path().join("records/runs.db"))
        .expect("the store is where BATON_STORE says");
    assert_eq!(baton_store::RunReader::runs(&store, 10).unwrap().len(), 1);
    assert!(!out.path().join(".baton/baton.db").exists());

    Test::new()
        .graph("g.toml", OK)
        .args(&["run", "g.toml", "--store", "postgres://db/baton"])
        .run()
        .status(3)
        .stderr_contains("cannot reach the run store at postgres://db/baton");
    Test::new()
        .graph("g.toml", OK)
        .args(&["run", "g.toml", "--store", "mysql:x"])
        .run()
        .status(2)
        .stderr_contains("not a store URL");
}

#[test]
fn a_store_that_cannot_be_created_is_exit_3() {
    Test::new()
        .graph("g.toml", OK)
        .file("blocker", "a file where a directory must go")
        .args(&["run", "g.toml", "--store", "sqlite:blocker/baton.db"])
        .run()
        .status(3)
        .stderr_contains("blocker");
}

/// `--budget USD` sets the run's hard budget over the file's (as `baton mcp`'s `budget_usd`
/// does); a budget that is no amount of dollars is bad input.
#[test]
fn budget_overrides_the_file_s_and_must_be_dollars() {
    let graph = "[run]\nbudget = { usd = 3 }\n\n[[task]]\nid = \"a\"\nprompt = \"x\"\nestimate = { usd = 0.5 }\n";
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&[
            "run",
            "graph.toml",
            "--budget",
            "1.5",
            "--dry-run",
            "--json",
        ])
        .run()
        .status(0);
    assert_eq!(out.json()["budget"]["limit"], "$1.50", "{}", out.stdout);
    for bad in ["0", "-2", "NaN"] {
        let flag = format!("--budget={bad}");
        Test::new()
            .graph("graph.toml", graph)
            .args(&["run", "graph.toml", &flag])
            .run()
            .status(2)
            .stderr_contains("a budget is a number of dollars above 0");
    }
}
