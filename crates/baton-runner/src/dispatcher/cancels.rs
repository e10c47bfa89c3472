//! `baton cancel` from another machine: a request in a store that carries them, looked for
//! by the run's driver wherever it is.

use std::time::Duration;

use baton_model::RunId;
use baton_store::Store;

/// How often a run on a shared store looks for a request to cancel it.
const CANCEL_POLL: Duration = Duration::from_secs(1);

/// Looks for a request to cancel the run in a store that carries them (`baton cancel` from
/// another machine), every [`CANCEL_POLL`]; never resolves for a store that does not, nor
/// after it found one.
pub(super) struct CancelWatch {
    on: bool,
    tick: tokio::time::Interval,
}

impl CancelWatch {
    pub(super) fn new(store: &dyn Store) -> Self {
        let mut tick = tokio::time::interval(CANCEL_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            on: store.carries_cancel_requests(),
            tick,
        }
    }

    /// Resolves once the run was asked to be cancelled.
    pub(super) async fn requested(&mut self, store: &dyn Store, run: &RunId) {
        while self.on {
            self.tick.tick().await;
            if store.cancel_requested(run).unwrap_or(false) {
                self.on = false;
                return;
            }
        }
        std::future::pending().await
    }
}
