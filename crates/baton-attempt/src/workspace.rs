//! Each task with `workspace = "worktree"` (agent tasks, by default, inside a git repository)
//! works in a git worktree of its own, `.baton/worktrees/RUN/TASK` on branch `baton/RUN/TASK`:
//! from the run's base when it needs nothing, else from a merge of what its dependencies
//! committed. After every attempt, whatever it changed is committed on its branch (so nothing
//! an agent did is lost, whatever happens next), with the evidence of what changed. When the
//! run is over, the branches of the tasks that succeeded are merged, in dependency order, into
//! `baton/RUN/result`; the user's branch and working tree are never touched.

use std::path::{Path, PathBuf};

use baton_graph::{Graph, ScopePolicy, Workspace};
use baton_model::{Outcome, RunId};
use baton_workspace::{Drivers, GitError, Repo, TaskStart};

use crate::RunDirs;
use crate::unit::TreeEnd;

mod candidates;
mod include;
mod making;
mod origin;
mod pool;
mod remote;
mod result;
mod tree_state;

pub use making::MakeTree;
pub use origin::{check_origin, origin_of};
pub use pool::empty_worktree_pool;
use pool::{pool_if_room, pool_into, pool_name, pool_size, room};
pub use remote::Publisher;
pub use result::Consolidated;
use tree_state::TreeState;

/// One task's worktree.
#[derive(Debug, Clone)]
pub struct TaskTree {
    path: PathBuf,
    branch: String,
    /// The commit it started from: what its evidence is measured against.
    start: String,
}

/// The run's worktrees.
#[derive(Debug)]
pub struct Workspaces {
    /// `None` when the run is not inside a git repository, or no task wants a worktree:
    /// every task then runs in the repository (or directory) itself.
    repo: Option<Repo>,
    base: String,
    run: RunId,
    dir: PathBuf,
    /// Per task, its worktree.
    trees: Vec<TreeState>,
    /// Per task, the commit its branch ended at when it succeeded: its result, which outlives
    /// its worktree (set aside in the pool once it succeeded).
    results: Vec<Option<String>>,
    /// Per task, the paths its branch changed: who else touched a file in conflict.
    changed: Vec<Vec<String>>,
    /// The run's directories: where each worktree's start is kept for a takeover.
    run_dirs: RunDirs,
    /// Best-of tasks' candidates after the first, by (task, candidate): their worktrees.
    candidate_trees: std::collections::HashMap<(u32, u32), TreeState>,
}

/// What an attempt commits to: a task's worktree and what its changes are held to. A value,
/// owned by the attempt unit.
#[derive(Debug, Clone)]
pub struct TreeWork {
    repo: Repo,
    tree: TaskTree,
    run: RunId,
    task: baton_model::TaskId,
    scope: Vec<String>,
    /// `scope_policy = "enforce"`: changes outside the scope fail the task.
    enforce: bool,
    /// Files the agent's CLI keeps in the worktree for itself, never committed.
    keep_out: &'static [&'static str],
    /// Where its worktree goes when its attempt succeeds, and the commit it is set back to
    /// there (the run's base); `None` to leave it (no pool, or a best-of task's candidate).
    pool: Option<(PathBuf, String)>,
}

impl TreeWork {
    /// Its worktree was made, starting at `commit`: what its evidence is measured against.
    pub fn started_at(&mut self, commit: String) {
        self.tree.start = commit;
    }

    /// Leaves its worktree where it is when its attempt succeeds: a best-of task's
    /// candidates' worktrees are the dispatcher's to sort out once the winner is picked.
    pub fn not_pooled(self) -> TreeWork {
        TreeWork { pool: None, ..self }
    }

    /// Sets its worktree aside in the pool, its attempt having succeeded (its work is on its
    /// branch), while the pool has room: by the attempt, off the dispatcher's thread (see
    /// `making`). Whether it went.
    pub fn hand_on(&self) -> bool {
        let Some((pool_dir, base)) = &self.pool else {
            return false;
        };
        let name = pool_name(&self.run, &self.tree.path);
        pool_if_room(&self.repo, &self.tree.path, pool_dir, &name, base)
    }

    /// Keeps `files` (an engine's own, see `EngineKind::own_files`) out of its commits.
    pub fn keeping_out(self, files: &'static [&'static str]) -> TreeWork {
        TreeWork {
            keep_out: files,
            ..self
        }
    }

    /// Commits what the attempt changed on the task's branch, with the evidence of what its
    /// branch changed since the task started. An error says what could not be done.
    ///
    /// The task chose the names of the files it made: every path in the evidence, the scope
    /// violations and the files handed on is redacted, once its scope was judged on the real
    /// name, before it becomes an event (and from there the database, `status`, `events`,
    /// `--json`) or a dependent's input.
    pub fn commit(
        &self,
        attempt: u32,
        outcome: &Outcome,
        redactor: &baton_redact::Redactor,
    ) -> Result<Committed, String> {
        let (repo, tree) = (&self.repo, &self.tree);
        let message = format!(
            "baton: {} attempt {attempt} of run {} ({outcome})",
            self.task, self.run
        );
        let baton_workspace::WorktreeCommit {
            commit,
            mut links_left_out,
        } = repo
            .commit_worktree(&tree.path, &message, self.keep_out)
            .map_err(|e| format!("cannot commit the task's changes: {e}"))?;
        let head = match &commit {
            Some(commit) => commit.clone(),
            None => repo
                .branch_commit(&tree.branch)
                .map_err(|e| e.to_string())?
                .unwrap_or_else(|| tree.start.clone()),
        };
        // Against where the task started: all its attempts' changes together.
        let mut evidence = repo
            .evidence(&tree.start, &head)
            .map_err(|e| format!("cannot read what the task changed: {e}"))?;
        let mut scope_violations = baton_workspace::scope_violations(&evidence, &self.scope);
        let redact = |path: &mut String| {
            if let std::borrow::Cow::Owned(redacted) = redactor.redact_str(path) {
                *path = redacted;
            }
        };
        for file in &mut evidence.files {
            redact(&mut file.path);
            file.from.iter_mut().for_each(redact);
        }
        scope_violations.iter_mut().for_each(redact);
        links_left_out.iter_mut().for_each(redact);
        let violates =
            (self.enforce && !scope_violations.is_empty()).then(|| scope_violations.clone());
        Ok(Committed {
            head,
            files_changed: evidence.paths().map(str::to_owned).collect(),
            commit: baton_model::WorkspaceCommit {
                task: self.task.clone(),
                attempt,
                branch: tree.branch.clone(),
                start: Some(tree.start.clone()),
                commit,
                evidence,
                scope_violations,
                links_left_out,
            },
            violates,
        })
    }
}

/// Sets `tree` back to where its task started, keeping what attempt `earlier` left.
fn restart_tree(repo: &Repo, tree: &TaskTree, earlier: u32) -> Result<(), Outcome> {
    repo.restart_worktree(&tree.path, &tree.branch, &tree.start, earlier)
        .map(|_| ())
        .map_err(|e| Outcome::SpawnFailed {
            error: format!(
                "cannot set the task's worktree {} back to where it started: {e}",
                tree.path.display()
            ),
        })
}

/// What happened to a task's worktree at the end of an attempt.
pub struct Committed {
    /// What `workspace-committed` records.
    pub commit: baton_model::WorkspaceCommit,
    /// Where the task's branch is now.
    pub head: String,
    /// The paths it changed, for its dependents' templates.
    pub files_changed: Vec<String>,
    /// The task changed files outside its scope under `scope_policy = "enforce"`.
    pub violates: Option<Vec<String>>,
}

/// The repository at `root` as `run` works in it: its git commands are held to the filter,
/// merge and diff drivers the repository's config defined when the run first started (kept
/// with the run), not to what the run's tasks may have written into the config since (see
/// `baton_workspace::Drivers`). For a run that kept none (it had no worktrees, or an older
/// baton ran it), to what the config defines now.
pub fn run_repo(root: &Path, state_dir: &Path, run: &RunId) -> Result<Repo, GitError> {
    let mut repo = Repo::discover(root)?;
    if let Some(kept) = RunDirs::new(state_dir, run).trusted_git_drivers() {
        repo.trust_drivers(Drivers::decode(&kept));
    }
    Ok(repo)
}

/// Whether the worktrees `graph`'s tasks want can be made in the project at `root` (a git
/// repository with a commit to branch from), checked before a run starts. Where they cannot,
/// a task that asked for one (`workspace = "worktree"`) is a problem to refuse the run for,
/// and agent tasks that have one by default are told of in a note: they work in the
/// directory itself, and (the write sandbox needing a worktree) unconfined.
pub fn check_worktrees(graph: &Graph, root: &Path) -> Result<Option<String>, Vec<String>> {
    let wanting: Vec<&baton_graph::Task> = graph
        .tasks()
        .iter()
        .filter(|t| t.workspace == Workspace::Worktree)
        .collect();
    if wanting.is_empty() {
        return Ok(None);
    }
    let base = graph.run_settings().base.as_deref();
    let why = match Repo::discover(root) {
        Err(_) => format!("`{}` is not inside a git repository", root.display()),
        Ok(repo) if repo.resolve("HEAD").is_err() && base.is_none_or(|b| b == WORKING_TREE) => {
            format!(
                "the git repository at `{}` has no commit yet to branch from",
                repo.root.display()
            )
        }
        // Worktrees start from `HEAD`: say what of the user's checkout they will not have.
        Ok(repo) if base.is_none() => return Ok(left_out_note(&repo)),
        Ok(_) => return Ok(None),
    };
    let asked: Vec<String> = wanting
        .iter()
        .filter(|t| t.workspace_asked)
        .map(|t| {
            format!(
                "task `{}` asks for `workspace = \"worktree\"`, but {why}: commit what is \
                 there first (`git init`, `git add -A`, `git commit -m start`), or drop its \
                 `workspace`",
                t.id
            )
        })
        .collect();
    if !asked.is_empty() {
        return Err(asked);
    }
    let names: Vec<String> = wanting.iter().map(|t| format!("`{}`", t.id)).collect();
    Ok(Some(format!(
        "{why}: agent tasks {} work in it directly, not each in a worktree of its own, and \
         without the write sandbox (commit what is there, and they get both)",
        names.join(", ")
    )))
}

/// `[run] base = "working-tree"`: the run starts from a commit of the working tree as it is.
const WORKING_TREE: &str = "working-tree";

/// A note naming the uncommitted changes of the user's checkout, which worktrees starting
/// from `HEAD` will not have; `None` when there are none (or they cannot be read).
fn left_out_note(repo: &Repo) -> Option<String> {
    const SHOWN: usize = 5;
    let left = repo.uncommitted().ok().filter(|l| !l.is_empty())?;
    let mut named: Vec<String> = left
        .iter()
        .take(SHOWN)
        .map(|(path, how)| format!("{path} ({how})"))
        .collect();
    if left.len() > SHOWN {
        named.push(format!("and {} more", left.len() - SHOWN));
    }
    Some(format!(
        "worktrees start from HEAD, without your uncommitted changes: {}; commit them, or set \
         `base = \"working-tree\"` under [run] to start from the working tree as it is \
         (`base = \"HEAD\"` says you meant HEAD: no note then)",
        named.join(", ")
    ))
}

/// [`run_repo`] at the start of a run (or a takeover): the first start, before any task ran,
/// keeps the drivers it trusts.
fn start_repo(root: &Path, state_dir: &Path, run: &RunId) -> Result<Repo, GitError> {
    let dirs = RunDirs::new(state_dir, run);
    if dirs.trusted_git_drivers().is_some() {
        return run_repo(root, state_dir, run);
    }
    let repo = Repo::discover(root)?;
    // Best effort: without it, a takeover trusts the config as it finds it.
    let _ = dirs.keep_trusted_git_drivers(&repo.trusted_drivers().encode());
    Ok(repo)
}

impl Workspaces {
    /// Finds the repository and the run's base commit when some task wants a worktree.
    pub fn new(graph: &Graph, root: &Path, state_dir: &Path, run: &RunId) -> Result<Self, String> {
        let none = |run: &RunId| Self {
            repo: None,
            base: String::new(),
            run: run.clone(),
            dir: PathBuf::new(),
            trees: Vec::new(),
            results: Vec::new(),
            changed: Vec::new(),
            run_dirs: RunDirs::new(state_dir, run),
            candidate_trees: Default::default(),
        };
        if !graph
            .tasks()
            .iter()
            .any(|t| t.workspace == Workspace::Worktree || t.plan.is_some())
        {
            return Ok(none(run));
        }
        if let Some(task) = graph
            .tasks()
            .iter()
            .find(|t| t.workspace == Workspace::Worktree && t.id.as_str() == "result")
        {
            return Err(format!(
                "task `{}` works in a worktree, whose branch would be `baton/RUN/result`: the \
                 name of the run's merged result; rename the task",
                task.id
            ));
        }
        // Outside a repository there is nothing to branch from: tasks share the directory.
        let Ok(repo) = start_repo(root, state_dir, run) else {
            return Ok(none(run));
        };
        let base = match graph.run_settings().base.as_deref() {
            Some(WORKING_TREE) => repo
                .snapshot_working_tree()
                .map_err(|e| format!("cannot take the working tree as the run's base: {e}"))?,
            Some(base_ref) => repo.resolve(base_ref).map_err(|e| {
                format!("cannot find the run's base `{base_ref}` in the repository: {e}")
            })?,
            None => match repo.resolve("HEAD") {
                Ok(head) => head,
                // A repository without a commit yet has nothing to branch from: tasks share
                // it, as outside a repository.
                Err(_) => return Ok(none(run)),
            },
        };
        Ok(Self {
            repo: Some(repo),
            base,
            run: run.clone(),
            dir: state_dir.join("worktrees").join(run.as_str()),
            trees: (0..graph.len()).map(|_| TreeState::Absent).collect(),
            results: vec![None; graph.len()],
            changed: vec![Vec::new(); graph.len()],
            run_dirs: RunDirs::new(state_dir, run),
            candidate_trees: Default::default(),
        })
    }

    /// The run has `tasks` tasks now (a planner added some).
    pub fn grow(&mut self, tasks: usize) {
        if self.repo.is_some() {
            self.trees.resize_with(tasks, TreeState::default);
            self.results.resize(tasks, None);
            self.changed.resize(tasks, Vec::new());
        }
    }

    /// The run's base commit.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A worker's copy starts from the coordinator's base, not from what `base` names in the
    /// worker's checkout now.
    pub fn adopt_base(&mut self, base: &str) {
        if self.repo.is_some() {
            base.clone_into(&mut self.base);
        }
    }

    /// Whether any task works in a worktree.
    pub fn active(&self) -> bool {
        self.repo.is_some()
    }

    /// Whether `task` works in a worktree of its own (it asks for one, and there is a
    /// repository to make it in).
    pub fn uses_tree(&self, graph: &Graph, task: u32) -> bool {
        self.repo.is_some() && graph.task(task).workspace == Workspace::Worktree
    }

    /// The directory `task` works in: its worktree, created at its first attempt, or `None`
    /// for the repository itself. A merge of its dependencies' results that conflicts is the
    /// task's outcome: it needs a person.
    ///
    /// `restart`: the attempt starts a new process or agent session (it continues none), so
    /// its worktree is set back to where the task started, clean; what the earlier attempt
    /// (this number) left is kept on its own ref (see `baton_workspace::Repo::restart_worktree`).
    /// Only an attempt that continues a session (a fix round, an agent cut short) goes on
    /// from the worktree as that session left it.
    pub fn prepare(
        &mut self,
        graph: &Graph,
        task: u32,
        restart: Option<u32>,
    ) -> Result<Option<PathBuf>, Outcome> {
        if !self.uses_tree(graph, task) {
            return Ok(None);
        }
        let state = &self.trees[task as usize];
        if let Some(tree) = state.tree() {
            // One still to be made, or set aside already (its task succeeded), holds nothing
            // of an earlier attempt.
            if let Some(earlier) = restart
                && state.making().is_none()
                && tree.path.join(".git").is_file()
            {
                let repo = self.repo.as_ref().expect("uses_tree checked");
                // Where it started as kept when it was made (a merge of its dependencies is
                // not the first one's commit, which is all `tree` knows before).
                let mut tree = tree.clone();
                if let Some(start) = self.run_dirs.worktree_start(&graph.task(task).id) {
                    tree.start = start;
                }
                restart_tree(repo, &tree, earlier)?;
            }
            return Ok(Some(tree.path.clone()));
        }
        let repo = self.repo.as_ref().expect("uses_tree checked");
        let id = &graph.task(task).id;
        let path = self.dir.join(&*id.file_name());
        let branch = self.branch(&id.file_name());
        // A takeover finds the worktree an earlier driver made: what an interrupted attempt
        // left in it is saved on the branch first, then the task goes on from there. One on
        // another branch (a pooled worktree a crash left half taken) is not the task's: it
        // goes, and the task gets a fresh one.
        // One whose checkout never ran (its maker died between registering it and checking
        // it out) holds nothing of the task's: it goes too, with the branch its making made
        // (at its first dependency's commit, the others not merged in yet), and it is made
        // again from the start.
        if path.join(".git").exists() {
            let ours =
                repo.worktree_branch(&path).ok().flatten().as_deref() == Some(branch.as_str());
            let unmade = !repo.is_checked_out(&path);
            if !ours || unmade {
                let _ = repo.remove_worktree(&path);
                let _ = std::fs::remove_dir_all(&path);
            }
            if ours && unmade && self.run_dirs.worktree_start(id).is_none() {
                let _ = repo.delete_branch(&branch);
            }
        }
        if path.join(".git").exists() {
            return self.go_on_in(graph, task, path, branch, restart);
        }
        // It ran before in this run (a planner asked again), and its worktree went back to the
        // pool: it goes on from its branch, in a worktree made again.
        if let Ok(Some(commit)) = repo.branch_commit(&branch) {
            return self.again_on_branch(graph, task, (path, branch, commit), restart);
        }
        let mut starts: Vec<(String, String)> = Vec::new();
        for &need in &graph.task(task).needs {
            if let Some(commit) = &self.results[need as usize]
                && !starts.iter().any(|(_, c)| c == commit)
            {
                starts.push((graph.task(need).id.to_string(), commit.clone()));
            }
        }
        let start = match starts.len() {
            0 => TaskStart::Commit(self.base.clone()),
            1 => TaskStart::Commit(starts[0].1.clone()),
            _ => TaskStart::Merge(starts.iter().map(|(_, c)| c.clone()).collect()),
        };
        // Made by the attempt, off the dispatcher's thread (see `making`); what it starts
        // from is known once it is made.
        let first = match &start {
            TaskStart::Commit(commit) => commit.clone(),
            TaskStart::Merge(commits) => commits[0].clone(),
        };
        let making = MakeTree {
            repo: repo.clone(),
            path: path.clone(),
            branch: branch.clone(),
            start,
            starts,
            pool_dir: self.pool_dir(),
            include: graph.task(task).worktree_include.to_vec(),
            run_dirs: self.run_dirs.clone(),
            task: id.clone(),
            keeps_start: true,
        };
        self.trees[task as usize] = TreeState::ToMake {
            tree: TaskTree {
                path: path.clone(),
                branch,
                start: first,
            },
            making: Box::new(making),
        };
        Ok(Some(path))
    }

    /// `task`'s worktree at `path` is there, made by an earlier driver (a takeover): a merge
    /// of its dependencies left for a person is concluded once resolved (or is still the
    /// task's outcome), what an interrupted attempt left is saved on the branch, and the task
    /// goes on from there.
    fn go_on_in(
        &mut self,
        graph: &Graph,
        task: u32,
        path: PathBuf,
        branch: String,
        restart: Option<u32>,
    ) -> Result<Option<PathBuf>, Outcome> {
        let repo = self.repo.as_ref().expect("uses_tree checked");
        let id = &graph.task(task).id;
        // A merge of its dependencies left for a person: resolved and committed by them,
        // concluded here once every file is resolved, or still the task's outcome.
        match repo.merge_in_progress(&path) {
            Ok(Some(merge)) if !merge.unmerged.is_empty() => {
                let incoming = graph
                    .task(task)
                    .needs
                    .iter()
                    .find(|&&n| self.results[n as usize].as_deref() == Some(&merge.incoming))
                    .map_or(merge.incoming.clone(), |&n| graph.task(n).id.to_string());
                return Err(Outcome::MergeConflict {
                    incoming,
                    files: merge.unmerged,
                });
            }
            Ok(Some(_)) => {
                repo.conclude_merge(&path)
                    .map_err(|e| Outcome::SpawnFailed {
                        error: format!(
                            "cannot commit the merge resolved in {}: {e}",
                            path.display()
                        ),
                    })?;
            }
            Ok(None) | Err(_) => {}
        }
        let _ = repo.commit_all(
            &path,
            &format!(
                "baton: checkpoint of {id} in run {}: changes left by an interrupted attempt",
                self.run
            ),
        );
        // Its evidence is what all its attempts changed: measured from where it started
        // (kept when its worktree was made), not from the checkpoint.
        let start = self
            .run_dirs
            .worktree_start(id)
            .or_else(|| repo.branch_commit(&branch).ok().flatten())
            .unwrap_or_else(|| self.base.clone());
        let tree = TaskTree {
            path: path.clone(),
            branch,
            start,
        };
        if let Some(earlier) = restart {
            restart_tree(repo, &tree, earlier)?;
        }
        self.trees[task as usize] = TreeState::Made {
            tree,
            needs_setup: false,
        };
        Ok(Some(path))
    }

    /// `task` ran before in this run and its worktree went to the pool: it goes on from its
    /// branch (at `commit`), in a worktree made again at `path` — set back to where the task
    /// started first when the attempt continues nothing.
    fn again_on_branch(
        &mut self,
        graph: &Graph,
        task: u32,
        (path, branch, commit): (PathBuf, String, String),
        restart: Option<u32>,
    ) -> Result<Option<PathBuf>, Outcome> {
        let repo = self.repo.as_ref().expect("uses_tree checked");
        let id = &graph.task(task).id;
        // An attempt that continues nothing starts from the task's start, the earlier
        // attempts' work kept on their refs (a run resumed after its budget ran out).
        if let (Some(earlier), Some(start)) = (restart, self.run_dirs.worktree_start(id)) {
            repo.restart_branch(&branch, &start, earlier)
                .map_err(|e| Outcome::SpawnFailed {
                    error: format!("cannot set {branch} back to where the task started: {e}"),
                })?;
        }
        repo.add_branch_worktree(&path, &branch)
            .map_err(|e| Outcome::SpawnFailed {
                error: format!("cannot make the task's worktree again on {branch}: {e}"),
            })?;
        let start = self.run_dirs.worktree_start(id).unwrap_or(commit);
        self.trees[task as usize] = TreeState::Made {
            tree: TaskTree {
                path: path.clone(),
                branch,
                start,
            },
            needs_setup: false,
        };
        Ok(Some(path))
    }

    /// Removes ref locks under the run's refs that a git killed mid-update left (see
    /// `Repo::remove_stale_ref_locks`): a takeover's first step, before any worktree is made
    /// again. Returns how many went.
    pub fn remove_stale_ref_locks(&self, older_than: std::time::Duration) -> usize {
        self.repo.as_ref().map_or(0, |repo| {
            repo.remove_stale_ref_locks(&format!("baton/{}", self.run), older_than)
                .unwrap_or(0)
        })
    }

    /// The run's branch `baton/RUN/NAME`: a task's (`NAME` its file name), a candidate's
    /// (`TASK@K`), `result`.
    pub fn branch(&self, name: &str) -> String {
        format!("baton/{}/{name}", self.run)
    }

    /// The worktree [`Workspaces::prepare`] left for `task`'s attempt to make, if it did.
    pub fn take_making(&mut self, task: u32) -> Option<MakeTree> {
        self.trees.get_mut(task as usize)?.take_making()
    }

    /// Makes `task`'s worktree left by [`Workspaces::prepare`] here and now.
    pub fn make_now(&mut self, task: u32) -> Result<(), Outcome> {
        let Some(making) = self.take_making(task) else {
            return Ok(());
        };
        match making.make() {
            Ok(start) => {
                if let Some(tree) = self.trees[task as usize].tree_mut() {
                    tree.start = start;
                }
                Ok(())
            }
            Err(outcome) => {
                self.unmade(task);
                Err(outcome)
            }
        }
    }

    /// What `task`'s attempt did with its worktree, wherever it ran: its `setup` ran (the
    /// next attempt does not run it again), it could not be made (the next starts again from
    /// what is there), or it succeeded (dependents start from its head; its worktree is
    /// pooled). The one routine that applies a worktree's end, on the coordinator and on a
    /// worker's own copy of the run's worktrees.
    pub fn attempt_ended(&mut self, task: u32, set_up: bool, tree: &TreeEnd) {
        if set_up {
            self.set_up(task);
        }
        match tree {
            TreeEnd::Kept => {}
            TreeEnd::Unmade => self.unmade(task),
            TreeEnd::Succeeded { head, pooled } => self.succeeded(task, head.clone(), *pooled),
        }
    }

    /// `task`'s attempt could not make its worktree: the next one starts again from what is
    /// there (a conflicted merge left for a person, or nothing).
    pub fn unmade(&mut self, task: u32) {
        if let Some(state) = self.trees.get_mut(task as usize) {
            state.clear();
        }
    }

    /// Where finished runs' worktrees wait for the next tasks: `.baton/worktrees/.pool`.
    fn pool_dir(&self) -> PathBuf {
        self.dir
            .parent()
            .map_or_else(|| self.dir.join(".pool"), |dir| dir.join(".pool"))
    }

    /// Whether `task`'s worktree still needs its `setup` run.
    pub fn needs_setup(&self, task: u32) -> bool {
        self.trees
            .get(task as usize)
            .is_some_and(TreeState::needs_setup)
    }

    /// `task`'s `setup` ran to success in its worktree.
    pub fn set_up(&mut self, task: u32) {
        if let Some(state) = self.trees.get_mut(task as usize) {
            state.set_up();
        }
    }

    /// What an attempt of `task` commits to: its worktree, once [`Workspaces::prepare`]
    /// made it. `None` for a task without a worktree.
    pub fn tree_work(&self, graph: &Graph, task: u32) -> Option<TreeWork> {
        let state = self.trees.get(task as usize)?;
        let mut tree = state.tree()?.clone();
        // Made by an earlier attempt (`MakeTree`): where it started is known now, kept when
        // it was made (a merge of its dependencies is not the first one's commit).
        if state.making().is_none()
            && let Some(start) = self.run_dirs.worktree_start(&graph.task(task).id)
        {
            tree.start = start;
        }
        self.work_in(graph, task, tree)
    }

    /// What an attempt of `task` working in `tree` commits to.
    fn work_in(&self, graph: &Graph, task: u32, tree: TaskTree) -> Option<TreeWork> {
        let spec = graph.task(task);
        Some(TreeWork {
            repo: self.repo.clone()?,
            tree,
            run: self.run.clone(),
            task: spec.id.clone(),
            scope: spec.scope.clone(),
            enforce: spec.scope_policy == ScopePolicy::Enforce,
            keep_out: &[],
            pool: (pool_size() > 0).then(|| (self.pool_dir(), self.base.clone())),
        })
    }

    /// The paths `task`'s branch changed, as its latest attempt read them: who else touched
    /// a file when merging the result conflicts.
    pub fn changed(&mut self, task: u32, paths: Vec<String>) {
        if let Some(slot) = self.changed.get_mut(task as usize) {
            *slot = paths;
        }
    }

    /// `task` succeeded with its branch at `head`: its dependents start from there, and it
    /// is merged into the result.
    ///
    /// Its worktree is not needed any more (its work is on its branch; a conflict at the
    /// result's merge makes it again, see [`Workspaces::consolidate`]): it goes to the pool at
    /// once, for the run's next tasks, while the pool has room — set aside by the attempt
    /// itself (`pooled`), or here.
    pub fn succeeded(&mut self, task: u32, head: String, pooled: bool) {
        if let Some(slot) = self.results.get_mut(task as usize) {
            *slot = Some(head);
        }
        if pooled {
            // Its attempt set it aside already (`TreeWork::hand_on`).
            self.unmade(task);
            return;
        }
        let Some(tree) = self.trees.get(task as usize).and_then(TreeState::tree) else {
            return;
        };
        if let Some(repo) = &self.repo
            && pool_if_room(
                repo,
                &tree.path,
                &self.pool_dir(),
                &pool_name(&self.run, &tree.path),
                &self.base,
            )
        {
            self.unmade(task);
        }
    }

    /// Sets the task worktree at `path` aside in the pool as `RUN-TASK`; whether it went.
    fn pool(&self, path: &Path) -> bool {
        let Some(repo) = &self.repo else {
            return false;
        };
        pool_into(
            repo,
            path,
            &self.pool_dir(),
            &pool_name(&self.run, path),
            &self.base,
        )
    }

    /// A task that succeeded before a takeover: its branch is its result.
    pub fn restored_success(&mut self, graph: &Graph, task: u32) {
        if !self.uses_tree(graph, task) {
            return;
        }
        let branch = self.branch(&graph.task(task).id.file_name());
        if let Some(repo) = &self.repo
            && let Ok(Some(commit)) = repo.branch_commit(&branch)
        {
            self.results[task as usize] = Some(commit);
        }
    }

    /// Removes the run's worktrees; their branches stay until `baton prune`. All of them, not
    /// only those this process made: a run taken over (after a crash, after a person resolved
    /// a conflict) has worktrees an earlier driver made.
    pub fn remove_worktrees(&self) {
        let Some(repo) = &self.repo else {
            return;
        };
        let mut paths: Vec<PathBuf> = self
            .trees
            .iter()
            .filter_map(TreeState::tree)
            .map(|t| t.path.clone())
            .collect();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            paths.extend(entries.flatten().map(|entry| entry.path()));
        }
        paths.sort();
        paths.dedup();
        let mut left = room(&self.pool_dir());
        for path in paths {
            // A task's worktree (not the scratch ones, `.verify`) is kept for the next tasks,
            // while the pool has room; its work is on its branch.
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(".");
            let task_tree = !name.starts_with('.') && path.join(".git").is_file();
            if left > 0 && task_tree && self.pool(&path) {
                left -= 1;
                continue;
            }
            let _ = repo.remove_worktree(&path);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
