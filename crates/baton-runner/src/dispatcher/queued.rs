//! A run whose attempts workers run (`baton worker`): the dispatcher queues them instead of
//! starting them, and takes their ends from the queue as it takes a local unit's.

use baton_attempt::unit::AttemptDone;
use baton_attempt::work::Work;
use baton_model::EventKind;

use super::Dispatcher;
use crate::remote::Queue;

impl Dispatcher<'_> {
    /// Attempts run on workers from now on: queued in `on.queue`, fenced by the run's lease
    /// `token`.
    pub(crate) fn run_on_workers(
        &mut self,
        on: crate::drive::OnWorkers<'_>,
        token: u64,
    ) -> Result<(), crate::RunError> {
        // Workers elsewhere start from the run's base as the remote holds it.
        if let Some(remote) = &self.graph.run_settings().remote {
            self.workspaces
                .publish_base(remote)
                .map_err(crate::RunError::Workspace)?;
        }
        self.queue = Some(Queue::start(
            on,
            self.run_id.clone(),
            token,
            self.shared.progress.clone(),
            self.stop_tx.subscribe(),
            self.shared.meter.clone(),
        )?);
        Ok(())
    }

    /// Queues attempt `attempt` of `task` for a worker; recorded started now (its pid is the
    /// worker's to know).
    pub(super) fn queue_attempt(&mut self, task: u32, attempt: u32, agent: bool) {
        let (resume, dropped) = self.continuing(task);
        let spec = self.graph.task(task);
        let engine_at = self.sched.engine(task);
        let work = Work {
            graph_len: self.graph.len() as u32,
            engine: engine_at,
            dropped,
            resume,
            agent,
            base: self
                .workspaces
                .active()
                .then(|| self.workspaces.base().to_owned()),
            run_spent: self.shared.meter.total(),
            task_spent: self.shared.meter.task_spent(task),
        };
        let engine = spec.engine_at(engine_at).to_owned();
        let labels = spec.runs_on.clone();
        if let Some(queue) = self.queue.as_mut() {
            queue.push(task, attempt, engine, labels.to_vec(), &work);
        }
        self.started(task, attempt, None);
    }
}

impl Dispatcher<'_> {
    /// Attempt `attempt` of `task`, started by an earlier coordinator, runs on on a worker:
    /// adopted as if this one had queued it (the scheduler holds its slot, an agent's spend
    /// is reserved), its start already recorded.
    pub(super) fn adopt(&mut self, task: u32, attempt: u32, charge_retries: bool) {
        let Some(queue) = self.queue.as_mut() else {
            return;
        };
        queue.adopted(task, attempt);
        self.sched.adopt(task, attempt, charge_retries);
        if self.launcher.is_agent(task) {
            let expected = self.graph.task(task).expected_usd();
            self.shared.meter.start((task, attempt), expected);
        }
    }

    /// What an agent running on a worker has spent so far (its `agent-activity`), on the
    /// run's meter: what the next launches are judged against. Its end replaces it.
    pub(super) fn heard_spend(&self, event: &baton_model::Event) {
        if self.queue.is_none() {
            return;
        }
        let EventKind::AgentActivity {
            task,
            attempt,
            tokens,
            cost_usd,
            ..
        } = &event.kind
        else {
            return;
        };
        if let Some(index) = self.graph.index_of(task.as_str()) {
            let spent = baton_attempt::budget::Spent {
                usd: cost_usd.unwrap_or(0.0),
                tokens: *tokens,
            };
            let _ = self.shared.meter.update((index, *attempt), spent);
        }
    }
}

/// The next attempt that ended on a worker, if the run's attempts run on workers.
pub(super) async fn next_remote(queue: &mut Option<Queue>) -> Option<AttemptDone> {
    match queue {
        Some(queue) => queue.next().await,
        None => std::future::pending().await,
    }
}
