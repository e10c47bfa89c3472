//! Test repositories: real git, in temporary directories.

#![allow(dead_code, reason = "each test file uses a different part")]

use std::path::{Path, PathBuf};
use std::process::Command;

use baton_workspace::{MergeOutcome, Repo, TaskStart};

/// A repository with one commit (`README.md`) on `main`, in `dir/repo`; worktrees go to
/// `dir/wt/`.
pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
    pub repo: Repo,
    pub base: String,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "--quiet", "-b", "main"]);
        write(&root, "README.md", "hello\n");
        write(&root, "shared.txt", "one\ntwo\nthree\n");
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "--quiet", "-m", "base"]);
        let repo = Repo::discover(&root).unwrap();
        let base = repo.resolve("HEAD").unwrap();
        Fixture { dir, repo, base }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.repo.root
    }

    pub(crate) fn wt(&self, name: &str) -> PathBuf {
        self.dir.path().join("wt").join(name)
    }

    /// Runs a task: a worktree on branch `task/NAME` from `start`, `files` written (`None`
    /// deletes), committed, the worktree removed. Returns the task's commit.
    pub(crate) fn task(
        &self,
        name: &str,
        start: &TaskStart,
        files: &[(&str, Option<&str>)],
    ) -> String {
        let path = self.wt(name);
        let branch = format!("task/{name}");
        let outcome = self.repo.add_worktree(&path, &branch, start).unwrap();
        assert!(matches!(outcome, MergeOutcome::Merged(_)), "{outcome:?}");
        for (file, content) in files {
            match content {
                Some(content) => write(&path, file, content),
                None => std::fs::remove_file(path.join(file)).unwrap(),
            }
        }
        let commit = self
            .repo
            .commit_all(&path, &format!("task {name}"))
            .unwrap()
            .expect("the task changed something");
        self.repo.remove_worktree(&path).unwrap();
        commit
    }

    /// A task from the base commit.
    pub(crate) fn task_from_base(&self, name: &str, files: &[(&str, Option<&str>)]) -> String {
        self.task(name, &TaskStart::Commit(self.base.clone()), files)
    }

    /// What the user would see of the main worktree: HEAD, where its branch points, status.
    pub(crate) fn main_state(&self) -> (String, String, String) {
        (
            git(self.root(), &["symbolic-ref", "HEAD"]),
            git(self.root(), &["rev-parse", "refs/heads/main"]),
            git(
                self.root(),
                &["status", "--porcelain", "--untracked-files=all"],
            ),
        )
    }

    pub(crate) fn worktree_count(&self) -> usize {
        git(self.root(), &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count()
    }
}

/// Plain git as the test's user would run it (no global config, the user's identity), for
/// setting things up and looking at the result. Never runs hooks, so that a hook's marker can
/// only come from baton, nor the fsmonitor or gpg the hardening tests configure. Stdout,
/// trimmed.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let output = user_git(dir)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        .args(["-c", "commit.gpgSign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .trim_end()
        .to_owned()
}

/// `git` as the user has it, hooks included, with no `GIT_*` variable from the test's
/// environment (the hardening tests set some).
pub(crate) fn user_git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    for (name, _) in std::env::vars() {
        if name.starts_with("GIT_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "user@example.com");
    command
}

pub(crate) fn write(dir: &Path, file: &str, content: &str) {
    write_bytes(dir, file, content.as_bytes());
}

pub(crate) fn write_bytes(dir: &Path, file: &str, content: &[u8]) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub(crate) fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

pub(crate) fn merged(outcome: MergeOutcome) -> String {
    match outcome {
        MergeOutcome::Merged(commit) => commit,
        MergeOutcome::Conflict(conflict) => panic!("unexpected conflict: {conflict:?}"),
    }
}

/// The parents of `commit`.
pub(crate) fn parents(dir: &Path, commit: &str) -> Vec<String> {
    git(dir, &["rev-list", "--parents", "-n", "1", commit])
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect()
}
