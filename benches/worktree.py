#!/usr/bin/env python3
"""Worktree tasks against the by-hand floor (issue #16). Not a test: it prints numbers.

usage: benches/worktree.py [--runs N] [--files 3000,30000] [--tasks 1,8]

For each generated repository (N files in a source-tree-like layout: directories 3-5 deep,
~40 files per directory, sizes from 200 B to 30 KiB, one commit), each round runs, in an
order that turns from round to round:

- `baton`: `baton run` of K shell tasks `echo line >> README.md` with `workspace =
  "worktree"` at `-j 4` (a worktree per task, the change committed, the result merged into
  `baton/RUN/result`, the worktrees removed);
- `baton first run`: the pool empty at the start (a first run): the run's tasks hand their
  worktrees on to each other as they finish;
- `baton pooled`: the same with the worktree pool warm (`.baton/worktrees/.pool` kept from the
  round before: the tasks' worktrees are switched to their base, not checked out again);
  `baton` alone runs with `BATON_WORKTREE_POOL=0`, every worktree fresh;
- `by hand`: the same done by a shell script, the floor baton is held to: per task
  `git worktree add -b`, the edit, `git add -A`, `git commit`; then per task `git merge-tree
  --write-tree` + `git commit-tree` onto the result, one `git update-ref`, and `git worktree
  remove` (the tasks' edits and commits 4 at a time, as baton's `-j 4`; the `worktree add`s one
  after another, as parallel ones race on the repository's locks). Every task appends to the
  same file, so the tasks after the first conflict at the merge, in both: the merge work is
  the same.

Branches and runs are deleted between rounds; `sync` before each measurement. Prints the
median wall time of each, their ratio, and the git processes baton started (one round run
with a counting `git` first on PATH).
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATON = os.environ.get("BATON") or os.path.join(ROOT, "target", "release", "baton")

BY_HAND = r'''
set -e
cd "$1"; k=$2
base=$(git rev-parse HEAD)
# `worktree add` one at a time (parallel ones race on the repository's locks), the tasks'
# edits and commits 4 at a time.
i=0; while [ $i -lt $k ]; do git worktree add -q -b bh/t$i .bh/t$i HEAD; i=$((i+1)); done
i=0; while [ $i -lt $k ]; do
  (cd .bh/t$i && echo line >> README.md && git add -A && git -c user.name=b -c user.email=b@b commit -qm task) &
  i=$((i+1))
  if [ $((i % 4)) -eq 0 ]; then wait; fi
done
wait
cur=$base; i=0
while [ $i -lt $k ]; do
  tree=$(git merge-tree --write-tree $cur bh/t$i | head -1)
  cur=$(git -c user.name=b -c user.email=b@b commit-tree $tree -p $cur -p bh/t$i -m "merge t$i")
  i=$((i+1))
done
git update-ref refs/heads/bh/result $cur
i=0; while [ $i -lt $k ]; do git worktree remove --force .bh/t$i; i=$((i+1)); done
'''


def sh(cmd, cwd=None, env=None):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)


def gen_repo(path, files, seed=7):
    rng = random.Random(seed)
    os.makedirs(path)
    sh(["git", "init", "-q", "-b", "main"], cwd=path)
    made, dirs = 0, [""]
    while made < files:
        parent = rng.choice(dirs)
        if parent.count("/") < 4 and rng.random() < 0.3:
            d = os.path.join(parent, f"mod{len(dirs)}")
            dirs.append(d)
            os.makedirs(os.path.join(path, d), exist_ok=True)
            continue
        for _ in range(min(40, files - made)):
            size = int(rng.lognormvariate(7.5, 1.0)) % 30000 + 200
            with open(os.path.join(path, parent, f"f{made}.rs"), "w") as f:
                f.write(("// generated line of source text\n" * (size // 33 + 1))[:size])
            made += 1
    with open(os.path.join(path, "README.md"), "w") as f:
        f.write("# bench\n")
    sh(["git", "add", "-A"], cwd=path)
    sh(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"], cwd=path)


def graph(k):
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\nworkspace = "worktree"\nrun = "echo line >> README.md"\n\n'
        for i in range(k))
    return tasks


def clean(repo, keep_pool=False):
    state = os.path.join(repo, ".baton")
    if keep_pool and os.path.isdir(state):
        for name in os.listdir(state):
            if name != "worktrees":
                p = os.path.join(state, name)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        wt = os.path.join(state, "worktrees")
        for name in os.listdir(wt) if os.path.isdir(wt) else []:
            if name != ".pool":
                shutil.rmtree(os.path.join(wt, name), ignore_errors=True)
    else:
        shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(os.path.join(repo, ".bh"), ignore_errors=True)
    sh(["git", "worktree", "prune"], cwd=repo)
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/heads/bh",
                           "refs/heads/baton"], cwd=repo, capture_output=True, text=True).stdout
    for ref in refs.split():
        sh(["git", "update-ref", "-d", ref], cwd=repo)
    subprocess.run(["sync"])


def timed(cmd, cwd, env=None):
    start = time.perf_counter()
    sh(cmd, cwd=cwd, env=env)
    return time.perf_counter() - start


def count_git(repo, k, base):
    shim = os.path.join(base, "shim")
    os.makedirs(shim, exist_ok=True)
    log = os.path.join(base, "git-calls")
    real = shutil.which("git")
    with open(os.path.join(shim, "git"), "w") as f:
        f.write(f'#!/bin/sh\necho x >> {log}\nexec {real} "$@"\n')
    os.chmod(os.path.join(shim, "git"), 0o755)
    clean(repo)
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, PATH=shim + os.pathsep + os.environ["PATH"])
    sh([BATON, "run", f"g{k}.toml", "-j", "4", "--quiet"], cwd=repo, env=env)
    with open(log) as f:
        return sum(1 for _ in f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", default="3000,30000")
    ap.add_argument("--tasks", default="1,8")
    a = ap.parse_args()
    sh(["cargo", "build", "--release", "-q", "-p", "baton"], cwd=ROOT)
    base = tempfile.mkdtemp(prefix="baton-wt-bench-")
    script = os.path.join(base, "by-hand.sh")
    with open(script, "w") as f:
        f.write(BY_HAND)
    rows = []
    for files in map(int, a.files.split(",")):
        repo = os.path.join(base, f"repo-{files}")
        gen_repo(repo, files)
        for k in map(int, a.tasks.split(",")):
            with open(os.path.join(repo, f"g{k}.toml"), "w") as f:
                f.write(graph(k))
            sh(["git", "add", f"g{k}.toml"], cwd=repo)
            sh(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "graph"],
               cwd=repo)
            cold = dict(os.environ, BATON_WORKTREE_POOL="0")
            cmd = [BATON, "run", f"g{k}.toml", "-j", "4", "--quiet"]
            runs = {
                "baton": (lambda: timed(cmd, repo, cold), False),
                "baton pooled": (lambda: timed(cmd, repo), True),
                # The pool empty at the start, as on a first run: the run's own tasks hand
                # their worktrees on to each other.
                "baton first run": (lambda: timed(cmd, repo), False),
                "by hand": (lambda: timed(["bash", script, repo, str(k)], repo), False),
            }
            times = {name: [] for name in runs}
            # The pool filled once before the pooled rounds.
            clean(repo)
            timed(cmd, repo)
            names = list(runs)
            for i in range(a.runs):
                turn = i % len(names)
                for name in names[turn:] + names[:turn]:
                    run, keep_pool = runs[name]
                    clean(repo, keep_pool)
                    times[name].append(run())
                    if not keep_pool:
                        # What a cold run gave back must not warm the pooled one's.
                        clean(repo, keep_pool=False)
                        timed(cmd, repo)
            med = {name: statistics.median(t) for name, t in times.items()}
            h = med["by hand"]
            rows.append({"files": files, "tasks": k,
                         "baton_s": round(med["baton"], 3),
                         "baton_pooled_s": round(med["baton pooled"], 3),
                         "by_hand_s": round(h, 3),
                         "ratio": round(med["baton"] / h, 2),
                         "pooled_ratio": round(med["baton pooled"] / h, 2),
                         "first_run_ratio": round(med["baton first run"] / h, 2),
                         "git_processes": count_git(repo, k, base),
                         "all": {name: [round(x, 2) for x in t] for name, t in times.items()}})
            print(rows[-1], flush=True)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
