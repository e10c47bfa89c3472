//! The repository a run works in, and what baton does to it.

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, Ordering};

use crate::evidence::Evidence;
use crate::git::{Drivers, Git, GitError, failed};

/// Set once git refused `merge-tree --write-tree` (older than 2.38): results are merged in a
/// scratch worktree from then on.
static NO_MERGE_TREE: AtomicBool = AtomicBool::new(false);

/// A git repository baton runs in.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The main worktree's root.
    pub root: PathBuf,
    git: Git,
    /// `--git-common-dir`, once asked.
    common_dir: std::sync::OnceLock<String>,
}

/// How a task's worktree starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStart {
    /// From this commit (the run's base, for a task with no dependencies).
    Commit(String),
    /// From a merge of these commits (its dependencies' results), in this order.
    Merge(Vec<String>),
}

/// Two sides of a merge that touched the same lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// What was being merged in when the conflict arose (a branch or commit).
    pub incoming: String,
    /// The files in conflict, repository-relative.
    pub files: Vec<String>,
}

/// How a merge went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The merge commit (or the one commit, when there was nothing to merge).
    Merged(String),
    Conflict(Conflict),
}

impl Repo {
    /// The repository containing `dir`, or an error saying it is not one.
    ///
    /// Its filter, merge and diff drivers are read now and trusted: every later command pins
    /// the settings that changed since back to these (see [`Drivers`]). Take the repository
    /// in hand before anything untrusted runs in it, or give it the drivers trusted earlier
    /// with [`Repo::trust_drivers`].
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        let mut git = Git::new();
        let root = PathBuf::from(git.output(dir, &["rev-parse", "--show-toplevel"])?.trim());
        git.trust_drivers_of(&root)?;
        Ok(Repo {
            root,
            git,
            common_dir: std::sync::OnceLock::new(),
        })
    }

    /// The driver settings this repository's commands are held to.
    pub fn trusted_drivers(&self) -> Drivers {
        self.git.trusted().cloned().unwrap_or_default()
    }

    /// Holds this repository's commands to `drivers` (read when a run started, say) instead
    /// of those read by [`Repo::discover`].
    pub fn trust_drivers(&mut self, drivers: Drivers) {
        self.git.trust(drivers);
    }

    /// The commit `rev` names (`HEAD`, a branch, a tag, an id).
    pub fn resolve(&self, rev: &str) -> Result<String, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let args = [
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ];
        let output = self.git.run(&self.root, &args)?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned());
        }
        // `--quiet` makes a rev that names nothing (or no commit) exit 1 without a word;
        // anything on stderr is a different failure, reported as it is.
        if output.status.code() == Some(1) && output.stderr.is_empty() {
            return Err(GitError::Other(format!(
                "no commit `{rev}` in the repository; check the branch, tag or commit id"
            )));
        }
        Err(failed(&args, &output))
    }

    /// `rev` as a commit id: a full object id as it is (baton's own, from git: the command
    /// it is given to fails on one that names nothing), anything else resolved.
    fn commit_id(&self, rev: &str) -> Result<String, GitError> {
        if is_object_id(rev) {
            Ok(rev.to_owned())
        } else {
            self.resolve(rev)
        }
    }

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
        let args = ["worktree", "add", "--quiet", "-b", branch, &path_arg, first];
        let added = self.git.run(&self.root, &args)?;
        if !added.status.success() {
            // Asked only now, when it failed: one process less for every task that starts.
            if self.branch_commit(branch)?.is_some() {
                return Err(GitError::Other(format!(
                    "branch `{branch}` already exists; delete it (`git branch -D {branch}`) or \
                     start the task on another branch"
                )));
            }
            return Err(failed(&args, &added));
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

    /// Merges the rest of a task's dependencies (`(rev, commit)`, in order) into its new
    /// worktree at `path`, fast-forwarding where one already contains it; each merge that is
    /// not a fast-forward is `baton: merge REV`.
    fn merge_dependencies(
        &self,
        path: &Path,
        rest: &[(&str, String)],
        on_conflict: OnConflict,
    ) -> Result<MergeOutcome, GitError> {
        for (rev, commit) in rest {
            let message = format!("baton: merge {rev}");
            let merged =
                self.merge_keeping(path, commit, &message, FastForward::Allow, on_conflict);
            if let Some(files) = merged? {
                return Ok(MergeOutcome::Conflict(Conflict {
                    incoming: (*rev).to_owned(),
                    files,
                }));
            }
        }
        Ok(MergeOutcome::Merged(self.head(path)?))
    }

    /// The merge in progress in the worktree at `path`, if one is.
    pub fn merge_in_progress(&self, path: &Path) -> Result<Option<MergeInProgress>, GitError> {
        let Ok(admin) = admin_dir(path) else {
            return Ok(None);
        };
        let Ok(incoming) = std::fs::read_to_string(admin.join("MERGE_HEAD")) else {
            return Ok(None);
        };
        Ok(Some(MergeInProgress {
            incoming: incoming
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
            unmerged: self.unmerged_files(path)?,
        }))
    }

    /// Commits the merge in progress in the worktree at `path`, its conflicts resolved (what a
    /// person edited is taken as it is), with git's own message for it. Returns the commit.
    pub fn conclude_merge(&self, path: &Path) -> Result<String, GitError> {
        let git = self.git.settled(path)?;
        git.output(path, &["add", "--all"])?;
        git.output(path, &["commit", "--quiet", "--no-edit", "--no-verify"])?;
        self.head(path)
    }

    /// Sets aside the worktree at `path` (a task's, its work committed on its branch) for a
    /// later task: emptied of the task's work (`rest` checked out detached, a commit of the
    /// user's history such as the run's base, and everything untracked or ignored removed),
    /// so that it holds nothing the repository's history does not, and no branch; then moved
    /// to `pooled`. [`Repo::reuse_worktree`] makes it a task's again.
    pub fn pool_worktree(&self, path: &Path, pooled: &Path, rest: &str) -> Result<(), GitError> {
        self.check_worktree_root(path)?;
        let rest = self.commit_id(rest)?;
        let git = self.git.settled(path)?;
        git.output(path, &["checkout", "--quiet", "--force", "--detach", &rest])?;
        git.output(path, &["clean", "-ffdxq"])?;
        create_parent(pooled)?;
        let (from, to) = (path_arg(path)?, path_arg(pooled)?);
        self.git
            .output(&self.root, &["worktree", "move", &from, &to])?;
        Ok(())
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

    /// Commits everything changed in `worktree` (new, modified, deleted files; what git
    /// ignores stays out) with `message`, as baton. `None` when nothing changed.
    ///
    /// Refuses a directory that is not the root of one of this repository's worktrees: should
    /// an agent have removed the worktree's `.git` file, git would find the enclosing
    /// repository instead and `git add -A` would sweep the user's own working tree.
    ///
    /// With plumbing, after `git add --all`: `write-tree`, compared with `HEAD`'s tree, then
    /// `commit-tree` and `update-ref` (no hooks, no status walk of the tree, one config read
    /// for `add` and `write-tree`), six git processes where `commit` took nine.
    pub fn commit_all(&self, worktree: &Path, message: &str) -> Result<Option<String>, GitError> {
        let (head, head_tree) = self.check_worktree_root(worktree)?;
        // `add` and `write-tree` (which refreshes the index, and may clean a file again)
        // both run filters: one read of the config for the two.
        let git = self.git.settled(worktree)?;
        git.output(worktree, &["add", "--all"])?;
        let tree = git.output(worktree, &["write-tree"])?.trim().to_owned();
        if tree == head_tree {
            return Ok(None);
        }
        let commit = self
            .git
            .output_with_input(
                worktree,
                &["commit-tree", &tree, "-p", &head, "-F", "-"],
                &cleanup_whitespace(message),
            )?
            .trim()
            .to_owned();
        // `HEAD` is the task's branch: the branch moves, from where it was only.
        self.git.output(
            worktree,
            &["update-ref", "-m", "baton: commit", "HEAD", &commit, &head],
        )?;
        Ok(Some(commit))
    }

    /// What changed between `from` and `to` (commits).
    pub fn evidence(&self, from: &str, to: &str) -> Result<Evidence, GitError> {
        let from = self.commit_id(from)?;
        let to = self.commit_id(to)?;
        // One diff for both: the raw records give each file's change, the numstat ones its
        // lines.
        let text = self.git.output(
            &self.root,
            &["diff", "--raw", "--numstat", "-M", "-z", &from, &to, "--"],
        )?;
        crate::evidence::parse_raw_numstat(&text)
    }

    /// Merges `commits` in order onto `base` as branch `branch` (created or reset). Stops at
    /// the first conflict.
    ///
    /// Each `(label, commit)` becomes one merge commit `baton: merge task LABEL` (never a
    /// fast-forward, even of a commit already merged), so the branch's first-parent history
    /// lists the tasks merged, one commit each. On a conflict the branch stays at the last
    /// merge that succeeded (at `base` if the first one conflicts); the conflict names the
    /// label.
    ///
    /// Nothing is checked out: each merge is `git merge-tree --write-tree` (git 2.38+) and
    /// `git commit-tree`, and the branch is set once at the end. With an older git, the merges
    /// are made in a scratch worktree at `path`, removed afterwards. A scratch worktree left at
    /// `path` by an interrupted call is removed first either way.
    pub fn merge_into_branch(
        &self,
        path: &Path,
        branch: &str,
        base: &str,
        commits: &[(String, String)],
    ) -> Result<MergeOutcome, GitError> {
        let base = self.commit_id(base)?;
        let commits = commits
            .iter()
            .map(|(label, rev)| Ok((label.as_str(), self.commit_id(rev)?)))
            .collect::<Result<Vec<_>, GitError>>()?;
        if path.exists() && self.find_worktree(path)?.is_some() {
            self.remove_worktree(path)?;
        }
        if !NO_MERGE_TREE.load(Ordering::Relaxed) {
            match self.merge_without_checkout(branch, &base, &commits) {
                Err(GitError::Failed { status, stderr, .. })
                    if status.contains("129") && stderr.contains("write-tree") =>
                {
                    // git older than 2.38: no `merge-tree --write-tree`.
                    NO_MERGE_TREE.store(true, Ordering::Relaxed);
                }
                done => return done,
            }
        }
        self.merge_in_worktree(path, branch, &base, &commits)
    }

    /// [`Repo::merge_into_branch`] with `merge-tree` and `commit-tree`.
    fn merge_without_checkout(
        &self,
        branch: &str,
        base: &str,
        commits: &[(&str, String)],
    ) -> Result<MergeOutcome, GitError> {
        let mut current = base.to_owned();
        let mut conflict = None;
        for (label, commit) in commits {
            let args = [
                "merge-tree",
                "--write-tree",
                "-z",
                "--name-only",
                "--no-messages",
                current.as_str(),
                commit.as_str(),
            ];
            let output = self.git.run(&self.root, &args)?;
            let text = String::from_utf8_lossy(&output.stdout);
            let mut fields = text.split('\0');
            let tree = fields.next().unwrap_or_default();
            match output.status.code() {
                Some(0) => {}
                Some(1) if !tree.is_empty() => {
                    let mut files: Vec<String> = fields
                        .filter(|f| !f.is_empty())
                        .map(str::to_owned)
                        .collect();
                    files.sort();
                    files.dedup();
                    conflict = Some(Conflict {
                        incoming: (*label).to_owned(),
                        files,
                    });
                    break;
                }
                _ => return Err(failed(&args, &output)),
            }
            let message = format!("baton: merge task {label}");
            current = self
                .git
                .output(
                    &self.root,
                    &[
                        "commit-tree",
                        tree,
                        "-p",
                        current.as_str(),
                        "-p",
                        commit.as_str(),
                        "-m",
                        &message,
                    ],
                )?
                .trim()
                .to_owned();
        }
        let reference = format!("refs/heads/{branch}");
        self.git.output(
            &self.root,
            &[
                "update-ref",
                "-m",
                "baton: merge the run's tasks",
                &reference,
                &current,
            ],
        )?;
        Ok(match conflict {
            Some(conflict) => MergeOutcome::Conflict(conflict),
            None => MergeOutcome::Merged(current),
        })
    }

    /// [`Repo::merge_into_branch`] as it is done with a git older than 2.38, in a scratch
    /// worktree at `path`: for the tests that hold both ways to the same result.
    #[doc(hidden)]
    pub fn merge_into_branch_checked_out(
        &self,
        path: &Path,
        branch: &str,
        base: &str,
        commits: &[(String, String)],
    ) -> Result<MergeOutcome, GitError> {
        let base = self.resolve(base)?;
        let commits = commits
            .iter()
            .map(|(label, rev)| Ok((label.as_str(), self.resolve(rev)?)))
            .collect::<Result<Vec<_>, GitError>>()?;
        self.merge_in_worktree(path, branch, &base, &commits)
    }

    /// [`Repo::merge_into_branch`] in a scratch worktree, for git older than 2.38.
    fn merge_in_worktree(
        &self,
        path: &Path,
        branch: &str,
        base: &str,
        commits: &[(&str, String)],
    ) -> Result<MergeOutcome, GitError> {
        let path_arg = path_arg(path)?;
        create_parent(path)?;
        self.git.output(
            &self.root,
            &["worktree", "add", "--quiet", "-B", branch, &path_arg, base],
        )?;
        let merged = (|| {
            for (label, commit) in commits {
                let message = format!("baton: merge task {label}");
                if let Some(files) = self.merge(path, commit, &message, FastForward::Never)? {
                    return Ok(MergeOutcome::Conflict(Conflict {
                        incoming: (*label).to_owned(),
                        files,
                    }));
                }
            }
            Ok(MergeOutcome::Merged(self.head(path)?))
        })();
        let removed = self.remove_worktree(path);
        let outcome = merged?;
        removed?;
        Ok(outcome)
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

    /// Deletes the branches under `prefix` (`baton/RUN/`).
    ///
    /// A branch checked out in a worktree cannot be deleted, so the worktrees that have one of
    /// these branches checked out are removed first (they are the run's). A branch checked out
    /// in the main worktree is an error: that is the user's working tree.
    pub fn delete_branches(&self, prefix: &str) -> Result<(), GitError> {
        let prefix = prefix.trim_end_matches('/');
        if prefix.trim_matches('/').is_empty() {
            return Err(GitError::Other(
                "refusing to delete branches under an empty prefix (that is every branch); \
                 give the run's prefix, like `baton/RUN/`"
                    .into(),
            ));
        }
        let under = |name: &str| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
        };
        let pattern = format!("refs/heads/{prefix}/");
        let refs = self.git.output(
            &self.root,
            &["for-each-ref", "--format=%(refname)", &pattern],
        )?;
        let branches: Vec<&str> = refs
            .lines()
            .filter_map(|r| r.strip_prefix("refs/heads/"))
            .filter(|b| under(b))
            .collect();
        if branches.is_empty() {
            return Ok(());
        }
        for worktree in self.worktrees()? {
            let Some(branch) = worktree.branch.as_deref() else {
                continue;
            };
            if !branches.contains(&branch) {
                continue;
            }
            if worktree.main {
                return Err(GitError::Other(format!(
                    "branch `{branch}` is checked out in the main worktree `{}`; switch to \
                     another branch before deleting the run's branches",
                    worktree.path.display()
                )));
            }
            self.remove_worktree(&worktree.path)?;
        }
        let mut args = vec!["branch", "--delete", "--force", "--"];
        args.extend(&branches);
        self.git.output(&self.root, &args)?;
        Ok(())
    }

    /// The commit a branch points at, if it exists.
    pub fn branch_commit(&self, branch: &str) -> Result<Option<String>, GitError> {
        let spec = format!("refs/heads/{branch}^{{commit}}");
        let args = [
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ];
        let output = self.git.run(&self.root, &args)?;
        if output.status.success() {
            return Ok(Some(
                String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            ));
        }
        if output.status.code() == Some(1) && output.stderr.is_empty() {
            return Ok(None);
        }
        Err(failed(&args, &output))
    }

    /// The commits on the first-parent line from `from` (excluded) to `to`, oldest first: for a
    /// result branch made by [`Repo::merge_into_branch`], one merge commit per task, in merge
    /// order.
    pub fn first_parents(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let range = format!("{from}..{to}");
        Ok(self
            .git
            .output(
                &self.root,
                &["rev-list", "--first-parent", "--reverse", &range],
            )?
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// The unified diff between two commits.
    ///
    /// In git's default form whatever the repository's config says (prefixes `a/` and `b/`,
    /// no external diff program or text conversion), and with file names unquoted, for people
    /// to read.
    pub fn diff(&self, from: &str, to: &str) -> Result<String, GitError> {
        let from = self.resolve(from)?;
        let to = self.resolve(to)?;
        self.git.output(
            &self.root,
            &[
                "-c",
                "core.quotePath=false",
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "--src-prefix=a/",
                "--dst-prefix=b/",
                "-M",
                &from,
                &to,
                "--",
            ],
        )
    }

    /// A commit of the main worktree as it is now — `HEAD` plus every uncommitted change,
    /// untracked files included, what git ignores left out — made on an index of its own (the
    /// user's index, branch and files are not touched), with `HEAD` as its parent. `HEAD`
    /// itself when nothing is uncommitted. For `base = "working-tree"`: what people mean when
    /// they ask agents to work on what they are looking at.
    pub fn snapshot_working_tree(&self) -> Result<String, GitError> {
        let head = self.resolve("HEAD")?;
        let index = Path::new(self.common_dir()?)
            .join(format!("baton-snapshot-index-{}", std::process::id()));
        let made = (|| {
            let git = self.git.settled(&self.root)?;
            git.output_with_index(&self.root, &["read-tree", &head], &index)?;
            git.output_with_index(&self.root, &["add", "--all"], &index)?;
            let tree = git
                .output_with_index(&self.root, &["write-tree"], &index)?
                .trim()
                .to_owned();
            let head_tree = self.resolve_tree(&head)?;
            if tree == head_tree {
                return Ok(head.clone());
            }
            Ok(self
                .git
                .output(
                    &self.root,
                    &[
                        "commit-tree",
                        &tree,
                        "-p",
                        &head,
                        "-m",
                        "baton: the working tree at the run's start",
                    ],
                )?
                .trim()
                .to_owned())
        })();
        let _ = std::fs::remove_file(&index);
        made
    }

    /// The tree of `commit`.
    fn resolve_tree(&self, commit: &str) -> Result<String, GitError> {
        let spec = format!("{commit}^{{tree}}");
        Ok(self
            .git
            .output(&self.root, &["rev-parse", "--verify", &spec])?
            .trim()
            .to_owned())
    }

    /// What the main worktree holds that a worktree starting from `HEAD` will not: modified
    /// and untracked files (not what git ignores), sorted.
    pub fn uncommitted(&self) -> Result<Vec<(String, &'static str)>, GitError> {
        let mut found: Vec<(String, &'static str)> = self
            .status()?
            .into_iter()
            .map(|(path, how)| (path, if how == "staged" { "modified" } else { how }))
            .collect();
        found.sort();
        Ok(found)
    }

    /// The uncommitted changes of the main worktree that merging `commit` would meet, each
    /// with how it is changed: every staged change (a merge would commit it along), and the
    /// modified and untracked files the merge would write (or that sit where it writes a
    /// directory, or beneath a file it writes). Others stay as they are through the merge.
    pub fn changes_in_the_way(
        &self,
        commit: &str,
    ) -> Result<Vec<(String, &'static str)>, GitError> {
        let split = |text: &str| -> Vec<String> {
            text.split('\0')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let touched = split(&self.git.output(
            &self.root,
            &[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--merge-base",
                "HEAD",
                commit,
                "--",
            ],
        )?);
        let meets = |path: &str| {
            touched.iter().any(|t| {
                t == path
                    || t.strip_prefix(path).is_some_and(|r| r.starts_with('/'))
                    || path
                        .strip_prefix(t.as_str())
                        .is_some_and(|r| r.starts_with('/'))
            })
        };
        let mut found: Vec<(String, &'static str)> = self
            .status()?
            .into_iter()
            .filter(|(path, how)| *how == "staged" || meets(path))
            .collect();
        found.sort();
        Ok(found)
    }

    /// The main worktree's uncommitted files, each `staged`, `modified` or `untracked` (what
    /// git ignores left out), in git's order.
    fn status(&self) -> Result<Vec<(String, &'static str)>, GitError> {
        // Explicit, as `status.showUntrackedFiles=no` in the repository's config would hide
        // new files.
        let status = self.git.output(
            &self.root,
            &[
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=all",
                "--no-renames",
            ],
        )?;
        Ok(status
            .split('\0')
            .filter(|e| e.len() > 3)
            .filter_map(|entry| {
                let (state, path) = entry.split_at(3);
                let how = match state.as_bytes()[0] {
                    b'?' => "untracked",
                    b'!' => return None,
                    b' ' => "modified",
                    _ => "staged",
                };
                Some((path.to_owned(), how))
            })
            .collect())
    }

    /// Whether the main worktree has uncommitted changes (untracked files included).
    pub fn is_dirty(&self) -> Result<bool, GitError> {
        // Explicit, as `status.showUntrackedFiles=no` in the repository's config would hide
        // new files.
        let status = self.git.output(
            &self.root,
            &["status", "--porcelain", "--untracked-files=normal"],
        )?;
        Ok(!status.is_empty())
    }

    /// Merges `commit` into the checked-out branch of the main worktree: a fast-forward when
    /// possible, else a merge commit. Refuses a dirty tree.
    ///
    /// Also refuses a detached HEAD (the result would belong to no branch). A conflict is
    /// aborted, leaving the branch and the tree as they were.
    pub fn apply(&self, commit: &str, message: &str) -> Result<MergeOutcome, GitError> {
        let id = self.resolve(commit)?;
        let in_the_way = self.changes_in_the_way(&id)?;
        if !in_the_way.is_empty() {
            const SHOWN: usize = 10;
            let mut named: Vec<String> = in_the_way
                .iter()
                .take(SHOWN)
                .map(|(path, how)| format!("{path} ({how})"))
                .collect();
            if in_the_way.len() > SHOWN {
                named.push(format!("and {} more", in_the_way.len() - SHOWN));
            }
            return Err(GitError::Other(format!(
                "uncommitted changes are in the way of the merge: {}; commit or stash them first",
                named.join(", ")
            )));
        }
        let args = ["symbolic-ref", "--quiet", "HEAD"];
        let head = self.git.run(&self.root, &args)?;
        match head.status.code() {
            Some(0) => {}
            Some(1) => {
                return Err(GitError::Other(
                    "HEAD is detached; check out the branch the result should go to first".into(),
                ));
            }
            _ => return Err(failed(&args, &head)),
        }
        if let Some(files) = self.merge(&self.root, &id, message, FastForward::Allow)? {
            return Ok(MergeOutcome::Conflict(Conflict {
                incoming: commit.to_owned(),
                files,
            }));
        }
        Ok(MergeOutcome::Merged(self.head(&self.root)?))
    }

    /// Merges `commit` into what is checked out in `worktree`. `Some(files)` on a conflict,
    /// after aborting the merge.
    fn merge(
        &self,
        worktree: &Path,
        commit: &str,
        message: &str,
        fast_forward: FastForward,
    ) -> Result<Option<Vec<String>>, GitError> {
        self.merge_keeping(worktree, commit, message, fast_forward, OnConflict::Discard)
    }

    /// [`Repo::merge`], leaving a conflict in progress under [`OnConflict::Keep`].
    fn merge_keeping(
        &self,
        worktree: &Path,
        commit: &str,
        message: &str,
        fast_forward: FastForward,
        on_conflict: OnConflict,
    ) -> Result<Option<Vec<String>>, GitError> {
        // The `--ff` flavour is explicit because `merge.ff` in the repository's config
        // would otherwise decide.
        let ff = match fast_forward {
            FastForward::Allow => "--ff",
            FastForward::Never => "--no-ff",
        };
        let args = [
            "merge",
            "--quiet",
            "--no-edit",
            "--no-stat",
            "--no-verify",
            ff,
            "-m",
            message,
            commit,
        ];
        let output = self.git.run(worktree, &args)?;
        if output.status.success() {
            return Ok(None);
        }
        let files = self.unmerged_files(worktree)?;
        let merging = self
            .git
            .run(
                worktree,
                &["rev-parse", "--verify", "--quiet", "MERGE_HEAD"],
            )?
            .status
            .success();
        if merging && (on_conflict == OnConflict::Discard || files.is_empty()) {
            self.git.output(worktree, &["merge", "--abort"])?;
        }
        if files.is_empty() {
            // Not a conflict: unrelated histories, a file in the way, …
            return Err(failed(&args, &output));
        }
        Ok(Some(files))
    }

    /// The paths with unmerged entries in `worktree`'s index, sorted.
    fn unmerged_files(&self, worktree: &Path) -> Result<Vec<String>, GitError> {
        let out = self.git.output(
            worktree,
            &[
                "diff",
                "--name-only",
                "--diff-filter=U",
                "-z",
                "--no-ext-diff",
            ],
        )?;
        let mut files: Vec<String> = out
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        files.sort();
        files.dedup();
        Ok(files)
    }

    fn head(&self, worktree: &Path) -> Result<String, GitError> {
        Ok(self
            .git
            .output(worktree, &["rev-parse", "--verify", "HEAD"])?
            .trim()
            .to_owned())
    }

    /// Removes a task's worktree and branch after its start failed.
    fn discard_task(&self, path: &Path, branch: &str) -> Result<(), GitError> {
        self.remove_worktree(path)?;
        if self.branch_commit(branch)?.is_some() {
            self.git
                .output(&self.root, &["branch", "--delete", "--force", "--", branch])?;
        }
        Ok(())
    }

    /// Checks that `worktree` is the root of one of this repository's worktrees (see
    /// [`Repo::commit_all`]), and returns its `HEAD` commit and that commit's tree, asked in
    /// the same command.
    fn check_worktree_root(&self, worktree: &Path) -> Result<(String, String), GitError> {
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

    /// The repository's common git directory, absolute; asked once.
    fn common_dir(&self) -> Result<&str, GitError> {
        if let Some(dir) = self.common_dir.get() {
            return Ok(dir);
        }
        let dir = self
            .git
            .output(
                &self.root,
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            )?
            .trim()
            .to_owned();
        Ok(self.common_dir.get_or_init(|| dir))
    }

    /// The registered worktree at `path`, if any.
    fn find_worktree(&self, path: &Path) -> Result<Option<Worktree>, GitError> {
        Ok(self
            .worktrees()?
            .into_iter()
            .find(|w| same_path(&w.path, path)))
    }

    fn worktrees(&self) -> Result<Vec<Worktree>, GitError> {
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

/// What a merge that conflicts leaves: nothing (aborted, and a new worktree removed), or
/// the merge in progress, for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnConflict {
    Discard,
    Keep,
}

/// A merge left in progress in a task's worktree ([`Repo::add_task_worktree`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeInProgress {
    /// The commit being merged in (`MERGE_HEAD`).
    pub incoming: String,
    /// The files still in conflict; empty once a person resolved them all (then
    /// [`Repo::conclude_merge`] commits the merge).
    pub unmerged: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
enum FastForward {
    Allow,
    Never,
}

/// One entry of `git worktree list`.
#[derive(Debug)]
struct Worktree {
    path: PathBuf,
    branch: Option<String>,
    main: bool,
}

/// A linked worktree's administrative directory, as its `.git` file names it.
fn admin_dir(worktree: &Path) -> Result<PathBuf, GitError> {
    let link = std::fs::read_to_string(worktree.join(".git"))
        .map_err(|e| GitError::Other(format!("cannot read `{}/.git`: {e}", worktree.display())))?;
    link.strip_prefix("gitdir: ")
        .map(|dir| PathBuf::from(dir.trim()))
        .ok_or_else(|| GitError::Other(format!("`{}/.git` is no link", worktree.display())))
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

/// Whether `rev` is a full object id (SHA-1 or SHA-256), not a name to resolve.
fn is_object_id(rev: &str) -> bool {
    matches!(rev.len(), 40 | 64) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A commit message as `git commit --cleanup=whitespace` leaves it: trailing whitespace off
/// every line, runs of blank lines made one, none at the start or end. Not `strip`: an
/// agent's message may hold lines starting with `#` (Markdown headings), which it would drop.
fn cleanup_whitespace(message: &str) -> String {
    let mut out = String::with_capacity(message.len() + 1);
    let mut blank_run = false;
    for line in message.lines().map(str::trim_end) {
        if line.is_empty() {
            blank_run = !out.is_empty();
            continue;
        }
        if blank_run {
            out.push('\n');
            blank_run = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `path` as an absolute, UTF-8 argument: git runs in the repository's root, where a relative
/// path would mean something else than it does to the caller.
fn path_arg(path: &Path) -> Result<String, GitError> {
    let absolute = std::path::absolute(path)
        .map_err(|e| GitError::Other(format!("cannot make `{}` absolute: {e}", path.display())))?;
    absolute.to_str().map(str::to_owned).ok_or_else(|| {
        GitError::Other(format!(
            "the path `{}` is not valid UTF-8; put baton's worktrees under a UTF-8 path",
            absolute.display()
        ))
    })
}

fn create_parent(path: &Path) -> Result<(), GitError> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    if let Some(parent) = absolute.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            GitError::Other(format!(
                "cannot create the directory `{}` for a worktree: {e}",
                parent.display()
            ))
        })?;
    }
    Ok(())
}

/// Whether two paths name the same place, symlinks resolved where they exist (git records
/// worktree paths with symlinks resolved: `/tmp` is `/private/tmp` on macOS).
fn same_path(a: &Path, b: &Path) -> bool {
    let normal = |p: &Path| {
        p.canonicalize()
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_owned())
    };
    normal(a) == normal(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_cleaned_as_cleanup_whitespace_does() {
        assert_eq!(
            cleanup_whitespace("\n\n# Title  \n\n\n\nbody\t\nmore\n\n"),
            "# Title\n\nbody\nmore\n"
        );
        assert_eq!(cleanup_whitespace(""), "");
        assert_eq!(cleanup_whitespace(" \n\t\n"), "");
    }

    #[test]
    fn only_full_ids_skip_resolving() {
        assert!(is_object_id(&"a".repeat(40)));
        assert!(is_object_id(&"0".repeat(64)));
        assert!(!is_object_id("HEAD"));
        assert!(!is_object_id(&"a".repeat(39)));
        assert!(!is_object_id(&"g".repeat(40)));
    }
}
