//! What every attempt of a run is run with, from wherever it is started.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::AgentConfig;

/// Where and how a run executes.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The repository root (or the directory baton runs in): tasks' `cwd` is relative to it.
    pub root: PathBuf,
    /// `.baton/`: logs and handoff files go under `runs/RUN/`.
    pub state_dir: PathBuf,
    /// Between TERM and KILL when an attempt times out or is cancelled.
    pub kill_grace: Duration,
    /// Seeds the backoff jitter.
    pub seed: u64,
    /// How agent engines are run, and what models cost.
    pub agents: AgentConfig,
    /// The worker running the attempts (`baton worker`): its `PID:START` (start time in clock
    /// ticks), put in every attempt's environment as `BATON_WORKER`, so that what a worker
    /// that died left running is found and ended by the next one on its host. `None` here.
    pub worker: Option<String>,
}
