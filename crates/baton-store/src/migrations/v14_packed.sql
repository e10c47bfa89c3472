-- Schema version 14: what the store writes in bulk is compressed when it is 1 KiB or more, as
-- one zstd frame (`packing.rs`): a commit's batch of events, in `event_batches.packed` (its
-- `events` left empty), and each part of a run's graph, in `run_graph_parts.json` with
-- `packed` 1. Both are JSON that repeats itself: a 100,000-task run's batches were 33 MB of
-- text and its graph 13 MB, two thirds of its database, written to the WAL and copied back by
-- checkpoints; packed they are about 2 MB. A batch of a few lines, as a run of a few tasks
-- writes, and a small graph stay as they are, as everything written before this version does.
--
-- Adding a column rewrites no row: what is there is read as it is.

ALTER TABLE event_batches ADD COLUMN packed BLOB;
ALTER TABLE run_graph_parts ADD COLUMN packed INTEGER NOT NULL DEFAULT 0;
