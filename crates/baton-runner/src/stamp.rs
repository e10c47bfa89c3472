//! Time stamps for events: milliseconds since the Unix epoch, as the store keeps them.

use std::time::{SystemTime, UNIX_EPOCH};

use baton_model::{Event, EventKind};

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `kind` as it happened now; its sequence number is the store's to give.
pub(crate) fn event(kind: EventKind) -> Event {
    Event {
        seq: 0,
        at_ms: now_ms(),
        kind,
    }
}
