//! Measures what recording a task costs the store, in CPU and wall time per task:
//! `cargo run --release -p baton-store --example commit_cost [TASKS] [BATCH] [idle]`.
//!
//! A run of `TASKS` tiny tasks (10,000 by default) is created first, then recorded the way the
//! dispatcher records it at concurrency 2 with batched turns: each commit holds `BATCH` tasks'
//! worth of events (5 by default): for each task, `attempt-finished` and `task-finished` of one
//! task with its small output, and `attempt-started` of the next. CPU time is this thread's,
//! from `/proc/thread-self/schedstat` (Linux), which counts nanoseconds rather than ticks.

use std::time::{Duration, Instant};

use baton_model::{Event, EventKind, Outcome, RunId, TaskId, TaskState};
use baton_store::{AttemptOutput, Durability, NewRun, RunLog, SqliteStore};

/// Nanoseconds this thread has run on a CPU.
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat (Linux only)");
    let ns = text.split_whitespace().next().unwrap().parse().unwrap();
    Duration::from_nanos(ns)
}

/// Bytes this process has passed to `write` and `pwrite`: the WAL frames, and checkpoints.
fn written() -> u64 {
    let text = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io (Linux only)");
    text.lines()
        .find_map(|line| line.strip_prefix("wchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let tasks: usize = args.next().map_or(10_000, |n| n.parse().unwrap());
    let batch: usize = args.next().map_or(5, |n| n.parse().unwrap());
    // With `idle`, checkpoint every 100 commits outside the timed commits, as a dispatcher may
    // while it waits for attempts.
    let idle_checkpoints = args.next().is_some_and(|arg| arg == "idle");
    let durability = Durability::from_env().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(&dir.path().join("baton.db"), durability).unwrap();
    let ids: Vec<TaskId> = (0..tasks)
        // As in `benches/gen_graph.py`, whose graphs `benches/bench.py` runs.
        .map(|i| TaskId::new(format!("t{i}")).unwrap())
        .collect();
    let run = RunId::new("20250101-000000-bench").unwrap();

    let start = Instant::now();
    store
        .create_run(&NewRun {
            id: run.clone(),
            name: "bench".into(),
            graph_path: "bench.toml".into(),
            graph: &"{}",
            concurrency: 2,
            started_at_ms: 0,
            tasks: ids.iter().cloned().zip(0..).collect(),
        })
        .unwrap();
    println!("create_run of {tasks} tasks: {:?}", start.elapsed());

    let event = |kind| Event {
        seq: 0,
        at_ms: 1_700_000_000_000,
        kind,
    };
    let started = |task: &TaskId| {
        event(EventKind::AttemptStarted {
            task: task.clone(),
            attempt: 1,
            pid: Some(424_242),
        })
    };
    let first: Vec<Event> = ids.iter().take(batch).map(started).collect();
    store.commit(&run, &first, &[]).unwrap();

    let mut took = Vec::new();
    let written_before = written();
    let cpu_before = thread_cpu();
    let mut wall = Duration::ZERO;
    let mut idle = Duration::ZERO;
    let mut done = 0;
    while done < tasks {
        let end = (done + batch).min(tasks);
        let mut events = Vec::with_capacity(3 * batch);
        let mut outputs = Vec::with_capacity(batch);
        for i in done..end {
            events.push(event(EventKind::AttemptFinished {
                task: ids[i].clone(),
                attempt: 1,
                outcome: Outcome::Exited { code: 0 },
                duration_ms: 1,
                agent: None,
                containment: None,
            }));
            events.push(event(EventKind::TaskFinished {
                task: ids[i].clone(),
                state: TaskState::Succeeded,
                reason: None,
            }));
            outputs.push(AttemptOutput {
                task: ids[i].clone(),
                attempt: 1,
                output: String::new(),
                output_bytes: 0,
                output_json: None,
                stderr_tail: String::new(),
                log_path: format!(".baton/runs/{run}/logs/{}/1.log", ids[i]),
            });
            if let Some(next) = ids.get(i + batch) {
                events.push(started(next));
            }
        }
        let start = Instant::now();
        store.commit(&run, &events, &outputs).unwrap();
        let elapsed = start.elapsed();
        wall += elapsed;
        took.push(elapsed);
        done = end;
        if idle_checkpoints && took.len() % 100 == 0 {
            // Outside the CPU measurement too: it is the dispatcher's idle time.
            let paused = thread_cpu();
            store.checkpoint().unwrap();
            idle += thread_cpu() - paused;
        }
    }
    // Building the batches is in here too, but costs well under a microsecond per task.
    let cpu = thread_cpu() - cpu_before - idle;
    let bytes = written() - written_before;

    let wal = dir.path().join("baton.db-wal");
    println!(
        "WAL: {} KiB",
        std::fs::metadata(&wal).map_or(0, |m| m.len() / 1024)
    );
    let commits = took.len();
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    println!(
        "{tasks} tasks, {batch} per commit ({durability:?}, idle checkpoints: \
         {idle_checkpoints}): {commits} commits: median {:?}, p90 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
    let per_task = |d: Duration| d.as_secs_f64() * 1e6 / tasks as f64;
    println!(
        "per task: {:.1} µs CPU, {:.1} µs wall, {:.1} KiB written (with checkpoints)",
        per_task(cpu),
        per_task(wall),
        bytes as f64 / 1024.0 / tasks as f64
    );
}
