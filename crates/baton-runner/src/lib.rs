//! The dispatcher: the one part of baton that talks to the outside world during a run.
//!
//! Each turn it gathers what happened (attempts that ended, retry timers that fired, stop
//! requests), feeds it to the scheduler, records the turn's events in the store in ONE
//! transaction, and only then carries out the scheduler's actions (spawning attempts, arming
//! timers, stopping processes) and tells the reporter. Recording before acting is what makes a
//! task's completion durable before any dependent starts; one transaction per turn rather than
//! per event is what makes that durability cheap.

mod approvals;
mod backoff;
mod consolidate;
mod dispatcher;
mod drive;
pub mod driver;
mod fan_out;
mod journal;
mod launch_log;
mod ledger;
mod reasons;
mod recorder;
mod remote;
mod run_id;
mod takeover;

pub use drive::{OnWorkers, RunError, StopRequest, coordinate, resume, run, submit};

pub use remote::check_on_workers;
pub use run_id::new_run_id;
pub use takeover::{
    BudgetChange, FileChanges, Reload, Takeover, TakeoverError, cancel_abandoned,
    compare_with_file, recorded_output, unfinished,
};

// What the CLI and workers need of the attempt unit's crate, where a run is driven from.
pub use baton_attempt::launch::redaction;
pub use baton_attempt::leftovers::{Unfinished, kill_leftovers};
pub use baton_attempt::workspace::{
    check_origin, check_worktrees, empty_worktree_pool, origin_of, run_repo,
};
pub use baton_attempt::{
    AgentConfig, ConfigError, NotifyConfig, NotifyOn, RunConfig, RunDirs, check_confinement,
    check_engines, containment_note, env_ref, paths, probe_engine,
};
