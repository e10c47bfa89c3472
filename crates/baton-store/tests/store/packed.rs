//! What the store packs (schema version 14): a commit's many lines of events and a large
//! graph's parts stored compressed, a few lines and a small graph as they are, each read back
//! as it was written.

use baton_model::{Event, EventName, Outcome, TaskState};
use baton_store::{RunLog, RunReader, StoreError};

use crate::support::*;

/// The events of `n` short tasks, as one commit records them: started, finished, task finished.
fn short_tasks(n: usize) -> Vec<Event> {
    (0..n)
        .flat_map(|i| {
            let id = format!("t{i}");
            [
                started(i as i64, &id, 1),
                finished(i as i64, &id, 1, Outcome::Exited { code: 0 }),
                task_finished(i as i64, &id, TaskState::Succeeded, None),
            ]
        })
        .collect()
}

/// The rows of `event_batches`: the bytes of their text, and of their packed lines if any.
fn stored(db: &Db) -> Vec<(usize, Option<usize>)> {
    let conn = rusqlite::Connection::open(db.path()).unwrap();
    conn.prepare(
        "SELECT length(CAST(events AS BLOB)), length(packed) FROM event_batches ORDER BY last_seq",
    )
    .unwrap()
    .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// A commit of many tasks' events is stored packed, far smaller than its lines, and reads back
/// as it was committed: whole, a page at a time, by kind, the last of a kind; a commit of one
/// task's is left as text.
#[test]
fn a_commit_of_many_events_is_packed_and_reads_back_as_committed() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_numbered_run("r1", 200)).unwrap();
    let run = run_id("r1");
    let events = short_tasks(200);
    store.commit(&run, &events[..3], &[]).unwrap();
    store.commit(&run, &events[3..], &[]).unwrap();

    let rows = stored(&db);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let (text, packed) = rows[0];
    assert!(
        text > 0 && packed.is_none(),
        "a few lines stay text: {rows:?}"
    );
    for &(text, packed) in &rows[1..] {
        let packed = packed.expect("packed");
        // 512 lines of about 110 bytes, or the 85 left.
        assert!(text == 0 && packed > 0 && packed < 4_000, "{rows:?}");
    }

    let read = store.events(&run, 0, 1_000).unwrap();
    let seqs: Vec<u64> = read.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=600).collect::<Vec<u64>>());
    let kinds: Vec<_> = read.iter().map(|e| e.kind.clone()).collect();
    let committed: Vec<_> = events.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, committed);
    // From the middle of a packed row, a page at a time.
    let page = store.events(&run, 300, 7).unwrap();
    assert_eq!(
        page.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (301..=307).collect::<Vec<u64>>()
    );
    assert_eq!(
        store
            .events_of_kind(&run, EventName::TaskFinished)
            .unwrap()
            .len(),
        200
    );
    let last = store
        .last_event_of_kind(&run, EventName::AttemptStarted)
        .unwrap()
        .unwrap();
    assert_eq!(last.seq, 598);
    assert_eq!(store.last_seq(&run).unwrap(), 600);
    assert_consistent(&store, &run);
}

/// A batch of many lines stored as text, as every batch was before version 14, reads as a
/// packed one does.
#[test]
fn a_long_batch_of_text_reads_as_before() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_numbered_run("r1", 100)).unwrap();
    let run = run_id("r1");
    store.commit(&run, &short_tasks(100), &[]).unwrap();
    let packed = store.events(&run, 0, 1_000).unwrap();
    drop(store);

    let conn = rusqlite::Connection::open(db.path()).unwrap();
    let text: String = packed
        .iter()
        .map(|e| {
            let json = serde_json::to_string(&e.kind).unwrap();
            format!("{}\t{}\t{}\t{json}\n", e.seq, e.at_ms, e.kind.name())
        })
        .collect();
    conn.execute_batch("DELETE FROM event_batches").unwrap();
    conn.execute(
        "INSERT INTO event_batches (run_id, last_seq, first_seq, events) VALUES ('r1', 300, 1, ?1)",
        [&text],
    )
    .unwrap();
    assert!(text.len() > 20_000);
    let store = db.open();
    assert_eq!(store.events(&run, 0, 1_000).unwrap(), packed);
    assert_consistent(&store, &run);
}

/// Packed lines that do not unpack, or a row with both text and packed lines, are errors that
/// say the events are stored damaged, never a log cut short.
#[test]
fn a_damaged_packed_batch_is_an_error() {
    for (events, packed) in [
        ("''", "X'28b52ffd00'"),
        ("''", "X'00'"),
        ("'1\t2\tk\t{}'", "X'00'"),
    ] {
        let db = Db::new();
        let store = db.open();
        store.create_run(&new_numbered_run("r1", 100)).unwrap();
        let run = run_id("r1");
        store.commit(&run, &short_tasks(100), &[]).unwrap();
        let conn = rusqlite::Connection::open(db.path()).unwrap();
        conn.execute_batch(&format!(
            "DELETE FROM event_batches;
             INSERT INTO event_batches (run_id, last_seq, first_seq, events, packed)
             VALUES ('r1', 300, 1, {events}, {packed});"
        ))
        .unwrap();
        let err = store.events(&run, 0, 10).unwrap_err();
        assert!(
            matches!(err, StoreError::BadEventBatch { last_seq: 300, .. }),
            "{events} {packed}: {err:?}"
        );
        assert!(store.check_consistency(&run).is_err());
    }
}

/// A graph's JSON of a few megabytes is stored in parts packed, a small one as it is; each
/// reads back as written, in order (the parts are inserted between the tasks' rows as they
/// come, and the run has enough tasks for that).
#[test]
fn a_large_graph_is_stored_packed_and_a_small_one_as_it_is() {
    let db = Db::new();
    let store = db.open();
    let tasks: Vec<String> = (0..40_000)
        .map(|i| format!(r#"{{"id":"t{i}","action":{{"kind":"noop"}},"backoff":1000}}"#))
        .collect();
    let json = format!(r#"{{"tasks":[{}]}}"#, tasks.join(","));
    assert!(json.len() > 2 << 20);
    let ids: Vec<String> = (0..20_000).map(|i| format!("t{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut large = new_run("r1", &ids);
    large.graph = &json;
    store.create_run(&large).unwrap();
    store.create_run(&new_run("r2", &["a"])).unwrap();

    let conn = rusqlite::Connection::open(db.path()).unwrap();
    let parts: Vec<(String, bool, usize)> = conn
        .prepare("SELECT run_id, packed, length(json) FROM run_graph_parts ORDER BY run_id, part")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let (packed, plain): (Vec<_>, Vec<_>) = parts.iter().partition(|(run, ..)| run == "r1");
    assert_eq!(packed.len(), 3, "{parts:?}");
    assert!(
        packed
            .iter()
            .all(|&&(_, packed, bytes)| packed && bytes < 200_000),
        "{parts:?}"
    );
    assert_eq!(plain, [&("r2".to_owned(), false, 12)]);
    assert!(store.graph_json(&run_id("r1")).unwrap().unwrap() == json);
    assert_eq!(
        store.graph_json(&run_id("r2")).unwrap().unwrap(),
        r#"{"tasks":[]}"#
    );

    // A part that does not unpack is an error, not a graph cut short.
    conn.execute_batch(
        "UPDATE run_graph_parts SET json = X'28b52ffd00' WHERE run_id = 'r1' AND part = 1",
    )
    .unwrap();
    let err = store.graph_json(&run_id("r1")).unwrap_err();
    assert!(matches!(err, StoreError::BadValue(_)), "{err:?}");
}
