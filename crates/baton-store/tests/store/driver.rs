//! One driver per run, and deleting runs.

use baton_model::{EventKind, RunState};
use baton_store::{Driver, StoreError};

use crate::support::*;

fn driver(pid: u32) -> Driver {
    Driver {
        pid,
        start_time: u64::from(pid) * 100,
        host: "box".into(),
    }
}

#[test]
fn a_live_driver_keeps_the_run_and_a_dead_one_is_replaced() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");

    assert_eq!(
        store
            .claim_driver(&run, &driver(1), |_| unreachable!())
            .unwrap(),
        None
    );
    // Claiming again is idempotent and asks nobody.
    assert_eq!(
        store
            .claim_driver(&run, &driver(1), |_| unreachable!())
            .unwrap(),
        None
    );

    let err = store
        .claim_driver(&run, &driver(2), |d| d.pid == 1)
        .unwrap_err();
    assert!(
        matches!(err, StoreError::RunHeld { pid: 1, start_time: 100, ref host, .. } if host == "box"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "run r1 is held by process 1 on box");

    assert_eq!(
        store.claim_driver(&run, &driver(2), |_| false).unwrap(),
        Some(driver(1))
    );
    assert_eq!(store.run(&run).unwrap().unwrap().driver, Some(driver(2)));

    // The replaced driver, if it was alive after all, cannot release the new one's claim.
    assert!(!store.release_driver(&run, &driver(1)).unwrap());
    assert!(store.release_driver(&run, &driver(2)).unwrap());
    assert_eq!(store.run(&run).unwrap().unwrap().driver, None);

    let err = store
        .claim_driver(&run_id("r9"), &driver(1), |_| true)
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownRun(_)), "{err:?}");
}

#[test]
fn two_stores_claiming_at_once_get_exactly_one_driver() {
    let db = Db::new();
    db.open().create_run(&new_run("r1", &["a"])).unwrap();
    let winners: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=8)
            .map(|pid| {
                let store = db.open();
                scope.spawn(move || {
                    store
                        .claim_driver(&run_id("r1"), &driver(pid), |_| true)
                        .is_ok()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert_eq!(winners, 1);
}

#[test]
fn a_running_run_with_a_live_driver_is_not_deleted() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    store.claim_driver(&run, &driver(1), |_| false).unwrap();
    store
        .commit(&run, &[started(1, "a", 1)], &[output("a", 1, "x")])
        .unwrap();

    let err = store.delete_run(&run, |_| true).unwrap_err();
    assert!(matches!(err, StoreError::RunHeld { pid: 1, .. }), "{err:?}");
    assert!(store.run(&run).unwrap().is_some());

    // Its driver died: the run is interrupted, and may go.
    assert!(store.delete_run(&run, |_| false).unwrap());
    assert_eq!(store.run(&run).unwrap(), None);
    assert!(store.tasks(&run).unwrap().is_empty());
    assert!(store.attempts(&run, &task("a")).unwrap().is_empty());
    assert!(store.events(&run, 0, 10).unwrap().is_empty());
    assert_eq!(store.graph_json(&run).unwrap(), None);
    assert!(!store.delete_run(&run, |_| true).unwrap());
}

#[test]
fn a_finished_run_is_deleted_even_if_its_driver_lives_on() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    store.claim_driver(&run, &driver(1), |_| false).unwrap();
    store
        .commit(
            &run,
            &[event(
                1,
                EventKind::RunFinished {
                    state: RunState::Failed,
                },
            )],
            &[],
        )
        .unwrap();
    assert!(store.delete_run(&run, |_| true).unwrap());
}
