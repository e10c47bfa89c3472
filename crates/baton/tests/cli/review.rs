//! Acceptance review with the real `claude` CLI against the scripted model: a reviewer that
//! rejects once and verifies after the fix, and one that leaves the work to a person.

use baton_mock_model::{MockModel, Rule, Script};
use baton_model::{EventKind, Outcome, ReviewVerdict, TaskState};

use crate::agents::with_claude;
use crate::planning::committed;
use crate::test::Test;

const GRAPH: &str = r#"
[[task]]
id = "answer"
engine = "claude"
timeout = "2m"
prompt = "TASK-ACC: write the answer to answer.txt"
allowed_tools = ["Bash"]
acceptance = ["answer.txt holds 42", "nothing else changes"]
fix_attempts = 1
"#;

/// The worker writes 41, then 42 when its work comes back; `reviews` answer the reviewer in
/// turn (the last one from then on).
fn script(reviews: &[&str]) -> Script {
    let mut script = Script::new();
    for (n, review) in reviews.iter().enumerate() {
        // The reviewer is given a schema: the model answers through Claude Code's tool for it.
        let rule = crate::planning::structured(review).when_contains("ACCEPTANCE CRITERIA");
        script = script.rule(if n + 1 < reviews.len() {
            rule.times(1)
        } else {
            rule
        });
    }
    let bash = |value: &str| {
        Rule::tool_use(
            "Bash",
            serde_json::json!({"command": format!("echo {value} > answer.txt"), "description": "write"}),
        )
    };
    script
        .rule(
            Rule::text("fixed")
                .when_contains("fix round 1")
                .when_last_contains("toolu_mock"),
        )
        .rule(bash("42").when_last_contains("fix round 1"))
        .rule(
            Rule::text("done")
                .when_contains("TASK-ACC")
                .when_last_contains("toolu_mock"),
        )
        .rule(bash("41").when_contains("TASK-ACC"))
}

#[test]
fn a_rejected_piece_of_work_goes_back_with_the_reasons_and_is_verified_after_the_fix() {
    let model = MockModel::start(script(&[
        r#"{"verdict": "rejected", "reasons": ["answer.txt holds 41, not 42"]}"#,
        r#"{"verdict": "verified", "reasons": ["answer.txt holds 42"]}"#,
    ]))
    .unwrap();
    let out = committed(with_claude(Test::new(), &model).graph("graph.toml", GRAPH))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        crate::workspaces::git(
            out.path(),
            &["show", &format!("baton/{run}/result:answer.txt")]
        ),
        "42"
    );
    // The reviewer saw the criteria, the task and its diff; the worker, the reasons.
    let requests = model.requests();
    let reviewer = requests
        .iter()
        .find(|r| r.text().contains("ACCEPTANCE CRITERIA"))
        .unwrap()
        .text();
    let schema = requests
        .iter()
        .find(|r| r.text().contains("ACCEPTANCE CRITERIA"))
        .and_then(|r| {
            r.body["tools"]
                .as_array()?
                .iter()
                .find(|t| t["name"] == "StructuredOutput")
                .map(|t| t["input_schema"]["properties"]["verdict"]["enum"].clone())
        })
        .expect("the reviewer had a schema");
    assert_eq!(schema[2], "rejected", "{schema}");
    for seen in ["1. answer.txt holds 42", "THE TASK WAS:\nTASK-ACC", "+41"] {
        assert!(reviewer.contains(seen), "{seen:?} not in: {reviewer}");
    }
    let fix = requests
        .iter()
        .find(|r| r.last_text().contains("fix round 1"))
        .unwrap()
        .text();
    assert!(fix.contains("answer.txt holds 41, not 42"), "{fix}");
    assert!(fix.contains("TASK-ACC"), "not the worker's session: {fix}");
    // Both verdicts are recorded; the last is the task's.
    let reviews: Vec<ReviewVerdict> = out
        .store()
        .events_of(|k| matches!(k, EventKind::Reviewed { .. }))
        .into_iter()
        .map(|k| match k {
            EventKind::Reviewed { review, .. } => review.verdict,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(reviews, [ReviewVerdict::Rejected, ReviewVerdict::Verified]);
    // `baton logs` shows the reviewer's two rounds, in the order they ran, each titled.
    let logs = crate::test::baton_in(
        out.path(),
        &["logs", "latest", "answer", "--phase", "review"],
    );
    assert_eq!(logs.code, Some(0), "{}", logs.stderr);
    let titles: Vec<&str> = logs
        .stdout
        .lines()
        .filter(|l| l.starts_with("── "))
        .collect();
    assert_eq!(
        titles,
        [
            "── review 1 · answer.1.review-1.log ──",
            "── review 2 · answer.1.review-2.log ──"
        ],
        "{}",
        logs.stdout
    );
    let task = out.json_task("answer");
    assert_eq!(task["review"]["verdict"], "verified", "{task}");
    assert_eq!(task["attempts"], 1);
    let status = out
        .then()
        .args(&["status"])
        .run()
        .status(0)
        .stdout_contains("reviewed: verified (answer.txt holds 42)");
    // The report's card shows both verdicts with their reasons.
    let report = status
        .then()
        .args(&["report", &run, "-o", "-"])
        .run()
        .status(0);
    for shown in [
        "<b>rejected</b>",
        "<li>answer.txt holds 41, not 42</li>",
        "<b>verified</b>",
        "<li>answer.txt holds 42</li>",
    ] {
        assert!(report.stdout.contains(shown), "{shown} not in the report");
    }
}

#[test]
fn a_reviewer_that_cannot_tell_leaves_the_task_to_a_person() {
    let model = MockModel::start(script(&[
        r#"{"verdict": "needs_human", "reasons": ["the criteria contradict each other"]}"#,
    ]))
    .unwrap();
    let out = committed(with_claude(Test::new(), &model).graph("graph.toml", GRAPH))
        .args(&["run", "graph.toml", "--json"])
        .run();
    let task = out.json_task("answer");
    assert_eq!(task["state"], "needs_human", "{task}");
    assert_eq!(
        task["review"]["reasons"][0],
        "the criteria contradict each other"
    );
    assert_eq!(
        out.store().attempts("answer")[0].outcome,
        Some(Outcome::Reviewed {
            verdict: ReviewVerdict::NeedsHuman
        })
    );
    assert_eq!(out.store().task("answer").status, TaskState::NeedsHuman);
    assert_eq!(out.json()["run"]["state"], "needs_human");
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    // What to type: look, then decide, then go on.
    let next: Vec<String> = out.json()["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        next,
        [
            format!("baton diff {run} answer"),
            format!("baton approve {run} answer"),
            format!("baton reject {run} answer --reason '…'"),
            format!("baton resume {run}"),
        ]
    );
    // A person accepts the work: the resume takes it as it is, without running it again.
    let asked = model.requests().len();
    let resumed = out
        .then()
        .args(&["approve", &run, "answer"])
        .run()
        .status(0)
        .stdout_contains("approved `answer`")
        .then()
        .args(&["resume", &run, "--json"])
        .run()
        .status(0);
    assert_eq!(resumed.json_task("answer")["state"], "succeeded");
    assert_eq!(resumed.json()["run"]["state"], "succeeded");
    assert_eq!(model.requests().len(), asked, "the task ran again");
    assert_eq!(
        crate::workspaces::git(
            resumed.path(),
            &["show", &format!("baton/{run}/result:answer.txt")]
        ),
        "41"
    );
    resumed.store().assert_consistent();
}

#[test]
fn a_person_can_reject_work_a_reviewer_left_to_them() {
    let model =
        MockModel::start(script(&[r#"{"verdict": "inconclusive", "reasons": []}"#])).unwrap();
    let out = committed(with_claude(Test::new(), &model).graph("graph.toml", GRAPH))
        .args(&["run", "graph.toml", "--json"])
        .run();
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let resumed = out
        .then()
        .args(&["reject", &run, "answer", "--reason", "wrong answer"])
        .run()
        .status(0)
        .then()
        .args(&["resume", &run, "--json"])
        .run()
        .status(1);
    let task = resumed.json_task("answer");
    assert_eq!(task["state"], "failed", "{task}");
    assert_eq!(task["reason"], "a person rejected its work: wrong answer");
}

#[test]
fn a_reviewer_needs_criteria_and_is_an_agent() {
    let out = Test::new()
        .graph(
            "graph.toml",
            r#"
[[task]]
id = "agent"
prompt = "x"
reviewer = { model = "m" }

[[task]]
id = "odd"
run = "true"
acceptance = ["it works"]
reviewer = { engine = "shell" }
"#,
        )
        .args(&["plan", "graph.toml"])
        .run()
        .status(2);
    assert!(
        out.stderr
            .contains("`reviewer` judges `acceptance` criteria"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("a reviewer is an agent, not `shell`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_shell_task_s_work_is_reviewed_by_the_run_s_agent() {
    let model = MockModel::start(
        Script::new().rule(
            crate::planning::structured(
                r#"{"verdict": "verified_with_warnings", "reasons": ["no tests"]}"#,
            )
            .when_contains("ACCEPTANCE CRITERIA"),
        ),
    )
    .unwrap();
    let graph = r#"
[[task]]
id = "build"
run = "echo built > out.txt"
workspace = "worktree"
acceptance = ["out.txt says built"]
reviewer = { engine = "claude", model = "claude-sonnet-4-5" }
"#;
    let out = committed(with_claude(Test::new(), &model).graph("graph.toml", graph))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json()["run"]["state"], "succeeded_with_warnings");
    let task = out.json_task("build");
    assert_eq!(
        task["review"]["verdict"], "verified_with_warnings",
        "{task}"
    );
    assert_eq!(task["state"], "succeeded_with_warnings", "{task}");
    assert_eq!(out.json()["totals"]["succeeded"], 1);
    out.then()
        .args(&["status"])
        .run()
        .status(0)
        .stdout_contains("build  succeeded_with_warnings         1");
    // The reviewer ran on the model asked for, saw the command and its diff, and its spend
    // is the task's.
    let asked = model
        .requests()
        .into_iter()
        .find(|r| r.text().contains("ACCEPTANCE CRITERIA"))
        .unwrap();
    assert_eq!(asked.body["model"], "claude-sonnet-4-5");
    let text = asked.text();
    assert!(text.contains("to run `echo built > out.txt`"), "{text}");
    assert!(text.contains("+built"), "{text}");
    assert!(task["agent"]["cost_usd"].as_f64().unwrap() > 0.0, "{task}");
}
