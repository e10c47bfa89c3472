//! What agents spend, held to the run's and each task's budget: a spent budget stops what
//! spent it and starts nothing more, a soft one pauses for a person, a raised one goes on.

use super::*;

#[test]
fn a_spent_run_budget_stops_the_agent_that_spent_it_and_starts_nothing_more() {
    // Its first message, a tool call, spends $3 of $1: its work is stopped there.
    let model = expensive_work_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 1.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
prompt = "two"

[[task]]
id = "third"
prompt = "three"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let first = out.json_task("first");
    assert_eq!(first["state"], "failed", "{first}");
    assert_eq!(first["outcome"]["kind"], "over-budget", "{first}");
    assert!(
        first["outcome"]["limit"]
            .as_str()
            .unwrap()
            .starts_with("run budget $1.00 reached"),
        "{first}"
    );
    for task in ["second", "third"] {
        let t = out.json_task(task);
        assert_eq!(t["state"], "skipped", "{t}");
        assert_eq!(t["reason"], "not started: run budget spent", "{t}");
        assert_eq!(t["attempts"], 0, "{t}");
    }
    assert_eq!(out.json()["run"]["state"], "failed");
    // Only the first task ever asked the model.
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn a_task_over_its_own_budget_fails_alone() {
    let model = expensive_work_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[[task]]
id = "capped"
prompt = "one"
budget = { usd = 0.5 }
retries = 2

[[task]]
id = "free"
prompt = "two"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let capped = out.json_task("capped");
    assert_eq!(capped["state"], "failed", "{capped}");
    // Over budget is the task's own failure: not retried.
    assert_eq!(capped["attempts"], 1, "{capped}");
    assert!(
        capped["outcome"]["limit"]
            .as_str()
            .unwrap()
            .starts_with("task budget $0.50 reached"),
        "{capped}"
    );
    assert_eq!(out.json_task("free")["state"], "succeeded");
}

#[test]
fn a_retried_run_counts_what_it_spent_before_against_its_budget() {
    let model = expensive_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 5.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    // About $3 spent: another agent at the average would pass $5, so it does not start.
    assert_eq!(out.json_task("first")["state"], "succeeded");
    assert_eq!(out.json_task("second")["state"], "skipped");
    assert_eq!(model.requests().len(), 1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    // Retrying the skipped task in the same run: the $3 spent before still count.
    let again = out
        .then()
        .args(&["retry", &run, "second", "--json"])
        .run()
        .status(1);
    assert_eq!(again.json_task("second")["state"], "skipped");
    assert_eq!(
        again.json_task("second")["reason"],
        "not started: run budget spent"
    );
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn a_soft_budget_pauses_the_run_until_a_person_approves() {
    let model = expensive_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 100.0, soft_usd = 2.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"

[[task]]
id = "third"
needs = ["second"]
prompt = "three"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(4);
    let json = out.json();
    assert_eq!(json["run"]["state"], "waiting", "{json}");
    let states: Vec<_> = ["first", "second", "third"]
        .iter()
        .map(|t| out.json_task(t)["state"].as_str().unwrap().to_owned())
        .collect();
    // About $3 spent by the first: past the soft $2, nothing else started, nothing lost.
    assert_eq!(states[0], "succeeded");
    assert!(states[1] == "ready" || states[1] == "pending", "{states:?}");
    assert_eq!(states[2], "pending");
    assert_eq!(model.requests().len(), 1);
    let run = json["run"]["id"].as_str().unwrap().to_owned();

    // Resuming without a decision about the money is refused, saying what to do.
    let refused = out
        .then()
        .args(&["resume", &run])
        .run()
        .status(2)
        .stderr_contains("is waiting at its soft budget ($3.")
        .stderr_contains(&format!("baton approve {run}"));

    // Approved: the rest runs, up to the hard budget.
    let approved = refused
        .then()
        .args(&["approve", &run, "--json"])
        .run()
        .status(0);
    assert_eq!(approved.json()["run"]["state"], "succeeded");
    assert_eq!(approved.json_task("third")["state"], "succeeded");
    assert_eq!(model.requests().len(), 3);
    let changed = approved
        .store()
        .events_of(|k| matches!(k, baton_model::EventKind::BudgetChanged { .. }));
    assert_eq!(
        changed,
        [baton_model::EventKind::BudgetChanged {
            usd: Some(100.0),
            tokens: None,
            soft_usd: None,
            soft_tokens: None
        }]
    );
    approved.store().assert_consistent();
}

#[test]
fn raising_the_budget_lets_a_spent_run_go_on() {
    let model = expensive_model();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 4.0, soft_usd = 2.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(4);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let raised = out
        .then()
        .args(&["resume", &run, "--raise-budget", "10", "--json"])
        .run()
        .status(0);
    assert_eq!(raised.json_task("second")["state"], "succeeded");
    assert_eq!(model.requests().len(), 2);
}

#[test]
fn a_codex_answer_that_spent_the_run_budget_is_kept_and_nothing_more_starts() {
    // Codex tells what it spent only with its answer: by then the money is spent, and
    // throwing the answer away would buy nothing.
    let model = MockModel::start(
        Script::new().rule(Rule::reply(Reply::text("done").costing(1_000_000, 10))),
    )
    .unwrap();
    let graph = r#"
[defaults]
engine = "codex"
model = "gpt-5"

[run]
concurrency = 1
budget = { usd = 1.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
prompt = "two"
"#;
    let out = with_codex(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    // $1.25 priced from the table for gpt-5's million input tokens: past the run's $1.
    let first = out.json_task("first");
    assert_eq!(first["state"], "succeeded", "{first}");
    assert_eq!(first["output"], "done", "{first}");
    assert!(
        first["agent"]["cost_usd"].as_f64().unwrap() > 1.0,
        "{first}"
    );
    let second = out.json_task("second");
    assert_eq!(second["state"], "skipped", "{second}");
    assert_eq!(
        second["reason"], "not started: run budget spent",
        "{second}"
    );
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn a_run_its_budget_stopped_goes_on_with_more_budget_and_says_what_did_not_fit() {
    let model = expensive_model();
    // Each answer costs about $3: after the first, the next agent's reserve ($3, the average)
    // does not fit in what is left of $4, though only $3 is spent.
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 1
budget = { usd = 4.0 }

[[task]]
id = "first"
prompt = "one"

[[task]]
id = "second"
needs = ["first"]
prompt = "two"

[[task]]
id = "third"
needs = ["second"]
prompt = "three"
"#;
    let out = with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(out.json_task("second")["state"], "skipped");
    let stop = out.store().run().stop.unwrap();
    assert_eq!(stop.cause, baton_model::StopCause::BudgetSpent);
    assert_eq!(
        stop.reason,
        "budget spent: `second` would reserve $3.00 (the average of the finished agents) and \
         does not fit: $3.00 spent, of $4.00"
    );
    // Without more budget it says what to do.
    let refused = out
        .then()
        .args(&["resume", &run])
        .run()
        .status(2)
        .stderr_contains("--raise-budget");
    let raised = refused
        .then()
        .args(&["resume", &run, "--raise-budget", "7", "--json"])
        .run()
        .status(1);
    assert_eq!(raised.json_task("second")["state"], "succeeded");
    assert_eq!(
        raised.json_task("third")["state"],
        "skipped",
        "$7 covers one more"
    );
    // `retry` takes more budget too.
    let retried = raised
        .then()
        .args(&["retry", &run, "--raise-budget", "20", "--json"])
        .run()
        .status(0);
    assert_eq!(retried.json_task("third")["state"], "succeeded");
    assert_eq!(model.requests().len(), 3);
}
