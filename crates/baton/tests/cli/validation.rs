//! A graph file with errors: every problem reported at once, with file, line and column, and
//! nothing run.

use crate::test::Test;

const BROKEN: &str = r#"name = "broken"

[[task]]
id = "a"
needs = ["b"]
run = "echo a"

[[task]]
id = "b"
needs = ["a"]
run = "echo b"
timout = "1s"

[[task]]
id = "a"
run = "echo again"

[[task]]
id = "c"
needs = ["nope"]
run = "echo c"
"#;

#[test]
fn every_problem_at_once_with_positions() {
    let out = Test::new()
        .graph("broken.toml", BROKEN)
        .args(&["run", "broken.toml"])
        .run()
        .status(2)
        .stderr_contains("broken.toml:10:10: dependency cycle: a -> b -> a")
        .stderr_contains("broken.toml:12:1: unknown field `timout`")
        .stderr_contains("did you mean `timeout`?")
        .stderr_contains("broken.toml:15:6: duplicate task id `a`")
        .stderr_contains("broken.toml:20:10: unknown dependency `nope`")
        .stderr_contains("4 problems in broken.toml; nothing was run");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        !out.state_dir_exists(),
        "a graph with errors created .baton/"
    );
    insta::assert_snapshot!(out.stderr);
}

#[test]
fn bad_literals_and_escaping_scopes() {
    let out = Test::new()
        .graph(
            "literals.toml",
            r#"[defaults]
timeout = "10 parsecs"
handoff_limit = "lots"

[[task]]
id = "a"
scope = ["../outside/**"]
run = "echo a"
"#,
        )
        .args(&["run", "literals.toml"])
        .run()
        .status(2)
        .stderr_contains("literals.toml:2:")
        .stderr_contains("literals.toml:3:")
        .stderr_contains("literals.toml:7:");
    assert!(!out.state_dir_exists());
    insta::assert_snapshot!(out.stderr);
}

#[test]
fn same_errors_from_plan_and_graph() {
    for args in [
        ["plan", "broken.toml"].as_slice(),
        &["graph", "broken.toml", "--format", "dot"],
    ] {
        let out = Test::new()
            .graph("broken.toml", BROKEN)
            .args(args)
            .run()
            .status(2)
            .stderr_contains("4 problems in broken.toml; nothing was run");
        assert!(!out.state_dir_exists());
    }
}
