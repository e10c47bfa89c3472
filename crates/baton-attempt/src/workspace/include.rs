//! `worktree_include`: what git ignores but a task needs, brought into its new worktree.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::RunDirs;

/// Gives a new worktree what git ignores but the task needs (`worktree_include`): files are
/// copied, directories linked, from the repository's checkout. Entries are scope-like paths
/// or globs, matched against the top levels of the checkout (what git ignores is rarely
/// deeper: `.env`, `node_modules`, `target`). What it brings in is noted in the worktree so
/// that no commit of it ever takes them (`baton_workspace::note_included`), whatever
/// `.gitignore` says: a link committed and applied replaced the user's own directory.
///
/// The store that records the run (`run_dirs`' note of it) is never copied, nor are its WAL
/// and shared memory, whatever the entries match (`--store sqlite:PATH` inside the
/// repository): a copy of a live database is torn, and opening it in this process and closing
/// it again would drop every lock SQLite holds on it here.
pub(super) fn include(root: &Path, worktree: &Path, entries: &[String], run_dirs: &RunDirs) {
    if entries.is_empty() {
        return;
    }
    let mut found = Vec::new();
    collect(root, root, entries, 0, &mut found);
    let store = store_files(run_dirs);
    let mut brought = Vec::new();
    for relative in found {
        let from = root.join(&relative);
        let to = worktree.join(&relative);
        if to.symlink_metadata().is_ok() {
            continue;
        }
        // By what the path is (a link to the store is the store), told without opening it.
        if std::fs::metadata(&from).is_ok_and(|m| store.contains(&(m.dev(), m.ino()))) {
            continue;
        }
        if let Some(parent) = to.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let made = if from.is_dir() {
            std::os::unix::fs::symlink(&from, &to)
        } else {
            std::fs::copy(&from, &to).map(|_| ())
        };
        if made.is_ok() {
            brought.push(relative);
        }
    }
    // Should the note fail, its links are still never committed (they point out of the
    // worktree); only a copied file that `.gitignore` does not name would be.
    let _ = baton_workspace::note_included(worktree, &brought);
}

/// The files of the SQLite store that records the run, by device and inode: the database, its
/// WAL, shared memory and rollback journal, those that exist. None for a PostgreSQL store (its
/// location is a URL) or when the run's directory does not say.
fn store_files(run_dirs: &RunDirs) -> Vec<(u64, u64)> {
    let Some(location) = run_dirs.store_of() else {
        return Vec::new();
    };
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .filter_map(|suffix| {
            let file = format!("{location}{suffix}");
            std::fs::metadata(file).ok().map(|m| (m.dev(), m.ino()))
        })
        .collect()
}

/// The paths under `dir` (to a depth of 3) that `entries` cover, not descending into a match.
fn collect(root: &Path, dir: &Path, entries: &[String], depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(children) = std::fs::read_dir(dir) else {
        return;
    };
    for child in children.flatten() {
        let path = child.path();
        let Ok(relative) = path.strip_prefix(root) else {
            continue;
        };
        let name = relative.to_string_lossy();
        if name == ".git" || name == ".baton" {
            continue;
        }
        if baton_graph::scope_covers(entries, &name) {
            found.push(relative.to_path_buf());
        } else if depth < 3 && child.file_type().is_ok_and(|t| t.is_dir()) {
            collect(root, &path, entries, depth + 1, found);
        }
    }
}
