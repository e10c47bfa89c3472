#!/usr/bin/env python3
"""What recording one short task costs SQLite, row by row. Not a test: it prints numbers.

usage: benches/store_rows.py [--baton PATH] [--tasks N] [--batch K] [--runs R]

A task that starts and ends within one commit is recorded as three event rows and two
projection writes (crates/baton-store/src/project.rs, `run_attempt`): the attempt's row
(`AttemptRan`, an INSERT ... SELECT through the task's row) and the task's (`TaskRan`, an UPDATE
whose status change fires the `task_counts` trigger). This replays exactly that, N tasks in
random order K to a commit, on the schema of a database baton itself made (a run of the
10,000-task graph of `gen_graph.py`, emptied), and times variants that each leave one part out
or do it another way. Python's own cost per statement (~1-2 us) is in every figure; compare
the variants with each other, not with baton's recorder thread (docs/PERFORMANCE.md, session
13, has both).

The SQL is copied from crates/baton-store/src/statements.rs (session 13): keep it in step.
Since schema version 13 (2026-12-04) baton stores those three events as lines of one row per
commit (crates/baton-store/src/event_batches.rs) and no trigger counts statuses (version 12):
this replays the writes of session 13, which the figures in docs/PERFORMANCE.md are of.
"""
import argparse
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "benches", "gen_graph.py")

OUTPUT_OF_ATTEMPT_3 = (
    "output_attempt = IIF(COALESCE(output_attempt, 0) <= ?3, ?3, output_attempt), "
    "output = IIF(COALESCE(output_attempt, 0) <= ?3, ?8, output), "
    "output_bytes = IIF(COALESCE(output_attempt, 0) <= ?3, ?9, output_bytes), "
    "output_json = IIF(COALESCE(output_attempt, 0) <= ?3, ?10, output_json), "
    "stderr_tail = IIF(COALESCE(output_attempt, 0) <= ?3, ?11, stderr_tail) "
)
ATTEMPT_COLUMNS = (
    "run_id, task_idx, task_id, attempt, started_at_ms, pid, ended_at_ms, outcome_kind, "
    "outcome_json, exit_code, duration_ms, output, output_bytes, output_json, stderr_tail, "
    "log_path, tokens, cost_usd, agent_json, containment"
)
ATTEMPT_RAN = (
    f"INSERT INTO attempts ({ATTEMPT_COLUMNS}) SELECT ?1, idx, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19 FROM tasks "
    "WHERE run_id = ?1 AND task_id = ?2 AND attempts < ?3"
)
# The same row with the task's index given (known to the writer), no read of the task's row.
ATTEMPT_BY_INDEX = (
    f"INSERT INTO attempts ({ATTEMPT_COLUMNS}) VALUES (?1, ?20, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
)
TASK_RAN_SET = (
    "UPDATE tasks SET status = ?5, attempts = MAX(attempts, ?3), "
    "started_at_ms = COALESCE(started_at_ms, ?12), "
    "exit_code = IIF(MAX(attempts, ?3) = ?3, ?4, NULL), "
    "reason = ?6, ended_at_ms = ?7, next_attempt = NULL, retry_at_ms = NULL, "
    + OUTPUT_OF_ATTEMPT_3
)
TASK_RAN = TASK_RAN_SET + "WHERE run_id = ?1 AND task_id = ?2"
TASK_RAN_BY_INDEX = TASK_RAN_SET + "WHERE run_id = ?1 AND idx = ?13"
INSERT_EVENT = (
    "INSERT INTO events (run_id, seq, at_ms, kind, task_id, data_json) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
)

VARIANTS = {
    "as recorded": set(),
    "events only": {"no-projections"},
    "projections only": {"no-events"},
    "attempt row only": {"no-events", "no-task-row"},
    "task row only": {"no-events", "no-attempt-row"},
    "task row, no trigger": {"no-events", "no-attempt-row", "no-trigger"},
    "by index": {"by-index"},
    "by index, no trigger": {"by-index", "no-trigger"},
    "attempts with rowid": {"rowid-attempts"},
}


def made_database(baton, tasks, work):
    """A database baton made, its run's records emptied: (path, run id)."""
    graph_dir = os.path.join(work, "graph")
    os.makedirs(graph_dir)
    subprocess.run(["git", "init", "-q"], cwd=graph_dir, check=True)
    subprocess.run([sys.executable, GEN, "random", str(tasks), graph_dir], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([baton, "run", "graph.toml", "-j", "2", "--quiet"], cwd=graph_dir,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    made = os.path.join(work, "made.db")
    source = sqlite3.connect(os.path.join(graph_dir, ".baton", "baton.db"))
    target = sqlite3.connect(made)
    source.backup(target)
    source.close()
    (run,) = target.execute("SELECT id FROM runs").fetchone()
    target.execute("DELETE FROM attempts")
    target.execute("DELETE FROM events WHERE seq > 1")
    # Schema 13 and later keep a commit's attempt events in batches.
    if target.execute("SELECT 1 FROM sqlite_schema WHERE name = 'event_batches'").fetchone():
        target.execute("DELETE FROM event_batches")
    target.execute(
        "UPDATE tasks SET status = 'pending', attempts = 0, started_at_ms = NULL, "
        "ended_at_ms = NULL, exit_code = NULL, output_attempt = NULL, output = NULL, "
        "output_bytes = NULL, stderr_tail = NULL")
    target.commit()
    target.execute("PRAGMA journal_mode = DELETE")
    target.close()
    return made, run


def replay(made, run, work, changes, order, batch):
    """Microseconds per task to record every task of `order`, `batch` to a commit."""
    path = os.path.join(work, "replay.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.copy(made, path)
    conn = sqlite3.connect(path, isolation_level=None)
    # As baton's writer: WAL, NORMAL (crates/baton-store/src/store.rs).
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    if "no-trigger" in changes:
        conn.execute("DROP TRIGGER IF EXISTS tasks_count_status")
    if "rowid-attempts" in changes:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'attempts'").fetchone()
        conn.execute("DROP TABLE attempts")
        conn.execute(sql.replace(", WITHOUT ROWID", "").replace(
            "PRIMARY KEY (run_id, task_idx, attempt)", "UNIQUE (run_id, task_idx, attempt)"))
    seq = 1
    start = time.perf_counter()
    for first in range(0, len(order), batch):
        conn.execute("BEGIN IMMEDIATE")
        for idx in order[first:first + batch]:
            task = f"t{idx}"
            if "no-events" not in changes:
                for kind, data in (
                    ("attempt-started",
                     f'{{"kind":"attempt-started","task":"{task}","attempt":1,"pid":4242}}'),
                    ("attempt-finished",
                     f'{{"kind":"attempt-finished","task":"{task}","attempt":1,'
                     '"outcome":{"kind":"exited","code":0},"duration_ms":1,'
                     '"containment":"cgroup"}'),
                    ("task-finished",
                     f'{{"kind":"task-finished","task":"{task}","state":"succeeded"}}'),
                ):
                    seq += 1
                    conn.execute(INSERT_EVENT, (run, seq, 1_700_000_000_000, kind, task, data))
            if "no-projections" in changes:
                continue
            by_index = "by-index" in changes
            if "no-attempt-row" not in changes:
                row = (run, task, 1, 1_700_000_000_000, 4242, 1_700_000_000_001, "exited",
                       '{"kind":"exited","code":0}', 0, 1, "", 0, None, "",
                       f"/work/.baton/runs/{run}/logs/{task}.1.log", None, None, None,
                       "cgroup")
                if by_index:
                    conn.execute(ATTEMPT_BY_INDEX, row + (idx,))
                else:
                    conn.execute(ATTEMPT_RAN, row)
            if "no-task-row" not in changes:
                update = (run, task, 1, 0, "succeeded", None, 1_700_000_000_001, "", 0, None,
                          "", 1_700_000_000_000)
                if by_index:
                    conn.execute(TASK_RAN_BY_INDEX, update + (idx,))
                else:
                    conn.execute(TASK_RAN, update)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed / len(order) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baton", default=os.path.join(ROOT, "target", "release", "baton"))
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=13,
                    help="tasks per commit (13: the mean of a 10,000-task run at -j2)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(args.baton):
        sys.exit(f"no baton at {args.baton}: cargo build --release, or --baton PATH")
    with tempfile.TemporaryDirectory() as work:
        made, run = made_database(args.baton, args.tasks, work)
        order = list(range(args.tasks))
        random.Random(1).shuffle(order)
        times = {name: [] for name in VARIANTS}
        # Interleaved, so that each variant sees the machine the others do.
        for _ in range(args.runs):
            for name, changes in VARIANTS.items():
                times[name].append(replay(made, run, work, changes, order, args.batch))
        print(f"SQLite {sqlite3.sqlite_version}, {args.tasks} tasks, {args.batch} a commit, "
              f"median of {args.runs}")
        for name, values in times.items():
            print(f"  {name:<24} {statistics.median(values):6.1f} us/task")


if __name__ == "__main__":
    main()
