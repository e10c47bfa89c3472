-- Schema version 10: a run's events of the kinds written a few times a run (a merge, a budget
-- change, a planner's growth, a pick, …) are found without reading the others. The result,
-- `baton diff` and resume look them up by kind, and a 100,000-task run holds 300,000 events of
-- the kinds every attempt writes, which a lookup by kind read through each time. Only the rare
-- kinds are in the index, so recording an attempt writes nothing more. A query uses the index
-- only if its WHERE repeats each term of this condition (`read.rs`, `rare_kinds!`). Not
-- `kind NOT IN (…)`: SQLite builds a table for the list at every insert, which cost a quarter
-- of the time a 100,000-task run takes.

CREATE INDEX events_of_rare_kinds ON events (run_id, kind, seq)
    WHERE kind <> 'attempt-started' AND kind <> 'attempt-finished'
        AND kind <> 'task-finished' AND kind <> 'agent-activity';
