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
        .events_of(|k| matches!(k, EventKind::WorkspaceCommitted { .. }));
    assert_eq!(committed.len(), 2);
    for event in committed {
        let EventKind::WorkspaceCommitted {
            evidence, commit, ..
        } = event
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
        .events_of(|k| matches!(k, EventKind::WorkspaceCommitted { .. }));
    let EventKind::WorkspaceCommitted {
        scope_violations, ..
    } = &committed[0]
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

/// The names in the worktree pool, `.baton/worktrees/.pool`.
fn pooled(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(".baton/worktrees/.pool"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(".git").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A finished run's worktrees wait in a pool, and the next run's tasks take them instead of
/// checking out every file again (#16 goal 2): clean, with nothing of the task before (its
/// files, what git ignores), and `setup` run again. `BATON_WORKTREE_POOL=0` keeps none.
#[test]
fn the_next_run_reuses_a_finished_run_s_worktrees_clean() {
    let first = r#"
[[task]]
id = "t"
workspace = "worktree"
run = "echo one > out.txt; echo noise > build.log"
"#;
    let out = repo_with(first)
        .file(".gitignore", "*.log\n.baton/\n")
        .file(
            "second.toml",
            r#"
[[task]]
id = "u"
workspace = "worktree"
setup = ["echo set up > setup.log"]
run = "ls -A | grep -v '^.git$' | sort | tr '\n' ' '"
"#,
        );
    git(out.path(), &["add", "-A"]);
    git(
        out.path(),
        &["commit", "-qm", "ignore logs, a second graph"],
    );
    let out = out.args(&["run", "graph.toml", "--json"]).run().status(0);
    let first_run = run_id(&out);
    assert_eq!(pooled(out.path()), [format!("{first_run}-t")]);
    let root = out.path().to_owned();
    // The pooled worktree waits detached at the run's base, with nothing of the task's.
    let waiting = root.join(format!(".baton/worktrees/.pool/{first_run}-t"));
    assert!(!waiting.join("out.txt").exists() && !waiting.join("build.log").exists());

    let second = out
        .then()
        .args(&["run", "second.toml", "--json"])
        .run()
        .status(0);
    let second_run = run_id(&second);
    // It was taken (not left beside a new one), and given back at the end.
    assert_eq!(pooled(&root), [format!("{second_run}-u")]);
    assert_eq!(
        second.json_task("u")["output"],
        ".gitignore graph.toml second.toml setup.log shared.txt "
    );
    // The first task's work is on its branch all the same.
    assert_eq!(
        git(&root, &["show", &format!("baton/{first_run}/t:out.txt")]),
        "one"
    );

    let none = second
        .then()
        .env("BATON_WORKTREE_POOL", "0")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    // Taken from the pool, and not given back.
    assert_eq!(pooled(none.path()), Vec::<String>::new());

    // An explicit prune empties the pool (a cache: the next run fills it again).
    let again = none
        .then()
        .env("BATON_WORKTREE_POOL", "8")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(pooled(again.path()).len(), 1);
    let pruned = again
        .then()
        .args(&["prune", "--keep", "10"])
        .run()
        .status(0)
        .stdout_contains("removed 1 worktrees kept for the next runs' tasks");
    assert_eq!(pooled(pruned.path()), Vec::<String>::new());
    let listed = git(pruned.path(), &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains(".pool"), "{listed}");
}

/// The pool holds at most `BATON_WORKTREE_POOL` worktrees, even when many tasks end at once
/// and each finds room before any of them has moved its worktree in.
#[test]
fn many_tasks_ending_at_once_never_overfill_the_pool() {
    let graph = (0..8)
        .map(|i| {
            format!(
                "[[task]]\nid = \"t{i}\"\nworkspace = \"worktree\"\nrun = \"echo {i} > f{i}.txt\"\n"
            )
        })
        .collect::<String>();
    let out = repo_with(&format!("[run]\nconcurrency = 8\n\n{graph}"))
        .env("BATON_WORKTREE_POOL", "2")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let kept = pooled(out.path());
    assert_eq!(kept.len(), 2, "filled, and no more: {kept:?}");
    // Those that found no room were removed, their work kept on their branches.
    let run = run_id(&out);
    for i in 0..8 {
        assert_eq!(
            git(
                out.path(),
                &["show", &format!("baton/{run}/result:f{i}.txt")]
            ),
            i.to_string()
        );
    }
    // What went over was removed whole: git knows no worktree that is not on disk.
    let listed = git(out.path(), &["worktree", "list", "--porcelain"]);
    let pool_entries = listed.matches(".pool/").count();
    assert_eq!(pool_entries, kept.len(), "{listed}");
}

/// `workspace = "worktree"` where no worktree can be made (#16 item 5) is refused before
/// anything runs, naming the task and what to do: outside a git repository, and in one with no
/// commit yet.
#[test]
fn a_worktree_asked_for_where_none_can_be_made_is_refused_up_front() {
    let graph = "[[task]]\nid = \"edit\"\nworkspace = \"worktree\"\nrun = \"touch made\"\n";
    // A repository without a commit.
    let out = Test::new()
        .graph("graph.toml", graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains(
            "task `edit` asks for `workspace = \"worktree\"`, but the git repository at",
        )
        .stderr_contains("has no commit yet to branch from")
        .stderr_contains("git commit -m start");
    assert!(!out.path().join("made").exists(), "the task ran");
    assert!(Store::try_open(out.path()).is_none_or(|s| s.try_run().is_none()));
    // No repository at all.
    let test = Test::new().graph("graph.toml", graph);
    std::fs::remove_dir_all(test.path().join(".git")).unwrap();
    let out = test
        .args(&["run", "graph.toml"])
        .run()
        .status(2)
        .stderr_contains("is not inside a git repository");
    assert!(!out.path().join("made").exists(), "the task ran");
}

/// Worktrees start from `HEAD`: the run names what of your checkout they will not have, and
/// `base = "working-tree"` starts them from the working tree as it is — uncommitted edits and
/// untracked files included, ignored ones not — without touching your index, branch or files
/// (#16 item 6).
#[test]
fn the_run_says_what_worktrees_lack_and_can_start_from_the_working_tree() {
    let task = r#"
[[task]]
id = "look"
workspace = "worktree"
run = "cat build.sh shared.txt && { test ! -e secret.log || echo ignored-came-along; }"
"#;
    let test = repo_with(task).file(".gitignore", "*.log\n");
    git(test.path(), &["add", ".gitignore"]);
    git(test.path(), &["commit", "-qm", "ignore logs"]);
    let test = test
        .file("build.sh", "echo building\n")
        .file("shared.txt", "my own edit\n")
        .file("secret.log", "ignored\n")
        .file(
            "snap.toml",
            format!("[run]\nbase = \"working-tree\"\n{task}"),
        );
    let status_before = git(test.path(), &["status", "--porcelain"]);
    let head_before = git(test.path(), &["rev-parse", "HEAD"]);
    let out = test
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1)
        .stderr_contains(
            "worktrees start from HEAD, without your uncommitted changes: build.sh (untracked), \
             shared.txt (modified), snap.toml (untracked); commit them, or set `base = \
             \"working-tree\"`",
        );
    assert_eq!(out.json_task("look")["state"], "failed");
    let snap = out
        .then()
        .args(&["run", "snap.toml", "--json"])
        .run()
        .status(0);
    assert!(
        !snap.stderr.contains("worktrees start from HEAD"),
        "{}",
        snap.stderr
    );
    assert_eq!(
        snap.json_task("look")["output"],
        "echo building\nmy own edit"
    );
    // Yours is as it was.
    assert_eq!(git(snap.path(), &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git(snap.path(), &["status", "--porcelain"]), status_before);
}

/// A task that succeeded hands its worktree on at once: the run's next tasks take it from the
/// pool (four tasks one after another use one worktree), and a conflict at the result's merge
/// makes the task's worktree again for the person who resolves it (`conflicts.rs`).
#[test]
fn tasks_of_one_run_hand_their_worktree_on() {
    let graph = (1..=4)
        .map(|i| {
            format!(
                "[[task]]\nid = \"t{i}\"\nworkspace = \"worktree\"\nrun = \"echo {i} > f{i}.txt\"\n"
            )
        })
        .collect::<String>();
    let out = repo_with(&graph)
        .args(&["run", "graph.toml", "-j", "1", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    assert_eq!(pooled(out.path()).len(), 1, "{:?}", pooled(out.path()));
    // Each task's work is on its branch, and the result has all four.
    for i in 1..=4 {
        assert_eq!(
            git(
                out.path(),
                &["show", &format!("baton/{run}/result:f{i}.txt")]
            ),
            i.to_string()
        );
        assert_eq!(
            git(out.path(), &["show", &format!("baton/{run}/t{i}:f{i}.txt")]),
            i.to_string()
        );
    }
}

/// A task's worktree is made by its attempt, off the thread every other attempt is driven
/// from: while `git worktree add` checks out (seconds on a large repository), the run's
/// other tasks start and run. Here `git worktree add` waits until task `b` has run; made on
/// the dispatcher's thread, it would hold `b` back, and time out.
#[test]
fn other_tasks_run_while_a_worktree_is_being_made() {
    let graph = r#"
[run]
concurrency = 2

[[task]]
id = "a"
workspace = "worktree"
run = "echo from a > a.txt"

[[task]]
id = "b"
run = "touch b-ran"
"#;
    let test = repo_with(graph);
    let marker = test.path().join("b-ran");
    let path = git_shim_holding(&test, "*\" worktree add \"*", &marker);
    let out = test
        .env("PATH", &path)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = run_id(&out);
    assert_eq!(
        git(out.path(), &["show", &format!("baton/{run}/result:a.txt")]),
        "from a"
    );
}

/// Two runs in one repository at once, each making, pooling and removing worktrees: git's
/// commands on `.git/worktrees/` race between processes as between threads (one listing the
/// worktrees fails on one another is still making), so baton's take turns through a lock on
/// a file in the repository. Both runs succeed, every task's work on its branch.
#[test]
fn two_runs_in_one_repository_at_once_both_make_their_worktrees() {
    let tasks = |prefix: &str| {
        (0..6)
            .map(|n| {
                format!(
                    "[[task]]\nid = \"{prefix}{n}\"\nworkspace = \"worktree\"\nrun = \"echo {n} > {prefix}{n}.txt\"\n\n"
                )
            })
            .collect::<String>()
    };
    let test = repo_with("[[task]]\nid = \"x\"\nrun = \"true\"\n")
        .graph(
            "a.toml",
            &format!("[run]\nconcurrency = 6\n\n{}", tasks("a")),
        )
        .graph(
            "b.toml",
            &format!("[run]\nconcurrency = 6\n\n{}", tasks("b")),
        );
    git(test.path(), &["add", "-A"]);
    git(test.path(), &["commit", "-qm", "two graphs"]);
    let mut runs: Vec<std::process::Child> = ["a", "b"]
        .iter()
        .map(|name| {
            test.command(
                &["run", &format!("{name}.toml"), "--quiet"],
                &format!("{name}.log"),
            )
            .spawn()
            .expect("baton starts")
        })
        .collect();
    for (run, name) in runs.iter_mut().zip(["a", "b"]) {
        let status = run.wait().unwrap();
        let log = std::fs::read_to_string(test.path().join(format!("{name}.log"))).unwrap();
        assert!(status.success(), "run {name}: {status}\n{log}");
    }
    let branches = git(
        test.path(),
        &["branch", "--list", "baton/*/*", "--format=%(refname:short)"],
    );
    assert_eq!(
        branches.lines().filter(|b| !b.ends_with("/result")).count(),
        12,
        "{branches}"
    );
}

/// The driver dies after a task's worktree was registered and before it was checked out
/// (`worktree add --no-checkout`, then `reset --hard`): the takeover must not take the empty
/// directory for the task's work — committed as it is, it would delete every file on the
/// task's branch — but make the worktree again.
#[test]
fn a_worktree_registered_but_never_checked_out_is_made_again_on_resume() {
    let graph = r#"
[[task]]
id = "a"
workspace = "worktree"
run = "echo more >> shared.txt"
"#;
    let test = repo_with(graph);
    // The driver (git's parent) is killed as it asks for the checkout, once.
    let path = git_shim_killing_once(&test, "*\" reset --hard \"*", "*");
    let killed = test.env("PATH", &path).args(&["run", "graph.toml"]).run();
    assert_eq!(killed.code, None, "killed: {}", killed.stderr);
    assert_died_with_the_driver(killed.path());
    let (run, resumed) = killed.resumed();
    let root = resumed.path();
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/result:shared.txt")]),
        "line one\nmore"
    );
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/result:graph.toml")]),
        git(root, &["show", "HEAD:graph.toml"]),
        "nothing deleted"
    );
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

/// A task that starts from a merge of its dependencies and is tried again measures its
/// changes from that merge at every attempt, not from its first dependency's commit: the
/// other dependency's files are not the task's, and under an enforced scope would fail it.
#[test]
fn a_retried_task_measures_its_changes_from_its_merged_start() {
    let test = repo_with("[[task]]\nid = \"x\"\nrun = \"true\"\n");
    let tried = test.path().join("c-tried");
    let graph = format!(
        r#"
[defaults]
workspace = "worktree"

[[task]]
id = "a"
run = "echo a > a.txt"

[[task]]
id = "b"
run = "echo b > b.txt"

[[task]]
id = "c"
needs = ["a", "b"]
scope = ["c.txt"]
scope_policy = "enforce"
retries = 1
backoff = "10ms"
run = "echo c > c.txt; test -e '{tried}' || {{ touch '{tried}'; exit 1; }}"
"#,
        tried = tried.display()
    );
    std::fs::write(test.path().join("graph.toml"), graph).unwrap();
    git(test.path(), &["commit", "-qam", "the graph"]);
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let task = out.json_task("c");
    assert_eq!(task["attempts"], 2, "{task}");
    let changed: Vec<Vec<String>> = out
        .store()
        .events_of(
            |k| matches!(k, EventKind::WorkspaceCommitted { task, .. } if task.as_str() == "c"),
        )
        .into_iter()
        .map(|k| match k {
            EventKind::WorkspaceCommitted { evidence, .. } => {
                evidence.files.into_iter().map(|f| f.path).collect()
            }
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(changed, vec![vec!["c.txt".to_owned()]; 2]);
}

/// #31 item 7 (finding 14): a git killed with its driver between taking a ref's lock and
/// renaming it into place leaves `REF.lock`; every later update of that ref failed ("cannot
/// lock ref … File exists"), so the task failed for good on resume, and on retry. A takeover
/// removes the run's stale ref locks before it makes worktrees again.
#[test]
fn a_ref_lock_left_by_a_killed_git_does_not_fail_the_task_on_resume() {
    let graph = r#"
[[task]]
id = "slow"
workspace = "worktree"
run = '''
if [ "$BATON_ATTEMPT" = 1 ]; then sleep 60; else echo "all done" > done.txt; fi
'''
"#;
    let mut running = repo_with(graph).args(&["run", "graph.toml"]).spawn();
    running.await_that(
        "the first attempt",
        crate::test::RUN_LIMIT,
        |root: &Path| {
            let store = crate::test::Store::once_a_run_is_in(root)?;
            store.try_run()?;
            store.attempts("slow").first()?;
            Some(())
        },
    );
    let killed = running.kill();
    let run = killed.store().run().id.to_string();
    // What the killed git left: the lock of the task's branch, and of its kept attempt.
    let refs = killed.path().join(".git/refs");
    let branch = refs.join(format!("heads/baton/{run}/slow.lock"));
    std::fs::write(&branch, "").unwrap();
    let kept = refs.join(format!("baton/{run}/slow/attempt-1.lock"));
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::write(&kept, "").unwrap();
    let (_, resumed) = killed.resumed();
    let root = resumed.path();
    assert_eq!(
        git(root, &["show", &format!("baton/{run}/result:done.txt")]),
        "all done"
    );
    assert!(!branch.exists() && !kept.exists());
}
