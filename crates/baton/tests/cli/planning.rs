//! Planner tasks (`expand = true`) end to end with the real `claude` CLI against the scripted
//! model: the answer becomes tasks of the running graph, which run in worktrees and merge; an
//! answer that will not do is sent back while fix rounds last, else fails the planner with
//! every problem named; a crash after the planner answered never asks it again.

use std::path::Path;

use baton_mock_model::{MockModel, Rule, Script};
use baton_model::{EventKind, Outcome, TaskState};

use crate::agents::with_claude;
use crate::test::{RUN_LIMIT, Test};
use crate::workspaces::git;

/// A subtask that writes `file` with Claude Code's Bash tool (relative to its worktree), then
/// answers `done: FILE`.
fn writes(script: Script, marker: &str, file: &str) -> Script {
    script
        .rule(
            Rule::text(format!("done: {file}"))
                .when_contains(marker)
                .when_last_contains("toolu_mock"),
        )
        .rule(
            Rule::tool_use(
                "Bash",
                serde_json::json!({
                    "command": format!("echo {marker} > {file}"),
                    "description": "write"
                }),
            )
            .when_contains(marker),
        )
}

const PLAN: &str = r#"{"task": [
  {"id": "api", "prompt": "SUB-API: write api.txt", "scope": ["api.txt"], "allowed_tools": ["Bash"]},
  {"id": "db", "prompt": "SUB-DB: write db.txt", "scope": ["db.txt"], "allowed_tools": ["Bash"]},
  {"id": "glue", "needs": ["api", "db", "base"], "run": "cat api.txt db.txt > glue.txt && echo {{ needs.base.output }} >> glue.txt"}
]}"#;

/// Claude Code given a schema (`--json-schema`, as baton gives a planner) has the model answer
/// through its `StructuredOutput` tool: the model's answer is `json`.
pub(crate) fn structured(json: &str) -> Rule {
    Rule::tool_use(
        "StructuredOutput",
        serde_json::from_str(json).expect("the test's answer is JSON"),
    )
}

/// The graph: a planner for `GOAL-PLAN`, and a task after it.
fn graph(fix_attempts: u32, max_subtasks: u32) -> String {
    format!(
        r#"
[defaults]
timeout = "2m"

[[task]]
id = "base"
run = "echo base-output"

[[task]]
id = "plan"
needs = ["base"]
engine = "claude"
prompt = "GOAL-PLAN: add an api and a db"
expand = true
max_subtasks = {max_subtasks}
fix_attempts = {fix_attempts}

[[task]]
id = "after"
needs = ["plan"]
run = "echo after"
"#
    )
}

/// A run of `graph` with Claude Code on `model`, in a repository with a commit, that exits
/// with `code`.
fn run_planned(model: &MockModel, graph: &str, code: i32) -> crate::test::Output {
    committed(with_claude(Test::new(), model).graph("graph.toml", graph))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(code)
}

/// The request that sent a plan back to its planner with its problems.
fn sent_back(model: &MockModel, what: &str) -> baton_mock_model::Recorded {
    model
        .requests()
        .into_iter()
        .find(|r| r.text().contains("could not take your plan"))
        .unwrap_or_else(|| panic!("{what}"))
}

/// `test` with a first commit (of a README and what it holds), for worktrees to start from.
pub(crate) fn committed(test: Test) -> Test {
    let root = test.path().to_path_buf();
    std::fs::write(root.join("README"), "project\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "start"]);
    test
}

/// How many times the model was asked to plan `goal`: first turns only, not Claude Code's own
/// reminder to answer through its structured-output tool.
pub(crate) fn asked_to_plan(model: &MockModel, goal: &str) -> usize {
    model
        .requests()
        .iter()
        .filter(|r| {
            r.text().contains(goal)
                && !r.text().contains("toolu_mock")
                && !r.last_text().contains("structured-output-enforce")
        })
        .count()
}

fn planning_requests(model: &MockModel) -> usize {
    asked_to_plan(model, "GOAL-PLAN")
}

#[test]
fn a_planners_answer_runs_as_tasks_in_worktrees_and_merges() {
    let script = writes(
        writes(Script::new(), "SUB-API", "api.txt"),
        "SUB-DB",
        "db.txt",
    )
    .rule(structured(PLAN).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let test = committed(with_claude(Test::new(), &model).graph("graph.toml", &graph(0, 8)));
    let root = test.path().canonicalize().unwrap();
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();

    // The plan's tasks ran, under the planner's id, and what waited for it waited for them.
    let tasks: Vec<String> = out
        .store()
        .tasks()
        .iter()
        .map(|t| format!("{}:{}", t.task, t.status.as_str()))
        .collect();
    assert_eq!(
        tasks,
        [
            "base:succeeded",
            "plan:succeeded",
            "after:succeeded",
            "plan/api:succeeded",
            "plan/db:succeeded",
            "plan/glue:succeeded"
        ]
    );
    // The result lists each planner's tasks right after it.
    let listed: Vec<String> = out.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        listed,
        ["base", "plan", "plan/api", "plan/db", "plan/glue", "after"]
    );
    assert_eq!(
        out.json_task("plan")["planned"],
        serde_json::json!(["plan/api", "plan/db", "plan/glue"])
    );
    let after = out.store().attempts("after")[0].started_at_ms;
    for sub in ["plan/api", "plan/db", "plan/glue"] {
        let ended = out.store().attempts(sub)[0].ended_at_ms.unwrap();
        assert!(ended <= after, "{sub} ended after `after` started");
    }
    // Each agent worked in its own worktree; glue started from both results; all merged.
    let result = format!("baton/{run}/result");
    let show = |file: &str| git(&root, &["show", &format!("{result}:{file}")]);
    assert_eq!(show("api.txt"), "SUB-API");
    assert_eq!(show("db.txt"), "SUB-DB");
    // And it was handed what `base`, which ended before the plan was made, printed.
    assert_eq!(show("glue.txt"), "SUB-API\nSUB-DB\nbase-output");
    assert!(!root.join("api.txt").exists(), "written in the checkout");
    // The planner's output is the plan; its answer is recorded once.
    let plan_output = out.json_task("plan")["output"].as_str().unwrap().to_owned();
    assert!(plan_output.starts_with("{\"task\""), "{plan_output}");
    let expanded = out
        .store()
        .events_of(|k| matches!(k, EventKind::GraphExpanded { .. }));
    assert_eq!(expanded.len(), 1);
    assert_eq!(planning_requests(&model), 1);
    // The planner was told the shape, its limits and the repository's layout.
    let asked = model
        .requests()
        .into_iter()
        .find(|r| r.text().contains("GOAL-PLAN"))
        .unwrap();
    // Claude Code was given the plan's schema: its answer went through the tool that holds it.
    let tools = asked.body["tools"].as_array().cloned().unwrap_or_default();
    let schema = tools
        .iter()
        .find(|t| t["name"] == "StructuredOutput")
        .map(|t| t["input_schema"].clone())
        .expect("the planner had a schema");
    assert_eq!(schema["required"], serde_json::json!(["task"]), "{schema}");
    let told = asked.text();
    for what in [
        "{\"task\": [",
        "Limits: at most 8 tasks",
        "  README",
        "`after`",
    ] {
        let expected = what != "`after`";
        assert_eq!(
            told.contains(what),
            expected,
            "{what:?} in what the planner was told: {told}"
        );
    }
    out.store().assert_consistent();

    // `status` lists the planned tasks; `events` says what was planned.
    out.then()
        .args(&["status", &run])
        .run()
        .status(0)
        .stdout_contains("plan/api")
        .stdout_contains("plan/glue")
        .stdout_contains("added 3 tasks: api, db, glue")
        .then()
        .args(&["events", &run])
        .run()
        .status(0)
        .stdout_contains("graph-expanded plan#1: added plan/api, plan/db, plan/glue")
        // The report frames the planner's tasks in its graph.
        .then()
        .args(&["report", &run, "-o", "-"])
        .run()
        .status(0)
        .stdout_contains("<g class=\"group\">")
        .stdout_contains("tasks of plan</text>");
}

const BAD_PLAN: &str = r#"{"task": [
  {"id": "a", "needs": ["b"], "prompt": "x"},
  {"id": "b", "needs": ["a"], "prompt": "y", "colour": "red"},
  {"id": "c", "prompt": "z", "expand": true}
]}"#;

#[test]
fn an_invalid_answer_goes_back_with_every_problem_and_the_corrected_one_runs() {
    let script = writes(Script::new(), "SUB-ONE", "one.txt")
        .rule(
            structured(r#"{"task": [{"id": "one", "prompt": "SUB-ONE: write one.txt", "allowed_tools": ["Bash"]}]}"#)
                .when_last_contains("could not take your plan"),
        )
        .rule(structured(BAD_PLAN).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    // Subtasks may not plan (max_depth = 1), and at most 2 of them.
    let graph = graph(1, 2).replace("expand = true", "expand = true\nmax_depth = 1");
    let out = run_planned(&model, &graph, 0);
    // Every problem went back at once, in the same session.
    let fix = sent_back(&model, "the plan was sent back");
    let text = fix.text();
    for problem in [
        "the plan has 3 tasks; `plan` may add at most 2",
        "dependency cycle: plan/a -> plan/b -> plan/a",
        "unknown field `colour`",
        "planning may go 1 level deep",
        "fix round 1 of 1",
    ] {
        assert!(text.contains(problem), "{problem:?} not in: {text}");
    }
    assert!(
        text.contains("GOAL-PLAN"),
        "not the same conversation: {text}"
    );
    let ids: Vec<String> = out
        .store()
        .tasks()
        .iter()
        .map(|t| t.task.to_string())
        .collect();
    assert_eq!(ids, ["base", "plan", "after", "plan/one"]);
    assert_eq!(out.store().task("plan/one").status, TaskState::Succeeded);
    assert_eq!(out.store().attempts("plan").len(), 1);
}

#[test]
fn a_planned_planner_plans_a_level_deeper_and_no_further() {
    // The plan holds a planner of its own: at the default max_depth (2) it may plan.
    let outer = r#"{"task": [
  {"id": "lib", "prompt": "SUB-PLAN: split the library", "expand": true, "fix_attempts": 1},
  {"id": "docs", "needs": ["lib"], "run": "echo docs"}
]}"#;
    // Its first answer would plan a third level; sent back, it plans the work itself.
    let too_deep = r#"{"task": [{"id": "deeper", "prompt": "SUB-DEEPER", "expand": true}]}"#;
    let inner = r#"{"task": [
  {"id": "x", "run": "echo x"},
  {"id": "y", "needs": ["x"], "run": "echo y after {{ needs.x.output }}"}
]}"#;
    let script = Script::new()
        .rule(structured(inner).when_last_contains("could not take your plan"))
        .rule(Rule::text("planned").when_last_contains("toolu_mock"))
        .rule(structured(too_deep).when_contains("SUB-PLAN"))
        .rule(structured(outer).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let out = run_planned(&model, &graph(0, 8), 0);
    let fix = sent_back(&model, "the too-deep plan was sent back");
    assert!(
        fix.text()
            .contains("planning may go 2 levels deep; this task would plan at level 3"),
        "{}",
        fix.text()
    );
    assert!(fix.text().contains("SUB-PLAN"), "not its own session");
    // Two levels of planned tasks ran, each under its planner, and in order.
    let states: Vec<String> = out
        .store()
        .tasks()
        .iter()
        .map(|t| format!("{}:{}", t.task, t.status.as_str()))
        .collect();
    for task in ["plan/lib", "plan/docs", "plan/lib/x", "plan/lib/y", "after"] {
        assert!(
            states.contains(&format!("{task}:succeeded")),
            "{task}: {states:?}"
        );
    }
    assert!(!states.iter().any(|s| s.contains("deeper")), "{states:?}");
    assert_eq!(out.json_task("plan/lib/y")["output"], "y after x");
    assert_eq!(
        out.json_task("plan/lib")["planned"],
        serde_json::json!(["plan/lib/x", "plan/lib/y"])
    );
    let lib_y_end = out.store().attempts("plan/lib/y")[0].ended_at_ms.unwrap();
    assert!(out.store().attempts("plan/docs")[0].started_at_ms >= lib_y_end);
    assert_eq!(
        out.store().attempts("plan/lib").len(),
        1,
        "one attempt, one fix round"
    );
    out.store().assert_consistent();
}

#[test]
fn planned_tasks_are_checked_like_any_other() {
    // One planned task passes its check; the other's check fails it, which blocks what waits.
    let plan = r#"{"task": [
  {"id": "made", "run": "echo made > made.txt", "verify": ["grep -q made made.txt"]},
  {"id": "broken", "run": "echo half > half.txt", "verify": ["grep -q whole half.txt"]}
]}"#;
    let script = Script::new()
        .rule(Rule::text("planned").when_last_contains("toolu_mock"))
        .rule(structured(plan).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let out = run_planned(&model, &graph(0, 8), 1);
    assert_eq!(out.json_task("plan/made")["state"], "succeeded");
    let broken = out.json_task("plan/broken");
    assert_eq!(broken["state"], "failed", "{broken}");
    assert_eq!(
        broken["check"]["command"], "grep -q whole half.txt",
        "{broken}"
    );
    assert_eq!(out.json_task("after")["state"], "blocked");
}

#[test]
fn an_invalid_answer_without_fix_rounds_fails_the_planner_with_its_problems() {
    // Answered as text, not through the schema's tool (as a model may): Claude Code asks for
    // the tool once more, then gives the text, which baton reads as it would any engine's.
    let script = Script::new().rule(Rule::text(BAD_PLAN).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let out = run_planned(&model, &graph(0, 8), 1);
    let plan = out.json_task("plan");
    assert_eq!(plan["state"], "failed", "{plan}");
    let output = plan["output"].as_str().unwrap();
    assert!(output.contains("plan of plan:"), "{output}");
    assert!(output.contains("dependency cycle"), "{output}");
    assert!(output.contains("unknown field `colour`"), "{output}");
    let attempts = out.store().attempts("plan");
    assert!(
        matches!(
            attempts[0].outcome,
            Some(Outcome::InvalidPlan { problems: 2 })
        ),
        "{:?}",
        attempts[0].outcome
    );
    assert_eq!(out.json_task("after")["state"], "blocked");
    assert_eq!(out.store().tasks().len(), 3, "nothing was added");
    assert_eq!(planning_requests(&model), 1);
}

#[test]
fn a_crash_after_the_planner_answered_never_asks_it_again() {
    // The first attempt waits to be killed; the one the resume makes goes on.
    let plan = r#"{"task": [{"id": "slow", "run": "test $BATON_ATTEMPT -gt 1 || sleep 30; echo slow > slow.txt"}]}"#;
    let script = Script::new().rule(structured(plan).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let test = committed(with_claude(Test::new(), &model).graph("graph.toml", &graph(0, 8)));
    let mut running = test.args(&["run", "graph.toml"]).spawn();
    running.await_that("the planned task to start", RUN_LIMIT, |root: &Path| {
        let store = crate::test::Store::once_a_run_is_in(root)?;
        store.try_run()?;
        store
            .all_attempts()
            .iter()
            .any(|a| a.task.as_str() == "plan/slow")
            .then_some(())
    });
    let (_, resumed) = running.kill_and_resume();
    assert_eq!(planning_requests(&model), 1, "the planner was asked again");
    assert_eq!(resumed.store().task("plan").attempts, 1);
    assert_eq!(
        resumed.store().task("plan/slow").status,
        TaskState::Succeeded
    );
    assert_eq!(resumed.store().task("after").status, TaskState::Succeeded);
    let expanded = resumed
        .store()
        .events_of(|k| matches!(k, EventKind::GraphExpanded { .. }));
    assert_eq!(expanded.len(), 1);
    resumed.store().assert_consistent();
}

/// A repository with the graph whose planner re-plans up to `replans` times, against `model`.
fn replanning(model: &MockModel, replans: u32) -> Test {
    let graph = graph(0, 8).replace(
        "expand = true",
        &format!("expand = true\non_failure = \"replan\"\nmax_replans = {replans}"),
    );
    committed(with_claude(Test::new(), model).graph("graph.toml", &graph))
}

/// [`replanning`], run.
fn run_replanning(model: &MockModel, replans: u32) -> crate::test::Output {
    replanning(model, replans)
        .args(&["run", "graph.toml", "--json"])
        .run()
}

#[test]
fn a_failed_subtask_sends_its_planner_back_to_plan_what_is_left() {
    let first = r#"{"task": [
  {"id": "a", "run": "echo broken >&2; exit 1"},
  {"id": "c", "needs": ["a"], "run": "echo c"}
]}"#;
    let again = r#"{"task": [
  {"id": "a", "run": "echo fixed"},
  {"id": "c", "needs": ["a"], "run": "echo c again"}
]}"#;
    let script = Script::new()
        .rule(structured(again).when_last_contains("part of it failed"))
        .rule(structured(first).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let out = run_replanning(&model, 1).status(0);
    let states: Vec<String> = out
        .store()
        .tasks()
        .iter()
        .map(|t| format!("{}:{}", t.task, t.status.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            "base:succeeded",
            "plan:succeeded",
            "after:succeeded",
            "plan/a:failed",
            "plan/c:skipped",
            "plan/a-2:succeeded",
            "plan/c-2:succeeded",
        ]
    );
    // The planner was asked again in its session, told what failed and why.
    let asked = model
        .requests()
        .into_iter()
        .find(|r| r.last_text().contains("part of it failed"))
        .expect("the planner was asked again");
    let told = asked.last_text();
    assert!(told.contains("`a` failed"), "{told}");
    assert!(told.contains("broken"), "{told}");
    assert!(told.contains("`c`"), "{told}");
    assert!(
        asked.text().contains("GOAL-PLAN"),
        "not the planner's session"
    );
    assert_eq!(
        out.json_task("plan/c")["reason"],
        "replaced: its planner planned what was left again"
    );
    // What waited for the planner waited for the new plan, not for what it replaced.
    let after = out.store().attempts("after")[0].started_at_ms;
    assert!(out.store().attempts("plan/c-2")[0].ended_at_ms.unwrap() <= after);
    // A failure planned around: the run succeeds, with warnings.
    assert_eq!(out.json()["run"]["state"], "succeeded_with_warnings");
    let replans = out
        .store()
        .events_of(|k| matches!(k, EventKind::Replanning { .. }));
    assert_eq!(replans.len(), 1);
    // The re-plan is in the planner's result, and `status` says it.
    assert_eq!(
        out.json_task("plan")["replanned_after"],
        serde_json::json!(["plan/a"])
    );
    out.store().assert_consistent();
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    out.then()
        .args(&["status", &run])
        .run()
        .stdout_contains("re-planned 1× (after a failed)");
}

#[test]
fn a_planner_out_of_replans_lets_the_failure_block_what_waits() {
    let first = r#"{"task": [{"id": "a", "run": "exit 1"}]}"#;
    let script = Script::new().rule(structured(first).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let out = run_replanning(&model, 0).status(1);
    assert_eq!(out.json_task("after")["state"], "blocked");
    assert_eq!(planning_requests(&model), 1);
}

#[test]
fn a_crash_while_a_planner_re_plans_resumes_the_re_plan() {
    let first = r#"{"task": [{"id": "a", "run": "exit 1"}]}"#;
    let again = r#"{"task": [{"id": "a", "run": "echo fixed"}]}"#;
    // The first re-plan hangs (the driver is killed meanwhile); the resumed one answers.
    let script = Script::new()
        .rule(
            structured(again)
                .when_last_contains("part of it failed")
                .slow(60_000)
                .times(1),
        )
        .rule(structured(again).when_last_contains("part of it failed"))
        .rule(structured(first).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let mut running = replanning(&model, 1).args(&["run", "graph.toml"]).spawn();
    running.await_that("the planner to re-plan", RUN_LIMIT, |root: &Path| {
        let store = crate::test::Store::once_a_run_is_in(root)?;
        store.try_run()?;
        let asked = model
            .requests()
            .iter()
            .any(|r| r.last_text().contains("part of it failed"));
        let recorded = !store
            .events_of(|k| matches!(k, EventKind::Replanning { .. }))
            .is_empty();
        (asked && recorded).then_some(())
    });
    let (_, resumed) = running.kill_and_resume();
    let states: Vec<String> = resumed
        .store()
        .tasks()
        .iter()
        .map(|t| format!("{}:{}", t.task, t.status.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            "base:succeeded",
            "plan:succeeded",
            "after:succeeded",
            "plan/a:failed",
            "plan/a-2:succeeded"
        ]
    );
    // The re-plan went on where it was: asked once more, not a new re-plan.
    let replans = resumed
        .store()
        .events_of(|k| matches!(k, EventKind::Replanning { .. }));
    assert_eq!(replans.len(), 1);
    assert_eq!(
        planning_requests(&model),
        1,
        "the first plan was asked for again"
    );
    assert_eq!(resumed.json()["run"]["state"], "succeeded_with_warnings");
    resumed.store().assert_consistent();
}

/// Finding 15: a failure planned around before a crash still makes the run succeed with
/// warnings once it is resumed (it said `succeeded`: the warning lived only in the dead
/// driver's memory).
#[test]
fn a_run_resumed_after_a_re_plan_succeeds_with_warnings() {
    let first = r#"{"task": [{"id": "a", "run": "exit 1"}]}"#;
    // The re-planned task outlives the first driver.
    let again = r#"{"task": [{"id": "a", "run": "if [ \"$BATON_ATTEMPT\" = 1 ]; then sleep 60; fi; echo fixed"}]}"#;
    let script = Script::new()
        .rule(structured(again).when_last_contains("part of it failed"))
        .rule(structured(first).when_contains("GOAL-PLAN"));
    let model = MockModel::start(script).unwrap();
    let mut running = replanning(&model, 1).args(&["run", "graph.toml"]).spawn();
    running.await_that("the re-planned task to run", RUN_LIMIT, |root: &Path| {
        let store = crate::test::Store::once_a_run_is_in(root)?;
        store.try_run()?;
        store
            .all_attempts()
            .iter()
            .any(|a| a.task.as_str() == "plan/a-2")
            .then_some(())
    });
    let (_, resumed) = running.kill_and_resume();
    assert_eq!(
        resumed.store().task("plan/a-2").status,
        TaskState::Succeeded
    );
    assert_eq!(resumed.json()["run"]["state"], "succeeded_with_warnings");
    resumed.store().assert_consistent();
}

#[test]
fn a_codex_planner_answers_to_a_strict_schema() {
    // Codex holds its answer to a strict schema: every field there, null where unused.
    let plan = r#"{"task": [
  {"id": "one", "prompt": null, "run": "echo one", "needs": null, "scope": null, "verify": null, "estimate": null},
  {"id": "two", "prompt": null, "run": "echo two", "needs": ["one"], "scope": null, "verify": null, "estimate": {"minutes": 1, "usd": null}}
]}"#;
    let script = Script::new().rule(Rule::text(plan).when_contains("GOAL-CODEX"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "plan"
engine = "codex"
model = "gpt-5"
timeout = "2m"
prompt = "GOAL-CODEX: two steps"
expand = true
"#;
    let out = committed(crate::agents::with_codex(Test::new(), &model).graph("graph.toml", graph))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("plan/two")["output"], "two");
    assert_eq!(out.json_task("plan/one")["state"], "succeeded");
    // The schema went to the model with codex's request.
    let asked = model
        .requests()
        .into_iter()
        .find(|r| r.text().contains("GOAL-CODEX"))
        .unwrap();
    let body = asked.body.to_string();
    assert!(body.contains("\"additionalProperties\":false"), "{body}");
    assert!(body.contains("\"estimate\""), "{body}");
}
