//! Standard output that cannot be written: a pipe whose reader went away (`baton runs | head
//! -1`) ends the command quietly, with the exit code it had come to; anything else (a full
//! disk) is an error, exit 3, that says what could not be written. Never a panic.

use crate::test::{Output, Test};

const GRAPH: &str = "name = \"g\"\n\n[[task]]\nid = \"a\"\nrun = \"echo hello\"\n\n\
                     [[task]]\nid = \"b\"\nneeds = [\"a\"]\nrun = \"echo bye\"\n";

/// Every command that prints on stdout, once a run is recorded.
const PRINTING: &[&[&str]] = &[
    &["runs"],
    &["runs", "--json"],
    &["status"],
    &["status", "--json"],
    &["events", "latest"],
    &["events", "latest", "--json"],
    &["logs", "latest", "a"],
    &["plan", "g.toml"],
    &["plan", "g.toml", "--json"],
    &["run", "g.toml", "--dry-run"],
    &["graph", "g.toml"],
    &["graph", "g.toml", "--format", "mermaid"],
    &["doctor"],
    &["doctor", "--json"],
    &["--help"],
    &["runs", "--help"],
    &["--version"],
];

fn recorded() -> Output {
    Test::new()
        .graph("g.toml", GRAPH)
        .args(&["run", "g.toml"])
        .run()
        .status(0)
}

#[track_caller]
fn assert_no_panic(out: &Output, what: &str) {
    assert!(
        !out.stderr.contains("panicked") && out.code != Some(101),
        "{what} panicked ({:?}):\n{}",
        out.code,
        out.stderr
    );
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    let mut out = recorded();
    for args in PRINTING {
        let what = args.join(" ");
        out = out.then().stdout_closed_pipe().args(args).run();
        assert_no_panic(&out, &what);
        assert_eq!(out.code, Some(0), "{what}: exit code\n{}", out.stderr);
        assert!(out.stderr.is_empty(), "{what} said:\n{}", out.stderr);
    }
}

#[test]
fn a_full_disk_is_an_error_naming_what_was_lost() {
    let mut out = recorded();
    for args in PRINTING {
        let what = args.join(" ");
        out = out.then().stdout_full().args(args).run();
        assert_no_panic(&out, &what);
        assert_eq!(out.code, Some(3), "{what}: exit code\n{}", out.stderr);
        assert!(
            out.stderr.contains("to standard output")
                && out.stderr.contains("No space left on device"),
            "{what} said:\n{}",
            out.stderr
        );
    }
    let out = out
        .then()
        .stdout_full()
        .args(&["runs"])
        .run()
        .stderr_contains("error: cannot write the list of runs to standard output");
    assert_no_panic(&out, "runs");
}

#[test]
fn a_run_whose_reader_went_away_keeps_its_exit_code() {
    let out = Test::new()
        .graph("g.toml", GRAPH)
        .stdout_closed_pipe()
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.store().run().status, baton_model::RunState::Succeeded);

    let out = Test::new()
        .graph("bad.toml", "[[task]]\nid = \"a\"\nrun = \"exit 7\"\n")
        .stdout_closed_pipe()
        .args(&["run", "bad.toml"])
        .run()
        .status(1);
    assert_no_panic(&out, "run");
}

#[test]
fn a_run_whose_result_cannot_be_written_says_it_is_recorded() {
    let out = Test::new()
        .graph("g.toml", GRAPH)
        .stdout_full()
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(3)
        .stderr_contains("error: cannot write the result of run ")
        .stderr_contains("it is recorded: `baton status ")
        .stderr_contains("No space left on device");
    assert_no_panic(&out, "run --json");
    assert_eq!(out.store().run().status, baton_model::RunState::Succeeded);
}
