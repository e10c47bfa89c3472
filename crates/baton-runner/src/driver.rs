//! Who drives a run: this process, identified so that a later process can tell whether it is
//! still alive (pid plus start time, since pids are reused).

use baton_model::RunId;
use baton_store::{Claim, Driver, LEASE_TERM, Liveness, Store, StoreError};

/// This process as a run's driver.
pub fn me() -> Driver {
    let pid = std::process::id();
    Driver {
        pid,
        start_time: baton_attempt::procs::start_time(pid).unwrap_or(0),
        host: baton_attempt::procs::hostname(),
    }
}

/// Makes this process the driver of `run`: refused, naming the holder, while a live process
/// (or, on another host, one whose lease holds) drives it.
pub fn claim(store: &dyn Store, run: &RunId) -> Result<Claim, StoreError> {
    store.claim(
        run,
        &me(),
        baton_attempt::stamp::now_ms(),
        LEASE_TERM,
        &liveness,
    )
}

/// [`claim`] by a worker taking a run over, for `term` (its `--lease`): among workers the
/// lease decides, on this host too ([`among_workers`]).
pub fn claim_among_workers(
    store: &dyn Store,
    run: &RunId,
    term: std::time::Duration,
) -> Result<Claim, StoreError> {
    store.claim(
        run,
        &me(),
        baton_attempt::stamp::now_ms(),
        term,
        &among_workers,
    )
}

/// What a worker can tell of `driver`, a run's coordinator: dead if it is a process on this
/// host that is gone; else unknown, so that its lease decides. A coordinator on this host
/// whose lease lapsed is stuck, paused or cut off from the store (its process lives, but it
/// no longer drives the run): it is taken over as one on another host would be, and its next
/// fenced write tells it it lost the run.
pub fn among_workers(driver: &Driver) -> Liveness {
    match liveness(driver) {
        Liveness::Dead => Liveness::Dead,
        Liveness::Alive | Liveness::Unknown => Liveness::Unknown,
    }
}

/// Whether `driver` is a live process on this host. A driver recorded on another host is
/// taken as alive: this process cannot see it.
pub fn is_alive(driver: &Driver) -> bool {
    liveness(driver) != Liveness::Dead
}

/// What this process can tell of `driver`: alive or dead on this host; on another, unknown
/// (its lease decides).
pub fn liveness(driver: &Driver) -> Liveness {
    if driver.host != baton_attempt::procs::hostname() {
        return Liveness::Unknown;
    }
    if baton_attempt::procs::start_time(driver.pid) == Some(driver.start_time) {
        Liveness::Alive
    } else {
        Liveness::Dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = me();
        assert!(me.start_time > 0);
        assert!(is_alive(&me));
        let impostor = Driver {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!is_alive(&impostor));
    }
}
