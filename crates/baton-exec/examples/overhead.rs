//! Measures what supervising an attempt costs: runs `sh -c true` many times at concurrency 2,
//! once through baton-exec on a current-thread runtime and once with bare std spawns on one
//! thread (roughly what `ninja -j2` does), and prints both.
//!
//! `cargo run --release -p baton-exec --example overhead -- [ATTEMPTS] [both|bare|baton]`
//! (each attempt in a cgroup of its own where cgroup v2 is writable; `BATON_NO_CGROUP=1`: not)

use std::collections::VecDeque;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_exec::{Attempt, AttemptReport, AttemptSpec, Program, StopLevel};
use tokio::sync::watch;
use tokio::task::JoinSet;

const CONCURRENCY: usize = 2;

fn main() {
    let attempts: usize = std::env::args()
        .nth(1)
        .map_or(2000, |n| n.parse().expect("ATTEMPTS is a number"));
    let which = std::env::args().nth(2).unwrap_or_else(|| "both".to_owned());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let per = |total: Duration| total / u32::try_from(attempts).expect("attempts fit in u32");

    println!("{attempts} × `sh -c true` at concurrency {CONCURRENCY}");
    let bare = (which != "baton").then(|| bare_spawns(attempts));
    if let Some(bare) = bare {
        println!(
            "  bare std spawn, 1 thread: {bare:?} ({:?} each)",
            per(bare)
        );
    }
    let baton = (which != "bare").then(|| baton_attempts(attempts, dir.path()));
    if let Some(baton) = baton {
        println!(
            "  baton-exec, 1 thread:     {baton:?} ({:?} each)",
            per(baton)
        );
    }
    if let (Some(bare), Some(baton)) = (bare, baton) {
        println!("  ratio: {:.3}", baton.as_secs_f64() / bare.as_secs_f64());
    }
}

/// What `ninja -j2` does for each command, near enough: one thread, posix_spawn, pipes, wait.
fn bare_spawns(attempts: usize) -> Duration {
    let started = Instant::now();
    let mut running = VecDeque::new();
    for _ in 0..attempts {
        if running.len() == CONCURRENCY {
            finish(running.pop_front());
        }
        let child = Command::new("/bin/sh")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("sh starts");
        running.push_back(child);
    }
    while !running.is_empty() {
        finish(running.pop_front());
    }
    started.elapsed()
}

fn finish(child: Option<Child>) {
    let output = child
        .expect("a running child")
        .wait_with_output()
        .expect("sh runs");
    assert!(output.status.success());
}

fn baton_attempts(attempts: usize, logs: &std::path::Path) -> Duration {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (_stop, stop_rx) = watch::channel(StopLevel::Run);
        let started = Instant::now();
        let mut running = JoinSet::<AttemptReport>::new();
        let pool = baton_exec::CgroupPool::new("overhead");
        for index in 0..attempts {
            if running.len() == CONCURRENCY {
                let report = running
                    .join_next()
                    .await
                    .expect("a running attempt")
                    .expect("no panic");
                assert!(report.outcome.is_success(), "{:?}", report.outcome);
            }
            let mut spec = AttemptSpec::new(
                Program::Shell("true".into()),
                logs,
                logs.join(format!("{index}.log")),
            );
            spec.timeout = Some(Duration::from_secs(60));
            // A cgroup per attempt where available; `BATON_NO_CGROUP=1` measures without.
            spec.cgroup = Some(pool.clone());
            running.spawn(Attempt::spawn(spec).wait(stop_rx.clone()));
        }
        while let Some(report) = running.join_next().await {
            assert!(report.expect("no panic").outcome.is_success());
        }
        started.elapsed()
    })
}
