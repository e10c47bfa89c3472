//! `for_each`: one task per item of a list (Claude Code, with `{{ item }}` in its prompt), of
//! the checkout's directories matching a glob, of a predecessor's JSON array; each instance
//! with its own worktree and status, and what needs the task waiting for all of them.

use baton_mock_model::{MockModel, Rule, Script};

use crate::agents::with_claude;
use crate::planning::committed;
use crate::test::Test;

fn ids(out: &crate::test::Output) -> Vec<String> {
    out.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}:{}",
                t["id"].as_str().unwrap(),
                t["state"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn for_each_item_of_a_list_an_agent_works_in_its_own_worktree() {
    let script = Script::new()
        .rule(Rule::text("reviewed red").when_contains("REVIEW red"))
        .rule(Rule::text("reviewed green").when_contains("REVIEW green"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "review"
engine = "claude"
timeout = "2m"
prompt = "REVIEW {{ item }}"
for_each = ["red", "green"]

[[task]]
id = "sum"
needs = ["review"]
run = "echo {{ needs.review.output }}"
"#;
    let out = committed(with_claude(Test::new(), &model).graph("graph.toml", graph))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        ids(&out),
        [
            "review:succeeded",
            "review/red:succeeded",
            "review/green:succeeded",
            "sum:succeeded"
        ]
    );
    assert_eq!(out.json_task("review/red")["output"], "reviewed red");
    assert_eq!(out.json_task("review/green")["output"], "reviewed green");
    // The task itself hands on its items; what needs it starts after every instance.
    assert_eq!(out.json_task("sum")["output"], r#"["red","green"]"#);
    let sum = out.store().attempts("sum")[0].started_at_ms;
    for instance in ["review/red", "review/green"] {
        assert!(out.store().attempts(instance)[0].ended_at_ms.unwrap() <= sum);
        let branch = out.json_task(instance)["workspace"]["branch"].clone();
        assert!(
            branch
                .as_str()
                .unwrap()
                .ends_with(&instance.replace('/', "+")),
            "{branch}"
        );
    }
    out.store().assert_consistent();
}

#[test]
fn for_each_directory_a_glob_matches_and_each_item_of_a_predecessors_array() {
    let graph = r#"
[[task]]
id = "crate"
run = "ls {{ item }} > {{ item }}listing.txt && cat {{ item }}listing.txt"
scope = ["{{ item }}**"]
scope_policy = "enforce"
workspace = "worktree"
for_each = { glob = "crates/*/" }

[[task]]
id = "find"
run = "echo '[\"alpha\", {\"name\": \"beta\"}]' > $BATON_OUTPUT"

[[task]]
id = "each"
needs = ["find"]
run = "echo {{ item }}"
for_each = { from = "find" }
"#;
    let test = Test::new()
        .file("crates/api/lib.rs", "")
        .file("crates/db/lib.rs", "")
        .file("docs/readme.md", "")
        .graph("graph.toml", graph);
    let out = committed(test)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        ids(&out),
        [
            "crate:succeeded",
            "crate/api:succeeded",
            "crate/db:succeeded",
            "find:succeeded",
            "each:succeeded",
            "each/alpha:succeeded",
            "each/beta:succeeded"
        ]
    );
    assert_eq!(out.json_task("crate/api")["output"], "lib.rs\nlisting.txt");
    assert_eq!(out.json_task("each/alpha")["output"], "alpha");
    assert_eq!(out.json_task("each/beta")["output"], r#"{"name": "beta"}"#);
    // What the instances changed is in their scopes (`{{ item }}**` became theirs: under
    // `enforce`, anything else would have failed them).
    let files = &out.json_task("crate/db")["workspace"]["evidence"]["files"];
    assert_eq!(files[0]["path"], "crates/db/listing.txt", "{files}");
    assert_eq!(out.json()["run"]["state"], "succeeded");
}

#[test]
fn for_each_from_a_predecessor_that_wrote_no_array_fails_saying_so() {
    let graph = r#"
[[task]]
id = "find"
run = "echo not json"

[[task]]
id = "each"
needs = ["find"]
run = "echo {{ item }}"
for_each = { from = "find" }

[[task]]
id = "after"
needs = ["each"]
run = "true"
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let each = out.json_task("each");
    assert_eq!(each["state"], "failed", "{each}");
    assert!(
        each["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("`find` wrote no JSON array of items"),
        "{each}"
    );
    assert_eq!(out.json_task("after")["state"], "blocked");
}

#[test]
fn for_each_instances_retry_and_end_each_on_its_own() {
    // `a` fails its first attempt and is retried; `b` succeeds at once; `c` fails for good.
    // What needs the task waits for all of them, and is blocked by the one that failed.
    let graph = r#"
[[task]]
id = "each"
for_each = ["a", "b", "c"]
retries = 1
backoff = "10ms"
run = "if [ {{ item }} = c ]; then exit 3; fi; if [ {{ item }} = a ] && [ ! -e a.once ]; then touch a.once; exit 1; fi; echo done {{ item }}"

[[task]]
id = "after"
needs = ["each"]
run = "true"
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let attempts = |id: &str| out.json_task(id)["attempts"].as_u64().unwrap();
    assert_eq!(out.json_task("each/a")["state"], "succeeded");
    assert_eq!(attempts("each/a"), 2);
    assert_eq!(out.json_task("each/a")["output"], "done a");
    assert_eq!(out.json_task("each/b")["state"], "succeeded");
    assert_eq!(attempts("each/b"), 1);
    assert_eq!(out.json_task("each/c")["state"], "failed");
    assert_eq!(attempts("each/c"), 2, "its own retries, spent");
    assert_eq!(out.json_task("after")["state"], "blocked");
}

#[test]
fn for_each_mistakes_are_named_in_the_graph_file() {
    let graph = r#"
[[task]]
id = "a"
run = "true"

[[task]]
id = "each"
run = "echo {{ item }}"
for_each = { from = "a" }

[[task]]
id = "both"
prompt = "x"
expand = true
for_each = []

[[task]]
id = "odd"
run = "true"
for_each = { pick = 1 }
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["plan", "graph.toml"])
        .run()
        .status(2);
    for expected in [
        "`a` is not among task `each`'s needs",
        "task `both` both plans and fans out",
        "`for_each` has no items",
        "`for_each` takes one of `glob` or `from`",
    ] {
        assert!(
            out.stderr.contains(expected),
            "{expected:?} not in:\n{}",
            out.stderr
        );
    }
}

/// A `for_each` task's row said `succeeded · added 4 tasks: a, b, c, d` when two of them
/// failed: it says how its instances ended.
#[test]
fn a_fan_out_s_row_says_how_its_instances_ended() {
    let graph = r#"
[run]
on_failure = "continue"

[[task]]
id = "each"
for_each = ["a", "b", "c", "d"]
run = "test {{ item }} != b && test {{ item }} != d"
"#;
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("each "))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        row.ends_with("2 of 4 added tasks did not succeed: b, d"),
        "{row}"
    );
}

/// A static `for_each` list is sized by the file: 300 items run under the default
/// `max_tasks` (which bounds what planners add), where they failed at run time before.
#[test]
fn a_long_static_list_is_the_file_s_own_size() {
    let items: Vec<String> = (0..300).map(|i| format!("\"i{i}\"")).collect();
    let graph = format!(
        "[[task]]\nid = \"each\"\nfor_each = [{}]\nrun = \"true\"\n",
        items.join(", ")
    );
    let out = Test::new()
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json()["totals"]["succeeded"], 301);
}

/// A `for_each` glob is sized by the checkout, as a list is by the file: one task per crate of
/// a workspace of 100 runs under the default `max_tasks` (the newcomer's `glob = "crates/*/"`),
/// where it failed at run time before, and planners keep their room beside it. An explicit
/// `max_tasks` still holds.
#[test]
fn a_glob_over_many_paths_is_the_checkout_s_own_size() {
    let graph = "[[task]]\nid = \"crate\"\nfor_each = { glob = \"crates/*/\" }\nrun = \"true\"\n";
    let mut test = Test::new().graph("graph.toml", graph);
    for i in 0..100 {
        test = test.file(&format!("crates/c{i}/lib.rs"), "");
    }
    let out = committed(test)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json()["totals"]["succeeded"], 101);
    // The room is the graph's own, not a changed setting stored with the run: taking the run
    // up again says nothing of a changed file.
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let again = out.then().args(&["retry", &run]).run().status(0);
    assert!(!again.stderr.contains("changed since"), "{}", again.stderr);

    let capped = format!("[run]\nmax_tasks = 50\n{graph}");
    let out = again
        .then()
        .graph("graph.toml", &capped)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let crate_task = out.json_task("crate");
    assert!(
        crate_task["reason"]
            .as_str()
            .is_some_and(|r| r
                .contains("100 items would make the run hold 101 tasks; it may hold at most 50")),
        "{crate_task}"
    );
}

/// A misspelt name in a template (`{{ itme }}`) is found by `baton plan`, at its line, not by
/// every instance failing at run time.
#[test]
fn a_misspelt_template_name_is_found_before_anything_runs() {
    let graph = "[[task]]\nid = \"each\"\nfor_each = [\"a\", \"b\"]\nrun = \"echo {{ itme }}\"\n";
    Test::new()
        .graph("graph.toml", graph)
        .args(&["plan", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("graph.toml:4:16: in `run`: `itme` is not a name templates know")
        .stderr_contains("templates know `item`");
    // `item` outside a `for_each` task is no name either.
    Test::new()
        .graph(
            "g.toml",
            "[[task]]\nid = \"one\"\nrun = \"echo {{ item }}\"\n",
        )
        .args(&["plan", "g.toml"])
        .run()
        .status(2)
        .stderr_contains("`item` is a `for_each` task's");
}
