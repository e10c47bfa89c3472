-- PostgreSQL schema version 4: `baton cancel` of a run driven on another machine (by a
-- worker, which a signal could not reach, and must not: a worker asked to stop drains itself,
-- it does not cancel its runs). The request is recorded on the run; its coordinator looks for
-- it every second and cancels the run as Ctrl-C would.
ALTER TABLE runs ADD COLUMN cancel_requested_at_ms BIGINT;
