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

/// A secret written into a graph file would be kept with the run (`resume` runs from that
/// copy): it is refused like any other error, where it is, saying what it looks like and where
/// a secret goes instead; references to the environment pass.
#[test]
fn literal_secrets_are_refused_where_they_are_and_nothing_is_stored() {
    // Key-shaped strings made at run time, so that this file holds none.
    let key = format!("{}{}", "sk-ant-api03-", "x7Kq".repeat(20));
    let token = format!("gh{}_{}", "p", "a1B2".repeat(9));
    let graph = format!(
        r#"name = "leaky"

[[task]]
id = "deploy"
run = "curl -H 'x-api-key: {key}' https://api.example.com"

[[task]]
id = "db"
run = "mysql --password=$DB_PASS -e 'select 1'"
env = {{ DB_PASS = "${{DB_PASS}}", GH = "{token}" }}

[[task]]
id = "fetch"
run = 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com'
"#
    );
    let out = Test::new()
        .graph("leaky.toml", &graph)
        .args(&["run", "leaky.toml"])
        .run()
        .status(2)
        .stderr_contains("leaky.toml:5:28: `run` holds a literal secret (anthropic-api-key)")
        .stderr_contains("leaky.toml:10:39: `env.GH` holds a literal secret (github-token)")
        .stderr_contains("baton keeps the graph with its run: put the secret in baton's")
        .stderr_contains("${TOKEN}")
        .stderr_contains("pass_env")
        .stderr_contains("2 problems in leaky.toml; nothing was run");
    for secret in [&key, &token] {
        assert!(!out.stderr.contains(secret.as_str()), "{}", out.stderr);
        assert!(!out.stdout.contains(secret.as_str()), "{}", out.stdout);
    }
    assert!(
        !out.state_dir_exists(),
        "a graph with a secret created .baton/"
    );
}

/// No program can be given a NUL (in its arguments, environment or paths): a NUL in any string
/// of a graph file is refused where it is, with the rest of the file's problems, not when a
/// task is launched.
#[test]
fn a_nul_in_any_string_is_refused_where_it_is() {
    let toml = r#"name = "n\u0000"
[defaults]
setup = ["a\u0000"]

[[task]]
id = "a"
run = "echo a\u0000b"
cwd = "d\u0000"
verify = ["x\u0000"]
env = { A = "\u0000" }

[[task]]
id = "b"
prompt = "p\u0000"
model = "m\u0000"
args = ["--x\u0000"]
"#;
    let out = Test::new()
        .graph("nul.toml", toml)
        .args(&["plan", "nul.toml"])
        .run()
        .status(2)
        .stderr_contains("nul.toml:1:10: `name` cannot contain NUL (U+0000)")
        .stderr_contains("nul.toml:3:12: `defaults.setup` cannot contain NUL")
        .stderr_contains("nul.toml:7:14: `run` cannot contain NUL")
        .stderr_contains("nul.toml:8:9: `cwd` cannot contain NUL")
        .stderr_contains("nul.toml:9:13: `verify` cannot contain NUL")
        .stderr_contains("nul.toml:10:14: `env.A` cannot contain NUL")
        .stderr_contains("nul.toml:14:12: `prompt` cannot contain NUL")
        .stderr_contains("nul.toml:15:11: `model` cannot contain NUL")
        .stderr_contains("nul.toml:16:13: `args` cannot contain NUL")
        .stderr_contains("9 problems in nul.toml; nothing was run");
    assert!(!out.state_dir_exists());

    let out = out
        .then()
        .graph("nul.json", r#"{"task":[{"id":"a","run":"echo a\u0000b"}]}"#)
        .args(&["run", "nul.json"])
        .run()
        .status(2)
        .stderr_contains("nul.json:1:33: `run` cannot contain NUL");
    assert!(!out.state_dir_exists());
}

/// A count out of range says the range.
#[test]
fn a_count_out_of_range_says_the_range() {
    Test::new()
        .graph(
            "g.toml",
            "[run]\nconcurrency = 0\n\n[[task]]\nid = \"a\"\nretries = 99999999999999\nrun = \"true\"\n",
        )
        .args(&["plan", "g.toml"])
        .run()
        .status(2)
        .stderr_contains("g.toml:2:15: `concurrency` must be a whole number from 1 to 4294967295, not 0")
        .stderr_contains(
            "g.toml:6:11: `retries` must be a whole number from 0 to 4294967295, not 99999999999999",
        );
}

/// A `.json` graph file is strict JSON, as every other tool reads it; `.jsonc` allows comments
/// and trailing commas.
#[test]
fn a_json_graph_is_strict_json_and_jsonc_allows_comments_and_trailing_commas() {
    let trailing = r#"{"task": [{"id": "a", "run": "true"},]}"#;
    let out = Test::new()
        .graph("g.json", trailing)
        .args(&["plan", "g.json"])
        .run()
        .status(2)
        .stderr_contains("g.json:1:37: Trailing commas are not allowed")
        .stderr_contains("name it `.jsonc` to allow");
    let out = out
        .then()
        .graph(
            "c.json",
            "{\"task\": [{\"id\": \"a\", \"run\": \"true\"}] // done\n}",
        )
        .args(&["plan", "c.json"])
        .run()
        .status(2)
        .stderr_contains("c.json:1:39: Comments are not allowed");
    let jsonc = "{\n  // a comment\n  \"task\": [{\"id\": \"a\", \"run\": \"true\",},],\n}\n";
    out.then()
        .graph("g.jsonc", jsonc)
        .args(&["run", "g.jsonc"])
        .run()
        .status(0);
}
