//! A planner's answer validated and spliced into the graph (`Graph::expansion` / `extended`).

use std::path::Path;

use baton_graph::{Action, Graph, load_str, plan_text};

fn graph(toml: &str) -> Graph {
    load_str(Path::new("g.toml"), toml).unwrap_or_else(|e| panic!("{e}"))
}

const PLANNED: &str = r#"
[defaults]
timeout = "5m"
retries = 1

[[task]]
id = "prep"
run = "true"

[[task]]
id = "plan"
needs = ["prep"]
prompt = "split the work"
expand = true

[[task]]
id = "ship"
needs = ["plan"]
run = "true"
"#;

fn ids(graph: &Graph, list: &[u32]) -> Vec<String> {
    list.iter().map(|&i| graph.task(i).id.to_string()).collect()
}

#[test]
fn a_valid_answer_grows_the_graph_under_its_planner() {
    let g = graph(PLANNED);
    let plan = g.index_of("plan").unwrap();
    let answer = r#"{"task": [
        {"id": "api", "prompt": "build the api", "scope": ["src/api/**"]},
        {"id": "db", "prompt": "build the db", "scope": ["src/db/**"]},
        {"id": "glue", "needs": ["api", "db", "prep"], "run": "make glue"}
    ]}"#;
    let tasks = g.expansion(plan, answer).unwrap_or_else(|e| panic!("{e}"));
    let grown = g.extended(plan, tasks);
    assert_eq!(grown.len(), 6);
    let api = grown.index_of("plan/api").unwrap();
    let glue = grown.index_of("plan/glue").unwrap();
    // Roots start after the planner; a task that needs a sibling does not need it again.
    assert_eq!(ids(&grown, &grown.task(api).needs), ["plan"]);
    assert_eq!(
        ids(&grown, &grown.task(glue).needs),
        ["plan/api", "plan/db", "prep"]
    );
    // What waited for the planner waits for everything it planned.
    let ship = grown.index_of("ship").unwrap();
    assert_eq!(
        ids(&grown, &grown.task(ship).needs),
        ["plan", "plan/api", "plan/db", "plan/glue"]
    );
    // The run's defaults apply; the engine is the planner's.
    let t = grown.task(api);
    assert_eq!(t.timeout, Some(std::time::Duration::from_secs(300)));
    assert_eq!(t.retries, 1);
    assert!(matches!(&t.action, Action::Agent { engine, .. } if engine == "claude"));
    assert_eq!((t.parent, t.depth), (Some(plan), 1));
    assert_eq!(
        ids(&grown, &grown.planned_by(plan)),
        ["plan/api", "plan/db", "plan/glue"]
    );
    // The old graph is untouched, and the grown one survives its stored form.
    assert_eq!(g.len(), 3);
    let back = Graph::from_stored_json(&grown.to_stored_json()).unwrap();
    assert_eq!(back, grown);
    assert_eq!(back.conflicts(api), grown.conflicts(api));
}

#[test]
fn every_problem_of_an_answer_is_named_at_once() {
    let g = graph(PLANNED);
    let plan = g.index_of("plan").unwrap();
    let answer = r#"{
  "run": {"concurrency": 9},
  "task": [
    {"id": "a", "needs": ["b"], "prompt": "x"},
    {"id": "b", "needs": ["a"], "prompt": "y", "colour": "red"},
    {"id": "c", "needs": ["ship"], "run": "true"},
    {"id": "d/e", "needs": ["nope"], "run": "true"},
    {"id": "f", "prompt": "z", "pass_env": ["*"], "confine": "off", "workspace": "shared"}
  ]
}"#;
    let err = g.expansion(plan, answer).unwrap_err().to_string();
    for expected in [
        "plan of plan:2:3: error: a plan holds tasks only, not `run`",
        "unknown field `colour`",
        "dependency cycle: plan/a -> plan/b -> plan/a",
        "`ship` waits for `plan`, whose plan this is",
        "task id `d/e` contains `/`",
        "unknown dependency `nope`",
        "a plan cannot set `pass_env`",
        "a plan cannot set `confine`",
        "a plan cannot set `workspace`",
    ] {
        assert!(err.contains(expected), "{expected:?} missing from:\n{err}");
    }
}

#[test]
fn limits_hold_subtasks_depth_and_the_run_size() {
    let g = graph(
        r#"
[run]
max_tasks = 5

[[task]]
id = "plan"
prompt = "split"
expand = true
max_subtasks = 3
max_depth = 2
"#,
    );
    let plan = g.index_of("plan").unwrap();
    let four = r#"{"task": [{"id":"a","run":"true"},{"id":"b","run":"true"},{"id":"c","run":"true"},{"id":"d","run":"true"}]}"#;
    let err = g.expansion(plan, four).unwrap_err().to_string();
    assert!(
        err.contains("the plan has 4 tasks; `plan` may add at most 3"),
        "{err}"
    );

    // A subtask may plan once more (depth 2), its own subtasks may not.
    let nested = r#"{"task": [{"id":"sub","prompt":"split more","expand":true}]}"#;
    let grown = g.extended(plan, g.expansion(plan, nested).unwrap());
    let sub = grown.index_of("plan/sub").unwrap();
    assert_eq!(grown.task(sub).plan.as_deref().unwrap().max_depth, 2);
    let deeper = r#"{"task": [{"id":"x","prompt":"go","expand":true}]}"#;
    let err = grown.expansion(sub, deeper).unwrap_err().to_string();
    assert!(
        err.contains("planning may go 2 levels deep; this task would plan at level 3"),
        "{err}"
    );
    let grown = grown.extended(
        sub,
        grown
            .expansion(sub, r#"{"task":[{"id":"x","run":"true"}]}"#)
            .unwrap(),
    );
    assert_eq!(grown.task(grown.index_of("plan/sub/x").unwrap()).depth, 2);
    assert_eq!(
        ids(&grown, &grown.planned_by(plan)),
        ["plan/sub", "plan/sub/x"]
    );

    // 3 tasks now; three more would pass the run's 5.
    let three =
        r#"{"task": [{"id":"p","run":"true"},{"id":"q","run":"true"},{"id":"r","run":"true"}]}"#;
    let err = grown.expansion(sub, three).unwrap_err().to_string();
    assert!(
        err.contains("the run would hold 6 tasks; it may hold at most 5"),
        "{err}"
    );
}

#[test]
fn only_agents_plan_and_the_limits_are_for_planners() {
    let err = load_str(
        Path::new("g.toml"),
        r#"
[[task]]
id = "a"
run = "true"
expand = true

[[task]]
id = "b"
prompt = "x"
max_subtasks = 3

[[task]]
id = "c/d"
run = "true"
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("task `a` is not an agent task; only an agent can plan"),
        "{err}"
    );
    assert!(err.contains("`max_subtasks` is for planners"), "{err}");
    assert!(err.contains("task id `c/d` contains `/`"), "{err}");
}

#[test]
fn the_plan_is_the_whole_answer_or_its_one_json_block() {
    assert_eq!(plan_text("  {\"task\": []}\n").unwrap(), "{\"task\": []}");
    let fenced = "Here is the plan:\n```json\n{\"task\": [1]}\n```\nDone.";
    assert_eq!(plan_text(fenced).unwrap(), "{\"task\": [1]}");
    let two = "```json\n{}\n```\n```\n{}\n```";
    assert!(plan_text(two).unwrap_err().contains("2 JSON blocks"));
    assert!(
        plan_text("no plan here")
            .unwrap_err()
            .contains("holds no plan")
    );
}

/// A planner's tasks are a model's (`planned`), never in the checkout even when the run's
/// defaults put shell tasks there; so are a nested planner's, and a re-plan's. The file's own
/// tasks are not.
#[test]
fn what_a_planner_adds_is_marked_planned_and_kept_out_of_the_checkout() {
    let g = graph(
        &PLANNED
            .replace("[defaults]\n", "[defaults]\nworkspace = \"shared\"\n")
            .replace("expand = true\n", "expand = true\nmax_depth = 2\n"),
    );
    assert!(g.tasks().iter().all(|t| !t.planned));
    let plan = g.index_of("plan").unwrap();
    let answer = r#"{"task": [
        {"id": "cmd", "run": "make"},
        {"id": "sub", "prompt": "plan more", "expand": true}
    ]}"#;
    let grown = g.extended(
        plan,
        g.expansion(plan, answer).unwrap_or_else(|e| panic!("{e}")),
    );
    let cmd = grown.task(grown.index_of("plan/cmd").unwrap());
    assert!(cmd.planned);
    assert_eq!(cmd.workspace, baton_graph::Workspace::Worktree);
    // The nested planner's answer, and a re-plan of the first.
    let sub = grown.index_of("plan/sub").unwrap();
    let nested = grown
        .expansion(sub, r#"{"task": [{"id": "deep", "run": "make deep"}]}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        nested
            .iter()
            .all(|t| t.planned && t.workspace == baton_graph::Workspace::Worktree)
    );
    let again = grown
        .replacement(
            plan,
            r#"{"task": [{"id": "cmd", "run": "make again"}]}"#,
            &[grown.index_of("plan/cmd").unwrap()],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(again.iter().all(|t| t.planned));
    assert!(!grown.task(grown.index_of("ship").unwrap()).planned);
}
