//! Measures what one dispatcher turn costs the store: `cargo run --release -p baton-store
//! --example commit_cost [TURNS] [idle]`.

use std::time::{Duration, Instant};

use baton_model::{Event, EventKind, Outcome, RunId, TaskId, TaskState};
use baton_store::{AttemptOutput, Durability, NewRun, SqliteStore};

fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .map_or(20_000, |n| n.parse().unwrap());
    // With `idle`, checkpoint every 100 turns outside the timed commits, as a dispatcher may
    // while it waits for attempts.
    let idle_checkpoints = std::env::args().nth(2).is_some_and(|arg| arg == "idle");
    let durability = Durability::from_env().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(&dir.path().join("baton.db"), durability).unwrap();
    let ids: Vec<TaskId> = (0..=turns)
        .map(|i| TaskId::new(format!("t{i}")).unwrap())
        .collect();
    let run = RunId::new("bench").unwrap();

    let start = Instant::now();
    store
        .create_run(&NewRun {
            id: run.clone(),
            name: "bench".into(),
            graph_path: "bench.toml".into(),
            graph_json: "{}".into(),
            concurrency: 2,
            started_at_ms: 0,
            tasks: ids.iter().cloned().zip(0..).collect(),
        })
        .unwrap();
    println!("create_run of {} tasks: {:?}", ids.len(), start.elapsed());

    let event = |kind| Event {
        seq: 0,
        at_ms: 0,
        kind,
    };
    let started = |task: &TaskId| {
        event(EventKind::AttemptStarted {
            task: task.clone(),
            attempt: 1,
            pid: Some(4242),
        })
    };
    store.commit(&run, &[started(&ids[0])], &[]).unwrap();
    let mut took = Vec::with_capacity(turns);
    for i in 0..turns {
        let events = [
            event(EventKind::AttemptFinished {
                task: ids[i].clone(),
                attempt: 1,
                outcome: Outcome::Exited { code: 0 },
                duration_ms: 3,
            }),
            event(EventKind::TaskFinished {
                task: ids[i].clone(),
                state: TaskState::Succeeded,
                reason: None,
            }),
            started(&ids[i + 1]),
        ];
        let outputs = [AttemptOutput {
            task: ids[i].clone(),
            attempt: 1,
            output: "a line of output from a shell task\n".into(),
            output_bytes: 35,
            output_json: None,
            stderr_tail: String::new(),
            log_path: format!(".baton/runs/bench/{}/1.log", ids[i]),
        }];
        let start = Instant::now();
        store.commit(&run, &events, &outputs).unwrap();
        took.push(start.elapsed());
        if idle_checkpoints && i % 100 == 99 {
            store.checkpoint().unwrap();
        }
    }
    let wal = dir.path().join("baton.db-wal");
    println!(
        "WAL: {} KiB",
        std::fs::metadata(&wal).map_or(0, |m| m.len() / 1024)
    );
    let total: Duration = took.iter().sum();
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    println!(
        "{turns} turns of 3 events + 1 output ({durability:?}, idle checkpoints: \
         {idle_checkpoints}): mean {:?}, median {:?}, p90 {:?}, \
         p99 {:?}, max {:?}",
        total / turns as u32,
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}
