//! What a task's commits never take from its worktree, whatever `.gitignore` says: the
//! user's files that `worktree_include` brought in, and symbolic links a task made that point
//! out of the worktree.
//!
//! `worktree_include` links a directory (`node_modules`, `.venv`) into the worktree. A
//! `.gitignore` entry with a slash (`node_modules/`, the usual form) matches directories only,
//! not a link to one, so `git add --all` took the link; it went into the run's result as a link
//! to the user's own directory, and applying the result replaced that directory by a link to
//! itself. Git reads `info/exclude` from the repository's common directory, shared by every
//! worktree, so the worktree's own exclusion is kept here instead: a list in its
//! administrative directory (emptied with it when the worktree is pooled), read by each commit.

use std::path::{Component, Path, PathBuf};

use super::worktree::admin_dir;
use crate::git::GitError;

/// The file, in a worktree's administrative directory, listing the paths `worktree_include`
/// brought in (one a line, relative to the worktree's root).
const INCLUDED: &str = "baton-included";

/// Records that `relative` (paths from the worktree's root) were brought in from the user's
/// checkout, so that no commit of the worktree ever takes them.
pub fn note_included(worktree: &Path, relative: &[PathBuf]) -> Result<(), GitError> {
    if relative.is_empty() {
        return Ok(());
    }
    let file = admin_dir(worktree)?.join(INCLUDED);
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    for path in relative {
        let Some(path) = path.to_str() else { continue };
        // A name with a newline could not be listed; it is left out of the commit anyway as a
        // link out of the worktree, or copied (a file) and so the user's to judge.
        if path.contains('\n') || text.lines().any(|l| l == path) {
            continue;
        }
        text.push_str(path);
        text.push('\n');
    }
    std::fs::write(&file, text)
        .map_err(|e| GitError::Other(format!("cannot write `{}`: {e}", file.display())))
}

/// The paths [`note_included`] recorded for the worktree at `worktree`.
pub(super) fn included(worktree: &Path) -> Vec<String> {
    let Ok(admin) = admin_dir(worktree) else {
        return Vec::new();
    };
    std::fs::read_to_string(admin.join(INCLUDED))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The paths among git's raw diff records (`diff-tree --raw -z` from the branch's tree to
/// the tree about to be committed) that are symbolic links newly added (or a file or
/// directory turned into one) whose target leaves the worktree at `worktree`: an absolute
/// target, or a relative one climbing above the root. A link the branch already held is the
/// repository's own and stays.
pub(super) fn links_leaving(worktree: &Path, raw: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fields = raw.split('\0');
    while let Some(record) = fields.next() {
        let Some(record) = record.strip_prefix(':') else {
            continue;
        };
        let Some(path) = fields.next() else { break };
        // `:OLD_MODE NEW_MODE OLD_ID NEW_ID STATUS`
        let parts: Vec<&str> = record.split(' ').collect();
        let [old_mode, new_mode, _, _, status] = parts[..] else {
            continue;
        };
        if new_mode != "120000" || old_mode == "120000" || !matches!(status, "A" | "T") {
            continue;
        }
        let Ok(target) = std::fs::read_link(worktree.join(path)) else {
            continue;
        };
        if leaves(Path::new(path), &target) {
            found.push(path.to_owned());
        }
    }
    found
}

/// Whether a link at `at` (relative to the root) to `target` points outside the root.
fn leaves(at: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return true;
    }
    // Depth below the root of the directory holding the link, then the target's steps.
    let mut depth = at.components().count().saturating_sub(1) as i64;
    for part in target.components() {
        match part {
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::leaves;
    use std::path::Path;

    #[test]
    fn a_link_leaves_the_worktree_when_absolute_or_climbing_above_its_root() {
        assert!(leaves(
            Path::new("node_modules"),
            Path::new("/repo/node_modules")
        ));
        assert!(leaves(Path::new("a"), Path::new("../a")));
        assert!(leaves(Path::new("x/y/l"), Path::new("../../../etc")));
        assert!(leaves(Path::new("x/l"), Path::new("y/../../..")));
        assert!(!leaves(Path::new("x/y/l"), Path::new("../../README")));
        assert!(!leaves(Path::new("l"), Path::new("src/lib.rs")));
        assert!(!leaves(Path::new("x/l"), Path::new("./../y")));
    }
}
