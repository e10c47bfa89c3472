//! A planner's answer is code a model wrote (#29, red-team findings 1 and 2): the tasks it adds
//! get no more than the planner had. Their shell commands (`run`, `setup`, `verify`) run in a
//! worktree under the write sandbox, or are refused; their `env` takes literals only.
//!
//! The planner here is a `kind = "command"` engine that prints a plan from a file: what a
//! model could answer, without a model.

use std::path::{Path, PathBuf};

use crate::test::{Output, Test};
use crate::workspaces::git;

/// A test repository (one commit) whose planner answers `plan(ROOT)`, given the repository's
/// root; `$HOME` is a directory of the test's own (outside the repository).
fn planning(plan: impl FnOnce(&Path) -> String, run: &str) -> (Test, PathBuf) {
    let test = Test::new();
    let home = test.path().parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let answer = test.path().parent().unwrap().join("answer.json");
    std::fs::write(&answer, plan(&test.path().canonicalize().unwrap())).unwrap();
    let graph = format!(
        r#"
[run]
{run}

[[task]]
id = "plan"
engine = "planner"
prompt = "plan it"
expand = true
"#
    );
    let config = format!(
        "[engines.planner]\nkind = \"command\"\ncommand = \"cat\"\nargs = [\"{}\"]\n",
        answer.display()
    );
    let test = test
        .env("HOME", home.to_str().unwrap())
        .file("README", "the user's readme\n")
        .file("baton.toml", config)
        .graph("graph.toml", &graph);
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "the user's work"]);
    (test, home)
}

/// The checkout, `$HOME` and the repository's own configuration as the user left them.
fn untouched(out: &Output, home: &Path) {
    let root = out.path();
    assert_eq!(
        std::fs::read_to_string(root.join("README")).unwrap(),
        "the user's readme\n"
    );
    assert!(!root.join("setup-ran.txt").exists());
    assert!(!root.join("verify-ran.txt").exists());
    let in_home: Vec<_> = std::fs::read_dir(home)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with(".rt-"))
        .collect();
    assert!(in_home.is_empty(), "{in_home:?}");
    let config = std::fs::read_to_string(root.join(".git/config")).unwrap();
    assert!(!config.contains("hooksPath"), "{config}");
}

/// Finding 1's reproduction: a planned `run` that writes the checkout's README, `$HOME` and
/// `core.hooksPath` in the repository's `.git/config` (a hook for the user's next commit),
/// then says `done`. Before: all three written and the task succeeded. Now each write is
/// refused by the sandbox and nothing of the user's changes; the task's own exit code is its
/// last command's.
#[test]
fn a_planned_command_cannot_write_the_checkout_home_or_git_config() {
    let plan = |root: &Path| {
        let run = format!(
            "echo pwned > {root}/README; echo x > $HOME/.rt-plan-home-write; \
             git -C {root} config core.hooksPath /tmp/evil; echo done",
            root = root.display()
        );
        serde_json::json!({"task": [{"id": "a", "run": run}]}).to_string()
    };
    let (test, home) = planning(plan, "");
    let out = test.args(&["run", "graph.toml", "--json"]).run();
    let a = out.json_task("plan/a");
    assert_eq!(a["output"], "done", "{a}");
    untouched(&out, &home);
}

/// A planned task's `setup` and `verify` run under the same sandbox as its `run`: their
/// writes to the checkout fail, and with them the task.
#[test]
fn a_planned_setup_and_verify_are_confined_too() {
    let plan = |root: &Path| {
        let root = root.display();
        serde_json::json!({"task": [
            {"id": "setup", "setup": [format!("echo x > {root}/setup-ran.txt")], "run": "true"},
            {"id": "verify", "run": "true", "verify": [format!("echo x > {root}/verify-ran.txt")]},
        ]})
        .to_string()
    };
    let (test, home) = planning(plan, "");
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(1);
    assert_eq!(out.json_task("plan/setup")["state"], "failed");
    assert_eq!(out.json_task("plan/verify")["state"], "failed");
    untouched(&out, &home);
}

/// Where the kernel cannot confine (`BATON_NO_LANDLOCK` stands in for a kernel without
/// Landlock), a planned shell command is refused, saying why and what the graph can say to
/// allow it; `planned_commands = "allow"` runs it.
#[test]
fn without_a_sandbox_planned_commands_are_refused_unless_the_graph_allows_them() {
    let plan = |_: &Path| r#"{"task": [{"id": "a", "run": "echo ran > ran.txt"}]}"#.to_owned();
    let (test, _home) = planning(plan, "");
    let out = test
        .env("BATON_NO_LANDLOCK", "1")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let a = out.json_task("plan/a");
    assert_eq!(a["state"], "failed", "{a}");
    assert_eq!(a["attempts"], 1, "{a}");
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("was planned by a model")
            && reason.contains("Landlock is not available")
            && reason.contains("planned_commands = \"allow\""),
        "{reason}"
    );

    let (test, _home) = planning(plan, "planned_commands = \"allow\"");
    let out = test
        .env("BATON_NO_LANDLOCK", "1")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("plan/a")["state"], "succeeded");
}

/// A graph's `planned_commands` takes one of its two values, or says which.
#[test]
fn planned_commands_names_its_values() {
    Test::new()
        .graph(
            "graph.toml",
            "[run]\nplanned_commands = \"yes\"\n\n[[task]]\nid = \"a\"\nrun = \"true\"\n",
        )
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("confined")
        .stderr_contains("allow");
}

/// The same answer from a real planner: Claude Code (against the scripted model) plans a task
/// whose `run` writes the checkout's README and its `.git/config`. Both writes are refused.
#[test]
fn a_command_claude_planned_cannot_write_the_checkout_either() {
    let test = Test::new().file("README", "the user's readme\n");
    let root = test.path().canonicalize().unwrap();
    let run = format!(
        "echo pwned > {root}/README; git -C {root} config core.hooksPath /tmp/evil; echo done",
        root = root.display()
    );
    let answer = serde_json::json!({"task": [{"id": "a", "run": run}]}).to_string();
    let model = baton_mock_model::MockModel::start(
        baton_mock_model::Script::new()
            .rule(crate::planning::structured(&answer).when_contains("GOAL-PLAN")),
    )
    .unwrap();
    let graph = r#"
[[task]]
id = "plan"
engine = "claude"
prompt = "GOAL-PLAN: do it"
expand = true
"#;
    let test = crate::agents::with_claude(test, &model).graph("graph.toml", graph);
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "the user's work"]);
    let home = test.path().parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = test.args(&["run", "graph.toml", "--json"]).run();
    assert_eq!(out.json_task("plan/a")["output"], "done");
    untouched(&out, &home);
}

/// Finding 2's reproduction: a plan whose `env` reads baton's own environment
/// (`${MY_PLAIN_SECRET}`, `${AWS_SECRET_ACCESS_KEY}`) and writes what it got. Before: the
/// file held both values in clear. Now the plan is refused as a graph file would be, each
/// value named, and nothing ran.
#[test]
fn a_plan_s_env_takes_literals_only() {
    let plan = |_: &Path| {
        serde_json::json!({"task": [{
            "id": "a",
            "run": "echo A=$A B=$B > env-leak.txt",
            "env": {"A": "${MY_PLAIN_SECRET}", "B": "${AWS_SECRET_ACCESS_KEY}", "C": "plain"},
        }]})
        .to_string()
    };
    let (test, _home) = planning(plan, "");
    let out = test
        .env("MY_PLAIN_SECRET", "plainsecretvalue123")
        .env(
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        )
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let planner = out.json_task("plan");
    assert_eq!(planner["outcome"]["kind"], "invalid-plan", "{planner}");
    let said = planner.to_string();
    assert!(
        said.contains("a plan's `env` takes literal values, not `${MY_PLAIN_SECRET}`")
            && said.contains("not `${AWS_SECRET_ACCESS_KEY}`"),
        "{said}"
    );
    assert!(!said.contains("plainsecretvalue123"), "{said}");
    assert!(!walk_has(out.path(), "env-leak.txt"));
}

/// In any graph, `BATON_*` are baton's to set and the dynamic loader's variables are refused
/// (finding 2's `env-baton2` case set `BATON_RUN_ID`, `BATON_OUTPUT`, `LD_PRELOAD`, and they
/// reached the task, hiding it from the sweep that goes by its ids).
#[test]
fn a_task_may_not_set_baton_s_variables_or_the_loader_s() {
    let graph = r#"
[[task]]
id = "a"
run = "true"
env = { BATON_RUN_ID = "x", BATON_OUTPUT = "/tmp/out.json", LD_PRELOAD = "/tmp/evil.so", PATH = "/usr/bin:/bin" }
"#;
    Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("graph.toml:5:")
        .stderr_contains("`BATON_RUN_ID` is baton's to set")
        .stderr_contains("`BATON_OUTPUT` is baton's to set")
        .stderr_contains("`LD_PRELOAD` is the dynamic loader's")
        .stderr_contains("pass_env");
}

/// The same names in a plan: refused with the plan, before anything runs.
#[test]
fn a_plan_may_not_set_baton_s_variables_either() {
    let plan = |_: &Path| {
        r#"{"task": [{"id": "a", "run": "echo $BATON_TASK_ID > id.txt", "env": {"BATON_TASK_ID": "y", "LD_PRELOAD": "/tmp/x.so"}}]}"#
            .to_owned()
    };
    let (test, _home) = planning(plan, "");
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(1);
    let said = out.json_task("plan").to_string();
    assert!(
        said.contains("`BATON_TASK_ID` is baton's to set")
            && said.contains("`LD_PRELOAD` is the dynamic loader's"),
        "{said}"
    );
    assert!(!walk_has(out.path(), "id.txt"));
}

/// Whether a file named `name` is anywhere under `dir` (its worktrees included).
fn walk_has(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        e.file_name() == name || (path.is_dir() && !path.is_symlink() && walk_has(&path, name))
    })
}

/// Finding 19: a plan answer longer than the 64 KiB baton kept of a text planner's output was
/// cut in the middle and reported as `Unexpected token`. Now a planner's answer is kept up to
/// 8 MiB (a 300 KB plan runs), and one longer than that says so.
#[test]
fn a_long_plan_is_read_whole_and_one_too_long_says_so() {
    // Padded with env values of 100 KiB (one string of a process's environment may not pass
    // 128 KiB).
    let long = |size: usize| {
        move |_: &Path| {
            let env: serde_json::Map<String, serde_json::Value> = (0..size / (100 * 1024))
                .map(|i| (format!("PAD{i}"), "x".repeat(100 * 1024).into()))
                .collect();
            serde_json::json!({"task": [{"id": "a", "run": "true", "env": env}]}).to_string()
        }
    };
    let (test, _home) = planning(long(300 * 1024), "");
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    assert_eq!(out.json_task("plan/a")["state"], "succeeded");

    let (test, _home) = planning(long(9 * 1024 * 1024), "");
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(1);
    let planner = out.json_task("plan");
    assert_eq!(
        planner["outcome"]["kind"], "invalid-plan",
        "{}",
        planner["reason"]
    );
    let output = planner["output"].as_str().unwrap();
    assert!(
        output.starts_with(
            "the plan answer is 9.0MiB, more than baton keeps of a planner's answer (8.0MiB)"
        ),
        "{output}"
    );
}

/// Finding 19: an invalid plan's line in the summary and `status` was its last line, the
/// `help:`; it is its first problem.
#[test]
fn an_invalid_plan_is_summed_up_by_its_first_problem() {
    let plan =
        |_: &Path| r#"{"task": [{"id": "a", "run": "true", "env": {"A": "${HOME}"}}]}"#.to_owned();
    let (test, _home) = planning(plan, "");
    let out = test.args(&["run", "graph.toml"]).run().status(1);
    let status = baton_in_status(&out);
    let line = status
        .lines()
        .find(|l| l.starts_with("plan "))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        line.contains("its plan is not valid (1 problem) · “1:"),
        "{line}"
    );
    assert!(line.contains("a plan's `env` takes literal"), "{line}");
    assert!(!line.contains("help:"), "{line}");
}

fn baton_in_status(out: &Output) -> String {
    crate::test::baton_in(out.path(), &["status"]).stdout
}
