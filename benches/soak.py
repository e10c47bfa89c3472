#!/usr/bin/env python3
"""A soak of many machines under faults (#31): TASKS short tasks on WORKERS workers while a
fault strikes every few seconds, then what came of it. Not a timed benchmark: the figures are
tasks lost, tasks completed twice, copies of a task that overlapped, and how long work took to
flow again after each kind of fault (docs/PERFORMANCE.md, "Many machines under faults").

Faults, picked at random (seeded): `kill` (SIGKILL a worker, a fresh one started in its place),
`pause` (SIGSTOP a worker for twice its lease, then SIGCONT), `cut` (the server drops every
connection to the run's database: what a restart is to its clients), `restart` (pg_ctl
restart of the server, when BATON_BENCH_PGDATA is given).

  BATON_BENCH_PG=postgres://USER@HOST:PORT [BATON_BENCH_PGDATA=DIR] \
    benches/soak.py [--tasks 1000] [--workers 3] [--every 4] [--seed 1]

BATON=path/to/baton picks the binary (default: the release build, else the debug one). Each
task writes `ID start NS` and `ID end NS` lines (nanoseconds of this machine's clock) to one
log; a copy that was killed has no end.
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LEASE = 3


def baton_binary():
    named = os.environ.get("BATON")
    if named:
        return os.path.abspath(named)
    for profile in ("release", "debug"):
        path = os.path.join(HERE, "..", "target", profile, "baton")
        if os.path.exists(path):
            return os.path.abspath(path)
    sys.exit("no baton binary: cargo build --release, or BATON=…")


def psql(url, sql):
    out = subprocess.run(
        ["psql", "-qtA", url, "-c", sql], capture_output=True, text=True, check=False
    )
    return out.stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--every", type=float, default=4.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=float, default=900, help="give up after (s)")
    args = parser.parse_args()
    server = os.environ.get("BATON_BENCH_PG") or sys.exit("set BATON_BENCH_PG")
    pgdata = os.environ.get("BATON_BENCH_PGDATA")
    baton = baton_binary()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="baton-soak-")
    os.chdir(work)
    subprocess.run(["git", "init", "-q"], check=True)
    log = os.path.join(work, "copies.log")
    with open("g.toml", "w") as graph:
        graph.write("[run]\nconcurrency = 12\n")
        for i in range(args.tasks):
            # Short, uneven tasks; a quarter need the one four before them.
            needs = f'\nneeds = ["t{i - 4}"]' if i >= 4 and i % 4 == 0 else ""
            pause = rng.choice(["0.1", "0.2", "0.4", "0.8"])
            # A copy that starts while another copy of its task lives (all workers are on
            # this host: /proc shows them; a zombie, killed but not reaped yet by a paused
            # worker, is not alive) says so.
            pid = os.path.join(work, f"pid.t{i}")
            graph.write(
                f'\n[[task]]\nid = "t{i}"\nrun = "p=$(cat {pid} 2>/dev/null); '
                f'if [ -n \\"$p\\" ] && [ -e /proc/$p ] && ! grep -q \\") [ZX] \\" /proc/$p/stat 2>/dev/null; '
                f'then echo t{i} overlap 0 >> {log}; fi; '
                f'echo $$ > {pid}; echo t{i} start $(date +%s%N) >> {log}; '
                f'sleep {pause}; echo t{i} end $(date +%s%N) >> {log}"{needs}\n'
            )
    db = f"bench_soak_{os.getpid()}"
    psql(f"{server}/postgres", f"CREATE DATABASE {db}")
    url = f"{server}/{db}"
    workers = {}

    def start_worker(name):
        out = open(os.path.join(work, f"{name}.log"), "a")
        workers[name] = subprocess.Popen(
            [baton, "--store", url, "worker", "--slots", "4", "--lease", f"{LEASE}s"],
            stdout=out,
            stderr=out,
        )

    for w in range(args.workers):
        start_worker(f"w{w}")
    time.sleep(1)
    run = subprocess.run(
        [baton, "--store", url, "run", "g.toml", "--detach"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    started = time.time()
    faults = []
    state = "running"
    next_fault = started + args.every
    spare = args.workers
    try:
        while time.time() - started < args.limit:
            state = psql(url, f"SELECT status FROM runs WHERE id = '{run}'") or "running"
            if state not in ("running", "queued"):
                break
            if time.time() >= next_fault:
                kinds = ["kill", "pause", "cut"] + (["restart"] if pgdata else [])
                kind = rng.choice(kinds)
                at = time.time()
                if kind == "kill":
                    name = rng.choice(sorted(workers))
                    workers[name].send_signal(signal.SIGKILL)
                    workers[name].wait()
                    del workers[name]
                    start_worker(f"w{spare}")
                    spare += 1
                elif kind == "pause":
                    name = rng.choice(sorted(workers))
                    workers[name].send_signal(signal.SIGSTOP)
                    time.sleep(2 * LEASE)
                    workers[name].send_signal(signal.SIGCONT)
                elif kind == "cut":
                    psql(
                        f"{server}/postgres",
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{db}' AND pid <> pg_backend_pid()",
                    )
                else:
                    pg_ctl = sorted(
                        os.path.join("/usr/lib/postgresql", v, "bin", "pg_ctl")
                        for v in os.listdir("/usr/lib/postgresql")
                    )[-1]
                    command = [pg_ctl, "-D", pgdata, "-m", "fast", "-w", "restart"]
                    if os.geteuid() == 0:
                        command = ["runuser", "-u", "nobody", "--"] + command
                    # Not captured: the server it starts would hold the pipe open for good.
                    subprocess.run(
                        command,
                        cwd="/",
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        check=False,
                    )
                faults.append((kind, at))
                next_fault = time.time() + args.every * rng.uniform(0.5, 1.5)
            time.sleep(0.2)
    finally:
        for process in workers.values():
            process.send_signal(signal.SIGCONT)
            process.terminate()
        for process in workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    elapsed = time.time() - started
    statuses = psql(url, f"SELECT status, count(*) FROM tasks WHERE run_id = '{run}' GROUP BY status")

    # Copies of each task: starts and ends, in order.
    copies = {}
    ends = []
    for line in open(log):
        task, what, ns = line.split()
        copies.setdefault(task, []).append((what, int(ns)))
        if what == "end":
            ends.append(int(ns) / 1e9)
    completed_twice = sum(1 for c in copies.values() if sum(w == "end" for w, _ in c) > 1)
    lost = args.tasks - sum(1 for c in copies.values() if any(w == "end" for w, _ in c))
    overlaps = sum(1 for c in copies.values() for what, _ in c if what == "overlap")
    started_twice = sum(1 for c in copies.values() if sum(w == "start" for w, _ in c) > 1)
    ends.sort()
    recovery = {}
    for kind, at in faults:
        # How long after the fault (or, for a pause, after it ended) the next task ended.
        after = at + (2 * LEASE if kind == "pause" else 0)
        later = [e for e in ends if e > after]
        if later:
            recovery.setdefault(kind, []).append(later[0] - after)
    print(f"run {run}: {state} after {elapsed:.1f}s; tasks {statuses.replace(chr(10), ', ')}")
    print(f"faults: {len(faults)} ({', '.join(f'{k} {sum(1 for f in faults if f[0] == k)}' for k in sorted(set(f[0] for f in faults)))})")
    print(f"tasks never completed: {lost}; completed twice: {completed_twice}; "
          f"started more than once: {started_twice}; copies that ran at once: {overlaps}")
    for kind, gaps in sorted(recovery.items()):
        print(f"  after {kind}: next task ended in median {statistics.median(gaps):.2f}s, "
              f"max {max(gaps):.2f}s ({len(gaps)} faults)")
    print(f"(files in {work})")


if __name__ == "__main__":
    main()
