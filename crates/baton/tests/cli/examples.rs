//! The two example graphs of the README, run as a user would.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use baton_model::{Outcome, RunState, TaskState};

use crate::test::Test;

const QUICKSTART: &str = include_str!("../../../../examples/quickstart.toml");
const FAILURES: &str = include_str!("../../../../examples/failures.toml");

#[test]
fn quickstart_succeeds_and_is_recorded() {
    let out = Test::new()
        .graph("quickstart.toml", QUICKSTART)
        .args(&["run", "quickstart.toml", "--json"])
        .run()
        .status(0);

    let json = out.json();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["run"]["state"], "succeeded");
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 6);
    for task in tasks {
        assert_eq!(task["state"], "succeeded", "{task:#}");
    }
    assert_eq!(out.json_task("integration-tests")["attempts"], 2);
    let report = out.json_task("report")["output"]
        .as_str()
        .unwrap()
        .to_owned();
    for expected in [
        "lint: 0 warnings",
        "42 unit tests passed",
        "7 integration tests passed on attempt 2",
        "records fetched: 3",
    ] {
        assert!(
            report.contains(expected),
            "report lacks {expected:?}: {report}"
        );
    }
    assert!(report.contains(json["run"]["id"].as_str().unwrap()));

    let store = out.store();
    let run = store.run();
    assert_eq!(run.status, RunState::Succeeded);
    assert_eq!(run.id.as_str(), json["run"]["id"]);
    assert!(run.ended_at_ms.is_some());
    let records = store.tasks();
    assert_eq!(records.len(), tasks.len());
    for (record, task) in records.iter().zip(tasks) {
        assert_eq!(record.task.as_str(), task["id"]);
        assert_eq!(record.status, TaskState::Succeeded);
        assert_eq!(
            u64::from(record.attempts),
            task["attempts"].as_u64().unwrap()
        );
        assert_eq!(record.exit_code, Some(0));
    }
    let flaky = store.attempts("integration-tests");
    let outcomes: Vec<_> = flaky.iter().map(|a| a.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Some(Outcome::Exited { code: 1 }),
            Some(Outcome::Exited { code: 0 })
        ]
    );
    assert!(
        flaky[0]
            .stderr_tail
            .as_deref()
            .unwrap()
            .contains("connection reset by peer")
    );
    assert_eq!(
        store.all_attempts().len() as u64,
        json["totals"]["attempts"].as_u64().unwrap()
    );
    assert_eq!(
        store
            .task("fetch")
            .output_json
            .as_deref()
            .map(|j| j.contains("\"records\"")),
        Some(true)
    );
    store.assert_consistent();
    // No dependent started before each of its dependencies had finished, as recorded.
    for (task, needs) in [
        ("lint", &["fetch"][..]),
        ("unit-tests", &["fetch"]),
        ("integration-tests", &["fetch"]),
        (
            "report",
            &["fetch", "lint", "unit-tests", "integration-tests"],
        ),
        ("handoff-size", &["report"]),
    ] {
        let started = store.attempts(task)[0].started_at_ms;
        for need in needs {
            let ended = store.task(need).ended_at_ms.unwrap();
            assert!(
                ended <= started,
                "{task} started at {started}, before {need} ended at {ended}"
            );
        }
    }
    // Scratch files (handoffs, structured outputs) are gone once the run is over.
    assert!(!out.scratch(run.id.as_str()).exists());

    let exclude = String::from_utf8(out.read(".git/info/exclude")).unwrap();
    assert!(
        exclude.lines().any(|l| l == "/.baton/"),
        "exclude: {exclude}"
    );
    assert_private(&out.path().join(".baton"));
}

/// Everything under `.baton/` is the user's alone: directories 0700, files 0600.
fn assert_private(dir: &Path) {
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            assert_private(&path);
        } else {
            let mode = meta.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} is {mode:o}", path.display());
        }
    }
}

#[test]
fn failures_example_times_out_fails_and_blocks() {
    let out = Test::new()
        .graph("failures.toml", FAILURES)
        .args(&["run", "failures.toml", "--json"])
        .run()
        .status(1);
    // The timed-out task sleeps 30 s; its group was stopped at the 1 s timeout.
    assert!(out.elapsed.as_secs() < 20, "took {:?}", out.elapsed);

    let json = out.json();
    assert_eq!(json["run"]["state"], "failed");
    let state = |id: &str| out.json_task(id)["state"].as_str().unwrap().to_owned();
    assert_eq!(state("slow-migration"), "timed_out");
    assert_eq!(
        out.json_task("slow-migration")["outcome"]["kind"],
        "timed-out"
    );
    assert_eq!(state("compile"), "failed");
    assert_eq!(out.json_task("compile")["exit_code"], 2);
    assert!(
        out.json_task("compile")["stderr"]
            .as_str()
            .unwrap()
            .contains("error[E0308]")
    );
    assert_eq!(state("deploy"), "blocked");
    assert_eq!(state("package"), "blocked");
    assert_eq!(state("publish"), "blocked");
    assert_eq!(state("docs"), "succeeded");
    let reason = |id: &str| out.json_task(id)["reason"].as_str().unwrap().to_owned();
    assert!(
        reason("deploy").contains("slow-migration"),
        "{}",
        reason("deploy")
    );
    assert!(
        reason("package").contains("compile"),
        "{}",
        reason("package")
    );
    let publish = reason("publish");
    assert!(
        publish.contains("compile") || publish.contains("package") || publish.contains("deploy"),
        "{publish}"
    );
    let totals = &json["totals"];
    assert_eq!(
        (
            totals["succeeded"].as_u64(),
            totals["failed"].as_u64(),
            totals["timed_out"].as_u64(),
            totals["blocked"].as_u64()
        ),
        (Some(1), Some(1), Some(1), Some(3))
    );

    let store = out.store();
    assert_eq!(store.run().status, RunState::Failed);
    for id in ["deploy", "package", "publish"] {
        let task = store.task(id);
        assert_eq!(task.status, TaskState::Blocked);
        assert_eq!(task.attempts, 0, "{id} never ran");
        assert!(store.attempts(id).is_empty());
    }
    assert_eq!(
        store.attempts("slow-migration")[0].outcome,
        Some(Outcome::TimedOut)
    );
    store.assert_consistent();
}

#[test]
fn a_second_run_adds_a_run_not_another_exclude_line() {
    let graph = "[[task]]\nid = \"hello\"\nrun = \"echo hello\"\n";
    let out = Test::new()
        .graph("g.toml", graph)
        .args(&["run", "g.toml", "-q"])
        .run()
        .status(0)
        .then()
        .args(&["run", "g.toml", "-q"])
        .run()
        .status(0);
    let exclude = String::from_utf8(out.read(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude.lines().filter(|l| l.contains(".baton")).count(),
        1,
        "{exclude}"
    );
    let runs = out.store().runs();
    assert_eq!(runs.len(), 2);
    assert_ne!(runs[0].id, runs[1].id);
    assert!(runs.iter().all(|r| r.status == RunState::Succeeded));
}

#[test]
fn state_goes_to_the_repository_root_from_a_subdirectory() {
    let out = Test::new()
        .graph(
            "tools/ci/g.toml",
            "[[task]]\nid = \"where\"\nrun = \"pwd\"\n",
        )
        .current_dir("tools/ci")
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    assert!(
        out.state_dir_exists(),
        ".baton/ is not at the repository root"
    );
    assert!(!out.path().join("tools/ci/.baton").exists());
    // Tasks run from the repository root unless they set `cwd`.
    let pwd = out.json_task("where")["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        std::path::Path::new(&pwd).canonicalize().unwrap(),
        out.path().canonicalize().unwrap()
    );
}

#[test]
fn tasks_run_and_are_recorded_in_the_graph_file_s_project_wherever_baton_starts() {
    let test = Test::new().graph(
        "sub/deeper/here.toml",
        "[[task]]\nid = \"where\"\nrun = \"pwd\"\n",
    );
    let root = test.path().canonicalize().unwrap();
    let root_text = root.display().to_string();
    // From a subdirectory of the repository.
    let inside = test
        .current_dir("sub")
        .args(&["run", "deeper/here.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(inside.json_task("where")["output"], root_text.as_str());
    assert!(
        !root.join("sub/.baton").exists(),
        "recorded where baton started"
    );
    // From outside it, naming the file by its path.
    let outside = inside
        .then()
        .current_dir("..")
        .args(&["run", "repo/sub/deeper/here.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(outside.json_task("where")["output"], root_text.as_str());
    assert!(
        !root.parent().unwrap().join(".baton").exists(),
        "recorded where baton started"
    );
    assert_eq!(
        outside.store().runs().len(),
        2,
        "both runs are the repository's"
    );
}

/// `examples/offline/try.sh`, as the README tells a newcomer to run it: agent tasks and
/// `baton do` with a script for an agent, no key and no network, both succeed.
#[test]
fn the_offline_example_runs_agents_and_baton_do_with_no_key() {
    let scratch = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline/try.sh");
    let out = std::process::Command::new(script)
        .env("BATON", crate::test::BATON)
        .env("TMPDIR", scratch.path())
        .env("NO_COLOR", "1")
        .env_remove("BATON_STORE")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}\n{err}");
    assert!(said.contains("`graph` succeeded"), "{said}\n{err}");
    assert!(
        said.contains("`write the release notes` succeeded"),
        "{said}\n{err}"
    );
    assert!(said.contains("the work is on branch"), "{said}");
}

/// The repository's `examples/`.
fn examples_dir() -> std::path::PathBuf {
    crate::test::repo_path("examples")
}

/// What an example's header says its run ends as: its `# expect: STATE` line.
fn expected_state(text: &str) -> Option<&str> {
    text.lines()
        .take_while(|line| line.starts_with('#'))
        .find_map(|line| line.strip_prefix("# expect: "))
        .map(str::trim)
}

/// A value that looks like a token, for the example that shows redaction.
const DEPLOY_TOKEN: &str = "ghp_exampleTokenForTheGuide0123456789abcd";

/// Every graph in `examples/` (each chapter of the guide shows one) runs as a reader would run
/// it, in a repository with a commit, and ends as its header's `# expect:` line says; those in
/// `examples/offline/` beside the script that stands in for an agent. `examples/agents.toml`
/// needs a model: the next test runs it against the scripted one.
#[test]
fn every_example_graph_ends_as_its_header_says() {
    let examples = examples_dir();
    let offline = examples.join("offline");
    let mut ran = Vec::new();
    for (dir, beside) in [
        (&examples, &[][..]),
        (&offline, &["agent.sh", "baton.toml"][..]),
    ] {
        let mut graphs: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && !p.ends_with("baton.toml"))
            .collect();
        graphs.sort();
        for graph in graphs {
            let name = graph.file_name().unwrap().to_str().unwrap().to_owned();
            let text = std::fs::read_to_string(&graph).unwrap();
            let expected = expected_state(&text)
                .unwrap_or_else(|| panic!("{} has no `# expect: STATE` line", graph.display()))
                .to_owned();
            if name == "agents.toml" {
                continue;
            }
            let mut test = Test::new()
                .graph(&name, &text)
                .env("DEPLOY_TOKEN", DEPLOY_TOKEN);
            for file in beside {
                test = test.file(file, std::fs::read(dir.join(file)).unwrap());
                let mode = std::fs::metadata(dir.join(file)).unwrap().permissions();
                std::fs::set_permissions(test.path().join(file), mode).unwrap();
            }
            let code = if expected.starts_with("succeeded") {
                0
            } else {
                1
            };
            let out = crate::planning::committed(test)
                .args(&["run", &name, "--json"])
                .run()
                .status(code);
            assert_eq!(out.json()["run"]["state"], expected.as_str(), "{name}");
            out.store().assert_consistent();
            if name == "security.toml" {
                let said = out.json_task("deploy")["output"].to_string();
                assert!(said.contains("[REDACTED"), "{said}");
                let seen = out.json_task("environment")["output"].to_string();
                assert!(!seen.contains("DEPLOY_TOKEN"), "{seen}");
                let everything = serde_json::to_string(&out.json()).unwrap();
                assert!(!everything.contains(DEPLOY_TOKEN), "{everything}");
            }
            ran.push(name);
        }
    }
    for must in [
        "quickstart.toml",
        "graph-file.toml",
        "shell-tasks.toml",
        "worktrees.toml",
        "planning.toml",
        "security.toml",
        "failures.toml",
        "plan.toml",
        "budget.toml",
    ] {
        assert!(ran.iter().any(|n| n == must), "{must} did not run: {ran:?}");
    }
}

/// `examples/agents.toml` with the pinned Claude Code, the scripted model playing the model
/// with `examples/agents-mock.json`, as the guide's agents chapter says to try it.
#[test]
fn the_agents_example_runs_claude_code_against_the_scripted_model() {
    let text = std::fs::read_to_string(examples_dir().join("agents.toml")).unwrap();
    let mock = std::fs::read_to_string(examples_dir().join("agents-mock.json")).unwrap();
    let model =
        baton_mock_model::MockModel::start(baton_mock_model::Script::from_json(&mock).unwrap())
            .unwrap();
    let test = crate::agents::with_claude(Test::new(), &model).graph("agents.toml", &text);
    let out = crate::planning::committed(test)
        .args(&["run", "agents.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json()["run"]["state"], expected_state(&text).unwrap());
    assert_eq!(
        out.json_task("record")["output"],
        "review said: Biggest risk: DELETE has no authorization check."
    );
}
