-- Schema version 11: a run's graph is kept in parts of at most 1 MiB, written as it is
-- serialised. Kept whole, a 100,000-task graph (13 MB of JSON) was in memory three times at
-- once when its run started: the text, SQLite's copy of the bound value and the record made of
-- it. Bytes, not text, so that a part may end inside a character.

CREATE TABLE run_graph_parts (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    part   INTEGER NOT NULL,
    json   BLOB NOT NULL,
    PRIMARY KEY (run_id, part)
) STRICT, WITHOUT ROWID;

INSERT INTO run_graph_parts (run_id, part, json)
    SELECT run_id, 0, CAST(graph_json AS BLOB) FROM run_graphs;

DROP TABLE run_graphs;
