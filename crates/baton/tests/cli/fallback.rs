//! Engines that stand in for each other (`fallback`): an attempt that fails for the
//! machinery's reasons — a CLI that is not installed, an API that stays overloaded — goes to
//! the next engine, with the same prompt, worktree and handoff; a failure of the task's own
//! does not switch engines unless `fallback_on = "any"`.

use baton_mock_model::{Api, MockModel, Reply, Rule, Script};
use baton_model::{Outcome, TaskState};

use crate::agents::{infrastructure_failure, with_claude, with_codex};
use crate::test::{Test, fixture};

/// Two `command` engines: `flaky` fails as its own (exit 3), `steady` answers.
fn command_engines() -> String {
    let engine = |name: &str, extra: &str| {
        format!(
            "[engines.{name}]\nkind = \"command\"\ncommand = \"{}\"\nargs = [\"--model\", \"{{{{ model }}}}\", \"--prompt-file\", \"{{{{ prompt_file }}}}\"{extra}]\n",
            fixture("echo-agent.sh")
        )
    };
    format!(
        "{}{}",
        engine("flaky", ", \"--fail\""),
        engine("steady", "")
    )
}

#[test]
fn a_task_s_own_failure_switches_engines_only_when_asked() {
    let graph = |fallback_on: &str| {
        format!(
            r#"
[[task]]
id = "work"
engine = "flaky"
fallback = [{{ engine = "steady", model = "big" }}]
{fallback_on}
prompt = "do it"
"#
        )
    };
    // By default, the agent's own failure is the task's: it fails on its own engine.
    let out = Test::new()
        .file("baton.toml", command_engines())
        .graph("graph.toml", &graph(""))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let attempts = out.store().attempts("work");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].agent.as_ref().unwrap().engine, "flaky");

    // `fallback_on = "any"`: the next engine gets the next attempt, with its own model, and a
    // task with no `retries` of its own still gets it.
    let out = Test::new()
        .file("baton.toml", command_engines())
        .graph("graph.toml", &graph("fallback_on = \"any\""))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let attempts = out.store().attempts("work");
    let engines: Vec<_> = attempts
        .iter()
        .map(|a| a.agent.as_ref().unwrap().engine.as_str())
        .collect();
    assert_eq!(engines, ["flaky", "steady"]);
    assert_eq!(out.json_task("work")["output"], "big says: do it");
    let engines = &out.json_task("work")["agent"]["engines"];
    assert_eq!(engines[0]["engine"], "flaky", "{engines}");
    assert_eq!(engines[1]["engine"], "steady", "{engines}");
    assert_eq!(engines[1]["model"], "big", "{engines}");
    // Shown where people look.
    out.then()
        .args(&["status"])
        .run()
        .status(0)
        .stdout_contains("fell back from flaky to steady/big");
}

/// Finding 19: a run resumed after a task fell back goes on with the engine the task had
/// reached; it started the chain again from the engine that had failed.
#[test]
fn a_resumed_task_goes_on_with_the_engine_it_fell_back_to() {
    let graph = r#"
[[task]]
id = "work"
engine = "flaky"
fallback = [{ engine = "steady", model = "big" }]
fallback_on = "any"
prompt = "do it"
"#;
    // `steady` hangs on attempt 2 (the first on it), the driver is killed meanwhile.
    let engines = command_engines();
    let (head, _) = engines.trim_end().rsplit_once(']').expect("steady's args");
    let engines = format!("{head}, \"--hang-on-attempt\", \"2\"]\n");
    let mut running = Test::new()
        .file("baton.toml", engines)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .spawn();
    running.await_that("the fallback to run", crate::test::RUN_LIMIT, |root| {
        let store = crate::test::Store::once_a_run_is_in(root)?;
        store.try_run()?;
        (store.attempts("work").len() == 2).then_some(())
    });
    let (_, resumed) = running.kill_and_resume();
    let attempts = resumed.store().attempts("work");
    let engines: Vec<_> = attempts
        .iter()
        .map(|a| a.agent.as_ref().map_or("?", |agent| agent.engine.as_str()))
        .collect();
    assert_eq!(engines, ["flaky", "?", "steady"], "{attempts:?}");
    assert_eq!(attempts[1].outcome, Some(Outcome::Interrupted));
    assert_eq!(resumed.store().task("work").status, TaskState::Succeeded);
}

#[test]
fn an_engine_whose_cli_is_missing_falls_back_to_one_that_works() {
    let script = Script::new().rule(Rule::text("Codex did it"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[defaults]
fallback = [{ engine = "codex", model = "gpt-5" }]

[[task]]
id = "work"
engine = "claude"
prompt = "do the work"

[[task]]
id = "echo"
needs = ["work"]
run = "printf '%s' {{ needs.work.output }}"
"#;
    let test = with_codex(Test::new(), &model);
    let codex_config = std::fs::read_to_string(test.path().join("baton.toml")).unwrap();
    let out = test
        .file(
            "baton.toml",
            format!("{codex_config}[engines.claude]\ncommand = \"/nonexistent/claude\"\n"),
        )
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0)
        // The run is not refused: it says what stands in.
        .stderr_contains("`/nonexistent/claude` is not installed")
        .stderr_contains("its tasks fall back to `codex`");
    let attempts = out.store().attempts("work");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let first = attempts[0].outcome.clone().unwrap();
    assert!(
        matches!(&first, Outcome::SpawnFailed { error } if error.contains("/nonexistent/claude")),
        "{first:?}"
    );
    assert_eq!(attempts[0].agent.as_ref().unwrap().engine, "claude");
    let codex = attempts[1].agent.as_ref().unwrap();
    assert_eq!(codex.engine, "codex");
    assert_eq!(codex.model.as_deref(), Some("gpt-5"));
    assert_eq!(attempts[1].outcome, Some(Outcome::Exited { code: 0 }));
    // The same handoff reaches the dependent.
    assert_eq!(out.json_task("echo")["output"], "Codex did it");
    // The prompt reached codex as it was.
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.text().contains("do the work"))
    );
}

#[test]
fn an_engine_that_stays_overloaded_hands_over_and_the_budget_counts_both() {
    // Claude Code's API is overloaded past its own retries; Codex's answers.
    let script = Script::new()
        .rule(Rule::reply(Reply::overloaded()).when_api(Api::AnthropicMessages))
        .rule(Rule::reply(Reply::Text {
            text: "Codex finished it".into(),
            input_tokens: 1_000,
            output_tokens: 100,
        }));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[run]
budget = { usd = 5 }

[[task]]
id = "work"
engine = "claude"
fallback = [{ engine = "codex", model = "gpt-5" }]
prompt = "do the work"
"#;
    let test = with_claude(Test::new(), &model).env("CLAUDE_CODE_MAX_RETRIES", "1");
    let claude_config = std::fs::read_to_string(test.path().join("baton.toml")).unwrap();
    let test = with_codex(test, &model);
    let codex_config = std::fs::read_to_string(test.path().join("baton.toml")).unwrap();
    let out = test
        .file("baton.toml", format!("{claude_config}{codex_config}"))
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let attempts = out.store().attempts("work");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let (reason, _) = infrastructure_failure(&attempts[0]);
    assert_eq!(reason, "api_error_529");
    assert_eq!(attempts[0].agent.as_ref().unwrap().engine, "claude");
    assert_eq!(attempts[1].agent.as_ref().unwrap().engine, "codex");
    assert_eq!(out.json_task("work")["output"], "Codex finished it");
    assert_eq!(out.store().task("work").status, TaskState::Succeeded);
    // Every engine's attempts are counted: both appear in the spend, by engine.
    let json = out.json();
    let engines: Vec<_> = json["spend"]["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["engine"].as_str().unwrap().to_owned())
        .collect();
    assert!(engines.contains(&"codex".to_owned()), "{json}");
    assert_eq!(json["spend"]["attempts"], 2, "{json}");
    // Codex did not get Claude Code's session to continue: a session is its engine's own.
    let asked_codex = model
        .requests()
        .into_iter()
        .filter(|r| r.api == Api::OpenAiResponses)
        .count();
    assert!(asked_codex >= 1);
}
