-- PostgreSQL schema version 6: each worker's lease, so that `baton workers` can tell one not
-- heard from for longer than its lease (its claims lapsed: dead, cut off or paused) on any
-- host, not only its own. NULL for a worker of a build before this version.
ALTER TABLE workers ADD COLUMN lease_ms BIGINT;
