//! The run's result: the branches of the tasks that succeeded merged into
//! `baton/RUN/result`, and throwaway checkouts of it for the run's checks.

use std::path::{Path, PathBuf};

use baton_graph::Graph;
use baton_workspace::{MergeOutcome, Repo, TaskStart};

use super::Workspaces;
use super::pool::{pool_if_room, pool_size, reuse_pooled};

impl Workspaces {
    /// Merges the branches of the tasks that succeeded, in graph order (which respects
    /// dependencies: a task's needs come first), into `baton/RUN/result`.
    pub fn consolidate(&self, graph: &Graph) -> Option<Consolidated> {
        let repo = self.repo.as_ref()?;
        // A task whose work a dependent's branch holds (the dependent started from it) is in
        // the result through that dependent: merged again on its own, it would bring back the
        // conflict the dependent resolved among its dependencies.
        let held_by_dependent = |t: u32| {
            graph
                .dependents(t)
                .iter()
                .any(|&d| self.results[d as usize].is_some())
        };
        let merges: Vec<(String, String)> = topological(graph)
            .into_iter()
            .filter(|&t| !held_by_dependent(t))
            .filter_map(|t| {
                self.results[t as usize]
                    .clone()
                    .map(|c| (graph.task(t).id.to_string(), c))
            })
            .collect();
        if merges.is_empty() {
            return None;
        }
        let branch = self.branch("result");
        let scratch = self.dir.join(".result");
        Some(
            match repo.merge_into_branch(&scratch, &branch, &self.base, &merges) {
                Ok(MergeOutcome::Merged(commit)) => Consolidated::Merged {
                    branch,
                    commit,
                    order: merges.into_iter().map(|(task, _)| task).collect(),
                },
                Ok(MergeOutcome::Conflict(conflict)) => {
                    // The conflict is resolved in the task's worktree, which went to the pool
                    // when it succeeded: made again, on its branch.
                    let name = conflict.incoming.replace('/', "+");
                    let path = self.dir.join(&name);
                    if !path.join(".git").exists() {
                        let branch = self.branch(&name);
                        let _ = repo.add_branch_worktree(&path, &branch);
                    }
                    // Which tasks' changes it collides with: those merged before it that
                    // changed one of the files.
                    let before: Vec<String> = topological(graph)
                        .into_iter()
                        .take_while(|&t| graph.task(t).id.as_str() != conflict.incoming)
                        .filter(|&t| {
                            self.results[t as usize].is_some()
                                && self.changed[t as usize]
                                    .iter()
                                    .any(|f| conflict.files.contains(f))
                        })
                        .map(|t| graph.task(t).id.to_string())
                        .collect();
                    Consolidated::Conflict {
                        branch,
                        task: conflict.incoming,
                        with: before,
                        files: conflict.files,
                    }
                }
                Err(e) => Consolidated::Failed(format!("cannot merge the tasks' branches: {e}")),
            },
        )
    }

    /// A throwaway worktree of `commit`, removed (with its branch) when dropped: where the
    /// run's checks look at the merged result.
    pub fn checkout(&self, commit: &str) -> Result<Checkout, String> {
        let repo = self.repo.as_ref().ok_or("no repository")?.clone();
        let path = self.dir.join(".verify");
        // `+` is never in a task id: this cannot be a task's branch. It sits in a directory
        // of its own so that it can be deleted by prefix.
        let branch = self.branch("+verify/probe");
        // One left by a crash is replaced.
        let _ = repo.remove_worktree(&path);
        let _ = repo.delete_branches(&self.branch("+verify/"));
        // From a pooled worktree when there is one: only the files that differ are written,
        // which on a large repository is the whole cost of a check (and of each of a
        // bisection's probes); given back to the pool when the check is done.
        let start = TaskStart::Commit(commit.to_owned());
        let made = match reuse_pooled(&repo, &self.pool_dir(), &path, &branch, &start) {
            Some(made) => made,
            None => repo.add_worktree(&path, &branch, &start),
        };
        match made {
            Ok(MergeOutcome::Merged(_)) => Ok(Checkout {
                repo,
                path,
                prefix: self.branch("+verify/"),
                pool: (pool_size() > 0).then(|| {
                    (
                        self.pool_dir(),
                        format!("{}-verify", self.run),
                        self.base.clone(),
                    )
                }),
            }),
            Ok(MergeOutcome::Conflict(_)) => Err("a checkout cannot conflict".to_owned()),
            Err(e) => Err(format!("cannot check out the merged result: {e}")),
        }
    }

    /// The merge commits of the result branch, one per task merged, oldest first.
    pub fn merge_steps(&self, result: &str) -> Result<Vec<String>, String> {
        let repo = self.repo.as_ref().ok_or("no repository")?;
        repo.first_parents(&self.base, result)
            .map_err(|e| format!("cannot read the result's history: {e}"))
    }
}

/// The end of a run's consolidation.
#[derive(Debug, Clone)]
pub enum Consolidated {
    Merged {
        branch: String,
        commit: String,
        /// The tasks merged, in order: one merge commit each on the branch.
        order: Vec<String>,
    },
    /// Merging `task`'s branch conflicted in `files` with what was merged before it.
    Conflict {
        branch: String,
        task: String,
        /// The tasks merged before it whose changes it collides with.
        with: Vec<String>,
        files: Vec<String>,
    },
    Failed(String),
}

/// Task indices with every task after the tasks it needs. Graph order already is one when the
/// file lists needs first; this makes sure of it.
fn topological(graph: &Graph) -> Vec<u32> {
    let n = graph.len();
    let mut remaining: Vec<usize> = graph.tasks().iter().map(|t| t.needs.len()).collect();
    let mut ready: std::collections::VecDeque<u32> = (0..n as u32)
        .filter(|&t| remaining[t as usize] == 0)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(t) = ready.pop_front() {
        order.push(t);
        for &d in graph.dependents(t) {
            remaining[d as usize] -= 1;
            if remaining[d as usize] == 0 {
                ready.push_back(d);
            }
        }
    }
    order
}

/// A worktree that exists for as long as the value does.
pub struct Checkout {
    repo: Repo,
    path: PathBuf,
    /// Where its branch is: deleted with it.
    prefix: String,
    /// The pool it goes back to (the pool's directory, its name there, and the commit it is
    /// emptied to), while the pool has room.
    pool: Option<(PathBuf, String, String)>,
}

impl Checkout {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let pooled = self
            .pool
            .as_ref()
            .is_some_and(|(dir, name, rest)| pool_if_room(&self.repo, &self.path, dir, name, rest));
        if !pooled {
            let _ = self.repo.remove_worktree(&self.path);
        }
        let _ = self.repo.delete_branches(&self.prefix);
    }
}
