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

/// `pytest | tail` passed under `sh`, which has no `pipefail`: `shell` (per task or in
/// `[defaults]`) says what runs a task's commands, its checks included, as GitHub Actions'
/// `shell` does. The default stays `/bin/sh -c`.
#[test]
fn shell_runs_a_task_s_commands_and_checks() {
    let graph = r#"
[defaults]
shell = "bash -eo pipefail"

[[task]]
id = "piped"
run = "false | cat; echo went on"

[[task]]
id = "checked"
run = "true"
verify = ["false | cat"]

[[task]]
id = "plain"
shell = ["/bin/sh"]
run = "false | cat; echo went on"

[[task]]
id = "bashism"
run = "[[ -n yes ]] && echo double brackets"
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("piped")["state"], "failed");
    assert_eq!(out.json_task("piped")["output"], "");
    assert_eq!(out.json_task("checked")["state"], "failed");
    assert_eq!(out.json_task("plain")["state"], "succeeded");
    assert_eq!(out.json_task("plain")["output"], "went on");
    assert_eq!(out.json_task("bashism")["output"], "double brackets");
}

/// A `shell` that names nothing is refused, saying how to write one.
#[test]
fn an_empty_shell_is_refused() {
    Test::new()
        .graph(
            "graph.toml",
            "[[task]]\nid = \"a\"\nrun = \"true\"\nshell = \" \"\n",
        )
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("graph.toml:4:9: `shell` names no program")
        .stderr_contains("shell = \"bash -eo pipefail\"");
}

/// The newcomer's `echo "v{{ needs.ver.output }}" >> CHANGELOG` wrote `v'1.2.3'`. Inside a
/// double-quoted string a value is now escaped for that string: the version lands as is, and
/// a value full of what the shell would expand there stays text.
#[test]
fn a_value_inside_double_quotes_lands_as_it_is() {
    let graph = r#"
[[task]]
id = "ver"
run = "echo 1.2.3"

[[task]]
id = "nasty"
run = '''printf '%s' 'a "quote" $HOME `id` \back'; echo'''

[[task]]
id = "log"
needs = ["ver", "nasty"]
run = 'echo "v{{ needs.ver.output }}" >> CHANGELOG; printf "%s\n" "{{ needs.nasty.output }}" >> CHANGELOG'
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(0);
    assert_eq!(
        String::from_utf8(out.read("CHANGELOG")).unwrap(),
        "v1.2.3\na \"quote\" $HOME `id` \\back\n"
    );
}

/// `baton logs RUN` of a run of one task needs no task; of more, it names them.
#[test]
fn logs_of_a_one_task_run_need_no_task() {
    let out = Test::new()
        .graph(
            "graph.toml",
            "[[task]]\nid = \"only\"\nrun = \"echo hello from only\"\n",
        )
        .args(&["run", "graph.toml"])
        .run()
        .status(0);
    let logs = crate::test::baton_in(out.path(), &["logs", "latest"]);
    assert_eq!(logs.code, Some(0), "{}", logs.stderr);
    assert_eq!(logs.stdout, "hello from only\n");
    let two = out
        .then()
        .graph(
            "two.toml",
            "[[task]]\nid = \"a\"\nrun = \"true\"\n\n[[task]]\nid = \"b\"\nrun = \"true\"\n",
        )
        .args(&["run", "two.toml"])
        .run()
        .status(0);
    let refused = crate::test::baton_in(two.path(), &["logs", "latest"]);
    assert_eq!(refused.code, Some(2));
    assert!(
        refused.stderr.contains("has 2 tasks: name one"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains(": a, b"), "{}", refused.stderr);
}
