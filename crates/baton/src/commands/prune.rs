//! Removing old runs, on request (`baton prune`) and by default after every run, so that
//! `.baton/` does not grow without end.

use std::path::Path;
use std::time::Duration;

use baton_model::{RunId, RunState, format_size, parse_duration};
use baton_runner::{RunDirs, driver};
use baton_store::{RunRecord, Store, StoreError};
use serde::Serialize;

use crate::cli::PruneArgs;
use crate::exit::{self, Failure};
use crate::out;
use crate::project::Project;

/// Runs kept by default, newest first.
pub(crate) const DEFAULT_KEEP: usize = 100;
/// Logs kept by default, in bytes: past this, the oldest runs go first. The newest run is
/// always kept, whatever its size.
pub(crate) const DEFAULT_MAX_LOG_BYTES: u64 = 2 << 30;

/// Which runs to remove.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub keep: Option<usize>,
    pub older_than: Option<Duration>,
    pub max_log_bytes: Option<u64>,
    /// Keep every run that can still be resumed (interrupted, waiting for a person, needing
    /// one, cancelled), whatever else says: what retention does on its own. An explicit
    /// `baton prune` removes them too, ending what their dead driver left first.
    pub keep_resumable: bool,
}

impl Policy {
    /// What `baton run` applies after every run: the newest `BATON_KEEP_RUNS` runs (100) and
    /// at most `BATON_KEEP_LOG_BYTES` of their logs (2 GiB).
    pub(crate) fn default_retention() -> Self {
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        Self {
            keep: Some(env("BATON_KEEP_RUNS").map_or(DEFAULT_KEEP, |n| n.max(1) as usize)),
            older_than: None,
            max_log_bytes: Some(env("BATON_KEEP_LOG_BYTES").unwrap_or(DEFAULT_MAX_LOG_BYTES)),
            keep_resumable: true,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Pruned {
    pub id: String,
    pub name: String,
    pub log_bytes: u64,
}

#[derive(Debug, Serialize)]
struct PruneReport<'a> {
    schema: u32,
    dry_run: bool,
    removed: &'a [Pruned],
    /// Runs that matched but are being driven by a live process.
    skipped_running: &'a [String],
    /// Directories of runs the store has no record of (a prune killed half way), removed.
    strays: &'a [String],
    /// Worktrees that waited for the next runs' tasks (`.baton/worktrees/.pool`), removed.
    pooled_worktrees: usize,
}

pub(crate) fn prune(args: PruneArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    if args.keep.is_none() && args.older_than.is_none() {
        return Err(Failure::BadInput(
            "say which runs to remove: `--keep N` (keep the newest N) and/or `--older-than 30d`"
                .into(),
        ));
    }
    let older_than = args
        .older_than
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| Failure::BadInput(format!("--older-than: {e}")))?;
    let project = Project::discover()?;
    let at = project.store_at(store_url).map_err(Failure::BadInput)?;
    if !at.exists() {
        out::line(
            "what was pruned",
            "nothing to prune: no runs are recorded here",
        )?;
        return Ok(exit::SUCCESS);
    }
    let store = crate::commands::records::open_for_writing(&at)?;
    let store = store.as_ref();
    let policy = Policy {
        keep: args.keep.map(|k| k as usize),
        older_than,
        max_log_bytes: None,
        keep_resumable: false,
    };
    let Outcome {
        removed,
        skipped,
        strays,
    } = apply(store, &project.state_dir, &policy, args.dry_run)?;
    let pooled = baton_runner::empty_worktree_pool(&project.root, &project.state_dir, args.dry_run);
    if args.json {
        let report = PruneReport {
            schema: 1,
            dry_run: args.dry_run,
            removed: &removed,
            skipped_running: &skipped,
            strays: &strays,
            pooled_worktrees: pooled,
        };
        out::json("what was pruned", &report)?;
        return Ok(exit::SUCCESS);
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    // Printed the one way out (terminal-safe: a run's name comes from its graph file).
    let mut text = String::new();
    for run in &removed {
        text.push_str(&format!(
            "{verb} run {} `{}` ({} of logs)\n",
            run.id,
            run.name,
            format_size(run.log_bytes)
        ));
    }
    for id in &skipped {
        text.push_str(&format!("kept run {id}: it is running\n"));
    }
    for id in &strays {
        text.push_str(&format!(
            "{verb} the files of run {id}, which has no record\n"
        ));
    }
    if pooled > 0 {
        text.push_str(&format!(
            "{verb} {pooled} worktrees kept for the next runs' tasks (.baton/worktrees/.pool)\n"
        ));
    }
    let total: u64 = removed.iter().map(|r| r.log_bytes).sum();
    text.push_str(&format!(
        "{verb} {} runs, {} of logs\n",
        removed.len(),
        format_size(total)
    ));
    out::text("what was pruned", &text)?;
    Ok(exit::SUCCESS)
}

/// What a prune did.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub removed: Vec<Pruned>,
    /// Runs that matched but are driven by a live process (or could still be resumed, under
    /// `keep_resumable`).
    pub skipped: Vec<String>,
    /// Run directories with no record, removed.
    pub strays: Vec<String>,
}

/// How long a run directory without a record is left alone: a run being started has its
/// directory a moment before its record.
const STRAY_AGE: Duration = Duration::from_secs(10 * 60);

/// Removes the runs `policy` selects, with their logs; never one driven by a live process.
///
/// The record goes first, then the files: a prune killed in between leaves files without a
/// record, which a later prune finds (they are swept after `STRAY_AGE`), never a record whose
/// logs are gone. A run whose driver died is taken care of before it goes: the process groups
/// and cgroups its attempts left are ended, and its scratch (which may hold a task's
/// `$BATON_OUTPUT`) is removed with it.
pub(crate) fn apply(
    store: &dyn Store,
    state_dir: &Path,
    policy: &Policy,
    dry_run: bool,
) -> Result<Outcome, Failure> {
    let runs: Vec<RunRecord> = store.runs(u32::MAX)?.into_iter().map(|s| s.run).collect();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut log_total = 0u64;
    let mut outcome = Outcome::default();
    // Newest first: a run is removed when it is past the count, past the age, or when the logs
    // of the newer runs already fill the budget.
    for (position, run) in runs.iter().enumerate() {
        let dirs = RunDirs::new(state_dir, &run.id);
        let bytes = dirs.log_bytes();
        let too_many = policy.keep.is_some_and(|keep| position >= keep);
        let too_old = policy
            .older_than
            .is_some_and(|age| now_ms.saturating_sub(run.started_at_ms) > age.as_millis() as i64);
        let too_big = position > 0
            && policy
                .max_log_bytes
                .is_some_and(|max| log_total.saturating_add(bytes) > max);
        if !(too_many || too_old || too_big) {
            log_total = log_total.saturating_add(bytes);
            continue;
        }
        let live =
            run.status == RunState::Running && run.driver.as_ref().is_some_and(driver::is_alive);
        let state = super::records::effective_state(run);
        if live || (policy.keep_resumable && resumable(state)) {
            outcome.skipped.push(run.id.to_string());
            continue;
        }
        if !dry_run {
            if state == RunState::Interrupted {
                // Its dead driver's processes would run on, recorded nowhere. Held while they
                // are ended, so that a `baton resume` started meanwhile cannot have its new
                // attempts taken for them.
                let lease = match driver::claim(store, &run.id) {
                    Ok(claim) => claim.lease,
                    Err(StoreError::RunHeld { .. }) => {
                        outcome.skipped.push(run.id.to_string());
                        continue;
                    }
                    Err(err) => return Err(err.into()),
                };
                let unfinished = baton_runner::unfinished(store, &run.id);
                if let Ok(unfinished) = &unfinished {
                    baton_runner::kill_leftovers(&run.id, unfinished);
                }
                let _ = store.release(&run.id, lease);
                unfinished?;
            }
            match store.delete_run(&run.id, now_ms, &driver::liveness) {
                Ok(_) => {}
                // Taken over since we looked: leave it.
                Err(StoreError::RunHeld { .. }) => {
                    outcome.skipped.push(run.id.to_string());
                    continue;
                }
                Err(err) => return Err(err.into()),
            }
            remove_files(state_dir, &run.id);
        }
        outcome.removed.push(Pruned {
            id: run.id.to_string(),
            name: run.name.clone(),
            log_bytes: bytes,
        });
    }
    outcome.strays = sweep_strays(store, state_dir, &runs, dry_run)?;
    Ok(outcome)
}

/// Whether a run in `state` can still be taken over and finished (`baton resume`).
fn resumable(state: RunState) -> bool {
    matches!(
        state,
        RunState::Interrupted | RunState::Waiting | RunState::NeedsHuman | RunState::Cancelled
    )
}

/// Removes everything of run `id` on disk: its scratch, its directory (logs), its branches
/// and any worktree left on them.
fn remove_files(state_dir: &Path, id: &RunId) {
    let dirs = RunDirs::new(state_dir, id);
    dirs.remove_scratch();
    // The repository is the one holding `.baton/`, held to the drivers the run trusted (kept
    // in its directory, so opened before that goes).
    let repo = state_dir
        .parent()
        .and_then(|root| baton_runner::run_repo(root, state_dir, id).ok());
    let _ = std::fs::remove_dir_all(&dirs.run);
    if let Some(repo) = repo {
        let _ = repo.delete_branches(&format!("baton/{id}/"));
    }
    let _ = std::fs::remove_dir_all(state_dir.join("worktrees").join(id.as_str()));
}

/// Run directories under `.baton/runs/` that say this store records them, that it has no
/// record of, and that are older than `STRAY_AGE`: what a prune killed between a record and
/// its files left. (A directory of a run another store records — `--store` — is that store's
/// business, and one without a note is left alone.) Removed (unless `dry_run`); their names
/// are returned.
fn sweep_strays(
    store: &dyn Store,
    state_dir: &Path,
    recorded: &[RunRecord],
    dry_run: bool,
) -> Result<Vec<String>, Failure> {
    let Ok(entries) = std::fs::read_dir(state_dir.join("runs")) else {
        return Ok(Vec::new());
    };
    let known: std::collections::HashSet<&str> = recorded.iter().map(|r| r.id.as_str()).collect();
    let location = store.location();
    let mut strays = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| RunId::new(n).ok()) else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STRAY_AGE);
        let ours = RunDirs::new(state_dir, &id).store_of().as_deref() == Some(location.as_str());
        // Looked up again: a run started since `recorded` was read has a record by now.
        if !ours || known.contains(id.as_str()) || !old || store.run(&id)?.is_some() {
            continue;
        }
        if !dry_run {
            remove_files(state_dir, &id);
        }
        strays.push(id.to_string());
    }
    strays.sort();
    Ok(strays)
}
