//! Merging the tasks' branches into the run's result, and applying it to the user's branch.

mod common;

use baton_workspace::{Conflict, MergeOutcome, TaskStart};
use common::{Fixture, git, merged, parents, read, write};

#[test]
fn parallel_branches_from_one_base_both_arrive() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task_from_base(
        "b",
        &[
            ("b.txt", Some("b\n")),
            ("shared.txt", Some("one\ntwo\nthree\nfour\n")),
        ],
    );
    let scratch = fx.wt("merge");
    let result = merged(
        fx.repo
            .merge_into_branch(
                &scratch,
                "baton/r/result",
                "main",
                &[("api".into(), a.clone()), ("db".into(), "task/b".into())],
            )
            .unwrap(),
    );
    assert_eq!(
        fx.repo.branch_commit("baton/r/result").unwrap(),
        Some(result.clone())
    );
    assert!(!scratch.exists());
    assert_eq!(fx.worktree_count(), 1);

    let files = git(fx.root(), &["ls-tree", "-r", "--name-only", &result]);
    assert_eq!(files, "README.md\na.txt\nb.txt\nshared.txt");
    assert_eq!(
        git(fx.root(), &["show", &format!("{result}:shared.txt")]),
        "one\ntwo\nthree\nfour"
    );
    // One merge commit per task, never a fast-forward, named after the label.
    assert_eq!(
        git(
            fx.root(),
            &["log", "--first-parent", "--format=%s|%an", &result]
        ),
        "baton: merge task db|baton\nbaton: merge task api|baton\nbase|Test User"
    );
    let [first, second] = &parents(fx.root(), &result)[..] else {
        panic!("not a merge: {result}")
    };
    assert_eq!(second, &b);
    assert_eq!(parents(fx.root(), first), vec![fx.base.clone(), a]);

    // Called again: the branch is reset to the base, not merged on top.
    let again = merged(
        fx.repo
            .merge_into_branch(&scratch, "baton/r/result", &fx.base, &[])
            .unwrap(),
    );
    assert_eq!(again, fx.base);
    assert_eq!(
        fx.repo.branch_commit("baton/r/result").unwrap(),
        Some(fx.base.clone())
    );
}

#[test]
fn dependent_tasks_merge_cleanly_in_order() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task(
        "b",
        &TaskStart::Commit(a.clone()),
        &[("a.txt", Some("a, then b\n"))],
    );
    let result = merged(
        fx.repo
            .merge_into_branch(
                &fx.wt("merge"),
                "baton/r/result",
                &fx.base,
                &[("a".into(), a), ("b".into(), b)],
            )
            .unwrap(),
    );
    assert_eq!(
        git(fx.root(), &["show", &format!("{result}:a.txt")]),
        "a, then b"
    );
}

#[test]
fn a_conflict_names_the_file_and_the_label_and_keeps_the_last_good_merge() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task_from_base("b", &[("shared.txt", Some("one\nTWO by b\nthree\n"))]);
    let c = fx.task_from_base("c", &[("shared.txt", Some("one\nTWO by c\nthree\n"))]);
    let d = fx.task_from_base("d", &[("d.txt", Some("d\n"))]);
    let scratch = fx.wt("merge");
    let outcome = fx
        .repo
        .merge_into_branch(
            &scratch,
            "baton/r/result",
            &fx.base,
            &[
                ("a".into(), a),
                ("b".into(), b),
                ("c".into(), c),
                ("d".into(), d),
            ],
        )
        .unwrap();
    assert_eq!(
        outcome,
        MergeOutcome::Conflict(Conflict {
            incoming: "c".into(),
            files: vec!["shared.txt".into()],
        })
    );
    assert!(!scratch.exists());
    assert_eq!(fx.worktree_count(), 1);
    let head = fx.repo.branch_commit("baton/r/result").unwrap().unwrap();
    assert_eq!(
        git(fx.root(), &["log", "-1", "--format=%s", &head]),
        "baton: merge task b"
    );
    let files = git(fx.root(), &["ls-tree", "-r", "--name-only", &head]);
    assert_eq!(files, "README.md\na.txt\nshared.txt");
}

#[test]
fn a_failing_merge_still_removes_the_scratch_worktree() {
    let fx = Fixture::new();
    // A commit with no history in common with the base.
    git(fx.root(), &["switch", "--quiet", "--orphan", "elsewhere"]);
    write(fx.root(), "other.txt", "x\n");
    git(fx.root(), &["add", "other.txt"]);
    git(fx.root(), &["commit", "--quiet", "-m", "unrelated"]);
    git(fx.root(), &["switch", "--quiet", "main"]);
    let scratch = fx.wt("merge");
    let error = fx
        .repo
        .merge_into_branch(
            &scratch,
            "baton/r/result",
            &fx.base,
            &[("x".into(), "elsewhere".into())],
        )
        .unwrap_err()
        .to_string();
    assert!(error.contains("unrelated histories"), "{error}");
    assert!(!scratch.exists());
    assert_eq!(fx.worktree_count(), 1);

    // A missing commit is reported before anything is created.
    let error = fx
        .repo
        .merge_into_branch(
            &scratch,
            "baton/r/other",
            &fx.base,
            &[("x".into(), "nope".into())],
        )
        .unwrap_err()
        .to_string();
    assert!(error.contains("no commit `nope`"), "{error}");
    assert_eq!(fx.repo.branch_commit("baton/r/other").unwrap(), None);
}

#[test]
fn a_scratch_worktree_left_by_a_crash_is_replaced() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let scratch = fx.wt("merge");
    fx.repo
        .add_worktree(
            &scratch,
            "baton/r/result",
            &TaskStart::Commit(fx.base.clone()),
        )
        .unwrap();
    write(&scratch, "half-done.txt", "x\n");
    let result = merged(
        fx.repo
            .merge_into_branch(&scratch, "baton/r/result", &fx.base, &[("a".into(), a)])
            .unwrap(),
    );
    assert!(!scratch.exists());
    assert_eq!(
        fx.repo.branch_commit("baton/r/result").unwrap(),
        Some(result)
    );
}

#[test]
fn apply_fast_forwards_a_clean_tree() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let result = merged(
        fx.repo
            .merge_into_branch(&fx.wt("m"), "baton/r/result", &fx.base, &[("a".into(), a)])
            .unwrap(),
    );
    let outcome = fx
        .repo
        .apply("baton/r/result", "baton: apply run r", false)
        .unwrap();
    assert_eq!(outcome, MergeOutcome::Merged(result.clone()));
    assert_eq!(git(fx.root(), &["rev-parse", "main"]), result);
    assert_eq!(git(fx.root(), &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(read(fx.root(), "a.txt"), "a\n");
    assert!(!fx.repo.is_dirty().unwrap());
}

#[test]
fn apply_makes_a_merge_commit_when_the_branch_moved_on() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    write(fx.root(), "user.txt", "mine\n");
    git(fx.root(), &["add", "user.txt"]);
    git(fx.root(), &["commit", "--quiet", "-m", "user's work"]);
    let user = git(fx.root(), &["rev-parse", "HEAD"]);

    let head = merged(fx.repo.apply(&a, "baton: apply run r", false).unwrap());
    assert_eq!(parents(fx.root(), &head), vec![user, a]);
    assert_eq!(
        git(fx.root(), &["log", "-1", "--format=%s", &head]),
        "baton: apply run r"
    );
    assert_eq!(git(fx.root(), &["rev-parse", "main"]), head);
    assert_eq!(read(fx.root(), "a.txt"), "a\n");
    assert_eq!(read(fx.root(), "user.txt"), "mine\n");
    assert!(!fx.repo.is_dirty().unwrap());
}

#[test]
fn apply_refuses_a_dirty_tree_and_a_detached_head() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    // An untracked file where the merge writes one, an edit of a file it changes, anything
    // staged: named, and refused.
    write(fx.root(), "a.txt", "mine\n");
    write(fx.root(), "elsewhere.txt", "x\n");
    write(fx.root(), "staged.txt", "x\n");
    git(fx.root(), &["add", "staged.txt"]);
    let error = fx.repo.apply(&a, "m", false).unwrap_err().to_string();
    assert_eq!(
        error,
        "uncommitted changes are in the way of the merge: a.txt (untracked), staged.txt \
         (staged); commit or stash them first"
    );
    git(fx.root(), &["rm", "--quiet", "--cached", "staged.txt"]);
    std::fs::remove_file(fx.root().join("staged.txt")).unwrap();
    std::fs::remove_file(fx.root().join("a.txt")).unwrap();
    // One the merge does not touch stays, and does not stop it.
    let applied = merged(fx.repo.apply(&a, "m", false).unwrap());
    assert_eq!(git(fx.root(), &["rev-parse", "main"]), applied);
    assert_eq!(read(fx.root(), "elsewhere.txt"), "x\n");
    git(fx.root(), &["reset", "--quiet", "--hard", &fx.base]);
    std::fs::remove_file(fx.root().join("elsewhere.txt")).unwrap();

    git(fx.root(), &["switch", "--quiet", "--detach", "main"]);
    let error = fx.repo.apply(&a, "m", false).unwrap_err().to_string();
    assert!(error.contains("HEAD is detached"), "{error}");
    assert_eq!(git(fx.root(), &["rev-parse", "main"]), fx.base);
}

#[test]
fn apply_aborts_a_conflict() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("shared.txt", Some("one\nTWO by a\nthree\n"))]);
    write(fx.root(), "shared.txt", "one\nTWO by the user\nthree\n");
    git(fx.root(), &["commit", "--quiet", "-am", "user's edit"]);
    let before = fx.main_state();
    let outcome = fx.repo.apply(&a, "m", false).unwrap();
    assert_eq!(
        outcome,
        MergeOutcome::Conflict(Conflict {
            incoming: a,
            files: vec!["shared.txt".into()],
        })
    );
    assert_eq!(fx.main_state(), before);
    assert_eq!(
        read(fx.root(), "shared.txt"),
        "one\nTWO by the user\nthree\n"
    );
}

/// With git 2.38+ the result is merged without a checkout; with an older git, in a scratch
/// worktree. Both make the same history: the same trees, one merge commit per task named
/// after it, the same conflict.
#[test]
fn merging_without_a_checkout_makes_what_a_checkout_makes() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task_from_base("b", &[("shared.txt", Some("one\nTWO by b\nthree\n"))]);
    let c = fx.task_from_base("c", &[("shared.txt", Some("one\nTWO by c\nthree\n"))]);
    let tasks: Vec<(String, String)> = vec![
        ("a".into(), a.clone()),
        ("b".into(), b.clone()),
        ("c".into(), c),
    ];
    let summary = |branch: &str| {
        let head = fx.repo.branch_commit(branch).unwrap().unwrap();
        git(
            fx.root(),
            &["log", "--first-parent", "--format=%T %s|%an", &head],
        )
    };
    let fast = fx
        .repo
        .merge_into_branch(&fx.wt("m1"), "baton/r/fast", &fx.base, &tasks)
        .unwrap();
    let slow = fx
        .repo
        .merge_into_branch_checked_out(&fx.wt("m2"), "baton/r/slow", &fx.base, &tasks)
        .unwrap();
    assert_eq!(fast, slow);
    assert!(
        matches!(fast, MergeOutcome::Conflict(ref c) if c.incoming == "c"),
        "{fast:?}"
    );
    assert_eq!(summary("baton/r/fast"), summary("baton/r/slow"));
    assert!(!fx.wt("m1").exists() && !fx.wt("m2").exists());
    assert_eq!(fx.worktree_count(), 1);

    // Where they differ, on purpose: a commit the branch already has (a task that changed
    // nothing after its dependency) still gets its merge commit without a checkout, so that
    // the history is one step per task, which bisection walks; `git merge` makes none.
    let again = vec![
        ("a".into(), a.clone()),
        ("b".into(), b),
        ("a-again".into(), a),
    ];
    fx.repo
        .merge_into_branch(&fx.wt("m3"), "baton/r/again", &fx.base, &again)
        .unwrap();
    let steps = summary("baton/r/again");
    assert_eq!(steps.lines().count(), 4, "base and three merges:\n{steps}");
    assert!(
        steps.starts_with(&format!(
            "{} baton: merge task a-again|baton",
            steps.lines().nth(1).unwrap().split(' ').next().unwrap()
        )),
        "{steps}"
    );
}
