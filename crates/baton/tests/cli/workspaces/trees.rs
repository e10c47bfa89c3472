//! The worktrees themselves: made while other tasks run, pooled and handed on clean, made
//! again when a crash left them half made, refused up front where none can be made.

use super::*;

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
    // Starting from HEAD on purpose (`base = "HEAD"`) is not told the note again.
    let head = snap
        .then()
        .file("head.toml", format!("[run]\nbase = \"HEAD\"\n{task}"))
        .args(&["run", "head.toml", "--json"])
        .run()
        .status(1);
    assert!(
        !head.stderr.contains("worktrees start from HEAD"),
        "{}",
        head.stderr
    );
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
            |k| matches!(k, EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit { task, .. }) if task.as_str() == "c"),
        )
        .into_iter()
        .map(|k| match k {
            EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit { evidence, .. }) => {
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
