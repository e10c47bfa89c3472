//! Tasks in git worktrees of their own, in real repositories the tests make: their changes
//! committed on their branches, merged into the run's result, checked — and the user's own
//! branch and working tree never touched.

use std::path::Path;
use std::process::Command;

use baton_model::{EventKind, Outcome};

use crate::test::{Output, RUN_LIMIT, Store, Test};

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with one commit holding `graph.toml` (and `shared.txt`), so that the user's
/// working tree starts clean.
pub(crate) fn repo_with(graph: &str) -> Test {
    let test = Test::new()
        .graph("graph.toml", graph)
        .file("shared.txt", "line one\n");
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "the user's work"]);
    test
}

pub(crate) fn run_id(out: &Output) -> String {
    out.json()["run"]["id"].as_str().unwrap().to_owned()
}

/// What the user sees of their repository: branch, commit, and `git status`.
fn user_view(dir: &Path) -> (String, String, String) {
    (
        git(dir, &["rev-parse", "--abbrev-ref", "HEAD"]),
        git(dir, &["rev-parse", "HEAD"]),
        git(dir, &["status", "--porcelain"]),
    )
}

#[test]
fn parallel_tasks_land_in_the_result_branch_and_the_user_s_branch_is_untouched() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo from a > a.txt"

[[task]]
id = "b"
run = "echo from b > b.txt"
"#;
    let test = repo_with(graph);
    let before = user_view(test.path());
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let run = run_id(&out);
    let root = out.path();
    assert_eq!(user_view(root), before);
    assert!(!root.join("a.txt").exists() && !root.join("b.txt").exists());
    // Both changes arrived in the merged result.
    let result = format!("baton/{run}/result");
    assert_eq!(git(root, &["show", &format!("{result}:a.txt")]), "from a");
    assert_eq!(git(root, &["show", &format!("{result}:b.txt")]), "from b");
    assert_eq!(
        git(root, &["show", &format!("{result}:shared.txt")]),
        "line one"
    );
    // Each task's work is on its own branch; the worktrees are gone.
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/a:a.txt")]),
        "from a"
    );
    assert!(!root.join(".baton/worktrees").join(&run).join("a").exists());
    // The evidence says what each changed.
    let committed = out
        .store()
        .events_of(|k| matches!(k, EventKind::WorkspaceCommitted(_)));
    assert_eq!(committed.len(), 2);
    for event in committed {
        let EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
            evidence, commit, ..
        }) = event
        else {
            unreachable!()
        };
        assert!(commit.is_some());
        assert_eq!(evidence.files.len(), 1);
        assert_eq!(evidence.lines_added, 1);
    }
}

#[test]
fn a_dependent_starts_from_what_its_dependencies_committed() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "schema"
run = "echo 'users(id)' > schema.sql"

[[task]]
id = "docs"
run = "echo 'readme' > README"

[[task]]
id = "api"
needs = ["schema", "docs"]
run = "cat schema.sql README; echo 'GET /users' > api.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("api")["output"], "users(id)\nreadme");
    let run = run_id(&out);
    let result = format!("baton/{run}/result");
    for file in ["schema.sql", "README", "api.txt"] {
        git(out.path(), &["cat-file", "-e", &format!("{result}:{file}")]);
    }
}

#[test]
fn a_change_outside_the_scope_is_a_warning_or_under_enforce_a_failure() {
    let graph = |policy: &str| {
        format!(
            r#"
[[task]]
id = "a"
workspace = "worktree"
scope = ["src/**"]
scope_policy = "{policy}"
run = "mkdir -p src && echo x > src/a.rs && echo y > outside.txt"
"#
        )
    };
    let warned = repo_with(&graph("warn"))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(warned.json()["run"]["state"], "succeeded_with_warnings");
    let committed = warned
        .store()
        .events_of(|k| matches!(k, EventKind::WorkspaceCommitted(_)));
    let EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
        scope_violations, ..
    }) = &committed[0]
    else {
        unreachable!()
    };
    assert_eq!(scope_violations, &["outside.txt"]);
    // The result document and the summary say so too.
    let workspace = &warned.json_task("a")["workspace"];
    assert_eq!(
        workspace["scope_violations"][0], "outside.txt",
        "{workspace}"
    );
    assert_eq!(workspace["evidence"]["files"].as_array().unwrap().len(), 2);
    assert_eq!(workspace["evidence"]["files"][0]["kind"], "created");
    warned
        .then()
        .args(&["status"])
        .run()
        .status(0)
        .stdout_contains("2 files +2 -0")
        .stdout_contains("outside its scope: outside.txt");

    let enforced = repo_with(&graph("enforce"))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let task = enforced.json_task("a");
    assert_eq!(task["state"], "failed", "{task}");
    assert_eq!(task["outcome"]["kind"], "out-of-scope", "{task}");
    assert_eq!(task["outcome"]["files"][0], "outside.txt", "{task}");
}

#[test]
fn a_failing_check_fails_the_task_and_its_output_is_kept() {
    let graph = r#"
[[task]]
id = "build"
workspace = "worktree"
run = "echo 'fn main() {}' > main.rs"
verify = ["test -f main.rs", "grep -q missing main.rs || { echo 'no missing in main.rs' >&2; exit 3; }"]

[[task]]
id = "after"
needs = ["build"]
run = "echo never"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let build = out.json_task("build");
    assert_eq!(build["state"], "failed", "{build}");
    assert_eq!(build["outcome"]["kind"], "verify-failed", "{build}");
    assert_eq!(out.json_task("after")["state"], "blocked");
    let checked = out
        .store()
        .events_of(|k| matches!(k, EventKind::Checked { .. }));
    let EventKind::Checked { checks, .. } = &checked[0] else {
        unreachable!()
    };
    assert_eq!(checks.len(), 2);
    assert!(checks[0].passed());
    assert_eq!(checks[1].outcome, Outcome::Exited { code: 3 });
    assert!(
        checks[1].output.contains("no missing in main.rs"),
        "{:?}",
        checks[1]
    );
    // The work was kept on the task's branch all the same.
    let run = run_id(&out);
    git(
        out.path(),
        &["cat-file", "-e", &format!("baton/{run}/build:main.rs")],
    );
}

#[test]
fn conflicting_edits_need_a_person_who_is_told_which_tasks_and_files() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "left"
run = "echo left > shared.txt"

[[task]]
id = "right"
run = "echo right > shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json()["run"]["state"], "needs_human");
    let merged = out
        .store()
        .events_of(|k| matches!(k, EventKind::ResultMerged { .. }));
    let EventKind::ResultMerged {
        conflict_task,
        conflict_with,
        conflict_files,
        ..
    } = &merged[0]
    else {
        unreachable!()
    };
    assert_eq!(conflict_task.as_deref(), Some("right"));
    assert_eq!(conflict_with, &["left"]);
    assert_eq!(conflict_files, &["shared.txt"]);
    out.then()
        .args(&["events", "latest"])
        .run()
        .status(0)
        .stdout_contains("`right` conflicts with `left` in shared.txt");
}

#[test]
fn dependencies_whose_changes_conflict_leave_the_dependent_to_a_person() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "left"
run = "echo left > shared.txt"

[[task]]
id = "right"
run = "echo right > shared.txt"

[[task]]
id = "both"
needs = ["left", "right"]
run = "cat shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let both = out.json_task("both");
    assert_eq!(both["state"], "needs_human", "{both}");
    assert_eq!(both["outcome"]["kind"], "merge-conflict", "{both}");
    assert_eq!(both["outcome"]["files"][0], "shared.txt", "{both}");
    assert_eq!(out.json()["run"]["state"], "needs_human");

    // The conflicted merge waits in the task's worktree, and `next` says how to finish it
    // (#16 item 8): edit, commit, resume.
    let run = run_id(&out);
    let worktree = out.path().join(format!(".baton/worktrees/{run}/both"));
    let conflicted = std::fs::read_to_string(worktree.join("shared.txt")).unwrap();
    assert!(conflicted.contains("<<<<<<<"), "{conflicted}");
    let status = out.then().args(&["status", "--json"]).run().status(0);
    let next: Vec<String> = status.json()["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    let dir = worktree.canonicalize().unwrap_or(worktree.clone());
    let commit = next
        .iter()
        .find(|c| c.ends_with("commit -a --no-edit") && c.contains("/both"))
        .unwrap_or_else(|| panic!("{next:?}"));
    assert!(
        next.iter().any(|c| c.contains("edit shared.txt")),
        "{next:?}"
    );
    assert_eq!(next.last().unwrap(), &format!("baton resume {run}"));
    // A resume before it is resolved finds it as it was.
    let early = status.then().args(&["resume", &run, "--json"]).run();
    assert_eq!(early.json_task("both")["state"], "needs_human");
    std::fs::write(dir.join("shared.txt"), "left and right\n").unwrap();
    let ran = Command::new("sh")
        .args(["-c", commit])
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    // Resumed, the task goes on from the resolution, and the run's result is made from it:
    // `left` and `right` are in `both`, whose branch holds the resolution, so they are not
    // merged again on their own (which would conflict again).
    let resumed = early.then().args(&["resume", &run, "--json"]).run();
    let both = resumed.json_task("both");
    assert_eq!(both["state"], "succeeded", "{both}");
    assert_eq!(both["output"], "left and right", "{both}");
    assert_eq!(
        resumed.json()["run"]["state"],
        "succeeded",
        "{}",
        resumed.stdout
    );
    assert_eq!(
        git(
            resumed.path(),
            &["show", &format!("baton/{run}/result:shared.txt")]
        ),
        "left and right"
    );
}

#[test]
fn the_run_s_checks_judge_the_merged_result() {
    let graph = |check: &str| {
        format!(
            r#"
[run]
verify = ["{check}"]

[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo a > a.txt"

[[task]]
id = "b"
run = "echo b > b.txt"
"#
        )
    };
    // The check leaves a file behind in its checkout.
    let passed = repo_with(&graph("test -f a.txt && test -f b.txt && touch stray"))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    // The check's checkout went back to the pool with the tasks' worktrees; a second run's
    // check takes one from there (no file of an earlier check left in it: it passes only if
    // the new result is what it sees).
    let pool = passed.path().join(".baton/worktrees/.pool");
    let pooled: Vec<String> = std::fs::read_dir(&pool)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(pooled.iter().any(|n| n.ends_with("-verify")), "{pooled:?}");
    passed
        .then()
        .graph(
            "graph.toml",
            &graph("test -f a.txt && test -f b.txt && ! test -f stray"),
        )
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let failed = repo_with(&graph("test -f c.txt"))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(failed.json()["run"]["state"], "failed");
    let checked = failed
        .store()
        .events_of(|k| matches!(k, EventKind::Checked { task: None, .. }));
    assert_eq!(checked.len(), 1);
}

#[test]
fn diff_shows_a_task_s_change_and_apply_merges_the_result_into_a_clean_tree_only() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo from a > a.txt"

[[task]]
id = "b"
needs = ["a"]
run = "echo 'line two' >> shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    // A task's diff is its own change, not its dependencies'.
    let diff_b = out.then().args(&["diff", &run, "b"]).run().status(0);
    let text = diff_b.stdout.clone();
    assert!(text.contains("+line two"), "{text}");
    assert!(!text.contains("a.txt"), "{text}");
    let whole = diff_b.then().args(&["diff", &run]).run().status(0);
    let text = whole.stdout.clone();
    assert!(
        text.contains("a.txt") && text.contains("+line two"),
        "{text}"
    );

    // A dirty tree is refused, and left as it was.
    std::fs::write(whole.path().join("shared.txt"), "my own edit\n").unwrap();
    let refused = whole
        .then()
        .args(&["apply", &run])
        .run()
        .status(2)
        .stderr_contains("uncommitted changes are in the way of the merge: shared.txt (modified)");
    assert_eq!(
        std::fs::read_to_string(refused.path().join("shared.txt")).unwrap(),
        "my own edit\n"
    );
    git(refused.path(), &["checkout", "--", "shared.txt"]);
    let applied = refused.then().args(&["apply", &run]).run().status(0);
    let root = applied.path();
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "from a\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("shared.txt")).unwrap(),
        "line one\nline two\n"
    );
    assert_eq!(git(root, &["status", "--porcelain"]), "");
}

#[test]
fn a_failed_check_goes_back_to_the_task_to_fix() {
    // The command fixes its work only when told what failed: the second call, with
    // $BATON_FIX_FEEDBACK naming the check's output.
    let graph = |rounds: u32| {
        format!(
            r#"
[[task]]
id = "build"
workspace = "worktree"
fix_attempts = {rounds}
run = '''
if [ -n "$BATON_FIX_FEEDBACK" ] && grep -q "grep -q fixed" "$BATON_FIX_FEEDBACK"; then
  echo "fixed in round $BATON_FIX_ATTEMPT" > ok.txt
else
  echo broken > ok.txt
fi
'''
verify = ["grep -q fixed ok.txt"]
"#
        )
    };
    let failed = repo_with(&graph(0))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(
        failed.json_task("build")["outcome"]["kind"],
        "verify-failed"
    );

    let fixed = repo_with(&graph(2))
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let task = fixed.json_task("build");
    assert_eq!(task["state"], "succeeded", "{task}");
    assert_eq!(task["attempts"], 1, "{task}");
    let checked = fixed
        .store()
        .events_of(|k| matches!(k, EventKind::Checked { .. }));
    let passes: Vec<bool> = checked
        .iter()
        .map(|k| match k {
            EventKind::Checked { checks, .. } => checks.iter().all(|c| c.passed()),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(passes, [false, true]);
    let run = run_id(&fixed);
    assert_eq!(
        git(
            fixed.path(),
            &["show", &format!("baton/{run}/result:ok.txt")]
        ),
        "fixed in round 1"
    );
}

#[test]
fn what_an_interrupted_attempt_left_in_its_worktree_is_saved_before_the_task_goes_on() {
    let graph = r#"
[[task]]
id = "slow"
workspace = "worktree"
run = '''
if [ "$BATON_ATTEMPT" = 1 ]; then
  echo "half done" > half.txt
  sleep 60
else
  echo "all done" > done.txt
fi
'''
"#;
    let mut running = repo_with(graph).args(&["run", "graph.toml"]).spawn();
    // The first attempt has written its half when its worktree holds the file.
    running.await_that("the first half", crate::test::RUN_LIMIT, |root: &Path| {
        // Its start recorded too: a crash before that commit would run attempt 1 again.
        let store = crate::test::Store::once_a_run_is_in(root)?;
        store.try_run()?;
        store.attempts("slow").first()?;
        let worktrees = root.join(".baton/worktrees");
        std::fs::read_dir(&worktrees)
            .ok()?
            .flatten()
            .map(|run| run.path().join("slow/half.txt"))
            .find(|p| p.exists())
    });
    let (run, resumed) = running.kill_and_resume();
    let root = resumed.path();
    // The half survived the crash as a checkpoint commit, kept on the interrupted attempt's
    // ref; the attempt after it (a shell task: no session to continue) started again from the
    // task's start, so the result holds its work alone, not one on top of the other (#28).
    let kept = format!("refs/baton/{run}/slow/attempt-1");
    let log = git(root, &["log", "--format=%s", &kept]);
    assert!(log.contains("checkpoint of slow"), "{log}");
    assert_eq!(
        git(root, &["show", &format!("{kept}:half.txt")]),
        "half done"
    );
    let result = format!("baton/{run}/result");
    let files = git(root, &["ls-tree", "--name-only", &result]);
    assert!(!files.contains("half.txt"), "{files}");
    assert_eq!(
        git(root, &["show", &format!("{result}:done.txt")]),
        "all done"
    );
    // What the task changed is measured from where it started: its evidence and `baton diff`
    // name the file of the attempt that succeeded; `--attempt 1` shows the half.
    let files: Vec<String> = resumed.json_task("slow")["workspace"]["evidence"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", resumed.json_task("slow")))
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(files, ["done.txt"]);
    let first = resumed
        .then()
        .args(&["diff", &run, "slow", "--attempt", "1"])
        .run()
        .status(0);
    assert!(first.stdout.contains("+half done"), "{}", first.stdout);
    let diff = first.then().args(&["diff", &run, "slow"]).run().status(0);
    assert!(
        diff.stdout.contains("+all done") && !diff.stdout.contains("half"),
        "{}",
        diff.stdout
    );
}

#[test]
fn prune_removes_a_run_s_branches_with_it() {
    let graph = "[[task]]\nid = \"a\"\nworkspace = \"worktree\"\nrun = \"echo a > a.txt\"\n";
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    let branches = git(out.path(), &["branch", "--list", &format!("baton/{run}/*")]);
    assert!(branches.contains(&format!("baton/{run}/a")), "{branches}");
    let pruned = out.then().args(&["prune", "--keep", "0"]).run().status(0);
    let branches = git(pruned.path(), &["branch", "--list", "baton/*"]);
    assert_eq!(branches, "");
    // The user's own branch stays.
    assert!(!git(pruned.path(), &["branch", "--list", "master", "main"]).is_empty());
}

#[test]
fn a_new_worktree_gets_what_git_ignores_and_its_setup_before_the_task() {
    let graph = r#"
[[task]]
id = "a"
workspace = "worktree"
worktree_include = [".env", "deps"]
setup = ["test -f .env", "echo installed > .setup-ran"]
run = "cat .env deps/lib.txt .setup-ran"
"#;
    let test = repo_with(graph)
        .file(".gitignore", ".env\ndeps/\n.setup-ran\n")
        .file(".env", "SECRET_NAME=dev\n")
        .file("deps/lib.txt", "a library\n");
    git(test.path(), &["add", ".gitignore"]);
    git(test.path(), &["commit", "-qm", "ignore"]);
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    assert_eq!(
        out.json_task("a")["output"],
        "SECRET_NAME=dev\na library\ninstalled"
    );

    // A setup that fails is the machinery's failure, shown as such, and is tried again.
    let failing = r#"
[[task]]
id = "a"
workspace = "worktree"
setup = ["echo 'cannot fetch deps' >&2; exit 7"]
run = "echo never"
retries = 1
backoff = "10ms"
"#;
    let out = repo_with(failing)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let task = out.json_task("a");
    assert_eq!(task["attempts"], 2, "{task}");
    let error = task["outcome"]["error"].as_str().unwrap();
    assert!(error.starts_with("setup `echo"), "{error}");
    assert!(error.contains("cannot fetch deps"), "{error}");
}

#[test]
fn a_failing_run_check_is_bisected_to_the_task_that_broke_it() {
    // Four independent tasks; the third in merge order breaks the check (it deletes a file
    // the check needs), and the ones merged after it change nothing the check looks at.
    let graph = r#"
[run]
verify = ["test -f shared.txt"]

[defaults]
workspace = "worktree"

[[task]]
id = "one"
run = "echo 1 > one.txt"

[[task]]
id = "two"
run = "echo 2 > two.txt"

[[task]]
id = "breaker"
run = "rm shared.txt"

[[task]]
id = "four"
run = "echo 4 > four.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json()["run"]["state"], "failed");
    let checked = out
        .store()
        .events_of(|k| matches!(k, EventKind::Checked { task: None, .. }));
    assert!(
        !checked.is_empty(),
        "no check of the result: {}",
        out.json()
    );
    let EventKind::Checked { blamed, checks, .. } = &checked[0] else {
        unreachable!()
    };
    assert!(!checks[0].passed());
    assert_eq!(blamed.as_deref(), Some("breaker"));
    let after = out
        .then()
        .args(&["events", "latest"])
        .run()
        .status(0)
        .stdout_contains("first failing after merging `breaker`");
    // The probes' checkouts are gone, branch and all.
    assert_eq!(
        git(after.path(), &["branch", "--list", "baton/*/+verify*"]),
        ""
    );
}

#[test]
fn a_conflict_resolved_on_the_task_branches_lets_the_run_be_resumed() {
    let graph = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "left"
run = "echo left > shared.txt"

[[task]]
id = "right"
run = "echo right > shared.txt"
"#;
    let out = repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    assert_eq!(out.json()["run"]["state"], "needs_human");
    let run = run_id(&out);
    let root = out.path().to_owned();
    // The person resolves it in `right`'s worktree (kept for them): merges `left` in, keeps
    // both lines, commits on the task's branch.
    let worktree = root.join(".baton/worktrees").join(&run).join("right");
    let merge = Command::new("git")
        .args(["merge", "-q", &format!("baton/{run}/left")])
        .current_dir(&worktree)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(!merge.status.success(), "the merge conflicts");
    std::fs::write(worktree.join("shared.txt"), "left\nright\n").unwrap();
    git(&worktree, &["add", "shared.txt"]);
    git(&worktree, &["commit", "-qm", "resolved"]);
    let before = user_view(&root);

    let resumed = out.then().args(&["resume", &run, "--json"]).run().status(0);
    assert_eq!(resumed.json()["run"]["state"], "succeeded");
    assert_eq!(
        git(
            resumed.path(),
            &["show", &format!("baton/{run}/result:shared.txt")]
        ),
        "left\nright"
    );
    assert_eq!(user_view(resumed.path()), before);
}

/// A `PATH` with a `git` that kills its parent, the driver, the first time it is asked for
/// a command matching `pattern` (a shell `case` pattern, matched against ` ARGS `) in a
/// directory matching `dir` (another, against `$PWD`). A second later, if it is still
/// running, it leaves `.outlived` in the repository: see [`assert_died_with_the_driver`].
pub(crate) fn git_shim_killing_once(test: &Test, pattern: &str, dir: &str) -> String {
    let once = test.path().join(".kill-once");
    std::fs::write(&once, "").unwrap();
    git_shim(
        test,
        &format!(
            "{pattern})\n\
             \tcase \"$PWD\" in {dir}) if rm '{}' 2>/dev/null; then\n\
             \t\tkill -9 $PPID; sleep 1; touch '{}'; exit 1\n\
             \tfi;; esac;;",
            once.display(),
            test.path().join(".outlived").display()
        ),
    )
}

/// The git command that [`git_shim_killing_once`] made kill the driver died with it: one that
/// writes a worktree's files (a checkout can take minutes on a large repository) must not go
/// on writing, its `index.lock` in the way of the takeover's own commands, while the takeover
/// makes that worktree again at the same path.
#[track_caller]
pub(crate) fn assert_died_with_the_driver(root: &Path) {
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        !root.join(".outlived").exists(),
        "git went on after the driver that started it died"
    );
}

/// A `PATH` with a `git` whose commands matching `pattern` (a shell `case` pattern, matched
/// against ` ARGS `) wait until `until` exists (30 s at most, then fail) before running.
pub(crate) fn git_shim_holding(test: &Test, pattern: &str, until: &Path) -> String {
    git_shim(
        test,
        &format!(
            "{pattern})\n\
             \tn=0; while [ ! -e '{}' ]; do\n\
             \t\tn=$((n+1)); [ $n -gt 300 ] && {{ echo 'never came: {}' >&2; exit 1; }}; sleep 0.1\n\
             \tdone;;",
            until.display(),
            until.display()
        ),
    )
}

/// A `PATH` with a `git` first on it that runs `case_arms` (shell `case` arms matched against
/// ` ARGS `) before it runs the real git: to hold up or break one git command of baton's.
pub(crate) fn git_shim(test: &Test, case_arms: &str) -> String {
    let real_git = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real_git = String::from_utf8(real_git.stdout).unwrap();
    let shim = test.path().join(".shim");
    std::fs::create_dir(&shim).unwrap();
    std::fs::write(
        shim.join("git"),
        format!(
            "#!/bin/sh\ncase \" $* \" in\n{case_arms}\nesac\nexec '{}' \"$@\"\n",
            real_git.trim()
        ),
    )
    .unwrap();
    let executable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(shim.join("git"), executable).unwrap();
    format!("{}:{}", shim.display(), std::env::var("PATH").unwrap())
}

mod holds;
mod hostile;
mod trees;
