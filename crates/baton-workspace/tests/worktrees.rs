//! Task worktrees and branches, and what baton reads of the repository.

mod common;

use baton_workspace::{Conflict, MergeOutcome, Repo, TaskStart};
use common::{Fixture, git, merged, parents, read, write};

#[test]
fn discover_finds_the_root_from_a_subdirectory() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.root().join("sub")).unwrap();
    let repo = Repo::discover(&fx.root().join("sub")).unwrap();
    assert_eq!(
        repo.root.canonicalize().unwrap(),
        fx.root().canonicalize().unwrap()
    );
    let outside = tempfile::tempdir().unwrap();
    assert!(Repo::discover(outside.path()).is_err());
}

#[test]
fn resolve_names_the_missing_rev() {
    let fx = Fixture::new();
    assert_eq!(fx.repo.resolve("main").unwrap(), fx.base);
    assert_eq!(fx.repo.resolve(&fx.base[..10]).unwrap(), fx.base);
    let error = fx.repo.resolve("nope").unwrap_err().to_string();
    assert!(
        error.contains("no commit `nope` in the repository"),
        "{error}"
    );
    // An option-looking rev is a rev, not an option.
    let error = fx.repo.resolve("--all").unwrap_err().to_string();
    assert!(error.contains("no commit `--all`"), "{error}");
}

#[test]
fn add_worktree_from_a_commit() {
    let fx = Fixture::new();
    let path = fx.wt("deep/nested/a");
    let outcome = fx
        .repo
        .add_worktree(&path, "baton/r1/a", &TaskStart::Commit("main".into()))
        .unwrap();
    assert_eq!(outcome, MergeOutcome::Merged(fx.base.clone()));
    assert_eq!(read(&path, "README.md"), "hello\n");
    assert_eq!(
        fx.repo.branch_commit("baton/r1/a").unwrap(),
        Some(fx.base.clone())
    );
    assert_eq!(
        git(&path, &["symbolic-ref", "HEAD"]),
        "refs/heads/baton/r1/a"
    );

    // The branch exists now: a second worktree on it is refused, and says why.
    let error = fx
        .repo
        .add_worktree(
            &fx.wt("again"),
            "baton/r1/a",
            &TaskStart::Commit("main".into()),
        )
        .unwrap_err()
        .to_string();
    assert!(error.contains("`baton/r1/a` already exists"), "{error}");
    assert!(!fx.wt("again").exists());

    // A missing start commit creates nothing.
    let error = fx
        .repo
        .add_worktree(&fx.wt("b"), "baton/r1/b", &TaskStart::Commit("nope".into()))
        .unwrap_err()
        .to_string();
    assert!(error.contains("no commit `nope`"), "{error}");
    assert_eq!(fx.repo.branch_commit("baton/r1/b").unwrap(), None);
    assert!(!fx.wt("b").exists());
}

#[test]
fn a_task_starting_from_a_merge_sees_both_dependencies() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("from a\n"))]);
    let b = fx.task_from_base("b", &[("b.txt", Some("from b\n"))]);
    let path = fx.wt("c");
    let commit = merged(
        fx.repo
            .add_worktree(
                &path,
                "task/c",
                &TaskStart::Merge(vec![a.clone(), b.clone()]),
            )
            .unwrap(),
    );
    assert_eq!(read(&path, "a.txt"), "from a\n");
    assert_eq!(read(&path, "b.txt"), "from b\n");
    assert_eq!(parents(fx.root(), &commit), vec![a.clone(), b.clone()]);
    assert_eq!(
        git(&path, &["log", "-1", "--format=%s"]),
        format!("baton: merge {b}")
    );
    assert_eq!(git(&path, &["status", "--porcelain"]), "");
}

#[test]
fn a_merge_that_can_fast_forward_does() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("from a\n"))]);
    let commit = merged(
        fx.repo
            .add_worktree(
                &fx.wt("c"),
                "task/c",
                &TaskStart::Merge(vec![fx.base.clone(), "task/a".into()]),
            )
            .unwrap(),
    );
    assert_eq!(commit, a);
    // One dependency: its commit.
    let commit = merged(
        fx.repo
            .add_worktree(&fx.wt("d"), "task/d", &TaskStart::Merge(vec![a.clone()]))
            .unwrap(),
    );
    assert_eq!(commit, a);
}

#[test]
fn a_conflicting_start_leaves_nothing_behind() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("shared.txt", Some("one\nTWO by a\nthree\n"))]);
    fx.task_from_base("b", &[("shared.txt", Some("one\nTWO by b\nthree\n"))]);
    let path = fx.wt("c");
    let outcome = fx
        .repo
        .add_worktree(&path, "task/c", &TaskStart::Merge(vec![a, "task/b".into()]))
        .unwrap();
    assert_eq!(
        outcome,
        MergeOutcome::Conflict(Conflict {
            incoming: "task/b".into(),
            files: vec!["shared.txt".into()],
        })
    );
    assert!(!path.exists());
    assert_eq!(fx.repo.branch_commit("task/c").unwrap(), None);
    assert_eq!(fx.worktree_count(), 1);
}

#[test]
fn a_merge_of_nothing_is_an_error() {
    let fx = Fixture::new();
    let error = fx
        .repo
        .add_worktree(&fx.wt("c"), "task/c", &TaskStart::Merge(vec![]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("merge of no commits"), "{error}");
    assert_eq!(fx.repo.branch_commit("task/c").unwrap(), None);
}

#[test]
fn commit_all_commits_everything_but_ignored_files_as_baton() {
    let fx = Fixture::new();
    write(fx.root(), ".gitignore", "target/\n*.log\n");
    git(fx.root(), &["add", ".gitignore"]);
    git(fx.root(), &["commit", "--quiet", "-m", "ignore"]);
    let path = fx.wt("a");
    fx.repo
        .add_worktree(&path, "task/a", &TaskStart::Commit("main".into()))
        .unwrap();
    assert_eq!(fx.repo.commit_all(&path, "nothing").unwrap(), None);

    write(&path, "new/file.rs", "fn main() {}\n");
    write(&path, "README.md", "changed\n");
    std::fs::remove_file(path.join("shared.txt")).unwrap();
    write(&path, "target/debug/out", "build output\n");
    write(&path, "run.log", "log\n");
    let message = "# Task a\n\nDid things.\n";
    let commit = fx.repo.commit_all(&path, message).unwrap().unwrap();

    assert_eq!(
        fx.repo.branch_commit("task/a").unwrap(),
        Some(commit.clone())
    );
    let files = git(&path, &["show", "--name-status", "--format=", &commit]);
    assert_eq!(files, "M\tREADME.md\nA\tnew/file.rs\nD\tshared.txt");
    assert_eq!(
        git(&path, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "baton <baton@localhost>|baton <baton@localhost>"
    );
    // `#` lines are the message, not comments.
    assert_eq!(
        git(&path, &["log", "-1", "--format=%B"]),
        message.trim_end()
    );
    // Ignored files stay in the worktree, untracked.
    assert!(path.join("run.log").exists());
    assert_eq!(
        git(&path, &["status", "--porcelain", "--ignored"]),
        "!! run.log\n!! target/"
    );
    assert_eq!(fx.repo.commit_all(&path, "again").unwrap(), None);
}

#[test]
fn an_agent_s_own_files_are_kept_out_of_the_commit() {
    let fx = Fixture::new();
    let path = fx.wt("a");
    fx.repo
        .add_worktree(&path, "task/a", &TaskStart::Commit("main".into()))
        .unwrap();
    let keep_out = [".aider.tags.cache.v*", ".aider.chat.history.md"];
    write(&path, ".aider.tags.cache.v4/cache.db", "map\n");
    write(&path, ".aider.chat.history.md", "chat\n");
    assert_eq!(
        fx.repo.commit_all_but(&path, "none", &keep_out).unwrap(),
        None
    );
    write(
        &path,
        "src/.aider.tags.cache.v4",
        "a file of the task's, deeper down\n",
    );
    write(&path, "README.md", "changed\n");
    let commit = fx
        .repo
        .commit_all_but(&path, "task", &keep_out)
        .unwrap()
        .unwrap();
    let files = git(&path, &["show", "--name-status", "--format=", &commit]);
    assert_eq!(files, "M\tREADME.md\nA\tsrc/.aider.tags.cache.v4");
    // Left where they were, untracked.
    assert!(path.join(".aider.tags.cache.v4/cache.db").exists());
}

#[test]
fn commit_all_refuses_a_directory_that_is_not_a_worktree_root() {
    let fx = Fixture::new();
    let inside = fx.root().join("sub");
    write(&inside, "x.txt", "x\n");
    let error = fx
        .repo
        .commit_all(&inside, "sweep")
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not the root of a worktree"), "{error}");
    // A worktree whose `.git` file is gone, inside the main worktree: git would find the
    // main repository.
    let path = fx.root().join(".baton/wt/a");
    fx.repo
        .add_worktree(&path, "task/a", &TaskStart::Commit("main".into()))
        .unwrap();
    std::fs::remove_file(path.join(".git")).unwrap();
    write(&path, "new.txt", "x\n");
    assert!(fx.repo.commit_all(&path, "sweep").is_err());
    assert_eq!(git(fx.root(), &["rev-parse", "HEAD"]), fx.base);
    // Another repository's worktree is not ours either.
    let other = Fixture::new();
    assert!(fx.repo.commit_all(other.root(), "other").is_err());
}

#[test]
fn remove_worktree_is_repeatable() {
    let fx = Fixture::new();
    let path = fx.wt("a");
    fx.repo
        .add_worktree(&path, "task/a", &TaskStart::Commit("main".into()))
        .unwrap();
    write(&path, "uncommitted.txt", "x\n");
    fx.repo.remove_worktree(&path).unwrap();
    assert!(!path.exists());
    assert_eq!(fx.worktree_count(), 1);
    assert_eq!(
        fx.repo.branch_commit("task/a").unwrap(),
        Some(fx.base.clone())
    );
    fx.repo.remove_worktree(&path).unwrap();

    // Its directory deleted by hand: still fine, and git forgets it.
    let path = fx.wt("b");
    fx.repo
        .add_worktree(&path, "task/b", &TaskStart::Commit("main".into()))
        .unwrap();
    std::fs::remove_dir_all(&path).unwrap();
    fx.repo.remove_worktree(&path).unwrap();
    assert_eq!(fx.worktree_count(), 1);

    // Locked, too.
    let path = fx.wt("c");
    fx.repo
        .add_worktree(&path, "task/c", &TaskStart::Commit("main".into()))
        .unwrap();
    git(fx.root(), &["worktree", "lock", path.to_str().unwrap()]);
    fx.repo.remove_worktree(&path).unwrap();
    assert!(!path.exists());

    let error = fx.repo.remove_worktree(fx.root()).unwrap_err().to_string();
    assert!(error.contains("main worktree"), "{error}");
}

#[test]
fn delete_branches_deletes_the_runs_branches_and_their_worktrees() {
    let fx = Fixture::new();
    for branch in ["baton/r1/a", "baton/r1/deep/b", "baton/r10/a", "baton/r1x"] {
        git(fx.root(), &["branch", branch]);
    }
    let path = fx.wt("c");
    fx.repo
        .add_worktree(&path, "baton/r1/c", &TaskStart::Commit("main".into()))
        .unwrap();

    fx.repo.delete_branches("baton/r1/").unwrap();
    let left = git(
        fx.root(),
        &["for-each-ref", "--format=%(refname:short)", "refs/heads"],
    );
    assert_eq!(left, "baton/r10/a\nbaton/r1x\nmain");
    assert!(!path.exists());
    assert_eq!(fx.worktree_count(), 1);
    // Nothing left to delete is fine.
    fx.repo.delete_branches("baton/r1/").unwrap();

    let error = fx.repo.delete_branches("/").unwrap_err().to_string();
    assert!(error.contains("empty prefix"), "{error}");

    // The user's checked-out branch is not baton's to take away.
    git(fx.root(), &["switch", "--quiet", "baton/r10/a"]);
    let error = fx
        .repo
        .delete_branches("baton/r10")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("checked out in the main worktree"),
        "{error}"
    );
    assert!(fx.repo.branch_commit("baton/r10/a").unwrap().is_some());
}

#[test]
fn branch_commit_is_none_for_a_missing_branch() {
    let fx = Fixture::new();
    assert_eq!(
        fx.repo.branch_commit("main").unwrap(),
        Some(fx.base.clone())
    );
    assert_eq!(fx.repo.branch_commit("baton/nope").unwrap(), None);
    // A tag of that name is not a branch.
    git(fx.root(), &["tag", "v1"]);
    assert_eq!(fx.repo.branch_commit("v1").unwrap(), None);
}

#[test]
fn diff_is_a_plain_unified_diff() {
    let fx = Fixture::new();
    let a = fx.task_from_base(
        "a",
        &[
            ("README.md", Some("hello\nworld\n")),
            ("é x.txt", Some("new\n")),
        ],
    );
    let diff = fx.repo.diff(&fx.base, &a).unwrap();
    assert!(
        diff.contains("diff --git a/README.md b/README.md\n"),
        "{diff}"
    );
    assert!(diff.contains("\n+world\n"), "{diff}");
    assert!(diff.contains("+++ b/é x.txt"), "{diff}");
    assert!(!diff.contains('\x1b'));
    assert_eq!(fx.repo.diff(&a, &a).unwrap(), "");
}

#[test]
fn is_dirty_counts_untracked_files_but_not_ignored_ones() {
    let fx = Fixture::new();
    assert!(!fx.repo.is_dirty().unwrap());
    write(fx.root(), ".git/info/exclude", "*.tmp\n");
    write(fx.root(), "scratch.tmp", "x\n");
    assert!(!fx.repo.is_dirty().unwrap());
    write(fx.root(), "new.txt", "x\n");
    assert!(fx.repo.is_dirty().unwrap());
    std::fs::remove_file(fx.root().join("new.txt")).unwrap();
    write(fx.root(), "README.md", "changed\n");
    assert!(fx.repo.is_dirty().unwrap());
    git(fx.root(), &["add", "README.md"]);
    assert!(fx.repo.is_dirty().unwrap());
}

#[test]
fn the_main_worktree_is_untouched() {
    let fx = Fixture::new();
    // The user is in the middle of something.
    write(fx.root(), "README.md", "user's edit\n");
    write(fx.root(), "notes.txt", "user's notes\n");
    git(fx.root(), &["add", "notes.txt"]);
    write(fx.root(), "untracked.txt", "x\n");
    let before = fx.main_state();

    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task_from_base("b", &[("b.txt", Some("b\n"))]);
    let c = fx.task(
        "c",
        &TaskStart::Merge(vec![a.clone(), b.clone()]),
        &[("c.txt", Some("c\n"))],
    );
    merged(
        fx.repo
            .merge_into_branch(
                &fx.wt("result"),
                "baton/r/result",
                &fx.base,
                &[("a".into(), a), ("b".into(), b), ("c".into(), c)],
            )
            .unwrap(),
    );
    fx.repo.delete_branches("task/").unwrap();

    assert_eq!(fx.main_state(), before);
    assert_eq!(read(fx.root(), "README.md"), "user's edit\n");
    assert!(!fx.root().join("a.txt").exists());
}

/// A task's dependencies that conflict leave their merge in its worktree, in progress: a
/// person resolves it there, and once every file is resolved the merge is concluded with both
/// dependencies as parents.
#[test]
fn a_conflict_among_dependencies_waits_in_the_task_s_worktree() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("shared.txt", Some("one\nby a\nthree\n"))]);
    let b = fx.task_from_base("b", &[("shared.txt", Some("one\nby b\nthree\n"))]);
    let path = fx.wt("both");
    let outcome = fx
        .repo
        .add_task_worktree(
            &path,
            "task/both",
            &TaskStart::Merge(vec![a.clone(), b.clone()]),
        )
        .unwrap();
    assert!(matches!(outcome, MergeOutcome::Conflict(_)), "{outcome:?}");
    let waiting = fx
        .repo
        .merge_in_progress(&path)
        .unwrap()
        .expect("in progress");
    assert_eq!(waiting.incoming, b);
    assert_eq!(waiting.unmerged, ["shared.txt"]);
    // Edited but not marked resolved: still in conflict, as git sees it.
    write(&path, "shared.txt", "one\nby a and b\nthree\n");
    assert_eq!(
        fx.repo.merge_in_progress(&path).unwrap().unwrap().unmerged,
        ["shared.txt"]
    );
    git(&path, &["add", "shared.txt"]);
    assert!(
        fx.repo
            .merge_in_progress(&path)
            .unwrap()
            .unwrap()
            .unmerged
            .is_empty()
    );
    let merge = fx.repo.conclude_merge(&path).unwrap();
    assert_eq!(parents(fx.root(), &merge), vec![a, b]);
    assert_eq!(fx.repo.merge_in_progress(&path).unwrap(), None);
    assert_eq!(read(&path, "shared.txt"), "one\nby a and b\nthree\n");
}
