#!/usr/bin/env python3
"""Writes the benchmark graphs of docs/PERFORMANCE.md: the same random DAG as a baton graph file
and as a build.ninja, so both tools run exactly the same commands in the same order constraints.

usage: gen_graph.py random N OUT_DIR [--seed S] [--engine shell|noop]   -> graph.toml, build.ninja, Makefile
       gen_graph.py uneven N OUT_DIR [--seed S]                         -> graph.toml (sleeps), durations.json
"""
import argparse
import json
import os
import random


def random_dag(n, rng, max_deps=3, window=50):
    """Each task depends on up to `max_deps` tasks among the `window` before it: a DAG with long
    chains and wide levels, like a real build graph."""
    deps = []
    for i in range(n):
        k = rng.randint(0, min(max_deps, i))
        lo = max(0, i - window)
        deps.append(sorted(set(rng.sample(range(lo, i), k))) if k else [])
    return deps


def write_toml(path, name, deps, commands, engine="shell"):
    with open(path, "w") as f:
        f.write(f'name = "{name}"\n\n[run]\nconcurrency = 2\n\n')
        for i, d in enumerate(deps):
            f.write(f'[[task]]\nid = "t{i}"\n')
            if d:
                f.write("needs = [" + ", ".join(f'"t{j}"' for j in d) + "]\n")
            if engine == "noop":
                f.write('engine = "noop"\n\n')
            else:
                f.write(f'run = "{commands[i]}"\n\n')


def write_ninja(path, deps, commands):
    with open(path, "w") as f:
        f.write("rule run\n  command = $cmd\n\n")
        for i, d in enumerate(deps):
            inputs = " ".join(f"t{j}" for j in d)
            # Phony-free: each edge "produces" a stamp nobody writes, so ninja runs it once.
            f.write(f"build t{i}: run {inputs}\n  cmd = {commands[i]}\n")
        f.write("default " + " ".join(f"t{i}" for i in range(len(deps))) + "\n")


def write_make(path, deps, commands):
    """The same graph for make: one phony target per task. GNU make runs a recipe line with
    nothing for a shell in it directly, without `sh -c` (baton does the same)."""
    with open(path, "w") as f:
        names = " ".join(f"t{i}" for i in range(len(deps)))
        f.write(f".PHONY: all {names}\nall: {names}\n")
        for i, d in enumerate(deps):
            inputs = " ".join(f"t{j}" for j in d)
            f.write(f"t{i}: {inputs}\n\t@{commands[i]}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["random", "uneven"])
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", default="shell")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    deps = random_dag(a.n, rng)
    if a.kind == "random":
        commands = ["true"] * a.n
        write_toml(os.path.join(a.out, "graph.toml"), f"random-{a.n}", deps, commands, a.engine)
        write_ninja(os.path.join(a.out, "build.ninja"), deps, commands)
        write_make(os.path.join(a.out, "Makefile"), deps, commands)
    else:
        # Durations from 0.05 s to 1.0 s, skewed short, like real task mixes.
        durations = [round(0.05 + rng.random() ** 3 * 0.95, 2) for _ in range(a.n)]
        commands = [f"sleep {d}" for d in durations]
        write_toml(os.path.join(a.out, "graph.toml"), f"uneven-{a.n}", deps, commands)
        with open(os.path.join(a.out, "durations.json"), "w") as f:
            json.dump({"deps": deps, "durations": durations}, f)


if __name__ == "__main__":
    main()
