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
    let merged = store.last_event_of_kind(run, baton_model::EventName::ResultMerged)?;
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

pub(super) fn diff(args: DiffArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let repo = repo_of(&project, &run.id)?;
    let (from, to) = match &args.task {
        None => result_of(&*store, &run.id)?,
        Some(task) => {
            let committed: Vec<_> = store
                .events_of_kind(&run.id, baton_model::EventName::WorkspaceCommitted)?
                .into_iter()
                .filter_map(|e| match e.kind {
                    EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
                        task: t,
                        attempt,
                        start,
                        commit,
                        branch,
                        ..
                    }) if t.as_str() == task => Some((attempt, start, commit, branch)),
                    _ => None,
                })
                .collect();
            let Some((_, start, _, branch)) = committed.last().cloned() else {
                return Err(Failure::BadInput(format!(
                    "task `{task}` of run {} has no worktree changes recorded",
                    run.id
                )));
            };
            if let Some(n) = args.attempt {
                // Its own commit, or where its work was kept when a later attempt started
                // again (an interrupted attempt's checkpoint has only the ref).
                let own = committed.iter().rev().find(|(a, ..)| *a == n).cloned();
                let kept = repo.kept_attempt(&branch, n).ok().flatten();
                let commit = own.as_ref().and_then(|(_, _, c, _)| c.clone()).or(kept);
                let Some(head) = commit else {
                    return Err(Failure::BadInput(format!(
                        "attempt {n} of task `{task}` in run {} left no changes",
                        run.id
                    )));
                };
                let start = own
                    .and_then(|(_, s, ..)| s)
                    .or(start)
                    .unwrap_or_else(|| head.clone());
                return show(&repo, &start, &head, args.stat);
            }
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
    show(&repo, &from, &to, args.stat)
}

/// Prints what changed from `from` to `to`: the patch, or with `stat` the files and their
/// line counts.
fn show(repo: &Repo, from: &str, to: &str, stat: bool) -> Result<i32, Failure> {
    let text = if stat {
        repo.diff_stat(from, to)
    } else {
        repo.diff(from, to)
    };
    let text = text.context("git diff failed")?;
    // What an agent wrote may hold terminal escapes: never replayed raw to a terminal.
    out::Stdout::new("the diff").task_output(text.as_bytes())?;
    Ok(exit::SUCCESS)
}

pub(super) fn apply(args: ApplyArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let repo = repo_of(&project, &run.id)?;
    let (_, commit) = result_of(&*store, &run.id)?;
    let message = apply_message(&*store, &run, args.squash)?;
    // What the merge would meet of the user's (uncommitted changes, what git ignores that it
    // would replace) refuses it, named, before anything is touched (`Repo::apply`).
    match repo.apply(&commit, &message, args.squash) {
        Ok(baton_workspace::MergeOutcome::Merged(head)) => {
            out::line(
                "what was applied",
                &format!(
                    "baton: applied run {} to the current branch{} (now at {})",
                    run.id,
                    if args.squash { " as one commit" } else { "" },
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

/// The message of the commit `baton apply` makes (a merge, or with `--squash` the one
/// commit): the run, and the tasks whose changes it brings, one a line with its files.
fn apply_message(
    store: &dyn baton_store::Store,
    run: &baton_store::RunRecord,
    squash: bool,
) -> Result<String, Failure> {
    let mut tasks: Vec<(String, usize)> = Vec::new();
    for event in store.events_of_kind(&run.id, baton_model::EventName::WorkspaceCommitted)? {
        let EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit { task, evidence, .. }) =
            event.kind
        else {
            continue;
        };
        // A task's last commit holds all its attempts' changes (measured from its start).
        match tasks.iter_mut().find(|(t, _)| t == task.as_str()) {
            Some(known) => known.1 = evidence.files.len(),
            None => tasks.push((task.as_str().to_owned(), evidence.files.len())),
        }
    }
    tasks.retain(|(_, files)| *files > 0);
    // In the graph's order, not in the order they happened to end.
    let order: Vec<String> = store
        .tasks(&run.id)?
        .into_iter()
        .map(|t| t.task.to_string())
        .collect();
    tasks.sort_by_key(|(t, _)| order.iter().position(|o| o == t));
    let names: Vec<&str> = tasks.iter().map(|(t, _)| t.as_str()).collect();
    let subject = format!(
        "{} baton run {} ({}){}",
        if squash { "Squashed" } else { "Merge" },
        run.name,
        run.id,
        match names.len() {
            0 => String::new(),
            1..=3 => format!(": {}", names.join(", ")),
            n => format!(": {} and {} more", names[..2].join(", "), n - 2),
        }
    );
    let mut message = subject;
    if !tasks.is_empty() {
        message.push_str("\n\n");
        for (task, files) in &tasks {
            message.push_str(&format!(
                "- {task}: {files} file{}\n",
                if *files == 1 { "" } else { "s" }
            ));
        }
        message.push_str(&format!("\nbaton status {}\n", run.id));
    }
    Ok(message)
}
