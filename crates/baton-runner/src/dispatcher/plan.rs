//! What the scheduler is made from: the graph as it sees it ([`plan_of`]), and the parts a
//! dispatcher starts with ([`Ready`]).

use baton_attempt::workspace::Workspaces;
use baton_graph::{Action as TaskAction, Graph};
use baton_layout::RunDirs;
use baton_model::RunId;
use baton_scheduler::{Plan, PlanTask, Scheduler};

/// The nearest planner above `task` that re-plans (`on_failure = "replan"`).
fn replanner(graph: &Graph, task: u32) -> Option<u32> {
    let mut at = graph.task(task).parent;
    while let Some(p) = at {
        if graph
            .task(p)
            .plan
            .as_deref()
            .is_some_and(|plan| plan.replans > 0)
        {
            return Some(p);
        }
        at = graph.task(p).parent;
    }
    None
}

/// What a dispatcher is made from besides the graph, the store and the recorder: the run, its
/// directories and worktrees, and its scheduler ([`scheduler_of`]).
pub(crate) struct Ready {
    pub(crate) run_id: RunId,
    pub(crate) dirs: RunDirs,
    pub(crate) workspaces: Workspaces,
    pub(crate) sched: Scheduler,
}

/// A scheduler for `graph` as it stands. A new run's is made on a thread of its own while the
/// run's record is written (`drive::run`): a 100,000-task graph's takes 25 ms.
pub(crate) fn scheduler_of(graph: &Graph, seed: u64) -> Scheduler {
    Scheduler::new(&plan_of(graph), seed)
}

/// The graph as the scheduler sees it.
pub(super) fn plan_of(graph: &Graph) -> Plan {
    Plan {
        tasks: graph
            .tasks()
            .iter()
            .enumerate()
            .map(|(i, t)| PlanTask {
                needs: t.needs.clone(),
                conflicts: graph.conflicts(i as u32).to_vec(),
                retries: t.retries,
                backoff: t.backoff,
                needs_approval: t.approval,
                retry_infrastructure_only: matches!(
                    &t.action,
                    TaskAction::Agent { settings, .. }
                        if settings.retry_on == baton_graph::RetryOn::Infrastructure
                ),
                fallbacks: match &t.action {
                    TaskAction::Agent { settings, .. } => settings.fallback.len() as u32,
                    _ => 0,
                },
                fallback_on_any: matches!(
                    &t.action,
                    TaskAction::Agent { settings, .. }
                        if settings.fallback_on == baton_graph::RetryOn::Any
                ),
                replanned_by: replanner(graph, i as u32),
                replans: t.plan.as_deref().map_or(0, |p| p.replans),
                replaced: t.replaced,
            })
            .collect(),
        concurrency: graph.run_settings().concurrency,
        on_failure: graph.run_settings().on_failure,
    }
}
