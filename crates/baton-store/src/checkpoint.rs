//! Checkpoints on a thread of their own while a run is driven.
//!
//! SQLite copies the WAL back into the database file inside the commit that takes the WAL past
//! 1000 pages: that commit then takes 3–10 ms instead of a few hundred microseconds, twice
//! fsyncing, and the dispatcher waits through it with a slot free and a task ready (measured on
//! the 10,000-task graph: 5% of the commits took 40% of the commit time; docs/PERFORMANCE.md).
//! Here the writer connection only notes how long its WAL is after each commit (SQLite's WAL
//! hook, which replaces the automatic checkpoint), and a thread with a connection of its own runs
//! the PASSIVE checkpoint, which never blocks the writer, while the dispatcher goes on.

use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::{Connection, ffi};

/// How much the WAL grows between two wakes of the thread (see [`WakeAt`]): SQLite's own
/// default threshold, 1000 pages of 4 KiB (250 of the 16 KiB pages of a database made now).
const WAKE_AT_BYTES: i64 = 4_096_000;

/// The WAL's size at which the writer checkpoints by itself after all, if the thread has
/// fallen that far behind (it cannot keep up, or it failed): the WAL must not grow without
/// bound.
const WRITER_CHECKPOINTS_AT_BYTES: i64 = 16 * WAKE_AT_BYTES;

/// What the writer's WAL hook and the thread share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Checkpoints the thread ran that copied the whole WAL back.
    completed: AtomicU64,
    /// When the writer's WAL hook wakes the thread.
    wake_at: WakeAt,
    /// [`WRITER_CHECKPOINTS_AT_BYTES`] in the database's pages.
    writer_checkpoints_at_pages: c_int,
}

/// The thread is woken each time the WAL has grown by [`WAKE_AT_BYTES`] since it was last
/// woken, not after every commit once it is that long: while a run commits without a pause,
/// a checkpoint never catches up with the writer, the WAL never starts over, and it stays
/// longer than that (to [`WRITER_CHECKPOINTS_AT_BYTES`]). Woken after every commit, the
/// thread ran a checkpoint and its two `fsync`s per commit (a 100,000-task run: about a
/// thousand), and its CPU was taken from the writer's on two cores.
#[derive(Default)]
struct WakeAt {
    /// [`WAKE_AT_BYTES`] in the database's pages.
    every: c_int,
    /// The WAL's length in pages at which the thread is woken next. Only the writer's WAL
    /// hook reads and writes it.
    next: AtomicI32,
}

impl WakeAt {
    fn new(every: c_int) -> Self {
        Self {
            every,
            next: AtomicI32::new(every),
        }
    }

    /// Whether the WAL, `pages` long after a commit, calls for a checkpoint now.
    fn due(&self, pages: c_int) -> bool {
        let mut next = self.next.load(Ordering::Relaxed);
        if pages < next.saturating_sub(self.every) {
            // The WAL started over from its beginning.
            next = self.every;
        }
        let due = pages >= next;
        if due {
            next = pages.saturating_add(self.every);
        }
        self.next.store(next, Ordering::Relaxed);
        due
    }
}

#[derive(Default)]
struct State {
    due: bool,
    stop: bool,
}

/// Background checkpoints for one store's writer connection, until dropped.
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    /// The reference the writer's WAL hook holds, released when the hook is removed.
    hook_data: *const Shared,
    thread: Option<JoinHandle<()>>,
}

// SAFETY: `hook_data` is an `Arc<Shared>` turned raw (and `Shared` is Sync); it is only turned
// back into an `Arc` once, by `uninstall`.
unsafe impl Send for Checkpointer {}

impl Checkpointer {
    /// Starts the thread, with a connection of its own to the database at `path`, and hooks
    /// `writer`'s commits. `None` if either cannot be had: SQLite then checkpoints inside
    /// commits, as it does by default.
    pub(crate) fn start(writer: &Connection, path: &Path) -> Option<Self> {
        let own = Connection::open(path).ok()?;
        // Checkpoints fsync at NORMAL and FULL alike.
        own.pragma_update(None, "synchronous", "NORMAL").ok()?;
        let page_size: i64 = writer
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .ok()?;
        let pages = |bytes: i64| c_int::try_from(bytes / page_size.max(512)).unwrap_or(c_int::MAX);
        let shared = Arc::new(Shared {
            wake_at: WakeAt::new(pages(WAKE_AT_BYTES)),
            writer_checkpoints_at_pages: pages(WRITER_CHECKPOINTS_AT_BYTES),
            ..Shared::default()
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("checkpoint".to_owned())
                .spawn(move || run(&own, &shared))
                .ok()?
        };
        let hook_data = Arc::into_raw(Arc::clone(&shared));
        // SAFETY: the connection handle is valid while `writer` lives; `hook_data` stays valid
        // until `uninstall` removes the hook and then releases it.
        unsafe {
            ffi::sqlite3_wal_hook(writer.handle(), Some(wal_hook), hook_data.cast_mut().cast());
        }
        Some(Self {
            shared,
            hook_data,
            thread: Some(thread),
        })
    }

    /// How many checkpoints the thread completed so far.
    pub(crate) fn completed(&self) -> u64 {
        self.shared.completed.load(Ordering::Relaxed)
    }

    /// Removes the hook from `writer` (SQLite checkpoints by itself again) and stops the
    /// thread. Must be given the connection `start` hooked.
    pub(crate) fn stop(mut self, writer: &Connection) {
        // SAFETY: the same handle `start` hooked; setting the automatic checkpoint replaces
        // the hook, after which SQLite no longer holds `hook_data`.
        unsafe {
            ffi::sqlite3_wal_autocheckpoint(writer.handle(), self.shared.wake_at.every);
            drop(Arc::from_raw(self.hook_data));
        }
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: a PASSIVE checkpoint each time the writer says its WAL is long.
fn run(conn: &Connection, shared: &Shared) {
    loop {
        {
            let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            while !state.due && !state.stop {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.stop {
                return;
            }
            state.due = false;
        }
        // A failure changes nothing for correctness: the WAL only grows until the writer
        // checkpoints by itself.
        let busy = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            // (busy, pages in the WAL, pages copied back)
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        });
        if matches!(busy, Ok((0, log, copied)) if log == copied) {
            shared.completed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Called by SQLite after each commit of the writer, with the pages now in the WAL.
///
/// # Safety
///
/// Only for SQLite, as the WAL hook `Checkpointer::start` installs: `data` must point to a live
/// `Shared` (the reference `start` leaked, released only once the hook is removed), and `db`
/// and `name` must be the connection and database name SQLite calls the hook with.
unsafe extern "C" fn wal_hook(
    data: *mut c_void,
    db: *mut ffi::sqlite3,
    name: *const c_char,
    pages: c_int,
) -> c_int {
    // SAFETY: `data` is the `Shared` that `start` registered, alive while the hook is.
    let shared = unsafe { &*data.cast::<Shared>() };
    if pages >= shared.writer_checkpoints_at_pages {
        // SAFETY: SQLite passes its own valid handle and database name; checkpointing from
        // the WAL hook is what its automatic checkpoint does.
        unsafe {
            ffi::sqlite3_wal_checkpoint_v2(
                db,
                name,
                ffi::SQLITE_CHECKPOINT_PASSIVE,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
        return ffi::SQLITE_OK;
    }
    if shared.wake_at.due(pages) {
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !state.due {
            state.due = true;
            shared.wake.notify_one();
        }
    }
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::WakeAt;

    /// Woken once per [`super::WAKE_AT_BYTES`] of growth, and again from the start once the
    /// WAL started over.
    #[test]
    fn the_thread_is_woken_as_the_wal_grows_not_at_every_commit() {
        let wake = WakeAt::new(250);
        let woken: Vec<i32> = [10, 200, 260, 300, 400, 509, 510, 700, 20, 240, 250, 251]
            .into_iter()
            .filter(|&pages| wake.due(pages))
            .collect();
        assert_eq!(woken, [260, 510, 250]);
    }
}
