//! The tasks' worktrees: made (from a commit, or a merge of dependencies), looked up,
//! removed.

use std::path::{Path, PathBuf};

use super::{MergeOutcome, OnConflict, Repo, TaskStart, create_parent, path_arg, same_path};
use crate::git::{GitError, failed};

impl Repo {
    /// Creates the worktree `path` on a new branch `branch` starting as `start` says. A
    /// merge that conflicts leaves no worktree and no branch behind.
    ///
    /// Dependencies are merged in the order given, fast-forwarding when one already contains
    /// the worktree's commit: the task only needs their content, and a fast-forward keeps the
    /// task branch's history free of merges that say nothing. Each merge that is not a
    /// fast-forward is named `baton: merge REV` after the rev it was given.
    pub fn add_worktree(
        &self,
        path: &Path,
        branch: &str,
        start: &TaskStart,
    ) -> Result<MergeOutcome, GitError> {
        self.add_worktree_with(path, branch, start, OnConflict::Discard)
    }

    /// [`Repo::add_worktree`] for a task, where a merge of its dependencies that conflicts
    /// is left in the worktree, in progress, for a person to resolve there (`git -C PATH
    /// commit -a --no-edit` once the files are edited); [`Repo::merge_in_progress`] then says
    /// how far they are.
    pub fn add_task_worktree(
        &self,
        path: &Path,
        branch: &str,
        start: &TaskStart,
    ) -> Result<MergeOutcome, GitError> {
        self.add_worktree_with(path, branch, start, OnConflict::Keep)
    }

    fn add_worktree_with(
        &self,
        path: &Path,
        branch: &str,
        start: &TaskStart,
        on_conflict: OnConflict,
    ) -> Result<MergeOutcome, GitError> {
        let revs: &[String] = match start {
            TaskStart::Commit(commit) => std::slice::from_ref(commit),
            TaskStart::Merge(commits) if commits.is_empty() => {
                return Err(GitError::Other(format!(
                    "the task on branch `{branch}` starts from a merge of no commits; give at \
                     least one commit (a task without dependencies starts from the run's base)"
                )));
            }
            TaskStart::Merge(commits) => commits,
        };
        // Every rev is checked before anything is created, so a typo leaves nothing behind
        // (a full commit id is the caller's, from git: `worktree add` and `merge` check it).
        // Merging by commit id, not by name: `HEAD` would mean the new worktree's own.
        let commits = revs
            .iter()
            .map(|rev| Ok((rev.as_str(), self.commit_id(rev)?)))
            .collect::<Result<Vec<_>, GitError>>()?;
        let path_arg = path_arg(path)?;
        create_parent(path)?;
        let (_, first) = &commits[0];
        // Registered (a moment, taking its turn with the other commands on the repository's
        // worktrees: see `git::TURNS_FILE`), then checked out (the long part, beside other
        // worktrees' checkouts) as `worktree add` itself does it: `reset --hard`.
        let args = [
            "worktree",
            "add",
            "--quiet",
            "--no-checkout",
            "-b",
            branch,
            &path_arg,
            first,
        ];
        let added = self.git.run(&self.root, &args)?;
        if !added.status.success() {
            if String::from_utf8_lossy(&added.stderr).contains("already exists")
                && self.branch_commit(branch)?.is_some()
            {
                return Err(GitError::Other(format!(
                    "branch `{branch}` already exists; delete it (`git branch -D {branch}`) or \
                     start the task on another branch"
                )));
            }
            return Err(failed(&args, &added));
        }
        let reset = ["reset", "--hard", "--quiet", "--no-recurse-submodules"];
        if let Err(error) = self.git.output(path, &reset) {
            let _ = self.discard_task(path, branch);
            return Err(error);
        }
        if commits.len() == 1 {
            // Checked out as it is: nothing to merge, and its head is the commit.
            return Ok(MergeOutcome::Merged(first.clone()));
        }

        match self.merge_dependencies(path, &commits[1..], on_conflict) {
            Ok(MergeOutcome::Merged(commit)) => Ok(MergeOutcome::Merged(commit)),
            Ok(conflict) if on_conflict == OnConflict::Keep => Ok(conflict),
            Ok(conflict) => {
                self.discard_task(path, branch)?;
                Ok(conflict)
            }
            Err(error) => {
                // The first error is the one worth reporting; a failed clean-up after it
                // would only hide it.
                let _ = self.discard_task(path, branch);
                Err(error)
            }
        }
    }

    /// The branch checked out in the worktree at `path`; `None` for a detached `HEAD` or a
    /// directory that is no worktree.
    pub fn worktree_branch(&self, path: &Path) -> Result<Option<String>, GitError> {
        let output = self.git.run(path, &["symbolic-ref", "--quiet", "HEAD"])?;
        Ok(output.status.success().then(|| {
            String::from_utf8_lossy(&output.stdout)
                .trim()
                .trim_start_matches("refs/heads/")
                .to_owned()
        }))
    }

    /// Whether the worktree at `path` was ever checked out: a worktree is registered first
    /// (`worktree add --no-checkout`) and checked out after (see [`Repo::add_worktree`]), and
    /// one whose checkout never ran (its maker died in between) has no index. Taken as it is,
    /// it would look like a worktree whose every file was deleted.
    pub fn is_checked_out(&self, path: &Path) -> bool {
        admin_dir(path).is_ok_and(|admin| admin.join("index").is_file())
    }

    /// The worktree `path` with the existing branch `branch` checked out: a finished task's
    /// worktree made again, for a person to work in.
    pub fn add_branch_worktree(&self, path: &Path, branch: &str) -> Result<(), GitError> {
        let path_arg = path_arg(path)?;
        create_parent(path)?;
        self.git.output(
            &self.root,
            &["worktree", "add", "--quiet", &path_arg, branch],
        )?;
        Ok(())
    }

    /// Removes a worktree (its branch stays).
    ///
    /// Forcefully: it is baton's, and what an agent left in it uncommitted is not kept. A path
    /// that is no worktree (any more) is fine, so that clean-up can be repeated after a crash.
    pub fn remove_worktree(&self, path: &Path) -> Result<(), GitError> {
        // A linked worktree (a `.git` file, never the main one's directory) is removed
        // without listing them all first, and its removal takes its administrative files
        // with it: one git process, not four.
        if path.join(".git").is_file() && !same_path(path, &self.root) {
            let path_arg = path_arg(path)?;
            let args = ["worktree", "remove", "--force", "--force", &path_arg];
            if self.git.run(&self.root, &args)?.status.success() {
                return Ok(());
            }
            // Not one of this repository's, or half gone: as below.
        }
        if let Some(worktree) = self.find_worktree(path)? {
            if worktree.main {
                return Err(GitError::Other(format!(
                    "`{}` is the repository's main worktree; baton only removes the worktrees \
                     it created",
                    path.display()
                )));
            }
            let path_arg = path_arg(&worktree.path)?;
            // Twice `--force`: also when locked (`git worktree lock`).
            let args = ["worktree", "remove", "--force", "--force", &path_arg];
            let output = self.git.run(&self.root, &args)?;
            if !output.status.success() && worktree.path.exists() {
                return Err(failed(&args, &output));
            }
        }
        self.git.output(&self.root, &["worktree", "prune"])?;
        Ok(())
    }

    /// Removes a task's worktree and branch after its start failed.
    pub(super) fn discard_task(&self, path: &Path, branch: &str) -> Result<(), GitError> {
        self.remove_worktree(path)?;
        self.delete_branch(branch)
    }

    /// Deletes the branch `branch`, if there is one (checked out nowhere).
    pub fn delete_branch(&self, branch: &str) -> Result<(), GitError> {
        if self.branch_commit(branch)?.is_some() {
            self.git
                .output(&self.root, &["branch", "--delete", "--force", "--", branch])?;
        }
        Ok(())
    }

    /// Checks that `worktree` is the root of one of this repository's worktrees (see
    /// [`Repo::commit_all`]), and returns its `HEAD` commit and that commit's tree, asked in
    /// the same command.
    pub(super) fn check_worktree_root(
        &self,
        worktree: &Path,
    ) -> Result<(String, String), GitError> {
        let not_ours = || {
            GitError::Other(format!(
                "`{}` is not the root of a worktree of the repository at `{}` (was its `.git` \
                 file removed?); recreate the task's worktree",
                worktree.display(),
                self.root.display()
            ))
        };
        let args = [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
            "HEAD",
            "HEAD^{tree}",
        ];
        let theirs = self.git.output(worktree, &args).map_err(|_| not_ours())?;
        let mut theirs = theirs.lines();
        let top = theirs.next().unwrap_or_default();
        let common = theirs.next().unwrap_or_default();
        let head = theirs.next().unwrap_or_default().to_owned();
        let tree = theirs.next().unwrap_or_default().to_owned();
        if !same_path(Path::new(top), worktree)
            || !same_path(Path::new(common), Path::new(self.common_dir()?))
            || head.is_empty()
            || tree.is_empty()
        {
            return Err(not_ours());
        }
        Ok((head, tree))
    }

    /// The registered worktree at `path`, if any.
    pub(super) fn find_worktree(&self, path: &Path) -> Result<Option<Worktree>, GitError> {
        Ok(self
            .worktrees()?
            .into_iter()
            .find(|w| same_path(&w.path, path)))
    }

    pub(super) fn worktrees(&self) -> Result<Vec<Worktree>, GitError> {
        let out = self
            .git
            .output(&self.root, &["worktree", "list", "--porcelain", "-z"])?;
        let mut worktrees = Vec::new();
        let mut current: Option<Worktree> = None;
        // Attributes end with NUL; an empty one ends a worktree's record.
        for field in out.split('\0') {
            if field.is_empty() {
                worktrees.extend(current.take());
                continue;
            }
            if let Some(path) = field.strip_prefix("worktree ") {
                worktrees.extend(current.take());
                current = Some(Worktree {
                    path: PathBuf::from(path),
                    branch: None,
                    // Git lists the main worktree first.
                    main: worktrees.is_empty(),
                });
            } else if let (Some(branch), Some(worktree)) =
                (field.strip_prefix("branch refs/heads/"), current.as_mut())
            {
                worktree.branch = Some(branch.to_owned());
            }
        }
        worktrees.extend(current);
        Ok(worktrees)
    }
}

/// One entry of `git worktree list`.
#[derive(Debug)]
pub(super) struct Worktree {
    pub(super) path: PathBuf,
    pub(super) branch: Option<String>,
    pub(super) main: bool,
}

/// A linked worktree's administrative directory, as its `.git` file names it.
pub(super) fn admin_dir(worktree: &Path) -> Result<PathBuf, GitError> {
    let link = std::fs::read_to_string(worktree.join(".git"))
        .map_err(|e| GitError::Other(format!("cannot read `{}/.git`: {e}", worktree.display())))?;
    // Relative to the worktree when it is (`worktree.useRelativePaths`); a join leaves an
    // absolute one as it is.
    link.strip_prefix("gitdir: ")
        .map(|dir| worktree.join(dir.trim_end_matches(['\n', '\r'])))
        .ok_or_else(|| GitError::Other(format!("`{}/.git` is no link", worktree.display())))
}
