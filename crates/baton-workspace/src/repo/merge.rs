//! Merges: a task's dependencies into its worktree, and the tasks' branches into the run's
//! result (without a checkout where git can).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::worktree::admin_dir;
use super::{Conflict, MergeOutcome, Repo, create_parent, path_arg};
use crate::git::{GitError, failed};

/// `(label, commit id)` of each task merged into a result.
type Labelled<'a> = Vec<(&'a str, String)>;

/// Set once git refused `merge-tree --write-tree` (older than 2.38): results are merged in a
/// scratch worktree from then on.
static NO_MERGE_TREE: AtomicBool = AtomicBool::new(false);

impl Repo {
    /// Merges the rest of a task's dependencies (`(rev, commit)`, in order) into its new
    /// worktree at `path`, fast-forwarding where one already contains it; each merge that is
    /// not a fast-forward is `baton: merge REV`.
    pub(super) fn merge_dependencies(
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
        super::add_all(&git, path, &[])?;
        git.output(path, &["commit", "--quiet", "--no-edit", "--no-verify"])?;
        self.head(path)
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
        let (base, commits) = self.merge_inputs(base, commits)?;
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

    /// The base and the `(label, commit)`s of a result merge as commit ids, every one checked
    /// before anything is made.
    fn merge_inputs<'a>(
        &self,
        base: &str,
        commits: &'a [(String, String)],
    ) -> Result<(String, Labelled<'a>), GitError> {
        let commits = commits
            .iter()
            .map(|(label, rev)| Ok((label.as_str(), self.commit_id(rev)?)))
            .collect::<Result<Vec<_>, GitError>>()?;
        Ok((self.commit_id(base)?, commits))
    }

    /// The tree of `ours` and `theirs` merged, made without a checkout (`merge-tree
    /// --write-tree`, git 2.38+); `Err` with the conflicting files, sorted.
    pub(super) fn merge_tree(
        &self,
        ours: &str,
        theirs: &str,
    ) -> Result<Result<String, Vec<String>>, GitError> {
        let args = [
            "merge-tree",
            "--write-tree",
            "-z",
            "--name-only",
            "--no-messages",
            ours,
            theirs,
        ];
        let output = self.git.run(&self.root, &args)?;
        let text = String::from_utf8_lossy(&output.stdout);
        let mut fields = text.split('\0');
        let tree = fields.next().unwrap_or_default().to_owned();
        match output.status.code() {
            Some(0) => Ok(Ok(tree)),
            Some(1) if !tree.is_empty() => {
                let mut files: Vec<String> = fields
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned)
                    .collect();
                files.sort();
                files.dedup();
                Ok(Err(files))
            }
            _ => Err(failed(&args, &output)),
        }
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
            let tree = match self.merge_tree(&current, commit)? {
                Ok(tree) => tree,
                Err(files) => {
                    conflict = Some(Conflict {
                        incoming: (*label).to_owned(),
                        files,
                    });
                    break;
                }
            };
            let tree = tree.as_str();
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
        let (base, commits) = self.merge_inputs(base, commits)?;
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

    /// Merges `commit` into what is checked out in `worktree`. `Some(files)` on a conflict,
    /// after aborting the merge.
    pub(super) fn merge(
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
        // In the user's own checkout (`baton apply`), what git ignores is the user's too
        // (`node_modules`, `.venv`): the merge stops rather than replace it. `apply` looks
        // first and names it; this holds should something appear in between.
        let ignored = if worktree == self.root {
            "--no-overwrite-ignore"
        } else {
            "--overwrite-ignore"
        };
        let args = [
            "merge",
            "--quiet",
            "--no-edit",
            "--no-stat",
            "--no-verify",
            ff,
            ignored,
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
}

/// What a merge that conflicts leaves: nothing (aborted, and a new worktree removed), or
/// the merge in progress, for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnConflict {
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
pub(super) enum FastForward {
    Allow,
    Never,
}
