-- Schema version 1: runs, tasks, attempts and the append-only event log.
--
-- The event log is the source of truth; `runs.status`, `tasks` and `attempts` are projections of
-- it, updated in the same transaction as the events they follow from.

CREATE TABLE runs (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL,
    graph_path    TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER,
    concurrency   INTEGER NOT NULL,
    task_count    INTEGER NOT NULL,
    stop_reason   TEXT
) STRICT;

CREATE INDEX runs_newest_first ON runs (started_at_ms DESC, id DESC);

-- Apart from `runs` so that listing runs never walks the overflow pages of a large graph.
CREATE TABLE run_graphs (
    run_id     TEXT PRIMARY KEY NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    graph_json TEXT NOT NULL
) STRICT;

CREATE TABLE tasks (
    run_id         TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    task_id        TEXT NOT NULL,
    idx            INTEGER NOT NULL,
    status         TEXT NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    next_attempt   INTEGER,
    retry_at_ms    INTEGER,
    started_at_ms  INTEGER,
    ended_at_ms    INTEGER,
    exit_code      INTEGER,
    reason         TEXT,
    output_attempt INTEGER,
    output         TEXT,
    output_bytes   INTEGER,
    output_json    TEXT,
    stderr_tail    TEXT,
    PRIMARY KEY (run_id, task_id),
    UNIQUE (run_id, idx)
) STRICT;

-- How many tasks of each run are in each state, for `baton runs` without scanning every task.
-- Kept by a trigger rather than by an index on `tasks(status)`: a status change then dirties
-- this one small page instead of up to three index pages, and pages written are what a commit
-- costs. `create_run` inserts the first row of a run (all its tasks `pending`).
CREATE TABLE task_counts (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (run_id, status)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER tasks_count_status AFTER UPDATE OF status ON tasks
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND status = OLD.status;
    INSERT INTO task_counts (run_id, status, n) VALUES (NEW.run_id, NEW.status, 1)
        ON CONFLICT (run_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TABLE attempts (
    run_id        TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER,
    pid           INTEGER,
    outcome_kind  TEXT,
    outcome_json  TEXT,
    exit_code     INTEGER,
    duration_ms   INTEGER,
    output        TEXT,
    output_bytes  INTEGER,
    output_json   TEXT,
    stderr_tail   TEXT,
    log_path      TEXT,
    PRIMARY KEY (run_id, task_id, attempt),
    FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id) ON DELETE CASCADE
) STRICT;

-- Rows are small, so the table is keyed by (run_id, seq) directly.
CREATE TABLE events (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    at_ms     INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    task_id   TEXT,
    data_json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

-- Deleting a whole run stays possible (retention); rewriting history does not.
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
BEGIN
    SELECT RAISE (ABORT, 'the event log is append-only');
END;
