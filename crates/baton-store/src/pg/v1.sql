-- PostgreSQL schema version 1: what SQLite's versions 1 to 8 made, as one. Times are
-- milliseconds since the Unix epoch, as in SQLite; counts and ids BIGINT.
CREATE TABLE runs (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL,
    graph_path          TEXT NOT NULL,
    status              TEXT NOT NULL,
    started_at_ms       BIGINT NOT NULL,
    ended_at_ms         BIGINT,
    concurrency         BIGINT NOT NULL,
    task_count          BIGINT NOT NULL,
    stop_reason         TEXT,
    driver_pid          BIGINT,
    driver_start_time   BIGINT,
    driver_host         TEXT,
    -- Grows with every claim: it fences the holder's commits.
    lease_token         BIGINT NOT NULL DEFAULT 0,
    lease_expires_at_ms BIGINT
);
CREATE INDEX runs_started ON runs (started_at_ms DESC, id DESC);

CREATE TABLE run_graphs (
    run_id     TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    graph_json TEXT NOT NULL
);

CREATE TABLE tasks (
    run_id         TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    task_id        TEXT NOT NULL,
    idx            BIGINT NOT NULL,
    status         TEXT NOT NULL,
    attempts       BIGINT NOT NULL DEFAULT 0,
    next_attempt   BIGINT,
    retry_at_ms    BIGINT,
    started_at_ms  BIGINT,
    ended_at_ms    BIGINT,
    exit_code      INTEGER,
    reason         TEXT,
    output_attempt BIGINT,
    output         TEXT,
    output_bytes   BIGINT,
    output_json    TEXT,
    stderr_tail    TEXT,
    PRIMARY KEY (run_id, idx),
    UNIQUE (run_id, task_id)
);

CREATE TABLE attempts (
    run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    task_idx      BIGINT NOT NULL,
    task_id       TEXT NOT NULL,
    attempt       BIGINT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    ended_at_ms   BIGINT,
    pid           BIGINT,
    outcome_kind  TEXT,
    outcome_json  TEXT,
    exit_code     INTEGER,
    duration_ms   BIGINT,
    output        TEXT,
    output_bytes  BIGINT,
    output_json   TEXT,
    stderr_tail   TEXT,
    log_path      TEXT,
    tokens        BIGINT,
    cost_usd      DOUBLE PRECISION,
    agent_json    TEXT,
    containment   TEXT,
    PRIMARY KEY (run_id, task_idx, attempt)
);

CREATE TABLE events (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    at_ms     BIGINT NOT NULL,
    kind      TEXT NOT NULL,
    task_id   TEXT,
    data_json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX events_kind ON events (run_id, kind, seq);

CREATE TABLE approvals (
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    task_id  TEXT NOT NULL,
    approved BOOLEAN NOT NULL,
    reason   TEXT,
    at_ms    BIGINT NOT NULL,
    PRIMARY KEY (run_id, task_id)
);
