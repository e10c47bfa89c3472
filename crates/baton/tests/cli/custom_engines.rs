//! Engines defined in `baton.toml`: new names for known CLIs with other defaults, and any other
//! program (`kind = "command"`), without writing Rust.

use baton_mock_model::{MockModel, Rule, Script};

use crate::agents::agent_bin;
use crate::test::{Test, fixture};

fn local_engine(extra_args: &str) -> String {
    format!(
        "[engines.local]\nkind = \"command\"\ncommand = \"{}\"\nargs = [\"--model\", \"{{{{ model }}}}\", \"--prompt-file\", \"{{{{ prompt_file }}}}\"{extra_args}]\n",
        fixture("echo-agent.sh")
    )
}

#[test]
fn a_command_engine_gets_its_prompt_in_a_file_and_answers_on_stdout() {
    let graph = r#"
[[task]]
id = "name"
run = "echo world"

[[task]]
id = "greet"
engine = "local"
model = "tiny"
needs = ["name"]
prompt = "-- say hi to {{ needs.name.output }}"

[[task]]
id = "show"
needs = ["greet"]
run = "echo {{ needs.greet.output }}"
"#;
    let out = Test::new()
        .file("baton.toml", local_engine(""))
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(
        out.json_task("greet")["output"],
        "tiny says: -- say hi to world"
    );
    assert_eq!(
        out.json_task("show")["output"],
        "tiny says: -- say hi to world"
    );
    assert_eq!(out.json_task("greet")["agent"]["engine"], "local");
    // The prompt file is gone with the task; what it held is in the record.
    let scratch = out.scratch(out.json()["run"]["id"].as_str().unwrap());
    let leftovers: Vec<_> = walk(&scratch)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("prompt"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A command engine reports no tokens and no cost: the summary says so once, not
    // `local/tiny ≥$0.00 · 0 tokens` on its row and in the spend line.
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let status = out.then().args(&["status", &run]).run().status(0);
    assert!(
        status
            .stdout
            .contains("spend not reported: local said nothing of tokens or cost"),
        "{}",
        status.stdout
    );
    assert!(!status.stdout.contains("0 tokens"), "{}", status.stdout);
    // The report says it in its spend table, not as `0 tokens · ≥$0.00` on the task.
    let report = status
        .then()
        .args(&["report", &run, "-o", "-"])
        .run()
        .status(0);
    assert!(report.stdout.contains("not reported"), "{}", report.stdout);
    assert!(
        !report.stdout.contains("0 tokens"),
        "the report shows 0 tokens"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn a_failing_command_engine_is_the_task_s_failure_with_its_stderr() {
    let graph = r#"
[[task]]
id = "greet"
engine = "local"
prompt = "hi"
retries = 2
"#;
    let out = Test::new()
        .file("baton.toml", local_engine(", \"--fail\""))
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let task = out.json_task("greet");
    assert_eq!(task["state"], "failed", "{task}");
    // A program's own failure is not retried unless the task says `retry_on = "any"`.
    assert_eq!(task["attempts"], 1, "{task}");
    assert_eq!(task["outcome"]["class"], "task", "{task}");
    assert!(
        task["stderr"]
            .as_str()
            .unwrap()
            .contains("echo-agent: cannot do that"),
        "{task}"
    );
}

#[test]
fn a_configured_name_for_claude_carries_its_own_model() {
    let model = MockModel::start(Script::new().rule(Rule::text("opus answered"))).unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[engines.opus]\nkind = \"claude\"\ncommand = \"{}\"\nmodel = \"claude-opus-4-5\"\n",
        agent_bin("claude").display()
    );
    let out = Test::new()
        .file("baton.toml", config)
        .graph(
            "graph.toml",
            "[[task]]\nid = \"think\"\nengine = \"opus\"\nprompt = \"think hard\"\n",
        )
        .env("HOME", home.path().to_str().unwrap())
        .env("ANTHROPIC_BASE_URL", &model.url())
        .env(
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-test-key-for-the-mock-model-only",
        )
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("think")["output"], "opus answered");
    let asked = model.requests();
    assert!(
        asked.iter().any(|r| r.body["model"] == "claude-opus-4-5"),
        "{:?}",
        asked
            .iter()
            .map(|r| r.body["model"].clone())
            .collect::<Vec<_>>()
    );
}

#[test]
fn an_engine_name_neither_built_in_nor_configured_is_a_graph_error_with_a_suggestion() {
    Test::new()
        .file("baton.toml", local_engine(""))
        .graph(
            "graph.toml",
            "[[task]]\nid = \"a\"\nengine = \"locl\"\nprompt = \"p\"\n",
        )
        .args(&["plan", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("unknown engine `locl`")
        .stderr_contains("local");
}

#[test]
fn config_mistakes_are_bad_input_before_anything_runs() {
    let out = Test::new()
        .file(
            "baton.toml",
            "[engines.local]\nkind = \"command\"\nargs = [\"x\"]\n",
        )
        .graph("graph.toml", "[[task]]\nid = \"a\"\nrun = \"true\"\n")
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("[engines.local]: a command engine needs `command`");
    assert!(!out.state_dir_exists());
}
