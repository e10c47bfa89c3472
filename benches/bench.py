#!/usr/bin/env python3
"""The benchmarks of docs/PERFORMANCE.md. Not a test: it prints numbers.

usage: benches/bench.py [--runs N] [--quick] [--baseline PATH] [--baseline-env K=V] [--only true]

Needs `ninja` (Debian: ninja-build) for the side-by-side comparison; installs it with apt-get
when missing and allowed (root). Builds baton in release mode first.

1. 10,000-task random DAG of `true` at concurrency 2: baton (durable store on) vs `ninja -j2`
   and `make -j2` on the same graph (ninja runs every command through `sh -c`; make, like
   baton, runs a simple command directly), median wall time of N runs, and baton's peak RSS. With `--baseline PATH`
   (another build of baton, say the commit before a change), that binary runs too, interleaved
   with the others run by run, so that both builds and ninja see the same machine. With
   `--baseline-env K=V` (repeatable) the baseline runs with those variables set; without
   `--baseline`, the baseline is this build: `--baseline-env BATON_NO_CGROUP=1` measures what
   containing every task costs. A baseline built with `--features measure-floor` and run with
   `--baseline-env BATON_MEASURE_SKIP_COMMITS=1` commits nothing: what recording costs.
2. 100,000-task graph of no-op tasks through the whole of `baton run` (load, validate, store,
   schedule), and the scheduler alone (crates/baton-scheduler/examples/schedule_only.rs).
3. Uneven durations: a random DAG of `sleep`s; baton's makespan against the lower bound
   max(critical path, total work / concurrency) and against a wave-by-wave scheduler.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATON = os.path.join(ROOT, "target", "release", "baton")
GEN = os.path.join(ROOT, "benches", "gen_graph.py")


def sh(cmd, cwd=None, quiet=True):
    out = subprocess.DEVNULL if quiet else None
    subprocess.run(cmd, cwd=cwd, check=True, stdout=out, stderr=out)


def timed(cmd, cwd, may_fail=False):
    """Wall time and peak RSS (KiB) of one command, measured with wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0 and not may_fail:
        sys.exit(f"{cmd} failed with {status}")
    return wall, usage.ru_maxrss


def ensure_ninja():
    if shutil.which("ninja"):
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "ninja-build"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return shutil.which("ninja") is not None


def fresh_dir(base, name):
    d = os.path.join(base, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    sh(["git", "init", "-q"], cwd=d)
    return d


def timed_env(cmd, cwd, env):
    if not env:
        return timed(cmd, cwd)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        # A build that skips its commits reads back a run with nothing recorded: it ran every
        # task, and says that none succeeded.
        return timed(cmd, cwd, may_fail="BATON_MEASURE_SKIP_COMMITS" in env)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def bench_true(base, n, runs, baseline=None, baseline_env=None):
    d = fresh_dir(base, f"true-{n}")
    sh([sys.executable, GEN, "random", str(n), d])
    have_ninja = ensure_ninja()
    baton_times, ninja_times, baseline_times, make_times, rss = [], [], [], [], []
    def run_baton():
        shutil.rmtree(os.path.join(d, ".baton"), ignore_errors=True)
        wall, peak = timed([BATON, "run", "graph.toml", "-j", "2", "--quiet"], d)
        baton_times.append(wall)
        rss.append(peak)

    def run_baseline():
        shutil.rmtree(os.path.join(d, ".baton"), ignore_errors=True)
        wall, _ = timed_env([baseline, "run", "graph.toml", "-j", "2", "--quiet"], d,
                            baseline_env)
        baseline_times.append(wall)

    def run_ninja():
        for f in (".ninja_log", ".ninja_deps"):
            if os.path.exists(os.path.join(d, f)):
                os.remove(os.path.join(d, f))
        wall, _ = timed(["ninja", "-j2"], d)
        ninja_times.append(wall)

    def run_make():
        wall, _ = timed(["make", "-j2", "-s"], d)
        make_times.append(wall)

    contenders = [run_baton] + ([run_baseline] if baseline else []) + (
        [run_ninja] if have_ninja else []) + ([run_make] if shutil.which("make") else [])
    for i in range(runs):
        # The order turns from run to run: what 10,000 processes leave for the kernel to
        # clean up lands on whichever runs next, and must not always land on the same one.
        k = i % len(contenders)
        for run in contenders[k:] + contenders[:k]:
            run()
    b = statistics.median(baton_times)
    row = {"tasks": n, "baton_s": round(b, 2), "baton_peak_rss_mb": round(max(rss) / 1024, 1)}
    if ninja_times:
        nj = statistics.median(ninja_times)
        row.update({"ninja_s": round(nj, 2), "ratio": round(b / nj, 2)})
    if make_times:
        mk = statistics.median(make_times)
        row.update({"make_s": round(mk, 2), "vs_make": round(b / mk, 2)})
    if baseline_times:
        bl = statistics.median(baseline_times)
        row.update({"baseline_s": round(bl, 2), "vs_baseline": round(b / bl, 3)})
        if ninja_times:
            row["baseline_ratio"] = round(bl / statistics.median(ninja_times), 2)
    return row


def bench_noop(base, n):
    d = fresh_dir(base, f"noop-{n}")
    sh([sys.executable, GEN, "random", str(n), d, "--engine", "noop"])
    wall, peak = timed([BATON, "run", "graph.toml", "-j", "2", "--quiet"], d)
    out = subprocess.run(
        ["cargo", "run", "--release", "-q", "-p", "baton-scheduler", "--example", "schedule_only",
         "--", str(n)], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    return {"tasks": n, "baton_run_s": round(wall, 2), "peak_rss_mb": round(peak / 1024, 1),
            "scheduler_only": out}


def wave_makespan(deps, durations, concurrency):
    """What a wave-by-wave scheduler takes: level by level, each level's tasks packed onto the
    slots in file order, the next level starting only when the whole level is done."""
    level = []
    for i, d in enumerate(deps):
        level.append(1 + max((level[j] for j in d), default=-1))
    total = 0.0
    for lv in range(max(level) + 1):
        slots = [0.0] * concurrency
        for i, _ in enumerate(deps):
            if level[i] == lv:
                k = slots.index(min(slots))
                slots[k] += durations[i]
        total += max(slots)
    return total


def bench_uneven(base, n, concurrency):
    d = fresh_dir(base, f"uneven-{n}")
    sh([sys.executable, GEN, "uneven", str(n), d])
    with open(os.path.join(d, "durations.json")) as f:
        spec = json.load(f)
    deps, durations = spec["deps"], spec["durations"]
    finish = []
    for i, ds in enumerate(deps):
        finish.append(durations[i] + max((finish[j] for j in ds), default=0.0))
    critical = max(finish)
    work = sum(durations)
    bound = max(critical, work / concurrency)
    res = subprocess.run([BATON, "run", "graph.toml", "-j", str(concurrency), "--json"], cwd=d,
                         check=True, capture_output=True, text=True)
    makespan = json.loads(res.stdout)["run"]["duration_ms"] / 1000
    waves = wave_makespan(deps, durations, concurrency)
    return {"tasks": n, "concurrency": concurrency, "critical_path_s": round(critical, 2),
            "work_over_slots_s": round(work / concurrency, 2), "lower_bound_s": round(bound, 2),
            "baton_s": round(makespan, 2), "baton_vs_bound": round(makespan / bound, 3),
            "waves_s": round(waves, 2), "waves_vs_bound": round(waves / bound, 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller graphs, one run")
    ap.add_argument("--baseline", help="another baton binary, run interleaved in benchmark 1")
    ap.add_argument("--baseline-env", action="append", default=[], metavar="K=V",
                    help="set for the baseline's runs (the baseline is this build if no --baseline)")
    ap.add_argument("--only", choices=["true"], help="run benchmark 1 alone")
    a = ap.parse_args()
    baseline_env = dict(kv.split("=", 1) for kv in a.baseline_env)
    if baseline_env and not a.baseline:
        a.baseline = BATON
    sh(["cargo", "build", "--release", "-q", "-p", "baton"], cwd=ROOT, quiet=False)
    base = tempfile.mkdtemp(prefix="baton-bench-")
    n_true, n_noop, n_uneven = (2000, 20000, 60) if a.quick else (10000, 100000, 200)
    runs = 1 if a.quick else a.runs
    results = {
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0]},
        "true": bench_true(base, n_true, runs, a.baseline, baseline_env),
    }
    if not a.only:
        results["noop"] = bench_noop(base, n_noop)
        results["uneven"] = bench_uneven(base, n_uneven, 4)
    print(json.dumps(results, indent=2))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
