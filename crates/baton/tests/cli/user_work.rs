//! A user's work is safe with baton: what `worktree_include` brings in is never committed,
//! `baton apply` never replaces what the user has that git does not track (ignored
//! included), and a retried task starts from where it started rather than on top of its failed
//! attempt. Each of these lost a newcomer work on a real repository.

use std::path::Path;

use baton_model::EventKind;

use crate::test::{RUN_LIMIT, Test};
use crate::workspaces::{git, repo_with, run_id};

/// What `dir` holds at `path`: `dir`, `link`, `file` or `none` (not following a link).
fn kind(dir: &Path, path: &str) -> &'static str {
    match dir.join(path).symlink_metadata() {
        Err(_) => "none",
        Ok(m) if m.file_type().is_symlink() => "link",
        Ok(m) if m.is_dir() => "dir",
        Ok(_) => "file",
    }
}

/// The newcomer's repro, for each directory people keep out of git, each with and without a
/// trailing slash in `.gitignore`: the link `worktree_include` makes is not committed, and
/// `baton apply` leaves the real directory as it was. Before the fix, `node_modules/` (with a
/// slash, which matches no link) was committed as a link to the user's directory, and the
/// apply replaced the directory by a link to itself.
#[test]
fn worktree_include_is_never_committed_and_apply_keeps_the_user_s_directories() {
    for name in ["node_modules", ".venv", "target"] {
        for pattern in [format!("{name}/"), name.to_owned()] {
            let graph = format!(
                "[[task]]\nid = \"edit\"\nworkspace = \"worktree\"\n\
                 worktree_include = [\"{name}\"]\nrun = \"test -f {name}/x/i.js && echo more >> shared.txt\"\n"
            );
            let test = repo_with(&graph).file(".gitignore", format!("{pattern}\n"));
            git(test.path(), &["add", ".gitignore"]);
            git(test.path(), &["commit", "-qm", "ignore"]);
            let test = test.file(&format!("{name}/x/i.js"), "1\n");
            let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
            let run = run_id(&out);
            let root = out.path();
            let result = format!("baton/{run}/result");
            let files = git(root, &["ls-tree", "-r", "--name-only", &result]);
            assert!(!files.contains(name), "{pattern}: the result holds {files}");
            let applied = out.then().args(&["apply", &run]).run().status(0);
            let root = applied.path();
            assert_eq!(kind(root, name), "dir", "{pattern}");
            assert_eq!(
                std::fs::read_to_string(root.join(name).join("x/i.js")).unwrap(),
                "1\n",
                "{pattern}"
            );
            assert_eq!(
                std::fs::read_to_string(root.join("shared.txt")).unwrap(),
                "line one\nmore\n"
            );
        }
    }
}

/// A result that writes where the user has something git ignores (a file where a
/// `node_modules/` directory is, an ignored `.env`, a file inside an ignored directory) is
/// refused before anything is touched, the paths named. Git itself replaces ignored files
/// without a word: before the fix, each of these was overwritten or deleted.
#[test]
fn apply_refuses_to_replace_what_git_ignores_and_names_it() {
    // (.gitignore line, what the user has, what the task force-adds to its result)
    let cases = [
        ("node_modules/", "node_modules/x/i.js", "node_modules"),
        ("node_modules", "node_modules/x/i.js", "node_modules"),
        (".venv/", ".venv/bin/python", ".venv"),
        ("target/", "target/debug/app", "target/debug/app"),
        ("target", "target/debug/app", "target"),
        (".env", ".env", ".env"),
        ("*.log", "build.log", "build.log"),
    ];
    for (pattern, mine, theirs) in cases {
        let graph = format!(
            "[[task]]\nid = \"w\"\nworkspace = \"worktree\"\n\
             run = \"mkdir -p $(dirname {theirs}) && echo theirs > {theirs} && git add -f {theirs}\"\n"
        );
        let test = repo_with(&graph).file(".gitignore", format!("{pattern}\n"));
        git(test.path(), &["add", ".gitignore"]);
        git(test.path(), &["commit", "-qm", "ignore"]);
        let test = test.file(mine, "mine\n");
        let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
        let run = run_id(&out);
        let head = git(out.path(), &["rev-parse", "HEAD"]);
        let refused = out.then().args(&["apply", &run]).run().status(2);
        let top = theirs.split('/').next().unwrap();
        assert!(
            refused.stderr.contains("(ignored)") && refused.stderr.contains(top),
            "{pattern}: {}",
            refused.stderr
        );
        assert!(
            refused.stderr.contains("move them aside"),
            "{}",
            refused.stderr
        );
        let root = refused.path();
        assert_eq!(
            std::fs::read_to_string(root.join(mine)).unwrap(),
            "mine\n",
            "{pattern}"
        );
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head, "{pattern}");
    }
}

/// A link a task makes to somewhere outside its worktree is left out of its commit (and told
/// of in the event): applied, it would stand where the user's files are.
#[test]
fn a_link_out_of_the_worktree_is_left_out_of_the_commit() {
    let graph = r#"
[[task]]
id = "w"
workspace = "worktree"
run = "ln -s /etc/hostname host && ln -s shared.txt inside && echo b >> shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    let files = git(
        out.path(),
        &["ls-tree", "-r", "--name-only", &format!("baton/{run}/w")],
    );
    assert!(!files.contains("host"), "{files}");
    assert!(files.contains("inside"), "{files}");
    let left: Vec<Vec<String>> = out
        .store()
        .events_of(|k| matches!(k, EventKind::WorkspaceCommitted(_)))
        .into_iter()
        .map(|k| match k {
            EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
                links_left_out, ..
            }) => links_left_out,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(left, [vec!["host".to_owned()]]);
    let events = out.then().args(&["events", &run]).run().status(0);
    assert!(
        events.stdout.contains("left out: host"),
        "{}",
        events.stdout
    );
}

/// `baton apply --squash` makes one commit on the user's branch whose message names the run
/// and its tasks; a plain apply's merge says the same; `baton diff --stat` counts lines.
#[test]
fn apply_squash_makes_one_commit_naming_the_run_and_its_tasks() {
    let graph = r#"
name = "docs"

[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo from a > a.txt"

[[task]]
id = "b"
run = "echo 'line two' >> shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    let stat = out.then().args(&["diff", &run, "--stat"]).run().status(0);
    assert!(
        stat.stdout.contains("a.txt") && stat.stdout.contains("2 files changed, 2 insertions(+)"),
        "{}",
        stat.stdout
    );
    assert!(!stat.stdout.contains("+line two"), "{}", stat.stdout);
    let before = git(stat.path(), &["rev-parse", "HEAD"]);
    let applied = stat
        .then()
        .args(&["apply", &run, "--squash"])
        .run()
        .status(0)
        .stdout_contains("as one commit");
    let root = applied.path();
    assert_eq!(git(root, &["rev-parse", "HEAD^"]), before);
    assert_eq!(
        git(root, &["rev-list", "--count", &format!("{before}..HEAD")]),
        "1"
    );
    let message = git(root, &["log", "-1", "--format=%B"]);
    assert!(
        message.starts_with(&format!("Squashed baton run docs ({run}): a, b")),
        "{message}"
    );
    assert!(message.contains("- a: 1 file\n- b: 1 file"), "{message}");
    assert_eq!(
        std::fs::read_to_string(root.join("shared.txt")).unwrap(),
        "line one\nline two\n"
    );
    assert_eq!(git(root, &["status", "--porcelain"]), "");
}

/// The newcomer's repro: a retried worktree task starts from where the task started, not on
/// top of its failed attempt (before the fix the line was appended twice). The failed attempt's
/// work is kept on `baton/RUN/TASK/attempt-1` and shown by `baton diff --attempt 1`.
#[test]
fn a_retry_starts_from_the_task_s_start_and_keeps_the_failed_attempt() {
    let graph = r#"
[[task]]
id = "append"
workspace = "worktree"
retries = 1
backoff = "10ms"
run = "echo appended >> shared.txt; echo $BATON_ATTEMPT > scratch-$BATON_ATTEMPT; test $BATON_ATTEMPT -ge 2"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    let branch = format!("baton/{run}/append");
    let root = out.path();
    assert_eq!(
        git(root, &["show", &format!("{branch}:shared.txt")]),
        "line one\nappended"
    );
    let files = git(root, &["ls-tree", "--name-only", &branch]);
    assert!(!files.contains("scratch-1"), "{files}");
    let kept = format!("refs/baton/{run}/append/attempt-1");
    assert_eq!(git(root, &["show", &format!("{kept}:scratch-1")]), "1");
    let diff = out.then().args(&["diff", &run, "append"]).run().status(0);
    assert_eq!(
        diff.stdout.matches("+appended").count(),
        1,
        "{}",
        diff.stdout
    );
    let first = diff
        .then()
        .args(&["diff", &run, "append", "--attempt", "1"])
        .run()
        .status(0);
    assert!(first.stdout.contains("scratch-1"), "{}", first.stdout);
    assert!(!first.stdout.contains("scratch-2"), "{}", first.stdout);
    // Pruning the run removes the kept attempts with its branches.
    let pruned = first.then().args(&["prune", "--keep", "0"]).run().status(0);
    let refs = git(pruned.path(), &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains(&run), "{refs}");
}

/// A fix round continues the attempt's work (its session, or for a shell task its feedback):
/// it goes on from the worktree as the round before left it.
#[test]
fn a_fix_round_goes_on_from_the_worktree_as_it_was_left() {
    let graph = r#"
[[task]]
id = "build"
workspace = "worktree"
fix_attempts = 1
run = "echo round >> shared.txt"
verify = ["test $(grep -c round shared.txt) -ge 2"]
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    assert_eq!(
        git(
            out.path(),
            &["show", &format!("baton/{run}/build:shared.txt")]
        ),
        "line one\nround\nround"
    );
}

/// `baton resume` after the driver was killed mid-task: the interrupted shell task (no
/// session to continue) starts again from its start; what it had done is kept on its ref.
#[test]
fn a_shell_task_interrupted_by_a_killed_driver_starts_again_clean() {
    let graph = r#"
[[task]]
id = "slow"
workspace = "worktree"
run = "echo appended >> shared.txt; touch started-$BATON_ATTEMPT; [ $BATON_ATTEMPT -ge 2 ] || sleep 30"
"#;
    let test: Test = repo_with(graph);
    let mut running = test.args(&["run", "graph.toml"]).spawn();
    running.await_that("the first attempt started", RUN_LIMIT, |root| {
        walk_has(&root.join(".baton/worktrees"), "started-1").then_some(())
    });
    let (run, resumed) = running.kill_and_resume();
    let root = resumed.path();
    let branch = format!("baton/{run}/slow");
    assert_eq!(
        git(root, &["show", &format!("{branch}:shared.txt")]),
        "line one\nappended"
    );
    let files = git(root, &["ls-tree", "--name-only", &branch]);
    assert!(!files.contains("started-1"), "{files}");
    let kept = format!("refs/baton/{run}/slow/attempt-1");
    let kept_files = git(root, &["ls-tree", "--name-only", &kept]);
    assert!(kept_files.contains("started-1"), "{kept_files}");
}

/// The same for an agent (the real Claude Code CLI): it appended its line, then the driver was
/// killed during its next tool call. The resumed attempt is a new session (the driver that
/// knew the old one died with it), so it starts from the task's start and appends again: the
/// line is in the result once (twice without the restart), and the interrupted attempt's work
/// is kept on its ref.
#[test]
fn an_agent_interrupted_by_a_killed_driver_does_not_double_its_edit() {
    let graph = r#"
[[task]]
id = "append"
prompt = "TASK: append a line to shared.txt, then wait"
allowed_tools = ["Bash"]
"#;
    let model = appends_then_hangs();
    let test = crate::agents::with_claude(repo_with(graph), &model);
    let mut running = test.args(&["run", "graph.toml"]).spawn();
    running.await_that("the agent's second tool call", RUN_LIMIT, |_| {
        (model.requests().len() >= 2).then_some(())
    });
    let (run, resumed) = running.kill_and_resume();
    assert_eq!(resumed.json_task("append")["state"], "succeeded");
    let root = resumed.path();
    appended_once_and_kept(root, &run, "append");
}

/// And for an agent whose attempt timed out mid-work (its tool call never returns): the retry
/// is a new session, from the task's start; the line is in the result once (twice without the
/// restart), the timed-out attempt's work on its ref. 8 s: the first attempt must have
/// appended before its time is up, and a Claude Code starting beside the suite's other tests
/// can take seconds to.
#[test]
fn an_agent_that_timed_out_does_not_double_its_edit() {
    let graph = r#"
[[task]]
id = "append"
prompt = "TASK: append a line to shared.txt, then wait"
allowed_tools = ["Bash"]
timeout = "8s"
retries = 1
retry_on = "any"
backoff = "10ms"
"#;
    let model = appends_then_hangs();
    let out = crate::agents::with_claude(repo_with(graph), &model)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("append")["attempts"], 2);
    let run = run_id(&out);
    let root = out.path();
    appended_once_and_kept(root, &run, "append");
}

/// Whether a file named `name` is anywhere under `dir` (three levels down at most).
fn walk_has(dir: &Path, name: &str) -> bool {
    fn walk(dir: &Path, name: &str, depth: u32) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|e| {
            e.file_name() == name
                || (depth > 0
                    && e.file_type().is_ok_and(|t| t.is_dir())
                    && walk(&e.path(), name, depth - 1))
        })
    }
    walk(dir, name, 3)
}

/// The newcomer's loop, "fix the file, retry": `baton retry` says the file changed (it ran
/// the recorded `mkae` again, silently, before), the summary's `next:` offers `--reload`, and
/// `--reload` runs the fixed command. A file whose tasks changed shape is refused, named.
#[test]
fn retry_reload_takes_the_fixed_graph_file() {
    let failed = Test::new()
        .graph("f.toml", "[[task]]\nid = \"build\"\nrun = \"mkae build\"\n")
        .args(&["run", "f.toml", "--json"])
        .run()
        .status(1);
    let run = run_id(&failed);
    std::fs::write(
        failed.path().join("f.toml"),
        "[[task]]\nid = \"build\"\nrun = \"echo built\"\n",
    )
    .unwrap();
    let again = failed
        .then()
        .args(&["retry", &run, "--json"])
        .run()
        .status(1)
        .stderr_contains(&format!(
            "f.toml changed since run {run} started (tasks `build`); this retry runs the tasks \
             as the run recorded them: `baton retry {run} --reload` takes the changes"
        ));
    let next: Vec<String> = serde_json::from_value(again.json()["next"].clone()).unwrap();
    assert!(
        next.contains(&format!("baton retry {run} --reload")),
        "{next:?}"
    );
    let reloaded = again
        .then()
        .args(&["retry", &run, "--reload", "--json"])
        .run()
        .status(0);
    assert_eq!(reloaded.json_task("build")["output"], "built");
    // From here on the run is the file's: a resume or retry reads the reloaded graph.
    let events = reloaded
        .store()
        .events_of(|k| matches!(k, EventKind::GraphReloaded { .. }));
    assert_eq!(events.len(), 1);

    std::fs::write(
        reloaded.path().join("f.toml"),
        "[[task]]\nid = \"compile\"\nrun = \"echo\"\n",
    )
    .unwrap();
    reloaded
        .then()
        .args(&["retry", &run, "build", "--reload"])
        .run()
        .status(2)
        .stderr_contains("task `build` is no longer in the file; task `compile` is new");
}

/// The same rule for an agent (the real Claude Code CLI against the scripted model): its
/// attempt appends a line with its Bash tool and fails its check; the retry is a new session,
/// so it starts from the task's start and the line is in the result once (twice before).
#[test]
fn a_retried_agent_starts_from_the_task_s_start() {
    let graph = r#"
[[task]]
id = "append"
prompt = "TASK-APPEND: append a line to shared.txt"
allowed_tools = ["Bash"]
timeout = "2m"
retries = 1
retry_on = "any"
backoff = "10ms"
verify = ["test \"$BATON_ATTEMPT\" -ge 2"]
"#;
    let script = baton_mock_model::Script::new()
        .rule(baton_mock_model::Rule::text("appended").when_last_contains("toolu_mock"))
        .rule(
            baton_mock_model::Rule::tool_use(
                "Bash",
                serde_json::json!({"command": "echo appended >> shared.txt", "description": "append"}),
            )
            .when_contains("TASK-APPEND"),
        );
    let model = baton_mock_model::MockModel::start(script).unwrap();
    let test = crate::agents::with_claude(repo_with(graph), &model);
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    assert_eq!(out.json_task("append")["attempts"], 2);
    let run = run_id(&out);
    appended_once_and_kept(out.path(), &run, "append");
}

/// The newcomer's budget trial: three agents of unknown cost (no `estimate`, none finished)
/// against `usd = 0.30`, each answer costing $0.15 (claude-sonnet-4-5, 50,000 input tokens).
/// Before, all three launched at once, reserved $0 each, and the run ended at $0.45, every
/// answer thrown away as over budget. Now the first goes alone; once its cost is known the
/// next does not fit, and the run stops within its budget with the first task's work kept.
#[test]
fn agents_of_unknown_cost_do_not_overshoot_the_budget_together() {
    let model = baton_mock_model::MockModel::start(baton_mock_model::Script::new().rule(
        baton_mock_model::Rule::reply(baton_mock_model::Reply::Text {
            text: "done".into(),
            input_tokens: 50_000,
            output_tokens: 0,
        }),
    ))
    .unwrap();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 3
budget = { usd = 0.30 }

[[task]]
id = "a"
prompt = "one"

[[task]]
id = "b"
prompt = "two"

[[task]]
id = "c"
prompt = "three"
"#;
    let out = crate::agents::with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let json = out.json();
    let spent = json["spend"]["cost_usd"].as_f64().unwrap();
    assert!(spent <= 0.30, "spent {spent}: {json}");
    let states: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|t| out.json_task(t)["state"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        states.iter().filter(|s| *s == "succeeded").count(),
        1,
        "{states:?}"
    );
    assert_eq!(model.requests().len(), 1);
}

/// The worst overshoot with N agents at once: estimates that are too low ($0.09 each, so all
/// three fit $0.30 together) and answers that cost $0.15 each. The budget cannot stop an
/// answer that is already paid for, so the run ends at $0.45 at most with every answer that
/// came out kept, where before it ended at $0.45 with answers thrown away. What bounds the
/// overshoot is the reservation: each agent past its estimate spends at most its answer (or,
/// mid-work, the one message that crossed the limit) before it is stopped.
#[test]
fn agents_started_together_on_low_estimates_keep_the_answers_they_paid_for() {
    let model = baton_mock_model::MockModel::start(baton_mock_model::Script::new().rule(
        baton_mock_model::Rule::reply(baton_mock_model::Reply::text("done").costing(50_000, 0)),
    ))
    .unwrap();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
concurrency = 3
budget = { usd = 0.30 }

[[task]]
id = "a"
prompt = "one"
estimate = { usd = 0.09 }

[[task]]
id = "b"
prompt = "two"
estimate = { usd = 0.09 }

[[task]]
id = "c"
prompt = "three"
estimate = { usd = 0.09 }
"#;
    let out = crate::agents::with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run();
    let json = out.json();
    let spent = json["spend"]["cost_usd"].as_f64().unwrap();
    assert!(spent <= 0.45 + 1e-9, "spent {spent}: {json}");
    // Whatever answered is kept. One whose answer had not come out when the others had spent
    // the budget (its first line arrived after theirs) is stopped there, mid-work.
    let mut kept = 0;
    for task in ["a", "b", "c"] {
        let t = out.json_task(task);
        if t["output"] == "done" {
            assert_eq!(t["state"], "succeeded", "{t}");
            kept += 1;
        } else {
            assert_eq!(t["outcome"]["kind"], "over-budget", "{t}");
        }
    }
    assert!(kept >= 2, "{json}");
}

/// The newcomer's other budget loss: an agent that had already answered was stopped as over
/// budget after answering, its work thrown away, and `resume --raise-budget` paid for it again.
/// Here the agent appends a line with its Bash tool (cheap), then answers for $3 against a $1
/// budget: the answer is in, so it is judged and committed as usual, and only what had not
/// started is held back. Raising the budget runs just that (the first task's model is not asked
/// again). Before: `first` failed as over budget and the resume ran it a second time.
#[test]
fn an_answer_in_when_the_budget_runs_out_is_kept_and_never_paid_again() {
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"
allowed_tools = ["Bash"]

[run]
concurrency = 1
budget = { usd = 1.0 }

[[task]]
id = "first"
prompt = "TASK: append a line to shared.txt"

[[task]]
id = "second"
needs = ["first"]
prompt = "TASK: append another line to shared.txt"
"#;
    let script = baton_mock_model::Script::new()
        .rule(
            baton_mock_model::Rule::reply(
                baton_mock_model::Reply::text("appended").costing(1_000_000, 10),
            )
            .when_last_contains("toolu_mock"),
        )
        .rule(baton_mock_model::Rule::tool_use(
            "Bash",
            serde_json::json!({"command": "echo appended >> shared.txt", "description": "append"}),
        ));
    let model = baton_mock_model::MockModel::start(script).unwrap();
    let out = crate::agents::with_claude(repo_with(graph), &model)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let run = run_id(&out);
    let first = out.json_task("first");
    assert_eq!(first["state"], "succeeded", "{first}");
    assert_eq!(first["output"], "appended", "{first}");
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
    assert_eq!(model.requests().len(), 2);
    let result = format!("baton/{run}/result:shared.txt");
    assert_eq!(git(out.path(), &["show", &result]), "line one\nappended");

    let raised = out
        .then()
        .args(&["resume", &run, "--raise-budget", "20", "--json"])
        .run()
        .status(0);
    assert_eq!(raised.json_task("first")["attempts"], 1);
    assert_eq!(raised.json_task("second")["state"], "succeeded");
    // Two requests for `second`, none again for `first`.
    assert_eq!(model.requests().len(), 4);
    assert_eq!(
        git(raised.path(), &["show", &result]),
        "line one\nappended\nappended"
    );
}

/// A budget stop is no different: the agent appended its line, then its next message passed
/// the budget and it was stopped mid-work. `retry --raise-budget` starts a new session, so it
/// starts from the task's start: the line is in the result once (twice without the restart).
#[test]
fn a_retry_after_a_budget_stop_starts_from_the_task_s_start() {
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"
allowed_tools = ["Bash"]

[run]
budget = { usd = 1.0 }

[[task]]
id = "append"
prompt = "TASK: append a line to shared.txt, then check"
"#;
    let script = baton_mock_model::Script::new()
        .rule(baton_mock_model::Rule::text("appended").when_last_contains("STEP-TWO"))
        .rule(
            baton_mock_model::Rule::reply(
                baton_mock_model::Reply::tool_use("Bash", bash("echo STEP-TWO"))
                    .costing(1_000_000, 10),
            )
            .when_last_contains("STEP-ONE"),
        )
        .rule(baton_mock_model::Rule::tool_use(
            "Bash",
            bash("echo appended >> shared.txt; echo STEP-ONE"),
        ));
    let model = baton_mock_model::MockModel::start(script).unwrap();
    let out = crate::agents::with_claude(repo_with(graph), &model)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let run = run_id(&out);
    assert_eq!(
        out.json_task("append")["outcome"]["kind"],
        "over-budget",
        "{}",
        out.stdout
    );
    let retried = out
        .then()
        .args(&["retry", &run, "--raise-budget", "20", "--json"])
        .run()
        .status(0);
    assert_eq!(retried.json_task("append")["attempts"], 2);
    let root = retried.path();
    appended_once_and_kept(root, &run, "append");
}

/// A timed-out attempt is no different: its retry starts from the task's start, and what the
/// cut-short attempt had written is kept on its ref.
#[test]
fn a_retry_after_a_timeout_starts_from_the_task_s_start() {
    let graph = r#"
[[task]]
id = "slow"
workspace = "worktree"
timeout = "1s"
retries = 1
backoff = "10ms"
run = "echo appended >> shared.txt; [ $BATON_ATTEMPT -ge 2 ] || sleep 30"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    assert_eq!(out.json_task("slow")["attempts"], 2);
    let root = out.path();
    appended_once_and_kept(root, &run, "slow");
}

/// Red-team finding 19: with tasks estimated at $100 and $0.50 under `usd = 1`, the stop said
/// "$0 spent and $0.50 reserved for the next agent, of $1.00" (what fits), and the affordable
/// running task was cancelled. Now the one that fits runs to its end, and the stop names the
/// task whose reservation does not fit, with its figure.
#[test]
fn a_budget_stop_names_the_task_that_does_not_fit_and_spares_the_one_that_does() {
    let model = baton_mock_model::MockModel::start(
        baton_mock_model::Script::new().rule(
            baton_mock_model::Rule::reply(baton_mock_model::Reply::text("done").costing(30_000, 0))
                .slow(200),
        ),
    )
    .unwrap();
    let graph = r#"
[defaults]
model = "claude-sonnet-4-5"

[run]
budget = { usd = 1.0 }

[[task]]
id = "huge"
prompt = "two"
estimate = { usd = 100.0 }

[[task]]
id = "small"
prompt = "one"
estimate = { usd = 0.5 }
"#;
    let out = crate::agents::with_claude(Test::new(), &model)
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json_task("small")["state"], "succeeded");
    assert_eq!(out.json_task("huge")["state"], "skipped");
    let stopping: Vec<String> = out
        .store()
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RunStopping { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        stopping,
        [
            "budget spent: `huge` would reserve $100.00 (its estimate) and does not fit: $0.00 spent \
          and $0.50 reserved for the running agents, of $1.00"
        ],
    );
}

/// The newcomer's run changed files and ended with nothing saying where they were. A run whose
/// tasks changed files ends by naming the result branch and what to type (`status --json` has
/// it as `next`); the run's own `verify` checks on the result are in the summary.
#[test]
fn a_run_that_changed_files_says_where_the_work_is() {
    let graph = r#"
[run]
verify = ["test -s shared.txt"]

[[task]]
id = "edit"
workspace = "worktree"
run = "echo more >> shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(0);
    let run = out
        .stdout
        .lines()
        .find_map(|l| l.split("(run ").nth(1))
        .unwrap()
        .trim_end_matches(')')
        .to_owned();
    assert!(
        out.stdout
            .contains("verified: `test -s shared.txt` passed in "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "the work is on branch baton/{run}/result\nnext:\n  baton diff {run} --stat\n  baton apply {run}\n"
        )),
        "{}",
        out.stdout
    );
    // A run that changed nothing has nothing to say about it.
    let quiet = out
        .then()
        .graph("still.toml", "[[task]]\nid = \"look\"\nrun = \"true\"\n")
        .args(&["run", "still.toml"])
        .run()
        .status(0);
    assert!(!quiet.stdout.contains("next:"), "{}", quiet.stdout);
}

/// A Bash tool call's input, as the scripted model gives it.
fn bash(command: &str) -> serde_json::Value {
    serde_json::json!({"command": command, "description": "step"})
}

/// A model whose agent appends a line to `shared.txt` with its Bash tool, then makes a call
/// that never returns (the first time; after that, or told it was cut short, it answers).
fn appends_then_hangs() -> baton_mock_model::MockModel {
    let script = baton_mock_model::Script::new()
        .rule(baton_mock_model::Rule::text("finished").when_last_contains("cut short"))
        .rule(baton_mock_model::Rule::text("finished").when_last_contains("STEP-TWO"))
        .rule(
            baton_mock_model::Rule::tool_use("Bash", bash("tail -f /dev/null; echo STEP-TWO"))
                .when_last_contains("STEP-ONE")
                .times(1),
        )
        .rule(baton_mock_model::Rule::text("finished").when_last_contains("STEP-ONE"))
        .rule(baton_mock_model::Rule::tool_use(
            "Bash",
            bash("echo appended >> shared.txt; echo STEP-ONE"),
        ));
    baton_mock_model::MockModel::start(script).unwrap()
}

/// The run's result has the line `task` appended once, and its first attempt's ref has it too
/// (the work of the attempt the retry started over from).
fn appended_once_and_kept(root: &Path, run: &str, task: &str) {
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/result:shared.txt")]),
        "line one\nappended"
    );
    let kept = format!("refs/baton/{run}/{task}/attempt-1:shared.txt");
    assert_eq!(git(root, &["show", &kept]), "line one\nappended");
}
