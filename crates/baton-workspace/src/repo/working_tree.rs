//! The user's own checkout: what it holds that worktrees will not, a commit of it as it is,
//! and applying a run's result to it.

use std::path::Path;

use super::{Conflict, FastForward, MergeOutcome, Repo};
use crate::git::{GitError, failed};

impl Repo {
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
    /// with how it is changed: every staged change (a merge would commit it along), the
    /// modified and untracked files the merge would write (or that sit where it writes a
    /// directory, or beneath a file it writes), and what git ignores that the merge would
    /// overwrite or remove (`ignored`: a `node_modules/` where the result has a file or link,
    /// an ignored file where it has one). Others stay as they are through the merge.
    ///
    /// Git itself takes ignored files for expendable and replaces them without a word; the
    /// user's `node_modules`, `.venv` or `target` are not.
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
        let status = self.status()?;
        let mut found: Vec<(String, &'static str)> = status
            .iter()
            .filter(|(path, how)| *how == "staged" || meets(path))
            .cloned()
            .collect();
        for path in self.ignored_in_the_way(&touched)? {
            if !found.iter().any(|(p, _)| *p == path) {
                found.push((path, "ignored"));
            }
        }
        found.sort();
        Ok(found)
    }

    /// What the main worktree holds, untracked (ignored included), at a path the merge
    /// writes or beneath it, or as a file where the merge needs a directory: each as a path
    /// from the root (a directory with a trailing `/`).
    fn ignored_in_the_way(&self, touched: &[String]) -> Result<Vec<String>, GitError> {
        let tracked: std::collections::HashSet<String> = self
            .git
            .output(&self.root, &["ls-files", "-z", "--cached"])?
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        let mut found = Vec::new();
        let mut looked = std::collections::HashSet::new();
        for path in touched {
            // Each directory above it first: a file or link there stands where the merge
            // needs a directory.
            let mut prefix = String::new();
            for part in path.split('/') {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(part);
                if !looked.insert(prefix.clone()) {
                    continue;
                }
                let Ok(meta) = self.root.join(&prefix).symlink_metadata() else {
                    break;
                };
                let last = prefix.len() == path.len();
                if meta.is_dir() {
                    if last {
                        // The merge writes a file or link here, or removes what was one: a
                        // directory in its place goes, with what it holds that git does not
                        // track.
                        found.extend(self.untracked_under(&prefix)?);
                    }
                    continue;
                }
                if !tracked.contains(&prefix) {
                    found.push(prefix.clone());
                }
                break;
            }
        }
        Ok(found)
    }

    /// The untracked and ignored files and directories at or under `dir` (directories whole,
    /// with a trailing `/`).
    fn untracked_under(&self, dir: &str) -> Result<Vec<String>, GitError> {
        let spec = format!(":(literal){dir}");
        // No `--exclude-standard`: ignored files are listed with the others.
        let listed = self.git.output(
            &self.root,
            &["ls-files", "-z", "--others", "--directory", "--", &spec],
        )?;
        Ok(listed
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect())
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
    /// possible, else a merge commit with `message`; with `squash`, one new commit on the
    /// branch with `message`, holding what the merge would (the run's own commits left out of
    /// the branch's history). Refuses uncommitted changes the merge would meet, and what git
    /// ignores that it would overwrite or remove ([`Repo::changes_in_the_way`]), naming them,
    /// before anything is touched.
    ///
    /// Also refuses a detached HEAD (the result would belong to no branch). A conflict is
    /// aborted, leaving the branch and the tree as they were.
    pub fn apply(
        &self,
        commit: &str,
        message: &str,
        squash: bool,
    ) -> Result<MergeOutcome, GitError> {
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
            let ignored = in_the_way.iter().any(|(_, how)| *how == "ignored");
            let other = in_the_way.iter().any(|(_, how)| *how != "ignored");
            let advice = match (other, ignored) {
                (true, false) => "commit or stash them first",
                (false, _) => {
                    "git ignores them, but the result has files there: move them aside \
                     (baton apply never replaces them), then apply again"
                }
                (true, true) => {
                    "commit or stash the changes, move aside what git ignores (baton apply \
                     never replaces it), then apply again"
                }
            };
            return Err(GitError::Other(format!(
                "uncommitted changes are in the way of the merge: {}; {advice}",
                named.join(", "),
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
        let incoming = if squash {
            match self.squashed(&id, message)? {
                Ok(squashed) => squashed,
                Err(files) => {
                    return Ok(MergeOutcome::Conflict(Conflict {
                        incoming: commit.to_owned(),
                        files,
                    }));
                }
            }
        } else {
            id
        };
        if let Some(files) = self.merge(&self.root, &incoming, message, FastForward::Allow)? {
            return Ok(MergeOutcome::Conflict(Conflict {
                incoming: commit.to_owned(),
                files,
            }));
        }
        Ok(MergeOutcome::Merged(self.head(&self.root)?))
    }

    /// One commit on top of `HEAD` holding what merging `commit` into it would: the merge
    /// made without a checkout (`merge-tree`), so a conflict touches nothing. `Err` with the
    /// conflicting files.
    fn squashed(
        &self,
        commit: &str,
        message: &str,
    ) -> Result<Result<String, Vec<String>>, GitError> {
        let head = self.resolve("HEAD")?;
        let tree = match self.merge_tree(&head, commit)? {
            Ok(tree) => tree,
            Err(files) => return Ok(Err(files)),
        };
        let squashed = self
            .git
            .output_with_input(
                &self.root,
                &["commit-tree", &tree, "-p", &head, "-F", "-"],
                &super::cleanup_whitespace(message),
            )?
            .trim()
            .to_owned();
        Ok(Ok(squashed))
    }
}
