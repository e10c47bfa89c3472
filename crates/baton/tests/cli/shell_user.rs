//! What a shell user expects of a graph file (#32, the newcomer's trial): `env` in
//! `[defaults]`, and `[[tasks]]` caught as the typo it is.

use crate::test::Test;

/// `[defaults] env` is every task's `env`, under the task's own: a task's value for a name
/// wins, references stay references.
#[test]
fn env_in_defaults_is_every_task_s_env_under_its_own() {
    let graph = r#"
[defaults]
env = { STAGE = "ci", REGION = "${MY_REGION}" }

[[task]]
id = "plain"
run = "echo $STAGE $REGION"

[[task]]
id = "own"
run = "echo $STAGE $REGION"
env = { STAGE = "prod" }
"#;
    let out = Test::new()
        .env("MY_REGION", "eu-west-1")
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("plain")["output"], "ci eu-west-1");
    assert_eq!(out.json_task("own")["output"], "prod eu-west-1");
}

/// `[[tasks]]` ran as if it were `[[task]]`'s other spelling; in TOML it is a typo, and said so.
#[test]
fn plural_tasks_in_toml_is_an_error_that_says_task() {
    Test::new()
        .graph("graph.toml", "[[tasks]]\nid = \"a\"\nrun = \"true\"\n")
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("graph.toml:1:3: unknown field `tasks`")
        .stderr_contains("did you mean `[[task]]`?");
}
