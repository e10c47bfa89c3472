//! The coordinator in a worker: taking up runs no live process coordinates, driving each to
//! its end (`baton_runner::coordinate`), and what came of it for the worker's loop.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use baton_attempt::RunConfig;
use baton_model::RunId;
use baton_runner::StopRequest;
use baton_store::QueueStore;
use tokio::sync::mpsc;

use crate::{WorkerNews, with_causes};

/// A run this worker coordinates: what would stop it (kept open: a worker stopping leaves its
/// runs to be taken over, it does not cancel them), and the task that drives it.
pub(crate) type Coordinating = (
    mpsc::UnboundedSender<StopRequest>,
    tokio::task::JoinHandle<()>,
);

/// What this worker coordinates runs with: how their attempts run, the term of its lease on
/// them, and its id (a takeover is recorded as its).
#[derive(Clone)]
pub(crate) struct AsCoordinator {
    pub(crate) config: RunConfig,
    pub(crate) lease: Duration,
    pub(crate) worker: String,
}

/// Starts coordinating runs no live process coordinates.
pub(crate) fn take_runs(
    store: &Arc<dyn QueueStore>,
    me: &AsCoordinator,
    done: &mpsc::UnboundedSender<(RunId, Coordination)>,
    coordinating: &mut HashMap<RunId, Coordinating>,
    refused: &HashSet<RunId>,
    news: &mut dyn FnMut(WorkerNews),
) {
    let Ok(runs) = store.runs_to_coordinate() else {
        return;
    };
    for found in runs {
        let run = found.run;
        if coordinating.contains_key(&run) || refused.contains(&run) {
            continue;
        }
        // Its coordinator may live and its lease holds (a live one on this host whose lease
        // lapsed is stuck or cut off: it is taken over as one elsewhere would be).
        let held = found
            .driver
            .as_ref()
            .is_some_and(|driver| baton_runner::driver::among_workers(driver).holds(found.lapsed));
        if held || (!found.queued && found.driver.is_none() && !found.lapsed) {
            continue;
        }
        let (stop_tx, stops) = mpsc::unbounded_channel();
        news(WorkerNews::Coordinating { run: run.clone() });
        let (store, me, done) = (Arc::clone(store), me.clone(), done.clone());
        let key = run.clone();
        let task = tokio::task::spawn_local(async move {
            let state = coordinate_one(&*store, &run, me, stops).await;
            let _ = done.send((run, state));
        });
        coordinating.insert(key, (stop_tx, task));
    }
}

/// How coordinating a run ended, for the worker's loop.
pub(crate) enum Coordination {
    /// Driven to its end (or stopped): the words the worker says.
    Ended(String),
    /// Not this worker's to coordinate (see `baton_runner::check_origin`): left to others.
    Refused(String),
}

async fn coordinate_one(
    store: &dyn QueueStore,
    run: &RunId,
    me: AsCoordinator,
    stops: mpsc::UnboundedReceiver<StopRequest>,
) -> Coordination {
    let AsCoordinator {
        config,
        lease,
        worker,
    } = me;
    let log = match store.reconnect() {
        Ok(log) => log,
        Err(error) => return Coordination::Ended(format!("not coordinated: {error}")),
    };
    let mut reporter = baton_report::NullReporter;
    let workers = baton_runner::OnWorkers {
        queue: store,
        term: lease,
        worker: &worker,
    };
    Coordination::Ended(
        match baton_runner::coordinate(run, &*log, workers, &mut reporter, config, stops).await {
            Ok(Some(result)) => result.run.state.to_string(),
            Ok(None) => "taken by another worker".to_owned(),
            Err(baton_runner::RunError::Elsewhere { why, .. }) => {
                return Coordination::Refused(why);
            }
            Err(baton_runner::RunError::TakenOver { .. }) => "lost: another worker took it \
                over while this one could not renew its lease (it was paused, stuck or cut off \
                from the store); this one stopped acting for it, and the run goes on there"
                .to_owned(),
            Err(error) => format!("stopped: {}", with_causes(&error)),
        },
    )
}
