//! A task's attempt that starts a new process or a new agent session starts from the task's
//! start commit, clean, as CI re-runs and nextest retries do: the earlier attempt's changes are
//! kept on a ref of their own (`refs/baton/RUN/TASK/attempt-N`), not built upon. A step that
//! appends to a file, run twice on top of itself, wrote its line twice.
//!
//! Refs outside `refs/heads/`: a branch `baton/RUN/TASK/attempt-1` cannot sit beside the
//! branch `baton/RUN/TASK` (one name would be a file and a directory at once). Git finds them
//! by the short name all the same (`git log baton/RUN/TASK/attempt-1`).

use std::path::Path;

use super::{Repo, kept_out};
use crate::git::GitError;

impl Repo {
    /// The ref an earlier attempt's work is kept on: `refs/baton/RUN/TASK/attempt-N`, for the
    /// task's branch `baton/RUN/TASK`.
    pub fn attempt_ref(branch: &str, attempt: u32) -> String {
        format!("refs/{branch}/attempt-{attempt}")
    }

    /// Keeps `commit` (an earlier attempt's work) on [`Repo::attempt_ref`].
    pub fn keep_attempt(&self, branch: &str, attempt: u32, commit: &str) -> Result<(), GitError> {
        let commit = self.commit_id(commit)?;
        let reference = Self::attempt_ref(branch, attempt);
        self.git.output(
            &self.root,
            &[
                "update-ref",
                "-m",
                "baton: attempt kept",
                &reference,
                &commit,
            ],
        )?;
        Ok(())
    }

    /// The commit an earlier attempt's work was kept at, if it was.
    pub fn kept_attempt(&self, branch: &str, attempt: u32) -> Result<Option<String>, GitError> {
        self.ref_commit(&Self::attempt_ref(branch, attempt))
    }

    /// Sets the task's worktree at `worktree` (its branch checked out) back to `start`, as a
    /// new worktree would be: its branch moved there, tracked files as they were, untracked
    /// ones removed. What git ignores stays (a build's cache, what `setup` installed), and so
    /// does what `worktree_include` brought in. Whatever the branch held beyond `start` is
    /// kept first on [`Repo::attempt_ref`] for `attempt`. Whether its branch was set back.
    pub fn restart_worktree(
        &self,
        worktree: &Path,
        branch: &str,
        start: &str,
        attempt: u32,
    ) -> Result<bool, GitError> {
        let (head, _) = self.check_worktree_root(worktree)?;
        let start = self.commit_id(start)?;
        if head != start {
            self.keep_attempt(branch, attempt, &head)?;
            self.git
                .output(worktree, &["reset", "--quiet", "--hard", &start])?;
        }
        // Untracked files the attempt's commit left out (an engine's own files, links out of
        // the worktree) go; what worktree_include brought in stays.
        let excluded: Vec<String> = kept_out::included(worktree)
            .iter()
            .map(|p| format!(":(exclude,literal){p}"))
            .collect();
        let mut clean = vec!["clean", "-ffdq", "--", "."];
        clean.extend(excluded.iter().map(String::as_str));
        self.git.output(worktree, &clean)?;
        Ok(head != start)
    }

    /// Moves the task's branch back to `start` when no worktree has it checked out, keeping
    /// what it held beyond on [`Repo::attempt_ref`] for `attempt`. Whether it moved.
    pub fn restart_branch(
        &self,
        branch: &str,
        start: &str,
        attempt: u32,
    ) -> Result<bool, GitError> {
        let start = self.commit_id(start)?;
        let Some(head) = self.branch_commit(branch)? else {
            return Ok(false);
        };
        if head == start {
            return Ok(false);
        }
        self.keep_attempt(branch, attempt, &head)?;
        let reference = format!("refs/heads/{branch}");
        self.git.output(
            &self.root,
            &[
                "update-ref",
                "-m",
                "baton: restart",
                &reference,
                &start,
                &head,
            ],
        )?;
        Ok(true)
    }
}
