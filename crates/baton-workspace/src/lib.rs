//! Git for baton: a worktree and a branch per task, what a task changed, and the merge of the
//! tasks' branches into the run's result. Everything goes through the `git` program, hardened
//! (see [`git`]), since agents may have planted hooks, filters or an fsmonitor in a worktree.
//!
//! Branches: `baton/RUN/TASK` per task, `baton/RUN/result` for the merged result. The user's
//! own branch and working tree are never touched, except by [`Repo::apply`] when asked.

mod evidence;
mod git;
mod repo;

pub use evidence::{ChangeKind, Evidence, FileChange, scope_violations};
pub use git::{Drivers, GitError};
pub use repo::{
    Conflict, MergeInProgress, MergeOutcome, Repo, TaskStart, WorktreeCommit, note_included,
};
