//! What a task, a person or a crash can do to the run's git work: a confined task, a planted
//! filter driver, Ctrl-C during the run's checks, a bad base, a crash, secret file names, any
//! task id.

use super::*;

#[test]
fn a_confined_task_writes_only_in_its_worktree_and_cannot_touch_the_git_directory() {
    if !crate::test::landlock_sandbox_test(
        "a_confined_task_writes_only_in_its_worktree_and_cannot_touch_the_git_directory",
    ) {
        return;
    }
    // The repository is found from inside the worktree, as any program in it could.
    let graph = r#"
[[task]]
id = "confined"
workspace = "worktree"
confine = "workspace"
run = """
git_dir=$(git rev-parse --git-common-dir)
root=$(dirname "$git_dir")
echo inside > inside.txt
echo out > "$root/escaped.txt" 2>/dev/null || echo 'checkout: refused'
touch "$git_dir/planted" 2>/dev/null || echo 'git dir: refused'
{ git add -A && git -c user.name=a -c user.email=a@b commit -qm sneaked; } 2>/dev/null || echo 'commit: refused'
touch "$TMPDIR/scratch" && echo 'tmp: ok'
echo "sandbox: $BATON_SANDBOX"
"""

[[task]]
id = "free"
workspace = "worktree"
run = 'echo out > "$(dirname "$(git rev-parse --git-common-dir)")/free.txt"'
"#;
    let test = repo_with(graph);
    let before = git(test.path(), &["rev-parse", "HEAD"]);
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let root = out.path();
    let output = out.json_task("confined")["output"]
        .as_str()
        .unwrap()
        .to_owned();
    for line in [
        "checkout: refused",
        "git dir: refused",
        "commit: refused",
        "tmp: ok",
        "sandbox: landlock",
    ] {
        assert!(output.contains(line), "{line}: {output}");
    }
    assert!(!root.join("escaped.txt").exists());
    assert!(!root.join(".git/planted").exists());
    // Its work inside the worktree was committed by baton, outside the sandbox.
    let run = run_id(&out);
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/result:inside.txt")]),
        "inside"
    );
    assert_eq!(
        git(
            root,
            &["log", "--format=%s", &format!("baton/{run}/confined")]
        )
        .lines()
        .filter(|s| *s == "sneaked")
        .count(),
        0
    );
    assert_eq!(git(root, &["rev-parse", "HEAD"]), before);
    // A shell task is not confined unless it asks.
    assert_eq!(
        std::fs::read_to_string(root.join("free.txt")).unwrap(),
        "out\n"
    );
}

/// Tasks (unconfined) plant a filter driver in the repository's config and name it in a
/// `.gitattributes`: it never runs in baton's commits and merges, nor after a resume, which
/// trusts the drivers of the run's first start, not what it finds then.
#[test]
fn a_filter_driver_planted_by_a_task_never_runs_in_baton_s_git_commands_even_after_a_resume() {
    let test = repo_with("");
    let marker = test.path().parent().unwrap().join("driver-ran");
    let plant = format!(
        r#"git config filter.evil.clean "sh -c 'echo ran >> {m}; cat'"
git config filter.evil.smudge "sh -c 'echo ran >> {m}; cat'"
printf '* filter=evil\n' > .gitattributes"#,
        m = marker.display()
    );
    let graph = format!(
        r#"
[defaults]
workspace = "worktree"

[[task]]
id = "quick"
run = '''
{plant}
echo quick > quick.txt
'''

[[task]]
id = "slow"
run = '''
if [ "$BATON_ATTEMPT" -ge 2 ]; then echo resumed; exit 0; fi
{plant}
echo planted > planted.txt
sleep 60
'''
"#
    );
    let mut running = test
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml"])
        .spawn();
    // `quick` committed by this driver, `slow` planted and recorded as started.
    running.await_that(
        "both tasks to plant",
        crate::test::RUN_LIMIT,
        |root: &Path| {
            let store = crate::test::Store::once_a_run_is_in(root)?;
            store.try_run()?;
            store.attempts("slow").first()?;
            let quick = store.task("quick");
            let worktrees = std::fs::read_dir(root.join(".baton/worktrees")).ok()?;
            let planted = worktrees
                .flatten()
                .any(|run| run.path().join("slow/planted.txt").exists());
            (planted && quick.status == baton_model::TaskState::Succeeded).then_some(())
        },
    );
    // The takeover commits what the interrupted attempt left (a checkpoint), the task starts
    // again from its start (its worktree set back: a checkout, held to the trusted drivers
    // too), and the result is merged.
    let (run, resumed) = running.kill_and_resume();
    assert!(
        git(resumed.path(), &["config", "filter.evil.clean"]).contains("driver-ran"),
        "the driver was not planted"
    );
    assert_eq!(resumed.json_task("slow")["output"], "resumed");
    assert!(
        !marker.exists(),
        "the planted driver ran: {}",
        std::fs::read_to_string(&marker).unwrap()
    );
    let result = format!("baton/{run}/result");
    let show = |path: &str| git(resumed.path(), &["show", &format!("{result}:{path}")]);
    // The interrupted attempt's work is kept on its ref, not built upon.
    let kept = format!("refs/baton/{run}/slow/attempt-1:planted.txt");
    assert_eq!(git(resumed.path(), &["show", &kept]), "planted");
    assert_eq!(show("quick.txt"), "quick");
    assert_eq!(show(".gitattributes"), "* filter=evil");
}

/// The run's checks on the merged result run like any attempt: Ctrl-C stops them (and what
/// they started) instead of waiting for them, and the run ends `cancelled`.
#[test]
fn ctrl_c_stops_the_run_s_checks_on_the_result() {
    let graph = r#"
[run]
verify = ["touch \"$BATON_CLI_TEST_DIR/check.started\"; sleep 300"]

[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo a > a.txt"
"#;
    let mut running = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .spawn();
    running.await_that("the run's check to start", RUN_LIMIT, |root: &Path| {
        root.parent()
            .unwrap()
            .join("check.started")
            .exists()
            .then_some(())
    });
    running.signal(nix::sys::signal::Signal::SIGINT);
    let signalled = std::time::Instant::now();
    let out = running.wait(RUN_LIMIT).status(130);
    assert!(
        signalled.elapsed() < std::time::Duration::from_secs(15),
        "took {:?} to stop the check",
        signalled.elapsed()
    );
    assert_eq!(out.json()["run"]["state"], "cancelled");
    assert_eq!(out.json_task("a")["state"], "succeeded");
    let checked = out
        .store()
        .events_of(|k| matches!(k, EventKind::Checked { task: None, .. }));
    let EventKind::Checked { checks, blamed, .. } = &checked[0] else {
        unreachable!()
    };
    assert!(!checks[0].passed(), "{checks:?}");
    assert_eq!(blamed, &None);
    out.store().assert_consistent();
}

#[test]
fn a_base_that_does_not_exist_is_bad_input_and_leaves_no_run_behind() {
    let test = repo_with(
        r#"
[run]
base = "no-such-branch"

[[task]]
id = "a"
workspace = "worktree"
run = "true"
"#,
    );
    let out = test
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("cannot find the run's base `no-such-branch`");
    // Nothing was recorded: there is no interrupted run to resume, and no run directory.
    let runs = out.path().join(".baton/runs");
    assert!(
        !runs.exists() || std::fs::read_dir(&runs).unwrap().next().is_none(),
        "a run directory was left"
    );
    if let Some(store) = crate::test::Store::try_open(out.path()) {
        assert!(store.runs().is_empty(), "{:?}", store.runs());
    }
}

#[test]
fn a_run_finished_after_a_crash_leaves_no_worktree_behind() {
    // `a` and `c` succeed under the first driver, which is killed while `b` sleeps; the
    // resumed run finishes `b` and must remove all three worktrees, not only `b`'s.
    let test = repo_with(
        r#"
[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo a > a.txt"

[[task]]
id = "b"
needs = ["a"]
run = "echo b > b.txt; [ $BATON_ATTEMPT -gt 1 ] || { touch ../../../../b-started; sleep 30; }"

[[task]]
id = "c"
run = "echo c > c.txt"
"#,
    );
    let mut running = test.args(&["run", "graph.toml"]).spawn();
    // Its start recorded, so that the takeover ends it rather than running it twice.
    running.await_that("`b` to start", RUN_LIMIT, |root| {
        let recorded = || {
            let store = crate::test::Store::once_a_run_is_in(root)?;
            store.try_run()?;
            (!store.attempts("b").is_empty()).then_some(())
        };
        root.join("b-started").exists().then(recorded).flatten()
    });
    let (run, resumed) = running.kill_and_resume();
    let root = resumed.path();
    assert_eq!(resumed.json()["run"]["state"], "succeeded");
    assert!(
        !root.join(".baton/worktrees").join(&run).exists(),
        "worktrees left: {:?}",
        std::fs::read_dir(root.join(".baton/worktrees").join(&run))
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    // Only the pool's, detached and clean, for the next run's tasks.
    let listed = git(root, &["worktree", "list", "--porcelain"]);
    for record in listed
        .split("\n\n")
        .filter(|r| r.contains(".baton/worktrees"))
    {
        assert!(record.contains(".baton/worktrees/.pool/"), "{listed}");
        assert!(record.contains("\ndetached"), "{listed}");
    }
    // The work stays on the branches.
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/result:c.txt")]),
        "c"
    );
}

#[test]
fn a_conflict_in_a_file_whose_name_is_a_secret_names_it_redacted() {
    // The name is made when the task runs: the graph file itself holds no secret.
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = 'echo a > "ghp_$(printf "A%.0s" $(seq 36)).txt"'

[[task]]
id = "b"
run = 'echo b > "ghp_$(printf "A%.0s" $(seq 36)).txt"'
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let merged = out
        .store()
        .events_of(|k| matches!(k, EventKind::ResultMerged { .. }));
    let [EventKind::ResultMerged { conflict_files, .. }] = &merged[..] else {
        panic!("{merged:?}");
    };
    assert_eq!(conflict_files.len(), 1, "{conflict_files:?}");
    assert!(
        !conflict_files[0].contains("AAAAAAAAAAAA"),
        "{conflict_files:?}"
    );
    assert!(conflict_files[0].contains("REDACTED"), "{conflict_files:?}");
    assert!(!out.stdout.contains("AAAAAAAAAAAA"), "{}", out.stdout);
}

#[test]
fn task_ids_in_any_script_name_their_branches_logs_and_handoffs() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "日本語-タスク"
run = "echo 書いた > 日本.txt; echo こんにちは"

[[task]]
id = "café.v2"
needs = ["日本語-タスク"]
run = "cat 日本.txt; echo 'got {{ needs.日本語-タスク.output }}'"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    let root = out.path();
    assert_eq!(out.json_task("café.v2")["output"], "書いた\ngot こんにちは");
    // The branch git took is the task's id, as it is.
    assert_eq!(
        git(
            root,
            &["show", &format!("baton/{run}/日本語-タスク:日本.txt")]
        ),
        "書いた"
    );
    let branches = git(root, &["branch", "--list", &format!("baton/{run}/*")]);
    assert!(
        branches.contains(&format!("baton/{run}/café.v2")),
        "{branches}"
    );
    // And so is its log's file name, which `baton logs` reads.
    let logs = out
        .then()
        .args(&["logs", "latest", "日本語-タスク"])
        .run()
        .status(0);
    assert_eq!(logs.stdout, "こんにちは\n");
}
