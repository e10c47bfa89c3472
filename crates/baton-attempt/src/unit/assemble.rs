//! Putting an attempt unit together from the run's parts: the task's worktree (made at its
//! first attempt), its command line and files, and what its checks and fix rounds need.

use baton_graph::Graph;
use baton_model::Outcome;

use super::{AttemptUnit, Shared, Unit};
use crate::launch::{Continue, Launcher};
use crate::workspace::{TreeWork, Workspaces};

/// What a unit is assembled from: the dispatcher's parts, lent for the moment.
pub struct Assembly<'a> {
    pub graph: &'a std::sync::Arc<Graph>,
    pub launcher: &'a mut Launcher,
    pub workspaces: &'a mut Workspaces,
    pub shared: &'a Shared,
    /// A planner asked again: the tasks of its plan its answer replaces.
    pub dropped: Vec<u32>,
    /// The engine of the task's chain the attempt runs on (0: its own), or the index of its
    /// candidate's engine.
    pub engine: u32,
    /// A best-of task's candidate (1 for the first): it works in a worktree of its own.
    pub candidate: Option<u32>,
    /// How the run's tasks ended, so far: what the task is told of its needs.
    pub ended: crate::launch::Ended<'a>,
}

/// Attempt `attempt` of `task`, continuing `resume` if given, or the outcome of an attempt
/// that cannot start: its dependencies' changes conflict in its new worktree, or its command
/// line cannot be made (classified: see `LaunchError`).
pub fn assemble(
    parts: Assembly<'_>,
    task: u32,
    attempt: u32,
    agent: bool,
    resume: Option<&Continue>,
) -> Result<AttemptUnit, Outcome> {
    let Assembly {
        graph,
        launcher,
        workspaces,
        shared,
        dropped,
        engine,
        candidate,
        ended,
    } = parts;
    let spec_task = graph.task(task);
    // An attempt that continues no session (a fix round's, an agent's cut short) starts from
    // the task's start, clean: a retry never builds on the failed attempt's changes.
    let continues = resume.is_some_and(|r| r.fix.is_some() || r.session.is_some());
    let restart = (attempt > 1 && !continues).then(|| attempt - 1);
    let workdir = match candidate {
        // A candidate continues no session: one of a later round starts from the task's
        // start, its predecessor's work (the same candidate, a round before) kept aside.
        Some(k) => {
            let n = spec_task.candidate_count();
            workspaces.prepare_candidate(graph, task, k, (attempt > n).then(|| attempt - n))
        }
        None => workspaces.prepare(graph, task, restart),
    };
    let workdir = workdir.map_err(|outcome| match outcome {
        // File names are a task's output too: a secret can be one.
        Outcome::MergeConflict { incoming, files } => Outcome::MergeConflict {
            incoming,
            files: files.iter().map(|f| launcher.redact(f)).collect(),
        },
        outcome => outcome,
    })?;
    let watching = crate::recipe::Watching {
        meter: shared.meter.clone(),
        key: (task, attempt),
        news: Some(crate::agent::News {
            tx: shared.progress.clone(),
            task: spec_task.id.clone(),
            attempt,
        }),
    };
    // The task's new worktree (or a best-of candidate's), made by the unit.
    let making = match candidate {
        Some(k) => workspaces.take_candidate_making(task, k),
        None => workspaces.take_making(task),
    };
    let launch = launcher
        .prepare(
            task,
            attempt,
            crate::launch::Preparing {
                watching: &watching,
                resume,
                workdir: workdir.as_deref(),
                engine,
                ended,
            },
        )
        .map_err(|error| {
            // No unit will make it: the next attempt starts again.
            if making.is_some() {
                match candidate {
                    Some(k) => workspaces.candidate_unmade(task, k),
                    None => workspaces.unmade(task),
                }
            }
            error.outcome(launcher.redact(&error.to_string()))
        })?;
    // A candidate after the first works in a worktree of its own: its setup runs there (as
    // setup must, it may run again).
    let setup = if workspaces.needs_setup(task) || candidate.is_some_and(|k| k > 1) {
        spec_task.setup.clone()
    } else {
        Box::default()
    };
    Ok(AttemptUnit {
        unit: Unit {
            task,
            attempt,
            id: spec_task.id.clone(),
            agent,
            recipe: launch.recipe,
            setup: setup.to_vec(),
            verify: spec_task.verify.clone(),
            fix_attempts: spec_task.fix_attempts,
            tree: match candidate {
                Some(k) => workspaces
                    .candidate_work(graph, task, k)
                    .map(TreeWork::not_pooled),
                None => workspaces.tree_work(graph, task),
            }
            .map(|tree| tree.keeping_out(launch.keep_out)),
            plan: spec_task
                .plan
                .as_ref()
                .map(|_| (std::sync::Arc::clone(graph), dropped)),
            acceptance: (!spec_task.acceptance.is_empty()).then(|| super::Acceptance {
                criteria: spec_task.acceptance.to_vec(),
                asked: match &spec_task.action {
                    baton_graph::Action::Agent { prompt, .. } => prompt.clone(),
                    baton_graph::Action::Shell { run } => format!("to run `{run}`"),
                    baton_graph::Action::Noop => String::new(),
                },
            }),
            own_output: launch.own_output,
            shared: shared.clone(),
        },
        spec: launch.spec,
        watcher: launch.watcher,
        making,
    })
}
