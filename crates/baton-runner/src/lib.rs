//! The dispatcher: the one part of baton that talks to the outside world during a run.
//!
//! Each turn it gathers what happened (attempts that ended, retry timers that fired, stop
//! requests), feeds it to the scheduler, records the turn's events in the store in ONE
//! transaction, and only then carries out the scheduler's actions (spawning attempts, arming
//! timers, stopping processes) and tells the reporter. Recording before acting is what makes a
//! task's completion durable before any dependent starts; one transaction per turn rather than
//! per event is what makes that durability cheap.

mod agent;
mod approvals;
mod attempt;
mod budget;
mod collect;
pub mod config;
mod confine;
mod consolidate;
mod dispatcher;
mod drive;
pub mod driver;
pub mod env_ref;
mod fan_out;
mod handoff_files;
mod journal;
mod launch;
mod launch_error;
mod launch_log;
mod layout;
mod ledger;
mod leftovers;
mod out_dir;
pub mod paths;
mod planner;
mod reasons;
mod recorder;
mod remote;
mod result;
mod round;
mod run_id;
mod stamp;
mod takeover;
mod worker;
mod workspace;

pub use config::{AgentConfig, ConfigError, NotifyConfig, NotifyOn};
pub use drive::{RunConfig, RunError, StopRequest, coordinate, resume, run, submit};

/// `COMMAND --version` of an engine: its version (`None` if it printed none baton can read),
/// or why it cannot be used.
pub async fn probe_engine(
    engine: &baton_agent::Engine,
) -> Result<Option<baton_agent::Version>, String> {
    agent::probe(engine).await
}

/// Checks that every agent engine `graph` uses is installed and recent enough, before anything
/// runs: one line per problem; `Ok` holds notes to print (engines that cannot run, whose
/// tasks fall back to others).
pub async fn check_engines(
    graph: &baton_graph::Graph,
    config: &AgentConfig,
) -> Result<Vec<String>, Vec<String>> {
    let check = agent::probe_engines(graph, config).await;
    if check.problems.is_empty() {
        Ok(check.notes)
    } else {
        Err(check.problems)
    }
}
/// Whether the graph can run as its `confine` fields ask on this kernel: the tasks that
/// require a sandbox it cannot give (one line each), or a note to print once when tasks that
/// would be confined will run without it.
pub fn check_confinement(graph: &baton_graph::Graph) -> Result<Option<String>, Vec<String>> {
    confine::check(graph)
}
/// The graph's best-of tasks, each with how many candidates it runs at once: what the
/// reporters need to show their attempts as candidates.
pub fn best_of(graph: &baton_graph::Graph) -> std::collections::HashMap<baton_model::TaskId, u32> {
    graph
        .tasks()
        .iter()
        .filter(|t| t.candidate_count() > 1)
        .map(|t| (t.id.clone(), t.candidate_count()))
        .collect()
}

pub use launch::redaction;
pub use layout::RunDirs;
pub use leftovers::{Unfinished, kill_leftovers};
pub use result::{build_observed_result, build_result};
pub use run_id::new_run_id;
pub use takeover::{
    BudgetChange, FileChanges, Reload, Takeover, TakeoverError, cancel_abandoned,
    compare_with_file, recorded_graph,
};
pub use worker::{WorkerNews, WorkerOptions, work};
pub use workspace::{check_worktrees, empty_worktree_pool, run_repo};
