//! What an attempt's process gets in its environment: what it is given of baton's own, its
//! task's `env` (references expanded now, never stored), and baton's own variables last.

use std::ffi::OsString;
use std::sync::Arc;

use super::{Launcher, Prepared};
use crate::launch_error::LaunchError;

impl Launcher {
    /// The environment of attempt `attempt` of `task`: what it gets of baton's own
    /// (`passed`), its `env` (references expanded from baton's environment now), and baton's
    /// own variables last, so that nothing set before them stands.
    pub(super) fn environment_of(
        &self,
        task: u32,
        attempt: u32,
        passed: &[(OsString, OsString)],
        prepared: &Prepared,
    ) -> Result<Vec<(OsString, OsString)>, Arc<LaunchError>> {
        let spec_task = self.graph.task(task);
        let mut env: Vec<(OsString, OsString)> =
            Vec::with_capacity(passed.len() + spec_task.env.len() + 5);
        env.extend(passed.iter().cloned());
        for (key, value) in &spec_task.env {
            // `${VAR}` comes from baton's own environment now: the graph and its stored copy
            // never hold the value.
            let value =
                crate::env_ref::expand(value, |name| std::env::var(name).ok()).map_err(|err| {
                    LaunchError::EnvReference {
                        key: key.clone(),
                        message: err.to_string(),
                    }
                })?;
            if value.contains('\0') {
                return Err(Arc::new(LaunchError::Nul {
                    what: format!("env `{key}`"),
                }));
            }
            env.push((key.into(), value.into()));
        }
        // baton's own last, so that nothing passed or set before them stands: the sweep of
        // leftover processes goes by these ids.
        env.push(("BATON_TASK_ID".into(), spec_task.id.as_str().into()));
        env.push(("BATON_RUN_ID".into(), self.run_id.as_str().into()));
        env.push(("BATON_ATTEMPT".into(), attempt.to_string().into()));
        if let Some(worker) = &self.worker {
            env.push(("BATON_WORKER".into(), worker.into()));
        }
        env.push((
            "BATON_OUTPUT".into(),
            self.dirs.structured_output(&spec_task.id, attempt).into(),
        ));
        if let Some(handoff) = &prepared.handoff {
            env.push(("BATON_HANDOFF_FILE".into(), handoff.path().into()));
        }
        Ok(env)
    }
}
