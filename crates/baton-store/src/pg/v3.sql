-- PostgreSQL schema version 3: attempts' logs, shipped by the workers that ran them, for
-- `baton logs` on any machine. A log file is its pieces (at most 256 KiB each, contiguous
-- from offset 0) and a row saying how long it is now: a file rewritten from its start (a
-- check's log, each round) is shipped again from 0, and pieces past its length are stale.
CREATE TABLE attempt_log_files (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    file        TEXT NOT NULL,
    size        BIGINT NOT NULL,
    modified_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, file)
);
CREATE TABLE attempt_log_pieces (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    file   TEXT NOT NULL,
    "offset" BIGINT NOT NULL,
    bytes  BYTEA NOT NULL,
    PRIMARY KEY (run_id, file, "offset")
);
