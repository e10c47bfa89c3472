//! Attempts' logs in the store (schema version 3): a worker ships what its attempts write, so
//! that `baton logs` reads them from any machine. What is shipped was redacted as it was
//! written (log files hold only redacted output).

use baton_model::RunId;

use super::PgStore;
use crate::{StoreError, StoredLog};

/// Most bytes of one piece.
pub const LOG_PIECE: usize = 256 * 1024;

/// [`crate::WorkQueue::ship_log`] for `store`.
pub(super) fn ship(
    store: &PgStore,
    run: &RunId,
    file: &str,
    offset: u64,
    bytes: Vec<u8>,
    modified_ms: i64,
) -> Result<(), StoreError> {
    let (run, file) = (run.clone(), file.to_owned());
    store.conn.call_session(move |session| {
        let mut tx = session.client.transaction()?;
        let offset = offset as i64;
        let size = offset + bytes.len() as i64;
        tx.execute(
            "DELETE FROM attempt_log_pieces WHERE run_id = $1 AND file = $2 AND \"offset\" >= $3",
            &[&run.as_str(), &file, &offset],
        )?;
        if !bytes.is_empty() {
            tx.execute(
                "INSERT INTO attempt_log_pieces (run_id, file, \"offset\", bytes) VALUES ($1, $2, $3, $4)",
                &[&run.as_str(), &file, &offset, &bytes],
            )?;
        }
        tx.execute(
            "INSERT INTO attempt_log_files (run_id, file, size, modified_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (run_id, file) DO UPDATE SET size = $3, modified_ms = $4",
            &[&run.as_str(), &file, &size, &modified_ms],
        )?;
        tx.commit()?;
        Ok(())
    })
}

pub(super) fn files(
    store: &PgStore,
    run: &RunId,
    prefix: &str,
) -> Result<Vec<StoredLog>, StoreError> {
    let (run, pattern) = (run.clone(), format!("{}%", like_escaped(prefix)));
    store.conn.call(move |client| {
        let rows = client.query(
            "SELECT file, size, modified_ms FROM attempt_log_files \
             WHERE run_id = $1 AND file LIKE $2 ORDER BY modified_ms, file",
            &[&run.as_str(), &pattern],
        )?;
        Ok(rows
            .iter()
            .map(|row| StoredLog {
                file: row.get(0),
                size: row.get::<_, i64>(1).max(0) as u64,
                modified_ms: row.get(2),
            })
            .collect())
    })
}

pub(super) fn bytes(
    store: &PgStore,
    run: &RunId,
    file: &str,
    from: u64,
) -> Result<Vec<u8>, StoreError> {
    let (run, file) = (run.clone(), file.to_owned());
    store.conn.call(move |client| {
        let size: Option<i64> = client
            .query_opt(
                "SELECT size FROM attempt_log_files WHERE run_id = $1 AND file = $2",
                &[&run.as_str(), &file],
            )?
            .map(|row| row.get(0));
        let Some(size) = size else {
            return Ok(Vec::new());
        };
        let from = from as i64;
        let mut bytes = Vec::new();
        for row in client.query(
            "SELECT \"offset\", bytes FROM attempt_log_pieces WHERE run_id = $1 AND file = $2 \
             AND \"offset\" < $3 AND \"offset\" + length(bytes) > $4 ORDER BY \"offset\"",
            &[&run.as_str(), &file, &size, &from],
        )? {
            let offset: i64 = row.get(0);
            let piece: Vec<u8> = row.get(1);
            let start = (from - offset).max(0) as usize;
            let end = ((size - offset) as usize).min(piece.len());
            if start < end {
                bytes.extend_from_slice(&piece[start..end]);
            }
        }
        Ok(bytes)
    })
}

/// `text` as a literal in a `LIKE` pattern.
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}
