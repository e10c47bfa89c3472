//! What every work queue must do ([`WorkQueue`]): who may queue, claim, renew and end an
//! attempt, and what a lapsed lease does to a worker's late end. Written against the trait and
//! run against each backend that has a queue (PostgreSQL: see the `backends` at the end).

use std::time::Duration;

use baton_store::{
    Arrivals, AttemptEnd, AttemptKey, Driver, Liveness, QueueStore, QueuedAttempt, Renewal, Wake,
};

use crate::support::{new_run, run_id};

fn queued(task: u32, engine: &str, labels: &[&str]) -> QueuedAttempt {
    QueuedAttempt {
        task,
        attempt: 1,
        engine: engine.into(),
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        work: format!("work of {task}"),
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// A submitted run, claimed by a coordinator: its lease token.
fn coordinated(store: &dyn QueueStore, id: &str) -> u64 {
    let run = run_id(id);
    store.submit_run(&new_run(id, &["a", "b", "c"])).unwrap();
    assert_eq!(
        store.run(&run).unwrap().unwrap().status,
        baton_model::RunState::Queued
    );
    let me = Driver {
        pid: 1,
        start_time: 1,
        host: "coordinator".into(),
    };
    store
        .claim(
            &run,
            &me,
            baton_model::now_ms(),
            Duration::from_secs(30),
            &|_| Liveness::Unknown,
        )
        .unwrap()
        .lease
        .token
}

pub fn each_attempt_is_claimed_once_by_a_worker_that_offers_its_engine_and_labels(
    queue: &dyn Queue,
) {
    let store = queue.open();
    let store = store.as_ref();
    let token = coordinated(store, "r1");
    let run = run_id("r1");
    store
        .enqueue(
            &run,
            token,
            vec![
                queued(0, "shell", &[]),
                queued(1, "claude", &[]),
                queued(2, "shell", &["gpu"]),
            ],
        )
        .unwrap();
    // A shell worker without labels gets the one it can run, once.
    let plain = store
        .claim_attempts("plain", &strings(&["shell"]), &[], 10, 30_000)
        .unwrap();
    assert_eq!(plain.iter().map(|c| c.task).collect::<Vec<_>>(), [0]);
    assert_eq!(plain[0].work, "work of 0");
    assert!(
        store
            .claim_attempts("plain", &strings(&["shell"]), &[], 10, 30_000)
            .unwrap()
            .is_empty()
    );
    // Any engine, with the label: the other two.
    let gpu = store
        .claim_attempts("gpu", &[], &strings(&["gpu", "big"]), 10, 30_000)
        .unwrap();
    assert_eq!(gpu.iter().map(|c| c.task).collect::<Vec<_>>(), [1, 2]);
}

pub fn only_the_holder_ends_an_attempt_and_not_after_its_lease_lapsed(queue: &dyn Queue) {
    let store = queue.open();
    let store = store.as_ref();
    let token = coordinated(store, "r2");
    let run = run_id("r2");
    store
        .enqueue(
            &run,
            token,
            vec![queued(0, "shell", &[]), queued(1, "shell", &[])],
        )
        .unwrap();
    let claimed = store
        .claim_attempts("w1", &[], &[], 1, 30_000)
        .unwrap()
        .remove(0);
    let held = AttemptKey {
        run: run.clone(),
        task: claimed.task,
        attempt: claimed.attempt,
    };
    // Another worker cannot end it, nor renew it.
    assert!(!store.end_attempt("w2", &held, "forged").unwrap());
    assert_eq!(
        store
            .renew_attempts("w2", std::slice::from_ref(&held), 30_000)
            .unwrap()[0]
            .1,
        Renewal::Lost
    );
    assert_eq!(
        store
            .renew_attempts("w1", std::slice::from_ref(&held), 30_000)
            .unwrap()[0]
            .1,
        Renewal::Held { stop: 0 }
    );
    assert!(store.add_news("w1", &held, r#"{"n":1}"#).unwrap());
    assert!(!store.add_news("w2", &held, "{}").unwrap());
    assert!(store.add_news("w1", &held, r#"{"n":2}"#).unwrap());

    // The other one on a lease that lapses: the coordinator takes it as lapsed, and the
    // worker's end after that changes nothing.
    let late = store
        .claim_attempts("w3", &[], &[], 1, 1)
        .unwrap()
        .remove(0);
    let late = AttemptKey {
        run: run.clone(),
        task: late.task,
        attempt: late.attempt,
    };
    std::thread::sleep(Duration::from_millis(20));
    // The held attempt's end comes with the news it recorded before it, in order.
    assert!(store.end_attempt("w1", &held, "done").unwrap());
    let Arrivals { news, mut ends } = store.take_arrivals(&run).unwrap();
    assert_eq!(news, [r#"{"n":1}"#, r#"{"n":2}"#]);
    ends.sort_by_key(|e| match e {
        AttemptEnd::Ended { task, .. } | AttemptEnd::Lapsed { task, .. } => *task,
    });
    assert_eq!(
        ends,
        [
            AttemptEnd::Ended {
                task: held.task,
                attempt: 1,
                result: "done".into()
            },
            AttemptEnd::Lapsed {
                task: late.task,
                attempt: 1,
                worker: "w3".into()
            },
        ]
    );
    assert!(!store.end_attempt("w3", &late, "too late").unwrap());
    assert_eq!(
        store.renew_attempts("w3", &[late], 30_000).unwrap()[0].1,
        Renewal::Lost
    );
    assert_eq!(
        store.take_arrivals(&run).unwrap(),
        Arrivals::default(),
        "ended once"
    );
}

pub fn a_coordinator_that_lost_the_run_cannot_queue_and_a_new_one_drops_what_it_queued(
    queue: &dyn Queue,
) {
    let store = queue.open();
    let store = store.as_ref();
    let old = coordinated(store, "r3");
    let run = run_id("r3");
    store
        .enqueue(&run, old, vec![queued(0, "shell", &[])])
        .unwrap();
    // Another coordinator takes the run over (the old one's lease lapsed).
    let new = store
        .claim(
            &run,
            &Driver {
                pid: 2,
                start_time: 2,
                host: "other".into(),
            },
            baton_model::now_ms() + 60_000,
            Duration::from_secs(30),
            &|_| Liveness::Unknown,
        )
        .unwrap()
        .lease
        .token;
    assert!(new > old);
    assert!(matches!(
        store.enqueue(&run, old, vec![queued(1, "shell", &[])]),
        Err(baton_store::StoreError::LeaseLost { .. })
    ));
    assert_eq!(store.drop_queued_before(&run, new).unwrap(), 1);
    assert!(
        store
            .claim_attempts("w", &[], &[], 10, 30_000)
            .unwrap()
            .is_empty()
    );
    // A stop: what no worker took leaves the queue, what one holds is asked to stop.
    store
        .enqueue(
            &run,
            new,
            vec![queued(1, "shell", &[]), queued(2, "shell", &[])],
        )
        .unwrap();
    let taken = store
        .claim_attempts("w", &[], &[], 1, 30_000)
        .unwrap()
        .remove(0);
    let unclaimed = store.stop_attempts(&run, 1).unwrap();
    assert_eq!(unclaimed.len(), 1);
    let key = AttemptKey {
        run: run.clone(),
        task: taken.task,
        attempt: taken.attempt,
    };
    assert_eq!(
        store.renew_attempts("w", &[key], 30_000).unwrap()[0].1,
        Renewal::Held { stop: 1 }
    );
}

/// A listener wakes for what it listens for, and only for that: queued work wakes a worker
/// (and not a coordinator waiting on ends); an end wakes the coordinator.
pub fn a_listener_wakes_for_what_it_waits_for(queue: &dyn Queue) {
    let store = queue.open();
    let store = store.as_ref();
    let token = coordinated(store, "r1");
    let run = run_id("r1");
    let mut worker = store.listener(&[Wake::WorkQueued]).unwrap();
    let mut coordinator = store.listener(&[Wake::AttemptEnded]).unwrap();
    assert!(
        !worker.wait(Duration::from_millis(50)).unwrap(),
        "nothing queued yet"
    );
    store
        .enqueue(&run, token, vec![queued(0, "shell", &[])])
        .unwrap();
    assert!(
        worker.wait(Duration::from_secs(10)).unwrap(),
        "queued work wakes a worker"
    );
    assert!(!coordinator.wait(Duration::from_millis(50)).unwrap());
    let claim = store
        .claim_attempts("w1", &[], &[], 1, 30_000)
        .unwrap()
        .remove(0);
    let key = AttemptKey {
        run: claim.run,
        task: claim.task,
        attempt: claim.attempt,
    };
    assert!(store.end_attempt("w1", &key, "done").unwrap());
    assert!(
        coordinator.wait(Duration::from_secs(10)).unwrap(),
        "an end wakes its coordinator"
    );
    // Every wake that came is taken by the one wait.
    assert!(!worker.wait(Duration::from_millis(50)).unwrap());
}

/// A database of a backend with a queue, fresh for each case.
pub trait Queue {
    /// A new handle on it, as another process would open one.
    fn open(&self) -> Box<dyn QueueStore>;
}

macro_rules! queue_cases {
    ($backend:ident, $queue:expr) => {
        mod $backend {
            use super::*;
            queue_cases!(@cases $queue;
                each_attempt_is_claimed_once_by_a_worker_that_offers_its_engine_and_labels,
                only_the_holder_ends_an_attempt_and_not_after_its_lease_lapsed,
                a_coordinator_that_lost_the_run_cannot_queue_and_a_new_one_drops_what_it_queued,
                a_listener_wakes_for_what_it_waits_for,
            );
        }
    };
    (@cases $queue:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                super::$case(&$queue);
            }
        )*
    };
}

/// PostgreSQL: a database of its own on the suite's server.
struct Postgres(String);

impl Queue for Postgres {
    fn open(&self) -> Box<dyn QueueStore> {
        Box::new(baton_store::PgStore::open(&self.0).unwrap())
    }
}

queue_cases!(postgres, Postgres(baton_testpg::fresh_database()));
