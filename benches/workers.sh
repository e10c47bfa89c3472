#!/bin/bash
# Claim-run-complete throughput of no-op tasks through baton workers (docs/PERFORMANCE.md).
#   BATON_BENCH_PG=postgres://USER@HOST:PORT benches/workers.sh N [chain]
# submits 500 `true` tasks (concurrency 8) to N `baton worker --slots 4` processes, in a
# scratch repository, a fresh database each time, and prints the wall time from the submit to
# the run's end. With `chain`: 100 `true` tasks each needing the one before, so the wall time
# over 100 is the latency from a dependency's end to its dependent's end (its start, plus a
# `true`). BATON=path/to/baton picks the binary (default: the debug build). The figures in
# docs/PERFORMANCE.md are taken with the server started as the tests start theirs
# (`-c fsync=off -c synchronous_commit=off -c full_page_writes=off`): with `fsync=on` every
# commit waits on this disk, and the run takes half as long again.
set -euo pipefail
: "${BATON_BENCH_PG:?name a PostgreSQL server whose user may create databases}"
here=$(cd "$(dirname "$0")/.." && pwd)
B=$(realpath "${BATON:-$here/target/debug/baton}")
n=${1:?how many workers}
dir=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir" && git init -q
if [ "${2:-}" = chain ]; then
  python3 -c 'print("[run]\nconcurrency = 8"); [print(f"[[task]]\nid = \"t{i}\"\nrun = \"true\"" + (f"\nneeds = [\"t{i-1}\"]" if i else "")) for i in range(100)]' > g.toml
else
  python3 -c 'print("[run]\nconcurrency = 8"); [print(f"[[task]]\nid = \"t{i}\"\nrun = \"true\"") for i in range(500)]' > g.toml
fi
db=bench_workers_$$_$RANDOM
psql -q "$BATON_BENCH_PG/postgres" -c "CREATE DATABASE $db" >/dev/null
url=$BATON_BENCH_PG/$db
pids=()
for _ in $(seq 1 "$n"); do "$B" --store "$url" worker --slots 4 2>/dev/null & pids+=($!); done
sleep 1
start=$(date +%s.%N)
run=$("$B" --store "$url" run g.toml --detach 2>/dev/null)
# The end is the run's own record of it (`ended_at_ms`, written by its coordinator on this
# machine's clock), asked of the database a few times a second: polling every few
# milliseconds (a `psql`, and a server backend, each time) took 40% of the CPU the workers
# are measured on.
state() { psql -qtA "$url" -c "SELECT status FROM runs WHERE id = '$run'"; }
until [ "$(state)" = succeeded ]; do sleep 0.25; done
end_ms=$(psql -qtA "$url" -c "SELECT ended_at_ms FROM runs WHERE id = '$run'")
echo "workers=$n ${2:-} wall=$(python3 -c "print(round($end_ms / 1000 - $start, 2))")s"
