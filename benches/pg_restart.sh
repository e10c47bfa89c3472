#!/bin/bash
# A trial, not a benchmark: PostgreSQL restarted twice under three workers, as the hostile
# pass's finding 3 did (docs/guide/src/workers.md, "Leases, in numbers"). 60 one-second `true`-like tasks
# in ten waves of six; the server is restarted DELAY seconds after the submit, and again 3 s
# later. Prints the run's state, how long after the second restart it ended, and how many times
# the tasks ran (every task exactly once: "lines=60 unique=60").
#   BATON_BENCH_PG=postgres://USER@HOST:PORT BATON_BENCH_PGDATA=DIR benches/pg_restart.sh [DELAY]
# The server at BATON_BENCH_PGDATA must be one this user (or, as root, `nobody`) may restart
# with `pg_ctl restart` (which keeps the options it was started with). BATON=path/to/baton picks
# the binary (default: the debug build).
set -euo pipefail
: "${BATON_BENCH_PG:?name a PostgreSQL server whose user may create databases}"
: "${BATON_BENCH_PGDATA:?name the data directory of that server, for pg_ctl restart}"
here=$(cd "$(dirname "$0")/.." && pwd)
B=$(realpath "${BATON:-$here/target/debug/baton}")
pg_ctl=$(ls -d /usr/lib/postgresql/*/bin | sort | tail -1)/pg_ctl
restart() (
  cd /  # the scratch directory is not the server user's to enter
  if [ "$(id -u)" = 0 ]; then
    runuser -u nobody -- "$pg_ctl" -D "$BATON_BENCH_PGDATA" -m fast -w restart >/dev/null
  else
    "$pg_ctl" -D "$BATON_BENCH_PGDATA" -m fast -w restart >/dev/null
  fi
)
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir" && git init -q
python3 -c '
print("[run]\nconcurrency = 6")
for i in range(60):
    needs = f"\nneeds = [\"t{i-6}\"]" if i >= 6 else ""
    print(f"[[task]]\nid = \"t{i}\"\nrun = \"sleep 1; echo t{i} >> done.log\"{needs}")' > g.toml
db=bench_restart_$$_$RANDOM
psql -q "$BATON_BENCH_PG/postgres" -c "CREATE DATABASE $db" >/dev/null
url=$BATON_BENCH_PG/$db
for w in 1 2 3; do "$B" --store "$url" worker --slots 2 --lease 6s >"w$w.log" 2>&1 & pids+=($!); done
sleep 1
run=$("$B" --store "$url" run g.toml --detach 2>/dev/null)
sleep "${1:-6}"; restart; sleep 3; restart
state=running
for i in $(seq 1 120); do
  state=$(psql -qtA "$url" -c "SELECT status FROM runs WHERE id = '$run'" 2>/dev/null || echo running)
  [ -n "$state" ] && [ "$state" != running ] && break
  sleep 1
done
echo "state=$state after ${i}s; lines=$(wc -l < done.log) unique=$(sort -u done.log | wc -l)"
