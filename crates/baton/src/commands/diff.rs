//! `baton diff RUN [TASK]`: what a task changed on its branch, or what the whole run's merged
//! result changes, as a unified diff — for review before approving or applying.

use anyhow::Context;
use baton_model::EventKind;
use baton_workspace::Repo;

use super::records;
use crate::cli::{ApplyArgs, DiffArgs};
use crate::exit::{self, Failure};
use crate::out;

/// The run's merged result: `(base, commit)`, or why there is none.
fn result_of(
    store: &dyn baton_store::Store,
    run: &baton_model::RunId,
) -> Result<(String, String), Failure> {
    let merged = store.last_event_of_kind(run, "result-merged")?;
    match merged.map(|e| e.kind) {
        Some(EventKind::ResultMerged {
            base: Some(base),
            commit: Some(commit),
            ..
        }) => Ok((base, commit)),
        Some(EventKind::ResultMerged {
            conflict_task: Some(task),
            conflict_files,
            ..
        }) => Err(Failure::BadInput(format!(
            "run {run} has no merged result: task `{task}` conflicts in {}",
            conflict_files.join(", ")
        ))),
        _ => Err(Failure::BadInput(format!(
            "run {run} has no merged result (its tasks worked in no worktree, or it has not finished)"
        ))),
    }
}

/// The repository, held to the git drivers the run trusted when it started: its tasks may
/// have planted others in the repository's config since.
fn repo_of(project: &crate::project::Project, run: &baton_model::RunId) -> Result<Repo, Failure> {
    baton_runner::run_repo(&project.root, &project.state_dir, run)
        .map_err(|e| Failure::BadInput(format!("not in a git repository: {e}")))
}

pub fn diff(args: DiffArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let repo = repo_of(&project, &run.id)?;
    let (from, to) = match &args.task {
        None => result_of(&*store, &run.id)?,
        Some(task) => {
            let last = store
                .events_of_kind(&run.id, "workspace-committed")?
                .into_iter()
                .rev()
                .find_map(|e| match e.kind {
                    EventKind::WorkspaceCommitted {
                        task: t,
                        start,
                        commit,
                        branch,
                        ..
                    } if t.as_str() == task => Some((start, commit, branch)),
                    _ => None,
                });
            let Some((start, _, branch)) = last else {
                return Err(Failure::BadInput(format!(
                    "task `{task}` of run {} has no worktree changes recorded",
                    run.id
                )));
            };
            // A best-of task's candidates work on `TASK@K`; its own branch holds the winner's.
            let own = branch.split('@').next().unwrap_or(&branch).to_owned();
            let branch = match args.candidate {
                None => own,
                Some(k) => {
                    let candidate = format!("{own}@{k}");
                    let exists = repo.branch_commit(&candidate).ok().flatten().is_some();
                    if exists || k != 1 {
                        candidate
                    } else {
                        // Candidate 1 works on the task's own branch; it has a branch of its
                        // own once another candidate won.
                        own
                    }
                }
            };
            let head = repo
                .branch_commit(&branch)
                .context("cannot read the task's branch")?
                .ok_or_else(|| {
                    Failure::BadInput(format!("branch {branch} no longer exists (pruned?)"))
                })?;
            (start.unwrap_or_else(|| head.clone()), head)
        }
    };
    let text = repo.diff(&from, &to).context("git diff failed")?;
    // What an agent wrote may hold terminal escapes: never replayed raw to a terminal.
    out::Stdout::new("the diff").task_output(text.as_bytes())?;
    Ok(exit::SUCCESS)
}

pub fn apply(args: ApplyArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let repo = repo_of(&project, &run.id)?;
    let (_, commit) = result_of(&*store, &run.id)?;
    // Uncommitted changes the merge would meet refuse it, named (`Repo::apply`); others stay
    // as they are.
    let message = format!("baton: apply run {} ({})", run.id, run.name);
    match repo.apply(&commit, &message) {
        Ok(baton_workspace::MergeOutcome::Merged(head)) => {
            out::line(
                "what was applied",
                &format!(
                    "baton: applied run {} to the current branch (now at {})",
                    run.id,
                    &head[..head.len().min(12)]
                ),
            )?;
            Ok(exit::SUCCESS)
        }
        Ok(baton_workspace::MergeOutcome::Conflict(conflict)) => {
            out::err(&format!(
                "baton: the run's result conflicts with the current branch in {}; nothing was changed",
                conflict.files.join(", ")
            ));
            Ok(exit::RUN_FAILED)
        }
        Err(e) => Err(Failure::BadInput(e.to_string())),
    }
}
