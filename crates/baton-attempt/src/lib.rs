//! One attempt of one task, from its worktree to its end: the unit that a run's dispatcher
//! (`baton-runner`) or a worker (`baton-worker`) starts, and what it is made of.
//!
//! An attempt makes or reuses its task's git worktree, runs the task's setup, its command or
//! agent (watched line by line for budget and progress), judges the result, commits the
//! worktree, runs the task's checks and fix rounds, and ends with an [`unit::AttemptDone`]:
//! everything the dispatcher records and applies. The unit takes values and returns one: it
//! never reaches back into whoever started it, and this crate does not know the store, so a
//! worker on another machine runs the very same unit.
//!
//! - [`unit`]: the attempt's phases (`Make → Setup → Run → Judge → Commit → Verify → Fix`).
//! - [`launch`] and [`recipe`]: turning a task into the processes of its rounds (its command,
//!   its agent with its engine's arguments, its reviewer), with its inputs and secrets.
//! - [`workspace`]: the run's worktrees, made, reused from the pool, committed and merged.
//! - [`budget`]: the meter every agent's spend goes through.
//! - `baton_layout`: where a run's logs and files live under `.baton/runs/RUN/`.
//! - [`leftovers`] and [`procs`]: the processes an attempt or a dead driver left behind.

pub mod agent;
pub mod budget;
pub mod collect;
pub mod config;
pub mod confine;
pub mod env_ref;
pub mod handoff_files;
pub mod launch;
pub mod launch_error;
pub mod leftovers;
pub mod out_dir;
pub mod paths;
pub mod planner;
pub mod procs;
pub mod recipe;
mod run_config;
pub mod stamp;
pub mod unit;
pub mod work;
pub mod workspace;

pub use baton_layout::RunDirs;
pub use config::{AgentConfig, ConfigError, McpLimits, NotifyConfig, NotifyOn};
pub use run_config::RunConfig;

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

/// A note to print once when tasks that would each get a cgroup (agent tasks, and those with
/// `contain = "cgroup"`) will be held by their process group instead: no writable cgroup v2
/// here. `None` where they get one, or no task wants one.
pub fn containment_note(graph: &baton_graph::Graph) -> Option<String> {
    if baton_exec::cgroups_available() {
        return None;
    }
    let wants = |task: &baton_graph::Task| match task.contain {
        Some(contain) => contain == baton_graph::Contain::Cgroup,
        None => matches!(task.action, baton_graph::Action::Agent { .. }),
    };
    if !graph.tasks().iter().any(wants) {
        return None;
    }
    let why = match std::env::var_os(baton_exec::NO_CGROUP_ENV) {
        Some(_) => format!("{} is set", baton_exec::NO_CGROUP_ENV),
        None => "cgroup v2 is not mounted, or baton's own cgroup is not writable".to_owned(),
    };
    Some(format!(
        "no cgroup for tasks here ({why}): each is held by its process group instead, and a \
         daemon a task starts with `setsid` can outlive it; `baton doctor` says more"
    ))
}
