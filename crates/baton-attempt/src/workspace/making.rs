//! A task's new worktree, made by its attempt before the task's first process rather than by
//! the dispatcher: a checkout takes a second on a repository of 3,000 files and ten on one of
//! 30,000 (docs/PERFORMANCE.md), and the dispatcher's thread is the one every running
//! attempt's output, timers and the live view share. Made on a blocking thread, several at a
//! time: git's `worktree add` takes a directory of its own under `.git/worktrees/` with
//! `mkdir` (two at once never share one) and locks only the refs it writes.

use std::path::PathBuf;

use baton_model::{Outcome, TaskId};
use baton_workspace::{MergeOutcome, Repo, TaskStart};

use crate::RunDirs;

/// A task's worktree still to be made: from a pooled worktree when the pool has one, else
/// checked out fresh.
#[derive(Debug)]
pub struct MakeTree {
    pub(super) repo: Repo,
    pub(super) path: PathBuf,
    pub(super) branch: String,
    pub(super) start: TaskStart,
    /// The dependencies it starts from, `(task, commit)`: a conflict names the task.
    pub(super) starts: Vec<(String, String)>,
    pub(super) pool_dir: PathBuf,
    /// The task's `worktree_include`: files of the user's checkout copied in.
    pub(super) include: Vec<String>,
    pub(super) run_dirs: RunDirs,
    pub(super) task: TaskId,
    /// The task's own worktree: where it started is kept for its later attempts (a
    /// best-of task's other candidates start where it does, and keep nothing).
    pub(super) keeps_start: bool,
}

impl MakeTree {
    /// Makes the worktree; the commit it starts from, or the attempt's outcome when it cannot
    /// be made: its dependencies' changes conflict (the merge is left in it, for a person),
    /// or git failed.
    pub fn make(self) -> Result<String, Outcome> {
        let made = match super::pool::reuse_pooled(
            &self.repo,
            &self.pool_dir,
            &self.path,
            &self.branch,
            &self.start,
        ) {
            Some(made) => made,
            // A conflict among its dependencies stays in the worktree, for a person.
            None => self
                .repo
                .add_task_worktree(&self.path, &self.branch, &self.start),
        };
        match made {
            Ok(MergeOutcome::Merged(commit)) => {
                if self.keeps_start {
                    self.run_dirs.keep_worktree_start(&self.task, &commit);
                }
                super::include::include(&self.repo.root, &self.path, &self.include, &self.run_dirs);
                Ok(commit)
            }
            Ok(MergeOutcome::Conflict(conflict)) => {
                let incoming = self
                    .starts
                    .iter()
                    .find(|(_, c)| *c == conflict.incoming)
                    .map_or(conflict.incoming.clone(), |(id, _)| id.clone());
                Err(Outcome::MergeConflict {
                    incoming,
                    files: conflict.files,
                })
            }
            Err(e) => Err(Outcome::SpawnFailed {
                error: format!(
                    "cannot create {} worktree {}: {e}",
                    if self.keeps_start {
                        "the task's"
                    } else {
                        "the candidate's"
                    },
                    self.path.display()
                ),
            }),
        }
    }
}
