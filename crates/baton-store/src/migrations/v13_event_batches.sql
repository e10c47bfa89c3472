-- Schema version 13: the events every attempt writes (`attempt-started`, `attempt-finished`,
-- `task-finished`) and every agent's tool call (`agent-activity`) are stored a commit's at a time,
-- up to 512 to a row (`event_batches.rs`, `PER_ROW`), instead of a row each. A row of `events`
-- cost a 100,000-task run a B-tree insert, six bound values and ~150 bytes per event (its run id,
-- kind and task repeated beside its JSON): together a quarter of what recording the run cost. The
-- other kinds, which a run writes a few times and readers look up by kind
-- (`events_of_rare_kinds`), stay rows.
--
-- The column `events` holds one line per event, in order: `seq`, `at_ms`, the kind and the event's
-- JSON (as `events.data_json`), separated by tabs (JSON escapes every tab and newline it holds). A
-- reader after event N seeks the first batch whose `last_seq` is above N; a run's log is its rows
-- and its batches merged by `seq` (`event_batches.rs`). Runs recorded before this version keep
-- their rows, which are read as before.

CREATE TABLE event_batches (
    run_id    TEXT NOT NULL,
    last_seq  INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    events    TEXT NOT NULL,
    PRIMARY KEY (run_id, last_seq)
) STRICT;

CREATE TRIGGER event_batches_append_only BEFORE UPDATE ON event_batches
BEGIN
    SELECT RAISE (ABORT, 'the event log is append-only');
END;
