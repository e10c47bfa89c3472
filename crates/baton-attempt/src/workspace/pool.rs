//! Worktrees kept between tasks and runs, in `.baton/worktrees/.pool` (see
//! `baton_workspace::Repo::pool_worktree` and `reuse_worktree`): how many, which, and putting
//! one there or taking one out.

use std::path::{Path, PathBuf};

use baton_model::RunId;
use baton_workspace::{GitError, MergeOutcome, Repo, TaskStart};

/// Removes the worktrees kept for later tasks in the pool of the project whose state
/// directory is `state_dir` (inside the repository at `root`); with `dry_run`, only counts
/// them. Returns how many. An explicit `baton prune` empties it: the pool is a cache, and the
/// next run fills it again.
pub fn empty_worktree_pool(root: &Path, state_dir: &Path, dry_run: bool) -> usize {
    let pooled = pooled_worktrees(&state_dir.join("worktrees").join(".pool"));
    if dry_run || pooled.is_empty() {
        return pooled.len();
    }
    let Ok(repo) = Repo::discover(root) else {
        return 0;
    };
    pooled
        .iter()
        .filter(|path| repo.remove_worktree(path).is_ok() || std::fs::remove_dir_all(path).is_ok())
        .count()
}

/// How many finished worktrees are kept for later tasks: `BATON_WORKTREE_POOL`, 8 when
/// unset; 0 keeps none (every task's worktree is made fresh and removed at the run's end).
pub(super) fn pool_size() -> usize {
    std::env::var("BATON_WORKTREE_POOL")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(8)
}

/// The worktrees in the pool directory `pool`, oldest name first.
pub(super) fn pooled_worktrees(pool: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(pool) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(".git").is_file())
        .collect();
    found.sort();
    found
}

/// How many more worktrees the pool in `pool_dir` takes.
pub(super) fn room(pool_dir: &Path) -> usize {
    pool_size().saturating_sub(pooled_worktrees(pool_dir).len())
}

/// A task worktree's name in the pool: `RUN-TASK`.
pub(super) fn pool_name(run: &RunId, path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("task");
    format!("{run}-{name}")
}

/// Sets the worktree at `path` aside in `pool_dir` as `name`, emptied back to `base`;
/// whether it went.
pub(super) fn pool_into(repo: &Repo, path: &Path, pool_dir: &Path, name: &str, base: &str) -> bool {
    repo.pool_worktree(path, &pool_dir.join(name), base).is_ok()
}

/// [`pool_into`] while the pool has room; whether the worktree left `path` (into the pool, or
/// removed when the pool filled up while it was being emptied).
///
/// Room is counted again when it is the worktree's turn to go in (the pool's lock): tasks
/// that end at once all find room before any of them has moved theirs in, and filled a pool
/// of 2 with 8.
pub(super) fn pool_if_room(
    repo: &Repo,
    path: &Path,
    pool_dir: &Path,
    name: &str,
    base: &str,
) -> bool {
    room(pool_dir) > 0
        && repo
            .pool_worktree_if(path, &pool_dir.join(name), base, || room(pool_dir) > 0)
            .is_ok()
}

/// A worktree from the pool in `pool_dir` made `path` for a task starting at `start`, if the
/// pool has one that can be used (see [`Repo::reuse_worktree`]); `None` to make a fresh one.
pub(super) fn reuse_pooled(
    repo: &Repo,
    pool_dir: &Path,
    path: &Path,
    branch: &str,
    start: &TaskStart,
) -> Option<Result<MergeOutcome, GitError>> {
    for pooled in pooled_worktrees(pool_dir) {
        match repo.reuse_worktree(&pooled, path, branch, start) {
            Ok(Some(made)) => return Some(Ok(made)),
            Ok(None) => continue,
            Err(error) => return Some(Err(error)),
        }
    }
    None
}
