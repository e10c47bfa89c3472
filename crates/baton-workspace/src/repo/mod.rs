//! The repository a run works in, and what baton does to it: the repository itself, its
//! commits and branches here; the tasks' worktrees (`worktree`), the pool they wait in between
//! tasks (`pool`), merges (`merge`), and the user's own checkout (`working_tree`).

use std::path::{Path, PathBuf};

use crate::evidence::Evidence;
use crate::git::{Drivers, Git, GitError, failed};

mod kept_out;
mod merge;
mod pool;
mod restart;
mod working_tree;
mod worktree;

pub use kept_out::note_included;
pub use merge::MergeInProgress;
use merge::{FastForward, OnConflict};

/// A git repository baton runs in.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The main worktree's root.
    pub root: PathBuf,
    git: Git,
    /// `--git-common-dir`, once asked.
    common_dir: std::sync::OnceLock<String>,
}

/// What [`Repo::commit_worktree`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeCommit {
    /// The new commit; `None` when nothing changed.
    pub commit: Option<String>,
    /// Symbolic links out of the worktree that were left uncommitted.
    pub links_left_out: Vec<String>,
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
        let args = [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
        ];
        let found = git.output(dir, &args)?;
        let mut found = found.lines();
        let root = PathBuf::from(found.next().unwrap_or_default());
        let common = found.next().unwrap_or_default().to_owned();
        if root.as_os_str().is_empty() || common.is_empty() {
            return Err(GitError::Other(format!(
                "git did not say where the repository at `{}` is",
                dir.display()
            )));
        }
        git.in_repository(Path::new(&common));
        git.trust_drivers_of(&root)?;
        Ok(Repo {
            root,
            git,
            common_dir: std::sync::OnceLock::from(common),
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
        self.commit_all_but(worktree, message, &[])
    }

    /// [`Repo::commit_all`], leaving out the paths `keep_out` matches (git pathspecs from the
    /// worktree's root): files an agent's CLI keeps there for itself.
    pub fn commit_all_but(
        &self,
        worktree: &Path,
        message: &str,
        keep_out: &[&str],
    ) -> Result<Option<String>, GitError> {
        Ok(self.commit_worktree(worktree, message, keep_out)?.commit)
    }

    /// [`Repo::commit_all_but`], saying what was left out besides `keep_out`: never
    /// committed are what `worktree_include` brought in (see [`note_included`]) and a
    /// symbolic link the commit would add that points out of the worktree (to the user's own
    /// files: applied, it would stand where they are).
    pub fn commit_worktree(
        &self,
        worktree: &Path,
        message: &str,
        keep_out: &[&str],
    ) -> Result<WorktreeCommit, GitError> {
        let (head, head_tree) = self.check_worktree_root(worktree)?;
        // `add` and `write-tree` (which refreshes the index, and may clean a file again)
        // both run filters: one read of the config for the two.
        let git = self.git.settled(worktree)?;
        add_all(&git, worktree, keep_out)?;
        let mut tree = git.output(worktree, &["write-tree"])?.trim().to_owned();
        if tree == head_tree {
            return Ok(WorktreeCommit::default());
        }
        let raw = git.output(
            worktree,
            &[
                "diff-tree",
                "-r",
                "--raw",
                "-z",
                "--no-renames",
                &head_tree,
                &tree,
            ],
        )?;
        let links_left_out = kept_out::links_leaving(worktree, &raw);
        if !links_left_out.is_empty() {
            let mut rm = vec!["rm", "--cached", "--quiet", "--ignore-unmatch", "--"];
            let literal: Vec<String> = links_left_out
                .iter()
                .map(|p| format!(":(literal){p}"))
                .collect();
            rm.extend(literal.iter().map(String::as_str));
            git.output(worktree, &rm)?;
            tree = git.output(worktree, &["write-tree"])?.trim().to_owned();
            if tree == head_tree {
                return Ok(WorktreeCommit {
                    commit: None,
                    links_left_out,
                });
            }
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
        Ok(WorktreeCommit {
            commit: Some(commit),
            links_left_out,
        })
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
        // The earlier attempts' work kept beside the branches (`Repo::attempt_ref`) goes too.
        let kept = self.git.output(
            &self.root,
            &[
                "for-each-ref",
                "--format=%(refname)",
                &format!("refs/{prefix}/"),
            ],
        )?;
        for reference in kept.lines().filter(|r| !r.is_empty()) {
            self.git
                .output(&self.root, &["update-ref", "-d", reference])?;
        }
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

    /// Removes the ref locks (`*.lock`) under the run's refs (`prefix`, `baton/RUN`: its
    /// branches, the attempts' kept work, what was fetched for it) that are at least
    /// `older_than` old. A git killed between taking a ref's lock and renaming it into place
    /// (a driver SIGKILLed during `git worktree add`: its git dies with it) leaves the lock,
    /// and every later update of that ref fails ("cannot lock ref … File exists") until it is
    /// removed. Only the run's holder calls this, before it makes worktrees again; a fresh lock
    /// may be a live worker's git at work (`older_than` spares it). Returns how many went.
    pub fn remove_stale_ref_locks(
        &self,
        prefix: &str,
        older_than: std::time::Duration,
    ) -> Result<usize, GitError> {
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            return Ok(0);
        }
        let refs = Path::new(self.common_dir()?).join("refs");
        let run = prefix.rsplit('/').next().unwrap_or(prefix);
        let mut removed = 0;
        for dir in [
            refs.join("heads").join(prefix),
            refs.join(prefix),
            refs.join("baton-fetched").join(run),
        ] {
            removed += remove_locks_under(&dir, older_than, 0);
        }
        Ok(removed)
    }

    /// Points `branch` at `commit`, making it if need be (a best-of task's winner becomes
    /// its branch). A branch checked out in a worktree moves under it: the caller sets that
    /// worktree aside.
    pub fn set_branch(&self, branch: &str, commit: &str) -> Result<(), GitError> {
        let commit = self.commit_id(commit)?;
        let reference = format!("refs/heads/{branch}");
        self.git.output(
            &self.root,
            &["update-ref", "-m", "baton: pick", &reference, &commit],
        )?;
        Ok(())
    }

    /// Fetches `refspecs` from `remote` (a remote's name, a URL or a path): how a worker on
    /// another machine gets the run's base and its needs' branches. Tags and submodules stay.
    pub fn fetch(&self, remote: &str, refspecs: &[String]) -> Result<(), GitError> {
        let mut args = vec!["fetch", "--quiet", "--no-tags", "--no-write-fetch-head"];
        args.extend(["--end-of-options", remote]);
        args.extend(refspecs.iter().map(String::as_str));
        self.git.output(&self.root, &args)?;
        Ok(())
    }

    /// Pushes `refspecs` to `remote`: a worker's task branch, the coordinator's base and
    /// result.
    pub fn push(&self, remote: &str, refspecs: &[String]) -> Result<(), GitError> {
        let mut args = vec!["push", "--quiet", "--no-verify", "--end-of-options", remote];
        args.extend(refspecs.iter().map(String::as_str));
        self.git.output(&self.root, &args)?;
        Ok(())
    }

    /// The commit a branch points at, if it exists.
    pub fn branch_commit(&self, branch: &str) -> Result<Option<String>, GitError> {
        self.ref_commit(&format!("refs/heads/{branch}"))
    }

    /// The commit a full ref name (`refs/…`) points at, if it exists.
    fn ref_commit(&self, reference: &str) -> Result<Option<String>, GitError> {
        let spec = format!("{reference}^{{commit}}");
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
        self.diff_as(from, to, "--patch")
    }

    /// What changed between `from` and `to` as git's `--stat`: a line a file, with its lines
    /// added and removed, and a total.
    pub fn diff_stat(&self, from: &str, to: &str) -> Result<String, GitError> {
        self.diff_as(from, to, "--stat=100")
    }

    fn diff_as(&self, from: &str, to: &str, form: &str) -> Result<String, GitError> {
        let from = self.resolve(from)?;
        let to = self.resolve(to)?;
        self.git.output(
            &self.root,
            &[
                "-c",
                "core.quotePath=false",
                "diff",
                form,
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

    fn head(&self, worktree: &Path) -> Result<String, GitError> {
        Ok(self
            .git
            .output(worktree, &["rev-parse", "--verify", "HEAD"])?
            .trim()
            .to_owned())
    }

    /// The repository's common git directory, absolute (shared by all its worktrees): what
    /// tells two checkouts of one repository from two repositories.
    pub fn git_dir(&self) -> Result<&str, GitError> {
        self.common_dir()
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
}

/// Removes the `*.lock` files under `dir` at least `older_than` old; how many.
fn remove_locks_under(dir: &Path, older_than: std::time::Duration, depth: usize) -> usize {
    // Ref names nest a few levels at most: a guard against a loop, not a limit in practice.
    let Ok(entries) = std::fs::read_dir(dir).map_err(drop) else {
        return 0;
    };
    if depth > 16 {
        return 0;
    }
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            removed += remove_locks_under(&path, older_than, depth + 1);
        } else if path.extension().is_some_and(|e| e == "lock")
            && meta
                .modified()
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age >= older_than)
            && std::fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// `git add --all` in `worktree` (with `git`, its config read), leaving out what `keep_out`
/// matches and what `worktree_include` brought in (see `kept_out`).
pub(super) fn add_all(git: &Git, worktree: &Path, keep_out: &[&str]) -> Result<(), GitError> {
    let excluded: Vec<String> = keep_out.iter().map(|p| format!(":(exclude){p}")).collect();
    let mut add = vec!["add", "--all"];
    if !excluded.is_empty() {
        add.extend(["--", "."]);
        add.extend(excluded.iter().map(String::as_str));
    }
    git.output(worktree, &add)?;
    // Taken out of the index after the `add` rather than excluded from it: git refuses a
    // pathspec that names an ignored path, even one that excludes it.
    let included: Vec<String> = kept_out::included(worktree)
        .iter()
        .map(|p| format!(":(literal){p}"))
        .collect();
    if !included.is_empty() {
        let mut rm = vec!["rm", "--cached", "-r", "--quiet", "--ignore-unmatch", "--"];
        rm.extend(included.iter().map(String::as_str));
        git.output(worktree, &rm)?;
    }
    Ok(())
}

/// Whether `rev` is a full object id (SHA-1 or SHA-256), not a name to resolve.
pub(super) fn is_object_id(rev: &str) -> bool {
    matches!(rev.len(), 40 | 64) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A commit message as `git commit --cleanup=whitespace` leaves it: trailing whitespace off
/// every line, runs of blank lines made one, none at the start or end. Not `strip`: an
/// agent's message may hold lines starting with `#` (Markdown headings), which it would drop.
pub(super) fn cleanup_whitespace(message: &str) -> String {
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
pub(super) fn path_arg(path: &Path) -> Result<String, GitError> {
    let absolute = std::path::absolute(path)
        .map_err(|e| GitError::Other(format!("cannot make `{}` absolute: {e}", path.display())))?;
    absolute.to_str().map(str::to_owned).ok_or_else(|| {
        GitError::Other(format!(
            "the path `{}` is not valid UTF-8; put baton's worktrees under a UTF-8 path",
            absolute.display()
        ))
    })
}

pub(super) fn create_parent(path: &Path) -> Result<(), GitError> {
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
pub(super) fn same_path(a: &Path, b: &Path) -> bool {
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
