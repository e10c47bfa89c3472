//! What every work queue must do ([`WorkQueue`]): who may queue, claim, renew and end an
//! attempt, and what a lapsed lease does to a worker's late end. Written against the trait and
//! run against each backend that has a queue (PostgreSQL: see the `backends` at the end).

use std::time::Duration;

use baton_model::Outcome;
use baton_store::{
    Arrivals, AttemptEnd, AttemptKey, Driver, Lease, Liveness, QueueStore, QueuedAttempt, Renewal,
    StoreError, Wake,
};

use crate::support::{finished, new_run, run_id, started};

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
    coordinated_lease(store, id).token
}

/// The news' events and the ends of `arrived`, ends in task order.
fn sorted(arrived: Arrivals) -> (Vec<String>, Vec<AttemptEnd>) {
    let mut ends = arrived.ends;
    ends.sort_by_key(|e| match e {
        AttemptEnd::Ended { task, .. } | AttemptEnd::Lapsed { task, .. } => *task,
    });
    (arrived.news.into_iter().map(|n| n.event).collect(), ends)
}

/// The ids of `arrived`'s news: what a coordinator says it has at its next take.
fn ids(arrived: &Arrivals) -> Vec<i64> {
    arrived.news.iter().map(|n| n.id).collect()
}

/// Another coordinator's claim of run `id`, a minute later (its last lease lapsed).
fn take_over(store: &dyn QueueStore, id: &str) -> Lease {
    take_over_at(store, id, 2, baton_model::now_ms() + 60_000)
}

/// Coordinator `pid`'s claim of run `id` at `at_ms`.
fn take_over_at(store: &dyn QueueStore, id: &str, pid: u32, at_ms: i64) -> Lease {
    store
        .claim(
            &run_id(id),
            &Driver {
                pid,
                start_time: 2,
                host: "other".into(),
            },
            at_ms,
            Duration::from_secs(30),
            &|_| Liveness::Unknown,
        )
        .unwrap()
        .lease
}

/// [`coordinated`], with the whole lease.
fn coordinated_lease(store: &dyn QueueStore, id: &str) -> Lease {
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
}

pub(crate) fn each_attempt_is_claimed_once_by_a_worker_that_offers_its_engine_and_labels(
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
        .claim_attempts("plain", &strings(&["shell"]), &[], 10, 30_000, &[])
        .unwrap();
    assert_eq!(plain.iter().map(|c| c.task).collect::<Vec<_>>(), [0]);
    assert_eq!(plain[0].work, "work of 0");
    assert!(
        store
            .claim_attempts("plain", &strings(&["shell"]), &[], 10, 30_000, &[])
            .unwrap()
            .is_empty()
    );
    // Any engine, with the label: the other two.
    let gpu = store
        .claim_attempts("gpu", &[], &strings(&["gpu", "big"]), 10, 30_000, &[])
        .unwrap();
    assert_eq!(gpu.iter().map(|c| c.task).collect::<Vec<_>>(), [1, 2]);
}

pub(crate) fn only_the_holder_ends_an_attempt_and_not_after_its_lease_lapsed(queue: &dyn Queue) {
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
        .claim_attempts("w1", &[], &[], 1, 30_000, &[])
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
        .claim_attempts("w3", &[], &[], 1, 1, &[])
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
    let arrived = store.take_arrivals(&run, token, &[]).unwrap();
    let have = ids(&arrived);
    let (news, ends) = sorted(arrived);
    assert_eq!(news, [r#"{"n":1}"#, r#"{"n":2}"#]);
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
    // Until the ends are recorded they come again; the news the coordinator has do not.
    let again = sorted(store.take_arrivals(&run, token, &have).unwrap());
    assert_eq!(again, (Vec::new(), ends));
}

pub(crate) fn a_coordinator_that_lost_the_run_cannot_queue_and_a_new_one_drops_what_it_queued(
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
    let new = take_over(store, "r3").token;
    assert!(new > old);
    assert!(matches!(
        store.enqueue(&run, old, vec![queued(1, "shell", &[])]),
        Err(baton_store::StoreError::LeaseLost { .. })
    ));
    assert_eq!(store.adopt_queued(&run, new, &[]).unwrap(), []);
    assert!(
        store
            .claim_attempts("w", &[], &[], 10, 30_000, &[])
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
        .claim_attempts("w", &[], &[], 1, 30_000, &[])
        .unwrap()
        .remove(0);
    let unclaimed = store.stop_attempts(&run, new, 1).unwrap();
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

/// An answer lost on the way loses nothing: what a take returned comes again until the
/// coordinator says it has the news (at its next take) and records the ends (an end leaves
/// the queue in the transaction that records its `attempt-finished`).
pub(crate) fn ends_stay_until_recorded_and_news_until_the_coordinator_has_them(queue: &dyn Queue) {
    let store = queue.open();
    let store = store.as_ref();
    let lease = coordinated_lease(store, "r4");
    let run = run_id("r4");
    store
        .enqueue(
            &run,
            lease.token,
            vec![queued(0, "shell", &[]), queued(1, "shell", &[])],
        )
        .unwrap();
    let mut keys = Vec::new();
    for claim in store
        .claim_attempts("w1", &[], &[], 2, 30_000, &[])
        .unwrap()
    {
        let key = AttemptKey {
            run: run.clone(),
            task: claim.task,
            attempt: claim.attempt,
        };
        assert!(
            store
                .add_news("w1", &key, &format!("news of {}", key.task))
                .unwrap()
        );
        assert!(
            store
                .end_attempt("w1", &key, &format!("end of {}", key.task))
                .unwrap()
        );
        keys.push(key);
    }
    let ended = |task: u32| AttemptEnd::Ended {
        task,
        attempt: 1,
        result: format!("end of {task}"),
    };
    // The answer to this take is lost: the coordinator never saw it.
    let lost = store.take_arrivals(&run, lease.token, &[]).unwrap();
    assert_eq!(lost.news.len(), 2);
    // Asked again, with nothing it has: all of it again.
    let first = store.take_arrivals(&run, lease.token, &[]).unwrap();
    assert_eq!(first, lost);
    let have = ids(&first);
    // It has the news now; task "a"'s end is recorded.
    store
        .record(
            &run,
            lease,
            &[
                started(1_000, "a", 1),
                started(1_000, "b", 1),
                finished(2_000, "a", 1, Outcome::Exited { code: 0 }),
            ],
            &[],
        )
        .unwrap();
    let second = store.take_arrivals(&run, lease.token, &have).unwrap();
    assert_eq!(sorted(second.clone()), (Vec::new(), vec![ended(1)]));
    // Saying again that it has them (the answer to the take that said so was lost) is
    // harmless.
    assert_eq!(
        store.take_arrivals(&run, lease.token, &have).unwrap(),
        second
    );
    store
        .record(
            &run,
            lease,
            &[finished(2_000, "b", 1, Outcome::Exited { code: 0 })],
            &[],
        )
        .unwrap();
    assert_eq!(
        store.take_arrivals(&run, lease.token, &[]).unwrap(),
        Arrivals::default(),
        "recorded ends leave the queue"
    );
}

/// A coordinator that was taken over and wakes (split brain) can neither take what arrived
/// for its successor nor stop its successor's attempts: it is told it lost the run, and the
/// queue is left as it was.
pub(crate) fn a_coordinator_taken_over_takes_nothing_and_stops_nothing(queue: &dyn Queue) {
    let store = queue.open();
    let store = store.as_ref();
    let old = coordinated(store, "r5");
    let run = run_id("r5");
    let new = take_over(store, "r5").token;
    store
        .enqueue(
            &run,
            new,
            vec![queued(0, "shell", &[]), queued(1, "shell", &[])],
        )
        .unwrap();
    let claim = store
        .claim_attempts("w1", &[], &[], 1, 30_000, &[])
        .unwrap()
        .remove(0);
    let key = AttemptKey {
        run: run.clone(),
        task: claim.task,
        attempt: claim.attempt,
    };
    assert!(store.add_news("w1", &key, "news").unwrap());
    assert!(store.end_attempt("w1", &key, "done").unwrap());
    let lost = |result: Result<(), StoreError>| matches!(result, Err(StoreError::LeaseLost { .. }));
    assert!(lost(store.take_arrivals(&run, old, &[]).map(|_| ())));
    assert!(lost(store.stop_attempts(&run, old, 2).map(|_| ())));
    // The successor finds everything where it was: the end, the news, the queued attempt.
    let (news, ends) = sorted(store.take_arrivals(&run, new, &[]).unwrap());
    assert_eq!(news, ["news"]);
    assert_eq!(
        ends,
        [AttemptEnd::Ended {
            task: key.task,
            attempt: 1,
            result: "done".into()
        }]
    );
    assert_eq!(
        store
            .claim_attempts("w2", &[], &[], 5, 30_000, &[])
            .unwrap()
            .len(),
        1
    );
    // A run that is gone is said so.
    assert!(matches!(
        store.take_arrivals(&run_id("gone"), new, &[]),
        Err(StoreError::UnknownRun(_))
    ));
}

/// A coordinator taking a run over adopts the attempts it keeps, wherever they are (queued,
/// running on a worker, ended), and drops the rest; a worker's hold on an adopted attempt is
/// untouched. Only the lease holder adopts.
pub(crate) fn a_new_coordinator_adopts_what_it_keeps_and_drops_the_rest(queue: &dyn Queue) {
    let store = queue.open();
    let store = store.as_ref();
    let old = coordinated(store, "r6");
    let run = run_id("r6");
    store
        .enqueue(
            &run,
            old,
            vec![
                queued(0, "shell", &[]),
                queued(1, "shell", &[]),
                queued(2, "shell", &[]),
            ],
        )
        .unwrap();
    let claimed: Vec<AttemptKey> = store
        .claim_attempts("w1", &[], &[], 2, 30_000, &[])
        .unwrap()
        .into_iter()
        .map(|c| AttemptKey {
            run: run.clone(),
            task: c.task,
            attempt: c.attempt,
        })
        .collect();
    assert_eq!(claimed.iter().map(|k| k.task).collect::<Vec<_>>(), [0, 1]);
    assert!(store.end_attempt("w1", &claimed[0], "done").unwrap());
    let new = take_over(store, "r6").token;
    assert!(matches!(
        store.adopt_queued(&run, old, &[(0, 1)]),
        Err(StoreError::LeaseLost { .. })
    ));
    // Task 0 ended, task 2 waits: both kept; task 1 (running) is not, and a task never
    // queued is not found.
    assert_eq!(
        store
            .adopt_queued(&run, new, &[(0, 1), (2, 1), (7, 1)])
            .unwrap(),
        [(0, 1), (2, 1)]
    );
    // What was dropped is no longer its worker's.
    assert_eq!(
        store.renew_attempts("w1", &claimed[1..], 30_000).unwrap()[0].1,
        Renewal::Lost
    );
    // The adopted end is the new coordinator's to take; the adopted queued one is claimed.
    let (_, ends) = sorted(store.take_arrivals(&run, new, &[]).unwrap());
    assert_eq!(
        ends,
        [AttemptEnd::Ended {
            task: 0,
            attempt: 1,
            result: "done".into()
        }]
    );
    let next = store
        .claim_attempts("w2", &[], &[], 5, 30_000, &[])
        .unwrap();
    assert_eq!(next.iter().map(|c| c.task).collect::<Vec<_>>(), [2]);
    // A running attempt adopted stays its worker's.
    let adopter = take_over_at(store, "r6", 3, baton_model::now_ms() + 600_000).token;
    let running = AttemptKey {
        run: run.clone(),
        task: 2,
        attempt: 1,
    };
    assert_eq!(
        store.adopt_queued(&run, adopter, &[(2, 1)]).unwrap(),
        [(2, 1)]
    );
    assert_eq!(
        store
            .renew_attempts("w2", std::slice::from_ref(&running), 30_000)
            .unwrap()[0]
            .1,
        Renewal::Held { stop: 0 }
    );
    assert!(store.end_attempt("w2", &running, "done too").unwrap());
}

/// A listener wakes for what it listens for, and only for that: queued work wakes a worker
/// (and not a coordinator waiting on ends); an end wakes the coordinator.
pub(crate) fn a_listener_wakes_for_what_it_waits_for(queue: &dyn Queue) {
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
        .claim_attempts("w1", &[], &[], 1, 30_000, &[])
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
pub(crate) trait Queue {
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
                ends_stay_until_recorded_and_news_until_the_coordinator_has_them,
                a_coordinator_taken_over_takes_nothing_and_stops_nothing,
                a_new_coordinator_adopts_what_it_keeps_and_drops_the_rest,
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
