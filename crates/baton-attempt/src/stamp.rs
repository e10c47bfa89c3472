//! Time stamps for events: milliseconds since the Unix epoch, as the store keeps them.

use baton_model::{Event, EventKind};

pub use baton_model::now_ms;

/// `kind` as it happened now; its sequence number is the store's to give.
pub fn event(kind: EventKind) -> Event {
    Event {
        seq: 0,
        at_ms: now_ms(),
        kind,
    }
}
