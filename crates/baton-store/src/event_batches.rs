//! The events every attempt writes, stored a commit's at a time (schema version 13,
//! `migrations/v13_event_batches.sql`): a row of `event_batches` holds a commit's events of
//! the [batched](is_batched) kinds, a line each — `seq`, `at_ms`, kind and JSON, separated by
//! tabs (at most [`PER_ROW`] to a row). The other kinds are rows of `events`, as every event
//! was before. A run's log is the two merged by `seq`: `read.rs` reads the rows and merges in
//! what this module reads from the batches; `consistency.rs` reads both.
//!
//! A row's lines of [`PACKED_FROM`](crate::packing::PACKED_FROM) bytes or more are stored
//! compressed (schema version 14, `packing.rs`): a zstd frame in `packed`, `events` empty.

use std::borrow::Cow;
use std::io::Write as _;

use baton_model::{Event, EventKind, EventName, RunId};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::StoreError;

/// The `seq` of run `?1`'s last event (0 when it has none), as an SQL expression: a lookup at
/// the end of an index of each table.
macro_rules! last_seq_of_run_1 {
    () => {
        "MAX((SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1), \
         (SELECT COALESCE(MAX(last_seq), 0) FROM event_batches WHERE run_id = ?1))"
    };
}
pub(crate) use last_seq_of_run_1;

/// Whether events of `kind` are stored in batches: the kinds every attempt writes (or every
/// tool call). Readers look up the others by kind (`events_of_rare_kinds`).
pub(crate) fn is_batched(kind: EventName) -> bool {
    matches!(
        kind,
        EventName::AttemptStarted
            | EventName::AttemptFinished
            | EventName::TaskFinished
            | EventName::AgentActivity
    )
}

/// The most events one row holds. A reader paging from the middle of a row reads the row
/// again for each page (the MCP server's pages are 50 events): a commit's 4,096 events in one
/// row were half a megabyte a page. A row of 512 is 60 kB, and still one row where there were
/// 512.
pub(crate) const PER_ROW: usize = 512;

/// One commit's batched events, as they are written into its rows.
#[derive(Default)]
pub(crate) struct Batch {
    text: Vec<u8>,
    /// Each row's first and last `seq` and where its lines end in `text`.
    rows: Vec<(u64, u64, usize)>,
    /// Lines in the last row.
    lines: usize,
    /// Each row's lines compressed, by row, once [`Batch::pack`] has run: `None` for a row
    /// stored as text.
    packed: Vec<Option<Vec<u8>>>,
}

impl Batch {
    /// `events`, each numbered, in order, packed: all of what a commit's batched events cost
    /// before their rows are inserted (it runs beside the commit's other statements).
    pub(crate) fn of(events: &[(u64, &Event)]) -> Result<Self, StoreError> {
        let mut batch = Self {
            // Most lines of a short task's events are under 128 bytes.
            text: Vec::with_capacity(events.len() * 128),
            ..Self::default()
        };
        for &(seq, event) in events {
            batch.push(seq, event)?;
        }
        batch.pack();
        Ok(batch)
    }

    /// Compresses each row's lines that [`crate::packing`] packs.
    fn pack(&mut self) {
        let mut start = 0;
        self.packed = self
            .rows
            .iter()
            .map(|&(_, _, end)| {
                let lines = &self.text[start..end];
                start = end;
                crate::packing::pack(lines)
            })
            .collect();
    }

    /// Appends `event`, numbered `seq` (after every event pushed before).
    pub(crate) fn push(&mut self, seq: u64, event: &Event) -> Result<(), StoreError> {
        // Writing into a Vec fails only in the JSON encoder.
        let _ = write!(self.text, "{seq}\t{}\t{}\t", event.at_ms, event.kind.name());
        serde_json::to_writer(&mut self.text, &event.kind).map_err(StoreError::Encode)?;
        self.text.push(b'\n');
        match self.rows.last_mut() {
            Some((_, last, end)) if self.lines < PER_ROW => {
                (*last, *end) = (seq, self.text.len());
                self.lines += 1;
            }
            _ => {
                self.rows.push((seq, seq, self.text.len()));
                self.lines = 1;
            }
        }
        Ok(())
    }

    /// Inserts the batch as the run's rows, if it holds any event.
    pub(crate) fn insert(&self, tx: &Transaction<'_>, run: &RunId) -> Result<(), StoreError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let text = std::str::from_utf8(&self.text).expect("numbers, names and JSON are UTF-8");
        let mut insert = tx.prepare_cached(
            "INSERT INTO event_batches (run_id, last_seq, first_seq, events, packed) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let mut start = 0;
        for (i, &(first_seq, last_seq, end)) in self.rows.iter().enumerate() {
            let packed = self.packed.get(i).and_then(Option::as_deref);
            let lines = if packed.is_some() {
                ""
            } else {
                &text[start..end]
            };
            insert.execute(params![run.as_str(), last_seq, first_seq, lines, packed])?;
            start = end;
        }
        Ok(())
    }
}

/// The lines of a row of `event_batches`, read from its text or unpacked.
pub(crate) struct RowLines<'r> {
    last_seq: u64,
    text: Cow<'r, str>,
}

impl<'r> RowLines<'r> {
    /// The lines of a row of `last_seq, events, packed` of `event_batches`.
    pub(crate) fn of(row: &'r rusqlite::Row<'_>, run: &RunId) -> Result<Self, StoreError> {
        let last_seq: u64 = row.get(0)?;
        let damaged = || StoreError::BadEventBatch {
            run: run.clone(),
            last_seq,
        };
        let text = row.get_ref(1)?.as_str().map_err(|_| damaged())?;
        let text = match row.get_ref(2)?.as_blob_or_null().map_err(|_| damaged())? {
            None => Cow::Borrowed(text),
            // Both: which is the batch is not known.
            Some(_) if !text.is_empty() => return Err(damaged()),
            Some(packed) => {
                let lines = crate::packing::unpack(packed).map_err(|_| damaged())?;
                Cow::Owned(String::from_utf8(lines).map_err(|_| damaged())?)
            }
        };
        Ok(Self { last_seq, text })
    }

    /// The row's lines as text.
    #[cfg(test)]
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The row's lines, in order; a line that is not a batch's line is an error.
    pub(crate) fn lines<'a>(
        &'a self,
        run: &'a RunId,
    ) -> impl Iterator<Item = Result<Line<'a>, StoreError>> + 'a {
        lines(&self.text).map(move |line| {
            line.ok_or_else(|| StoreError::BadEventBatch {
                run: run.clone(),
                last_seq: self.last_seq,
            })
        })
    }
}

/// An event as a batch holds it, not yet decoded.
pub(crate) struct Line<'a> {
    pub(crate) seq: u64,
    pub(crate) at_ms: i64,
    pub(crate) kind: &'a str,
    pub(crate) data: &'a str,
}

impl Line<'_> {
    fn decode(&self, run: &RunId) -> Result<Event, StoreError> {
        let kind: EventKind =
            serde_json::from_str(self.data).map_err(|source| StoreError::Decode {
                run: run.clone(),
                seq: self.seq,
                source,
            })?;
        Ok(Event {
            seq: self.seq,
            at_ms: self.at_ms,
            kind,
        })
    }
}

/// The lines of a batch's text, in order; `None` for one that is not a line a batch holds.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = Option<Line<'_>>> {
    text.split_terminator('\n').map(|line| {
        let mut fields = line.splitn(4, '\t');
        Some(Line {
            seq: fields.next()?.parse().ok()?,
            at_ms: fields.next()?.parse().ok()?,
            kind: fields.next()?,
            data: fields.next()?,
        })
    })
}

/// The run's batched events with `seq > after`, in order: every one, or those of `kind`; at
/// most `limit`.
pub(crate) fn after(
    tx: &Transaction<'_>,
    run: &RunId,
    after: u64,
    kind: Option<EventName>,
    limit: Option<usize>,
) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    if kind.is_some_and(|kind| !is_batched(kind)) || limit == Some(0) {
        return Ok(events);
    }
    let mut statement = tx.prepare_cached(
        "SELECT last_seq, events, packed FROM event_batches \
         WHERE run_id = ?1 AND last_seq > ?2 ORDER BY last_seq",
    )?;
    let mut rows = statement.query(params![run.as_str(), after])?;
    while let Some(row) = rows.next()? {
        let row = RowLines::of(row, run)?;
        for line in row.lines(run) {
            let line = line?;
            if line.seq <= after || kind.is_some_and(|kind| kind.as_str() != line.kind) {
                continue;
            }
            events.push(line.decode(run)?);
            if limit.is_some_and(|limit| events.len() >= limit) {
                return Ok(events);
            }
        }
    }
    Ok(events)
}

/// The run's last batched event of `kind`.
pub(crate) fn last_of_kind(
    tx: &Transaction<'_>,
    run: &RunId,
    kind: EventName,
) -> Result<Option<Event>, StoreError> {
    if !is_batched(kind) {
        return Ok(None);
    }
    let mut statement = tx.prepare_cached(
        "SELECT last_seq, events, packed FROM event_batches \
         WHERE run_id = ?1 ORDER BY last_seq DESC",
    )?;
    let mut rows = statement.query(params![run.as_str()])?;
    while let Some(row) = rows.next()? {
        let row = RowLines::of(row, run)?;
        let mut found = None;
        for line in row.lines(run) {
            let line = line?;
            if line.kind == kind.as_str() {
                found = Some(line);
            }
        }
        if let Some(line) = found {
            return line.decode(run).map(Some);
        }
    }
    Ok(None)
}

/// The `seq` of the run's last event, rows and batches; 0 when it has none.
pub(crate) fn last_seq(tx: &Transaction<'_>, run: &RunId) -> Result<u64, StoreError> {
    Ok(tx
        .prepare_cached(concat!("SELECT ", last_seq_of_run_1!()))?
        .query_row([run.as_str()], |row| row.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Two runs of events, each in order, as one in order; at most `limit`.
pub(crate) fn merged(rows: Vec<Event>, batched: Vec<Event>, limit: Option<usize>) -> Vec<Event> {
    let mut events = if batched.is_empty() {
        rows
    } else if rows.is_empty() {
        batched
    } else {
        let mut events = Vec::with_capacity(rows.len() + batched.len());
        let (mut rows, mut batched) = (rows.into_iter().peekable(), batched.into_iter().peekable());
        loop {
            let next = match (rows.peek(), batched.peek()) {
                (Some(a), Some(b)) if a.seq <= b.seq => rows.next(),
                (Some(_), Some(_)) => batched.next(),
                (Some(_), None) => rows.next(),
                (None, _) => batched.next(),
            };
            match next {
                Some(event) => events.push(event),
                None => break,
            }
        }
        events
    };
    if let Some(limit) = limit {
        events.truncate(limit);
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_model::{Outcome, TaskId, TaskState};

    fn started(task: &str) -> EventKind {
        EventKind::AttemptStarted {
            task: TaskId::new(task).unwrap(),
            attempt: 1,
            pid: None,
        }
    }

    /// What a batch holds reads back as it was written, whatever its strings hold (a tab, a
    /// newline and a quote in an outcome's message are escaped by JSON).
    #[test]
    fn a_batch_reads_back_as_written() {
        let events = [
            Event {
                seq: 7,
                at_ms: -3,
                kind: started("a"),
            },
            Event {
                seq: 9,
                at_ms: 1_796_350_738_191,
                kind: EventKind::AttemptFinished {
                    task: TaskId::new("a").unwrap(),
                    attempt: 1,
                    outcome: Outcome::SpawnFailed {
                        error: "no\tsuch\nfile \"x\"".into(),
                    },
                    duration_ms: 4,
                    agent: None,
                    containment: None,
                },
            },
            Event {
                seq: 10,
                at_ms: 5,
                kind: EventKind::TaskFinished {
                    task: TaskId::new("a").unwrap(),
                    state: TaskState::Failed,
                    reason: Some("why\n".into()),
                },
            },
        ];
        let mut batch = Batch::default();
        for event in &events {
            batch.push(event.seq, event).unwrap();
        }
        let text = std::str::from_utf8(&batch.text).unwrap();
        assert_eq!(batch.rows, [(7, 10, text.len())]);
        assert_eq!(text.lines().count(), 3, "{text}");
        let run = RunId::new("r").unwrap();
        let read: Vec<Event> = lines(text)
            .map(|line| line.unwrap().decode(&run).unwrap())
            .collect();
        assert_eq!(read, events);
    }

    /// A commit's events go [`PER_ROW`] to a row, each row's lines whole and its bounds its
    /// first and last line's.
    #[test]
    fn a_large_commit_is_rows_of_per_row_events() {
        let events: Vec<Event> = (1..=2 * PER_ROW as u64 + 6)
            .map(|seq| Event {
                seq,
                at_ms: 0,
                kind: started(&format!("t{seq}")),
            })
            .collect();
        let numbered: Vec<(u64, &Event)> = events.iter().map(|e| (e.seq + 100, e)).collect();
        let batch = Batch::of(&numbered).unwrap();
        let bounds: Vec<(u64, u64)> = batch.rows.iter().map(|&(f, l, _)| (f, l)).collect();
        let per_row = PER_ROW as u64;
        assert_eq!(
            bounds,
            [
                (101, 100 + per_row),
                (101 + per_row, 100 + 2 * per_row),
                (101 + 2 * per_row, 106 + 2 * per_row)
            ]
        );
        let text = std::str::from_utf8(&batch.text).unwrap();
        let mut start = 0;
        for &(first, last, end) in &batch.rows {
            let row: Vec<u64> = lines(&text[start..end]).map(|l| l.unwrap().seq).collect();
            assert_eq!(row, (first..=last).collect::<Vec<_>>());
            start = end;
        }
        assert_eq!(start, text.len());
    }

    #[test]
    fn a_line_that_is_not_a_batch_line_is_found() {
        for bad in ["", "1\t2\tattempt-started", "x\t2\tk\t{}", "1\tx\tk\t{}"] {
            assert!(
                lines(&format!("{bad}\n")).next().unwrap().is_none(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn merged_keeps_the_order_of_seq_and_the_limit() {
        let at = |seq| Event {
            seq,
            at_ms: 0,
            kind: started("t"),
        };
        let seqs = |events: Vec<Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
        let rows = || vec![at(1), at(4), at(5)];
        let batched = || vec![at(2), at(3), at(6)];
        assert_eq!(seqs(merged(rows(), batched(), None)), [1, 2, 3, 4, 5, 6]);
        assert_eq!(seqs(merged(rows(), batched(), Some(4))), [1, 2, 3, 4]);
        assert_eq!(seqs(merged(Vec::new(), batched(), Some(2))), [2, 3]);
        assert_eq!(seqs(merged(rows(), Vec::new(), None)), [1, 4, 5]);
    }
}
