//! Worktrees kept between tasks: set aside clean, and made a task's again, as a fresh one
//! would be, rewriting only the files that differ.

use std::path::Path;

use super::worktree::admin_dir;
use super::{MergeOutcome, OnConflict, Repo, TaskStart, create_parent, path_arg};
use crate::git::{GitError, failed};

/// The pool's lock where its file cannot be had: within this process only.
static POOL_HERE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Repo {
    /// Sets aside the worktree at `path` (a task's, its work committed on its branch) for a
    /// later task: emptied of the task's work (`rest` checked out detached, a commit of the
    /// user's history such as the run's base, and everything untracked or ignored removed),
    /// so that it holds nothing the repository's history does not, and no branch; then moved
    /// to `pooled`. [`Repo::reuse_worktree`] makes it a task's again.
    pub fn pool_worktree(&self, path: &Path, pooled: &Path, rest: &str) -> Result<(), GitError> {
        self.pool_worktree_if(path, pooled, rest, || true)
            .map(|_| ())
    }

    /// [`Repo::pool_worktree`] if `admit` says so when it is its turn to go in: `admit` and the
    /// move run while the pool's lock (`POOL.lock`, beside the pool's directory: nothing in
    /// it but worktrees) is held, so that of
    /// tasks ending at once, those `admit` counts in are all there is (the emptying before
    /// goes on beside the others). Whether it went in; if not, the emptied worktree is
    /// removed (it no longer holds the task's work), and its branch stays.
    pub fn pool_worktree_if(
        &self,
        path: &Path,
        pooled: &Path,
        rest: &str,
        admit: impl FnOnce() -> bool,
    ) -> Result<bool, GitError> {
        self.check_worktree_root(path)?;
        let rest = self.commit_id(rest)?;
        let git = self.git.settled(path)?;
        git.output(path, &["checkout", "--quiet", "--force", "--detach", &rest])?;
        git.output(path, &["clean", "-ffdxq"])?;
        create_parent(pooled)?;
        let (from, to) = (path_arg(path)?, path_arg(pooled)?);
        let lock = pooled.parent().map(|pool| pool.with_extension("lock"));
        let _held = crate::git::hold(lock.as_deref(), &POOL_HERE);
        if !admit() {
            self.remove_worktree(path)?;
            return Ok(false);
        }
        self.git
            .output(&self.root, &["worktree", "move", &from, &to])?;
        Ok(true)
    }

    /// Makes the pooled worktree at `pooled` the worktree `path` of a new task, as
    /// [`Repo::add_worktree`] would have made it, but rewriting only the files that differ
    /// from what it held: taken by a rename (of two runs reaching for it, one gets it), its
    /// links repaired, everything git does not track removed (untracked and ignored files,
    /// nested repositories), its per-worktree state (`config.worktree`, a merge or rebase in
    /// progress, its reflog) removed, and `start` checked out on the new branch `branch`.
    ///
    /// `Ok(None)` if the pooled worktree was taken by someone else first or cannot be used:
    /// what could be taken of it is removed, and the caller makes a fresh one.
    pub fn reuse_worktree(
        &self,
        pooled: &Path,
        path: &Path,
        branch: &str,
        start: &TaskStart,
    ) -> Result<Option<MergeOutcome>, GitError> {
        let commits = match start {
            TaskStart::Commit(commit) => vec![("", self.commit_id(commit)?)],
            TaskStart::Merge(commits) if commits.is_empty() => return Ok(None),
            TaskStart::Merge(commits) => commits
                .iter()
                .map(|rev| Ok((rev.as_str(), self.commit_id(rev)?)))
                .collect::<Result<Vec<_>, GitError>>()?,
        };
        create_parent(path)?;
        if path.exists() || std::fs::rename(pooled, path).is_err() {
            return Ok(None);
        }
        let made = (|| {
            let path_arg = path_arg(path)?;
            self.git
                .output(&self.root, &["worktree", "repair", &path_arg])?;
            self.check_worktree_root(path)?;
            clear_worktree_state(path)?;
            let git = self.git.settled(path)?;
            git.output(path, &["clean", "-ffdxq"])?;
            let (_, first) = &commits[0];
            let args = ["checkout", "--quiet", "--force", "-b", branch, first];
            let switched = git.run(path, &args)?;
            if !switched.status.success() {
                if self.branch_commit(branch)?.is_some() {
                    return Err(GitError::Other(format!(
                        "branch `{branch}` already exists; delete it (`git branch -D {branch}`) \
                         or start the task on another branch"
                    )));
                }
                return Err(failed(&args, &switched));
            }
            // What `worktree add` leaves beside: `ORIG_HEAD` (its checkout is a `reset
            // --hard`) and an empty `refs/` for the worktree's own refs.
            let admin = admin_dir(path)?;
            let _ = std::fs::write(admin.join("ORIG_HEAD"), format!("{first}\n"));
            let _ = std::fs::create_dir_all(admin.join("refs"));
            if commits.len() == 1 {
                return Ok(MergeOutcome::Merged(first.clone()));
            }
            self.merge_dependencies(path, &commits[1..], OnConflict::Keep)
        })();
        match made {
            // A conflict stays in progress in it, as in a worktree made by
            // [`Repo::add_task_worktree`].
            Ok(made) => Ok(Some(made)),
            Err(GitError::Other(message)) if message.contains("already exists") => {
                let _ = self.remove_worktree(path);
                Err(GitError::Other(message))
            }
            Err(_) => {
                // Unusable (half pooled by a crash, repaired wrongly, …): gone, and a fresh
                // one is made instead.
                let _ = self.remove_worktree(path);
                let _ = std::fs::remove_dir_all(path);
                Ok(None)
            }
        }
    }
}

/// Removes what a worktree's administrative directory holds beyond what `git worktree add`
/// makes (`HEAD`, `commondir`, `gitdir`, `index`): its own config, a merge, rebase,
/// cherry-pick or bisection left in progress, its reflog, sparse-checkout patterns.
fn clear_worktree_state(worktree: &Path) -> Result<(), GitError> {
    let admin = admin_dir(worktree)?;
    let entries = std::fs::read_dir(&admin)
        .map_err(|e| GitError::Other(format!("cannot read `{}`: {e}", admin.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if matches!(
            name.to_str(),
            Some("HEAD" | "commondir" | "gitdir" | "index")
        ) {
            continue;
        }
        let path = entry.path();
        let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| GitError::Other(format!("cannot remove `{}`: {e}", path.display())))?;
    }
    Ok(())
}
