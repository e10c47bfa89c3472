//! `baton do "GOAL"` end to end with the real `claude` CLI against the scripted model: the
//! planner's answer is shown with an estimate and run on `--yes`, refused without a terminal to
//! ask on, edited in `$EDITOR` (a script) on a terminal (`script`'s pty), written for `baton
//! run` with `--plan-only`.

use baton_mock_model::{MockModel, Rule, Script};

use crate::agents::with_claude;
use crate::test::Test;
use crate::workspaces::git;

const GOAL: &str = "GOAL-DO: add a greeting";

/// The planner plans an agent task that writes `hello.txt` and a shell task that reads it.
fn model() -> MockModel {
    let plan = r#"{"task": [
  {"id": "write", "prompt": "SUB-WRITE: write hello.txt", "scope": ["hello.txt"], "allowed_tools": ["Bash"]},
  {"id": "read", "needs": ["write"], "run": "cat hello.txt"}
]}"#;
    let script = Script::new()
        .rule(
            Rule::text("wrote it")
                .when_contains("SUB-WRITE")
                .when_last_contains("toolu_mock"),
        )
        .rule(
            Rule::tool_use(
                "Bash",
                serde_json::json!({"command": "echo hello > hello.txt", "description": "write"}),
            )
            .when_contains("SUB-WRITE"),
        )
        .rule(crate::planning::structured(plan).when_contains("GOAL-DO"));
    MockModel::start(script).unwrap()
}

fn project(model: &MockModel) -> Test {
    crate::planning::committed(with_claude(Test::new(), model))
}

fn planning_requests(model: &MockModel) -> usize {
    crate::planning::asked_to_plan(model, "GOAL-DO")
}

#[test]
fn do_yes_plans_shows_the_plan_with_an_estimate_and_runs_it() {
    let model = model();
    let out = project(&model)
        .args(&["do", GOAL, "--yes", "--json"])
        .run()
        .status(0);
    // The plan was shown, as `baton plan` shows one, with what it should cost and take.
    for shown in [
        "The plan (",
        "  write            claude  · scope hello.txt",
        "  read             shell   needs write",
        "critical path (2 tasks): write -> read",
        "estimate: about $",
    ] {
        assert!(
            out.stderr.contains(shown),
            "{shown:?} not in:\n{}",
            out.stderr
        );
    }
    // Two runs: the planning, and the plan's, which did the work in worktrees.
    let runs = out.store().runs();
    assert_eq!(runs.len(), 2, "{runs:?}");
    // What the planning cost is said too: it is part of what `baton do` cost. The planning
    // run is the one the plan file is named after.
    let planning = out
        .stderr
        .split("/plans/")
        .nth(1)
        .and_then(|rest| rest.split(".toml").next())
        .unwrap();
    assert!(runs.iter().any(|r| r.id.as_str() == planning), "{runs:?}");
    assert!(
        out.stderr
            .contains(&format!("baton: planning it (run {planning}) cost $")),
        "{}",
        out.stderr
    );
    let json = out.json();
    assert_eq!(json["run"]["state"], "succeeded", "{json}");
    assert_eq!(out.json_task("read")["output"], "hello");
    assert_eq!(out.json_task("write")["state"], "succeeded");
    let run = json["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        git(
            out.path(),
            &["show", &format!("baton/{run}/result:hello.txt")]
        ),
        "hello"
    );
    // The plan is kept as a graph file that `baton run` takes.
    let planning = runs.iter().find(|r| r.id.as_str() != run).unwrap();
    let file = out
        .path()
        .join(format!(".baton/plans/{}.toml", planning.id));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("# GOAL-DO: add a greeting\n"), "{text}");
    assert!(text.contains("[[task]]\nid = \"write\""), "{text}");
    assert_eq!(planning_requests(&model), 1);
}

#[test]
fn do_refuses_at_once_when_nobody_can_answer() {
    let model = model();
    let out = project(&model).args(&["do", GOAL]).run().status(2);
    assert!(out.stderr.contains("pass --yes"), "{}", out.stderr);
    assert!(
        out.stderr.contains("--plan-only -o plan.toml"),
        "{}",
        out.stderr
    );
    // Nothing was asked of the model, nothing recorded.
    assert_eq!(model.requests().len(), 0);
    assert!(crate::test::Store::try_open(out.path()).is_none_or(|s| s.try_run().is_none()));
}

#[test]
fn do_on_a_terminal_lets_the_plan_be_edited_until_it_is_valid_then_runs_it() {
    let model = model();
    let test = project(&model);
    // The editor breaks the plan the first time, mends it and adds a task the second.
    let editor = test.path().parent().unwrap().join("editor.sh");
    let count = test.path().parent().unwrap().join("edits");
    std::fs::write(
        &editor,
        format!(
            "#!/bin/sh\nn=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}\n\
             if [ $n = 1 ]; then printf '\\n[[task]]\\nid = \"extra\"\\nrun = \"echo extra\"\\ncolour = \"red\"\\n' >> \"$1\"\n\
             else sed -i '/^colour/d' \"$1\"; fi\n",
            count = count.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = test
        .env("EDITOR", editor.to_str().unwrap())
        .typing("e\ne\nr\n")
        .args(&["do", GOAL, "--quiet"])
        .run()
        .status(0);
    // On a terminal, everything baton printed is in the pty's output.
    let shown = out.stdout.replace('\r', "");
    assert!(
        shown.contains("Run this plan? [r]un, [e]dit, [c]ancel:"),
        "{shown}"
    );
    assert!(shown.contains("unknown field `colour`"), "{shown}");
    assert!(
        shown.contains("The plan has errors. [e]dit again, [c]ancel:"),
        "{shown}"
    );
    assert!(shown.contains("  extra            shell"), "{shown}");
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "2");
    let tasks: Vec<String> = out.store().runs().into_iter().map(|r| r.name).collect();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let last = crate::test::baton_in(out.path(), &["status", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&last.stdout).unwrap();
    let ids: Vec<&str> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["write", "read", "extra"]);
    assert_eq!(json["run"]["state"], "succeeded");
}

#[test]
fn do_takes_its_engine_model_and_limit_and_cancel_runs_nothing() {
    let model = model();
    let out = project(&model)
        .typing("c\n")
        .args(&[
            "do",
            GOAL,
            "--engine",
            "claude",
            "--model",
            "claude-mock-planner",
            "--max-subtasks",
            "2",
        ])
        .run()
        .status(0);
    let shown = out.stdout.replace('\r', "");
    assert!(
        shown.contains("Run this plan? [r]un, [e]dit, [c]ancel:"),
        "{shown}"
    );
    assert!(shown.contains("nothing was run; the plan is in"), "{shown}");
    // Only the planning ran, on the model asked for, told its limit.
    let runs = out.store().runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let asked = model.requests().into_iter().next().unwrap();
    assert_eq!(asked.body["model"], "claude-mock-planner");
    assert!(asked.text().contains("at most 2 tasks"), "{}", asked.text());
    // The plan waits in its file, its tasks on the same engine and model.
    let plan =
        std::fs::read_to_string(out.path().join(format!(".baton/plans/{}.toml", runs[0].id)))
            .unwrap();
    assert!(plan.contains("engine = \"claude\""), "{plan}");
    assert!(plan.contains("model = \"claude-mock-planner\""), "{plan}");
}

#[test]
fn do_plan_only_writes_the_plan_for_baton_run() {
    let model = model();
    let out = project(&model)
        .args(&[
            "do",
            GOAL,
            "--plan-only",
            "-o",
            "plan.toml",
            "--scope",
            "hello.txt",
        ])
        .run()
        .status(0);
    assert!(
        out.stderr.contains("run it with `baton run plan.toml`"),
        "{}",
        out.stderr
    );
    // Only the planning ran.
    assert_eq!(out.store().runs().len(), 1);
    let text = String::from_utf8(out.read("plan.toml")).unwrap();
    assert!(text.contains("id = \"read\""), "{text}");
    // The planner was told the scope; the task without one gets it.
    let asked = model.requests().into_iter().next().unwrap().text();
    assert!(
        asked.contains("may change only files matching: hello.txt"),
        "{asked}"
    );
    let ran = out
        .then()
        .args(&["run", "plan.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(ran.json_task("read")["output"], "hello");
    assert_eq!(ran.store().runs().len(), 2);
    assert_eq!(ran.json()["run"]["state"], "succeeded");
}

#[test]
fn do_accept_adds_a_last_task_that_checks_the_goal_and_is_reviewed() {
    let plan = r#"{"task": [
  {"id": "write", "prompt": "SUB-WRITE: write hello.txt", "scope": ["hello.txt"], "allowed_tools": ["Bash"]}
]}"#;
    let script = Script::new()
        .rule(
            crate::planning::structured(
                r#"{"verdict": "verified", "reasons": ["hello.txt holds hello"]}"#,
            )
            .when_contains("ACCEPTANCE CRITERIA"),
        )
        .rule(Rule::text("the goal is met").when_contains("The tasks before you"))
        .rule(
            Rule::text("wrote it")
                .when_contains("SUB-WRITE")
                .when_last_contains("toolu_mock"),
        )
        .rule(
            Rule::tool_use(
                "Bash",
                serde_json::json!({"command": "echo hello > hello.txt", "description": "write"}),
            )
            .when_contains("SUB-WRITE"),
        )
        .rule(crate::planning::structured(plan).when_contains("GOAL-DO"));
    let model = MockModel::start(script).unwrap();
    let out = project(&model)
        .args(&[
            "do",
            GOAL,
            "--yes",
            "--json",
            "--accept",
            "hello.txt holds hello",
        ])
        .run()
        .status(0);
    // The planner was told the criteria; the last task saw the plan's work and was reviewed.
    let planner = model.requests().into_iter().next().unwrap().text();
    assert!(
        planner.contains("The goal is met when:\n- hello.txt holds hello"),
        "{planner}"
    );
    assert_eq!(out.json_task("goal")["state"], "succeeded");
    assert_eq!(out.json_task("goal")["review"]["verdict"], "verified");
    let reviewer = model
        .requests()
        .into_iter()
        .find(|r| r.text().contains("ACCEPTANCE CRITERIA"))
        .unwrap()
        .text();
    assert!(reviewer.contains("1. hello.txt holds hello"), "{reviewer}");
    assert!(
        out.stderr
            .contains("  goal             claude  needs write"),
        "{}",
        out.stderr
    );
}

#[test]
fn do_estimates_from_earlier_agents_on_the_same_engine_once_there_are_enough() {
    let model = model();
    let test = project(&model);
    // The first: nothing ran here before, so the planner's own attempt is all there is.
    let first = test.args(&["do", GOAL, "--yes"]).run().status(0);
    assert!(
        first
            .stderr
            .contains("from the planner's own attempt (no earlier agent runs here)"),
        "{}",
        first.stderr
    );
    // Two earlier agent attempts (a planner's, a task's): not enough to go by the engine.
    let second = first.then().args(&["do", GOAL, "--yes"]).run().status(0);
    assert!(
        second
            .stderr
            .contains("from 2 agent attempts of earlier runs here)"),
        "{}",
        second.stderr
    );
    // Four: the agent task is estimated from the attempts on its own engine.
    let third = second.then().args(&["do", GOAL, "--yes"]).run().status(0);
    assert!(
        third.stderr.contains(
            "from 4 agent attempts of earlier runs here, on the task's own engine and model for 1)"
        ),
        "{}",
        third.stderr
    );
}

#[test]
fn do_yes_will_not_run_a_plan_whose_estimate_is_over_the_budget() {
    let model = model();
    let out = project(&model)
        .args(&["do", GOAL, "--yes", "--budget", "0.000001"])
        .run()
        .status(2);
    assert!(
        out.stderr.contains("is over the budget ($0.0000"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("not run: the plan's estimate"),
        "{}",
        out.stderr
    );
    // Only the planning ran.
    assert_eq!(out.store().runs().len(), 1);
}

#[test]
fn do_shows_the_planners_own_estimates() {
    let plan = r#"{"task": [
  {"id": "one", "run": "true", "estimate": {"minutes": 10, "usd": 1.25}},
  {"id": "two", "needs": ["one"], "run": "true", "estimate": {"minutes": 5, "usd": 0.25}}
]}"#;
    let model = MockModel::start(
        Script::new().rule(crate::planning::structured(plan).when_contains("GOAL-DO")),
    )
    .unwrap();
    let out = project(&model)
        .args(&["do", GOAL, "--plan-only"])
        .run()
        .status(0);
    // The plan file keeps them.
    assert!(
        out.stdout
            .contains("estimate = { minutes = 10, usd = 1.25 }"),
        "{}",
        out.stdout
    );
    let out = out
        .then()
        .args(&["do", GOAL, "--yes", "--quiet"])
        .run()
        .status(0);
    assert!(
        out.stderr
            .contains("estimate: about $1.50, about 15m00s (the planner's estimates)"),
        "{}",
        out.stderr
    );
    // The planner was asked for them.
    let asked = model.requests().into_iter().next().unwrap().text();
    assert!(asked.contains("`estimate`"), "{asked}");
}

/// `baton do` with its engine missing named an internal file (`.baton/plans/goal-….toml:`)
/// and left it behind; it names `baton do`, the engine and `baton doctor`, and leaves no file.
#[test]
fn do_with_a_missing_engine_names_the_engine_not_an_internal_file() {
    let test = crate::workspaces::repo_with("");
    let out = test
        .file(
            "baton.toml",
            "[engines.claude]\ncommand = \"/nonexistent/claude\"\n",
        )
        .args(&["do", GOAL, "--yes"])
        .run()
        .status(2)
        .stderr_contains("baton do: engine `claude`: `/nonexistent/claude` is not installed")
        .stderr_contains("see `baton doctor`");
    assert!(!out.stderr.contains(".baton/plans"), "{}", out.stderr);
    let left: Vec<_> = std::fs::read_dir(out.path().join(".baton/plans"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
