-- Schema version 5: decisions about tasks that wait for a person (`approval = true`).
--
-- `baton approve RUN TASK` and `baton reject RUN TASK` write here from another process; the
-- process driving the run reads them, and records what it did with them as events. A decision
-- is made once.

CREATE TABLE approvals (
    run_id   TEXT NOT NULL,
    task_id  TEXT NOT NULL,
    approved INTEGER NOT NULL CHECK (approved IN (0, 1)),
    reason   TEXT,
    at_ms    INTEGER NOT NULL,
    PRIMARY KEY (run_id, task_id)
) STRICT;
