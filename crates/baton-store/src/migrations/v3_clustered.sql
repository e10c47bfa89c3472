-- Schema version 3: cheaper commits (a run of 10,000 tiny tasks records one per few
-- milliseconds, so what each recorded task costs the dispatcher shows).
--
-- `tasks` and `attempts` become WITHOUT ROWID tables clustered on their primary key: each
-- update is then one B-tree search instead of two (the key's index, then the row), and an
-- inserted attempt dirties one page instead of two. `tasks` keeps its index on `(run_id, idx)`,
-- which reads in graph order use and which no commit writes (`idx` never changes).
--
-- `tasks`, `attempts` and `events` lose their foreign keys: enforcing them costs every event and
-- every attempt a search of the parent table, which the store does not need (a commit checks
-- that the run exists, and its updates' changed-row counts prove that each task and attempt
-- does). Their only use was the cascade when a run is deleted, which
-- `SqliteStore::delete_run` now does itself.

CREATE TABLE tasks_v3 (
    run_id         TEXT NOT NULL,
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
) STRICT, WITHOUT ROWID;

CREATE TABLE attempts_v3 (
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
    PRIMARY KEY (run_id, task_id, attempt)
) STRICT, WITHOUT ROWID;

CREATE TABLE events_v3 (
    run_id    TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    at_ms     INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    task_id   TEXT,
    data_json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

-- The columns are in the same order as in version 1.
INSERT INTO tasks_v3 SELECT * FROM tasks;
INSERT INTO attempts_v3 SELECT * FROM attempts;
INSERT INTO events_v3 SELECT * FROM events;

-- Children first, so that no cascade runs; dropping a table drops its triggers.
DROP TABLE attempts;
DROP TABLE tasks;
DROP TABLE events;

ALTER TABLE tasks_v3 RENAME TO tasks;
ALTER TABLE attempts_v3 RENAME TO attempts;
ALTER TABLE events_v3 RENAME TO events;

-- As in version 1.
CREATE TRIGGER tasks_count_status AFTER UPDATE OF status ON tasks
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND status = OLD.status;
    INSERT INTO task_counts (run_id, status, n) VALUES (NEW.run_id, NEW.status, 1)
        ON CONFLICT (run_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER events_append_only BEFORE UPDATE ON events
BEGIN
    SELECT RAISE (ABORT, 'the event log is append-only');
END;
