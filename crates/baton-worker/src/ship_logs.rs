//! An attempt's logs, shipped to the store as they grow (`baton logs` on another machine).

use std::collections::HashMap;
use std::path::PathBuf;

use baton_model::RunId;
use baton_store::QueueStore;

/// Ships an attempt's log files (`TASK.ATTEMPT.*` in the run's `logs/`) to the store as they
/// grow. A file rewritten from its start (a check's log, each fix round) is shipped again
/// from 0: it is told from an append by its first bytes, or the last ones shipped, changing
/// (a rewrite identical in both places is taken for an append: its log may then be wrong in
/// the store until the attempt's last round, which every later one rewrites again).
pub(super) struct LogShipper {
    run: RunId,
    dir: PathBuf,
    prefix: String,
    /// Per file: bytes shipped, the first of them and the last.
    shipped: HashMap<String, (u64, Vec<u8>, Vec<u8>)>,
}

/// How many of a file's first bytes tell a rewrite from an append.
const HEAD: usize = 4096;

impl LogShipper {
    pub(super) fn new(run: &RunId, dir: PathBuf, prefix: String) -> Self {
        Self {
            run: run.clone(),
            dir,
            prefix,
            shipped: HashMap::new(),
        }
    }

    /// Ships what is new; a store that cannot take it now gets it at the next call.
    pub(super) fn ship(&mut self, store: &dyn QueueStore) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !name.starts_with(&self.prefix) {
                continue;
            }
            let Ok(mut file) = std::fs::File::open(entry.path()) else {
                continue;
            };
            let Ok(meta) = file.metadata() else { continue };
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            let mut head = Vec::with_capacity(HEAD);
            if (&mut file)
                .take(HEAD as u64)
                .read_to_end(&mut head)
                .is_err()
            {
                continue;
            }
            let (mut at, old_head, old_tail) = self.shipped.remove(&name).unwrap_or_default();
            let n = old_head.len().min(head.len());
            if meta.len() < at || old_head[..n] != head[..n] || tail(&mut file, at) != old_tail {
                at = 0;
            }
            let mut ok = file.seek(SeekFrom::Start(at)).is_ok();
            while ok && at < meta.len() {
                let want = (meta.len() - at).min(baton_store::LOG_PIECE as u64);
                let mut piece = Vec::with_capacity(want as usize);
                ok = (&mut file).take(want).read_to_end(&mut piece).is_ok() && !piece.is_empty();
                if !ok {
                    break;
                }
                let len = piece.len() as u64;
                ok = store
                    .ship_log(&self.run, &name, at, piece, modified_ms)
                    .is_ok();
                if ok {
                    at += len;
                }
            }
            let last = tail(&mut file, at);
            self.shipped.insert(name, (at, head, last));
        }
    }
}

/// The bytes just before `at`: with the first ones, what tells a file rewritten from its start
/// (and grown past where it was) from one appended to.
fn tail(file: &mut std::fs::File, at: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let from = at.saturating_sub(TAIL);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_ok() {
        let _ = file.take(at - from).read_to_end(&mut bytes);
    }
    bytes
}

/// How many bytes before the shipped end are compared.
const TAIL: u64 = 64;
