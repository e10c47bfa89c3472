-- Schema version 7: `tasks` and `attempts` clustered by the task's index in the graph instead
-- of by its id. Tasks end roughly in graph order, and a commit records the ends of the tasks
-- that ended since the last one: keyed by id (`t1`, `t10`, `t100`, ... sort apart), each of
-- them dirtied a page of its own in both tables, and every dirty page is a 4 KiB frame
-- appended to the WAL and later copied back by a checkpoint. Keyed by index, a commit's tasks
-- share a page or two in each table.
--
-- `tasks` keeps a unique index on `(run_id, task_id)`, which every update finds its row by;
-- no update changes it (`task_id` never changes), so it costs commits no writes. `attempts`
-- gets the task's index as a column (`task_idx`) and is looked up through that index of
-- `tasks`; its `task_id` stays for readers.

CREATE TABLE tasks_v7 (
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
    PRIMARY KEY (run_id, idx),
    UNIQUE (run_id, task_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE attempts_v7 (
    run_id        TEXT NOT NULL,
    task_idx      INTEGER NOT NULL,
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
    tokens        INTEGER,
    cost_usd      REAL,
    agent_json    TEXT,
    containment   TEXT,
    PRIMARY KEY (run_id, task_idx, attempt)
) STRICT, WITHOUT ROWID;

INSERT INTO tasks_v7 SELECT * FROM tasks;
-- Every attempt has its task (commits check it); an orphan would keep its row, under index -1,
-- rather than be lost.
INSERT INTO attempts_v7
SELECT a.run_id, COALESCE(t.idx, -1), a.task_id, a.attempt, a.started_at_ms, a.ended_at_ms,
       a.pid, a.outcome_kind, a.outcome_json, a.exit_code, a.duration_ms, a.output,
       a.output_bytes, a.output_json, a.stderr_tail, a.log_path, a.tokens, a.cost_usd,
       a.agent_json, a.containment
FROM attempts a LEFT JOIN tasks t ON t.run_id = a.run_id AND t.task_id = a.task_id;

-- Dropping a table drops its triggers.
DROP TABLE attempts;
DROP TABLE tasks;

ALTER TABLE tasks_v7 RENAME TO tasks;
ALTER TABLE attempts_v7 RENAME TO attempts;

-- As in version 3.
CREATE TRIGGER tasks_count_status AFTER UPDATE OF status ON tasks
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND status = OLD.status;
    INSERT INTO task_counts (run_id, status, n) VALUES (NEW.run_id, NEW.status, 1)
        ON CONFLICT (run_id, status) DO UPDATE SET n = n + 1;
END;
