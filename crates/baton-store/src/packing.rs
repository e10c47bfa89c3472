//! What the store writes in bulk, compressed (schema version 14): a commit's batches of events
//! (`event_batches.packed`) and the parts of a run's graph (`run_graph_parts.packed`). Both are
//! JSON that repeats itself (a 100,000-task run's events: 33 MB of lines, 1.3 MB packed; its
//! graph: 13 MB), written once, read rarely, and otherwise written to the WAL and copied back
//! by checkpoints page by page.

/// The fewest bytes packed: fewer (a commit of a few tasks' events, a small graph) stay as they
/// are, readable in SQL.
pub(crate) const PACKED_FROM: usize = 1024;

/// zstd's fastest level: a 100,000-task run's 33 MB of events in 40 ms, to 1.3 MB.
const LEVEL: i32 = 1;

/// `bytes` as one zstd frame, when there are [`PACKED_FROM`] of them or more and zstd can have
/// the memory it asks for; `None`: stored as they are (packing saves space, it holds nothing).
pub(crate) fn pack(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < PACKED_FROM {
        return None;
    }
    zstd::bulk::compress(bytes, LEVEL).ok()
}

/// The bytes [`pack`] packed; an error for any other.
pub(crate) fn unpack(packed: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::decode_all(packed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_packed_unpacks_as_it_was_and_little_is_left_alone() {
        let lines: Vec<u8> = (0..500)
            .flat_map(|i| format!("{i}\t0\tattempt-started\t{{\"task\":\"t{i}\"}}\n").into_bytes())
            .collect();
        let packed = pack(&lines).unwrap();
        assert!(packed.len() * 4 < lines.len(), "{}", packed.len());
        assert_eq!(unpack(&packed).unwrap(), lines);
        assert_eq!(pack(&lines[..PACKED_FROM - 1]), None);
        assert!(unpack(b"not a frame").is_err());
        assert!(unpack(&packed[..packed.len() / 2]).is_err());
    }
}
