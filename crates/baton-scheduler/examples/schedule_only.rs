//! Scheduling-only benchmark: drives the state machine through a random DAG with no process
//! and no store, every attempt finishing at once. Prints the time per task.
//!
//! cargo run --release -p baton-scheduler --example schedule_only -- 100000

use std::time::{Duration, Instant};

use baton_model::{OnFailure, Outcome};
use baton_scheduler::{Action, Input, Plan, PlanTask, Scheduler};

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map_or(100_000, |a| a.parse().expect("N must be a number"));
    let mut rng = fastrand::Rng::with_seed(1);
    // Same shape as benches/gen_graph.py: up to 3 needs among the 50 tasks before.
    let tasks: Vec<PlanTask> = (0..n)
        .map(|i| {
            let k = rng.u32(0..=3.min(i));
            let lo = i.saturating_sub(50);
            let mut needs: Vec<u32> = (0..k).map(|_| rng.u32(lo..i)).collect();
            needs.sort_unstable();
            needs.dedup();
            PlanTask {
                needs,
                backoff: Duration::from_secs(1),
                ..PlanTask::default()
            }
        })
        .collect();
    let edges: usize = tasks.iter().map(|t| t.needs.len()).sum();
    let plan = Plan {
        tasks,
        concurrency: 2,
        on_failure: OnFailure::Block,
    };

    let started = Instant::now();
    let mut sched = Scheduler::new(&plan, 1);
    let built = started.elapsed();
    let mut running: Vec<(u32, u32)> = Vec::new();
    let mut inputs = vec![Input::Start];
    let mut finished = 0u32;
    'run: loop {
        for input in inputs.drain(..) {
            for action in sched.handle(input) {
                match action {
                    Action::Launch { task, attempt } => running.push((task, attempt)),
                    Action::Finished { .. } => finished += 1,
                    Action::RunFinished { .. } => break 'run,
                    _ => {}
                }
            }
        }
        let (task, attempt) = running.pop().expect("a run that is not over has work");
        inputs.push(Input::Finished {
            task,
            attempt,
            outcome: Outcome::Exited { code: 0 },
        });
    }
    let total = started.elapsed();
    assert_eq!(finished, n);
    println!(
        "{n} tasks, {edges} edges: built in {built:?}, scheduled in {total:?} ({:.0} ns/task)",
        total.as_nanos() as f64 / f64::from(n)
    );
}
