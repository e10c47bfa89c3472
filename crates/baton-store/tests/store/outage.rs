//! A PostgreSQL server that drops its connections (a restart, a failover, an administrator's
//! `pg_terminate_backend`): a store, and a listener, carry on with new ones. What the clients
//! see of a restart is their connections closed by the server; cutting them on the suite's
//! shared server shows the same to this test's store without stopping anyone else's.

use std::time::Duration;

use baton_store::{PgStore, RunLog, RunReader, Wake, WorkQueue};

use crate::support::{new_run, run_id};

/// `call` until it succeeds, as a caller that polls would, within two seconds.
fn eventually<T>(mut call: impl FnMut() -> Result<T, baton_store::StoreError>) -> T {
    let mut failures: Vec<baton_store::StoreError> = Vec::new();
    for _ in 0..20 {
        match call() {
            Ok(value) => {
                // The call that meets the closed connection fails (with the cause), and the
                // next one is made on a new connection: at most one failure.
                assert!(failures.len() <= 1, "{failures:?}");
                // And says the store was out of reach, which callers retry.
                assert!(failures.iter().all(|e| e.is_unreachable()), "{failures:?}");
                return value;
            }
            Err(err) => failures.push(err),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("never connected again: {failures:?}");
}

#[test]
fn a_store_whose_connection_was_cut_connects_again() {
    let url = baton_testpg::fresh_database();
    let store = PgStore::open(&url).unwrap();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    baton_testpg::cut_connections(&url);
    let run = eventually(|| store.run(&run_id("r1")));
    assert_eq!(run.unwrap().name, "graph-r1");
}

#[test]
fn a_listener_whose_connection_was_cut_listens_again_and_says_to_look() {
    let url = baton_testpg::fresh_database();
    let store = PgStore::open(&url).unwrap();
    let mut listener = store.listener(&[Wake::RunSubmitted]).unwrap();
    baton_testpg::cut_connections(&url);
    // What was sent while it was cut is lost: the listener wakes its caller to look.
    let mut woke = false;
    for _ in 0..20 {
        if let Ok(true) = listener.wait(Duration::from_millis(100)) {
            woke = true;
            break;
        }
    }
    assert!(woke, "a listener cut off never said so");
    // And it listens on its new connection.
    while let Ok(true) = listener.wait(Duration::from_millis(50)) {}
    eventually(|| store.submit_run(&new_run("r2", &["a"])));
    assert!(listener.wait(Duration::from_secs(10)).unwrap());
}
