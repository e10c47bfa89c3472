-- PostgreSQL schema version 2: the work queue of runs driven by `baton worker`s.
--
-- A coordinator (whoever holds the run's lease) puts each attempt it launches here; a worker
-- claims it (FOR UPDATE SKIP LOCKED), holds it by a lease it renews, and writes its end into
-- the same row, fenced by its worker id and the row's state; the coordinator takes the ended
-- rows (deleting them: the table stays small) and records them in the run's log. Times are
-- milliseconds on the server's clock, never a worker's: leases are compared with the server's
-- own `now`, so machines whose clocks disagree cannot cut each other's leases short.
CREATE TABLE attempt_queue (
    run_id            TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    task_idx          BIGINT NOT NULL,
    attempt           BIGINT NOT NULL,
    -- The run's lease token of the coordinator that put it here: a newer coordinator drops
    -- what an older one queued (it records those attempts interrupted on taking over).
    coordinator_token BIGINT NOT NULL,
    -- What a worker must offer to take it.
    engine            TEXT NOT NULL,
    labels            TEXT[] NOT NULL DEFAULT '{}',
    -- What the worker needs to run it (the runner's own JSON).
    work              TEXT NOT NULL,
    -- queued | claimed | ended | lapsed
    state             TEXT NOT NULL DEFAULT 'queued',
    worker_id         TEXT,
    lease_until_ms    BIGINT,
    -- 0 run on, 1 stop gracefully, 2 stop at once: how the coordinator stops it.
    stop              SMALLINT NOT NULL DEFAULT 0,
    -- How it ended (the runner's own JSON), once `ended`.
    result            TEXT,
    queued_at_ms      BIGINT NOT NULL,
    claimed_at_ms     BIGINT,
    PRIMARY KEY (run_id, task_idx, attempt)
);
CREATE INDEX attempt_queue_queued ON attempt_queue (queued_at_ms) WHERE state = 'queued';

-- What running attempts record before they end (a check that failed, an agent's activity),
-- for their run's coordinator to take into the log.
CREATE TABLE attempt_news (
    id       BIGSERIAL PRIMARY KEY,
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    event    TEXT NOT NULL
);
CREATE INDEX attempt_news_run ON attempt_news (run_id, id);

-- Live workers, for `baton workers` (and for nothing that decides: leases do).
CREATE TABLE workers (
    id              TEXT PRIMARY KEY,
    host            TEXT NOT NULL,
    pid             BIGINT NOT NULL,
    slots           BIGINT NOT NULL,
    engines         TEXT[] NOT NULL,
    labels          TEXT[] NOT NULL,
    started_at_ms   BIGINT NOT NULL,
    heartbeat_at_ms BIGINT NOT NULL
);

-- The server's clock, in the unit of every time here.
CREATE FUNCTION baton_now_ms() RETURNS BIGINT
    AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT $$
    LANGUAGE SQL VOLATILE;
