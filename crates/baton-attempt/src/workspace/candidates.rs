//! A best-of task's candidates' worktrees. Candidate 1 works in the task's own worktree, on
//! its branch; each other candidate `k` in `TASK@k`, on `baton/RUN/TASK@k`, from the commit
//! the task's own started at (its dependencies' work, merged once). The winner's work becomes
//! the task's branch; every other candidate's stays on a branch of its own.

use std::path::PathBuf;

use baton_graph::Graph;
use baton_model::Outcome;
use baton_workspace::TaskStart;

use super::{MakeTree, TaskTree, TreeState, TreeWork, Workspaces};

impl Workspaces {
    /// The name of candidate `k`'s worktree and (after `baton/RUN/`) branch.
    fn candidate_name(graph: &Graph, task: u32, k: u32) -> String {
        format!("{}@{k}", graph.task(task).id.file_name())
    }

    /// Candidate `k`'s worktree, made by its first attempt (`None`: the task has none).
    ///
    /// Candidate 1's is the task's own, left to its attempt as any task's; the others start
    /// where it does and are left to theirs: all are made at once, off the dispatcher's
    /// thread. Only a task whose start is a merge of its dependencies' work has its own made
    /// here and now, first: the others start from that merge, which the making commits.
    ///
    /// `restart`: the candidate's attempt in the round before (a candidate continues no
    /// session): its worktree is set back to where the task started, what that attempt left
    /// kept on its own ref, so that a round never builds on the last one's work (finding 13:
    /// after a crash, each new candidate stacked its work on its predecessor's, and the winner
    /// held two candidates' work).
    pub fn prepare_candidate(
        &mut self,
        graph: &Graph,
        task: u32,
        k: u32,
        restart: Option<u32>,
    ) -> Result<Option<PathBuf>, Outcome> {
        let own = self.prepare(graph, task, if k == 1 { restart } else { None })?;
        if own.is_none() {
            return Ok(None);
        }
        let merges = self.trees[task as usize]
            .making()
            .map(|making| &making.start);
        if matches!(merges, Some(TaskStart::Merge(_))) {
            self.make_now(task)?;
        }
        if k == 1 {
            return Ok(own);
        }
        if let Some(state) = self.candidate_trees.get(&(task, k))
            && let Some(tree) = state.tree()
        {
            if let Some(earlier) = restart
                && state.making().is_none()
                && tree.path.join(".git").is_file()
            {
                let repo = self.repo.as_ref().expect("the task has a worktree");
                super::restart_tree(repo, tree, earlier)?;
            }
            return Ok(Some(tree.path.clone()));
        }
        // Made, or to be made from this very commit by candidate 1's attempt. Still pending
        // here, it is one candidate 1 never took (it could not launch): nobody will make it,
        // and it goes, the task's own worktree with it.
        let own = &self.trees[task as usize];
        let start = match own.making().map(|making| &making.start) {
            Some(TaskStart::Commit(commit)) => {
                let commit = commit.clone();
                self.unmade(task);
                commit
            }
            // `prepare` gave the task's own a path: it is there, made or to be made.
            _ => match own.tree() {
                Some(tree) => tree.start.clone(),
                // Never so; were it, the candidate must not run in the repository itself.
                None => {
                    return Err(Outcome::SpawnFailed {
                        error: format!("candidate {k}'s task has no worktree to start from"),
                    });
                }
            },
        };
        let repo = self.repo.as_ref().expect("the task has a worktree");
        let name = Self::candidate_name(graph, task, k);
        let path = self.dir.join(&name);
        let branch = self.branch(&name);
        let mut making = None;
        let mine = repo.worktree_branch(&path).ok().flatten().as_deref() == Some(branch.as_str());
        // One whose checkout never ran (see `Workspaces::prepare`) is made again.
        if path.join(".git").exists() && mine && repo.is_checked_out(&path) {
            // An earlier driver's (or an earlier attempt's): what it left is kept first, and
            // a new round starts from the task's start.
            match restart {
                Some(earlier) => {
                    let tree = TaskTree {
                        path: path.clone(),
                        branch: branch.clone(),
                        start: start.clone(),
                    };
                    super::restart_tree(repo, &tree, earlier)?;
                }
                None => {
                    let _ = repo.commit_all(
                        &path,
                        &format!("baton: checkpoint of {name} in run {}", self.run),
                    );
                }
            }
        } else {
            if path.exists() {
                let _ = repo.remove_worktree(&path);
                let _ = std::fs::remove_dir_all(&path);
            }
            let to_make = match repo.branch_commit(&branch) {
                // A retry after its worktree went: it goes on from its branch, set back to
                // the task's start first for a new round.
                Ok(Some(_)) => {
                    if let Some(earlier) = restart {
                        repo.restart_branch(&branch, &start, earlier).map_err(|e| {
                            Outcome::SpawnFailed {
                                error: format!(
                                    "cannot set {branch} back to where the task started: {e}"
                                ),
                            }
                        })?;
                    }
                    repo.add_branch_worktree(&path, &branch)
                        .map_err(|e| Outcome::SpawnFailed {
                            error: format!(
                                "cannot create candidate {k}'s worktree {}: {e}",
                                path.display()
                            ),
                        })?;
                    super::include::include(
                        &repo.root,
                        &path,
                        &graph.task(task).worktree_include,
                        &self.run_dirs,
                    );
                    None
                }
                _ => Some(TaskStart::Commit(start.clone())),
            };
            if let Some(start) = to_make {
                making = Some(MakeTree {
                    repo: repo.clone(),
                    path: path.clone(),
                    branch: branch.clone(),
                    start,
                    starts: Vec::new(),
                    pool_dir: self.pool_dir(),
                    include: graph.task(task).worktree_include.to_vec(),
                    run_dirs: self.run_dirs.clone(),
                    task: graph.task(task).id.clone(),
                    keeps_start: false,
                });
            }
        }
        let tree = TaskTree {
            path: path.clone(),
            branch,
            start,
        };
        // A candidate after the first runs the task's setup at every attempt: it is never
        // counted as set up.
        let state = match making {
            Some(making) => TreeState::ToMake {
                tree,
                making: Box::new(making),
            },
            None => TreeState::Made {
                tree,
                needs_setup: true,
            },
        };
        self.candidate_trees.insert((task, k), state);
        Ok(Some(path))
    }

    /// The worktree [`Workspaces::prepare_candidate`] left for candidate `k`'s attempt to
    /// make: the task's own for candidate 1.
    pub fn take_candidate_making(&mut self, task: u32, k: u32) -> Option<MakeTree> {
        if k == 1 {
            return self.take_making(task);
        }
        self.candidate_trees.get_mut(&(task, k))?.take_making()
    }

    /// Candidate `k`'s attempt could not make its worktree (or never came to): the next
    /// attempt of the task makes it again.
    pub fn candidate_unmade(&mut self, task: u32, k: u32) {
        if k == 1 {
            self.unmade(task);
            return;
        }
        self.candidate_trees.remove(&(task, k));
    }

    /// What candidate `k`'s attempt commits to.
    pub fn candidate_work(&self, graph: &Graph, task: u32, k: u32) -> Option<TreeWork> {
        if k == 1 {
            return self.tree_work(graph, task);
        }
        let tree = self.candidate_trees.get(&(task, k))?.tree()?.clone();
        self.work_in(graph, task, tree)
    }

    /// Candidate `winner` is the task's result: the task's branch moves to its work
    /// (candidate 1's stays, on `TASK@1`, when it lost), and the other candidates' worktrees
    /// go (their branches stay). Returns the winner's commit, for [`Workspaces::succeeded`].
    pub fn pick(&mut self, graph: &Graph, task: u32, winner: u32) -> Option<String> {
        let repo = self.repo.as_ref()?;
        // The task's branch by name: candidate 1's worktree, the task's own, may never have
        // been made (its making failed while the others ran), and the winner's work must
        // still become the task's.
        let own = self.branch(&graph.task(task).id.file_name());
        let first = repo.branch_commit(&own).ok().flatten();
        let head = if winner == 1 {
            first
        } else {
            repo.branch_commit(&self.candidate_branch(graph, task, winner))
                .ok()
                .flatten()
                .inspect(|head| {
                    if let Some(first) = &first {
                        let _ = repo.set_branch(&self.candidate_branch(graph, task, 1), first);
                    }
                    let _ = repo.set_branch(&own, head);
                })
        };
        let mut done: Vec<u32> = self
            .candidate_trees
            .keys()
            .filter(|(t, _)| *t == task)
            .map(|(_, k)| *k)
            .collect();
        done.sort_unstable();
        for k in done {
            if let Some(tree) = self
                .candidate_trees
                .remove(&(task, k))
                .and_then(|mut state| state.clear())
            {
                let _ = repo.remove_worktree(&tree.path);
            }
        }
        head
    }

    /// The branch candidate `k` of `task` worked on.
    pub fn candidate_branch(&self, graph: &Graph, task: u32, k: u32) -> String {
        self.branch(&Self::candidate_name(graph, task, k))
    }
}
