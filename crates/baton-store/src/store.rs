use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};

use crate::Durability;
use crate::StoreError;
use crate::checkpoint::Checkpointer;
use crate::migrate::{MIGRATIONS, SCHEMA_VERSION, migrate, user_version};
use crate::private_fs;
use crate::task_index::TaskIndex;

/// How long a statement waits for another process's write lock before giving up as busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Enough for every statement the store prepares, so none is ever re-parsed.
const STATEMENT_CACHE: usize = 64;

/// The page size of a database this build makes (one made before keeps its own: 4 KiB, as
/// SQLite's default, for every database made before 3ac6c6e and between 5194273 and 86edb88).
/// A commit of many short tasks rewrites pages of `tasks` and `attempts` and appends to the
/// WAL a header and a page per page dirtied, each a system call: with pages of 16 KiB a
/// 100,000-task run made a fifth of the calls, and ran 6% faster (8 KiB: 3%; docs/PERFORMANCE.md).
const PAGE_SIZE: i64 = 16_384;

/// The SQLite run database.
///
/// One connection, behind a mutex so that the store can be shared between threads. Every write
/// is one `BEGIN IMMEDIATE` transaction: it takes the write lock first, so it waits (up to the
/// busy timeout) for another writer instead of failing the way a deferred transaction that read
/// and then tries to write does. Readers in other processes open their own store (see
/// [`SqliteStore::open_readonly`]); in WAL mode they read a snapshot and never block the writer
/// nor wait for it.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// How it was opened for writing; `None` if read-only.
    durability: Option<Durability>,
    /// Checkpoints on a thread of their own, while a run is driven.
    checkpointer: Mutex<Option<Checkpointer>>,
    /// The file opened for writing (device, inode): a commit into a file that is no longer at
    /// the path would be lost the moment the store is closed.
    identity: Option<(u64, u64)>,
    /// Where the tasks of the run last committed to are: taken by each commit before the
    /// connection (and never while holding it).
    pub(crate) task_rows: Mutex<TaskIndex>,
    /// Read-only connections for a read made while `conn` is in use on another thread (a run's
    /// result reads its tasks and its attempts at once): opened when first wanted, then kept;
    /// at most [`SPARE_CONNECTIONS`] (the dashboard reads on as many threads as it has
    /// requests).
    spare: Mutex<Spares>,
}

/// The most spare read connections a store opens; a read beyond them waits for one.
const SPARE_CONNECTIONS: usize = 3;

#[derive(Default)]
struct Spares {
    idle: Vec<Connection>,
    opened: usize,
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // The hook must be gone before the connection closes.
        self.stop_background_checkpoints();
        // Before the connection: the last one to close folds the WAL back into the database
        // and removes it, which a read-only one cannot do.
        self.spare
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .idle
            .clear();
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens the database for reading and writing, creating it if needed (its directory 0700, the
    /// file 0600: outputs may hold secrets) and migrating it to the current schema. Durability
    /// comes from `BATON_SYNC` (see [`Durability`]).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::from_env()?)
    }

    pub fn open_with(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        Self::open_migrated(path, durability, MIGRATIONS)
    }

    /// Opens knowing only `migrations`, so that tests can build databases of older versions.
    pub(crate) fn open_migrated(
        path: &Path,
        durability: Durability,
        migrations: &[&str],
    ) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            private_fs::create_dir(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        private_fs::create_file(path).map_err(|source| StoreError::CreateFile {
            path: path.to_owned(),
            source,
        })?;
        let conn = Connection::open(path).map_err(|source| open_error(path, source))?;
        // SQLite opens a file it may not write read-only without saying so; a store opened to
        // record must say so now, not at its first commit.
        if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            return Err(open_error(
                path,
                rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                    Some("the database file cannot be written".to_owned()),
                ),
            ));
        }
        configure(&conn, Some(durability)).map_err(|source| open_error(path, source))?;
        migrate(&conn, path, migrations).map_err(|err| err.at(path))?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
            durability: Some(durability),
            checkpointer: Mutex::new(None),
            task_rows: Mutex::default(),
            spare: Mutex::default(),
            identity: identity(path),
        })
    }

    /// A second connection to the same database, opened the same way: for a thread that
    /// writes while this one goes on (a run's commits). Read-only stays read-only.
    ///
    /// The run this one's task index is of goes with it: the other handle is the one that
    /// commits (a run's recorder), and this one reads its rows back if it commits again.
    pub fn open_another(&self) -> Result<Self, StoreError> {
        let another = match self.durability {
            Some(durability) => Self::open_with(&self.path, durability),
            None => Self::open_readonly(&self.path),
        }?;
        let mut rows = self
            .task_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *another
            .task_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = std::mem::take(&mut rows);
        Ok(another)
    }

    /// Opens an existing database for reading only: `baton status`, `logs`, `events`. Never
    /// migrates, so it refuses a database whose schema is not the current one.
    ///
    /// A reader of a WAL database needs its `-shm` file, and creates it when it is missing (the
    /// last connection to close removes it). Where it cannot (a read-only directory or mount),
    /// SQLite cannot open the database at all; it is then opened `immutable` (SQLite's URI
    /// parameter: no locks, no WAL), which is exact when no `-wal` file holds commits: nothing
    /// can be changing a database whose directory nobody can write. A `-wal` file with commits
    /// in it would be missed, so that database is refused, saying so.
    pub fn open_readonly(path: &Path) -> Result<Self, StoreError> {
        Self::open_readonly_at_current(path)
    }

    /// [`SqliteStore::open_readonly`], migrating first a database whose schema is older than
    /// this build's (one an older baton wrote): a reader after an upgrade reads instead of
    /// asking for a write first. The migration is a write, made once, in one transaction; a
    /// database this process cannot write stays refused, saying it is old.
    pub fn open_readonly_upgrading(path: &Path) -> Result<Self, StoreError> {
        match Self::open_readonly_at_current(path) {
            Err(StoreError::SchemaTooOld { found, known, .. }) if found > 0 => {
                drop(Self::open(path).map_err(|_| StoreError::SchemaTooOld {
                    path: path.to_owned(),
                    found,
                    known,
                })?);
                Self::open_readonly_at_current(path)
            }
            opened => opened,
        }
    }

    fn open_readonly_at_current(path: &Path) -> Result<Self, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let connect = |target: &Path| -> rusqlite::Result<(Connection, u32)> {
            let conn = Connection::open_with_flags(target, flags)?;
            configure(&conn, None)?;
            let found = user_version(&conn)?;
            Ok((conn, found))
        };
        let (conn, found) = match connect(path) {
            Ok(opened) => opened,
            Err(err)
                if err.sqlite_error_code() == Some(ErrorCode::CannotOpen) && path.is_file() =>
            {
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                let pending = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
                if pending {
                    let why = format!(
                        "it cannot be read where it is (its directory is read-only) while {} \
                         holds commits not yet in it; open it once where it can be written",
                        Path::new(&wal).display()
                    );
                    return Err(open_error(
                        path,
                        rusqlite::Error::SqliteFailure(
                            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                            Some(why),
                        ),
                    ));
                }
                // `file:PATH?immutable=1`, the path percent-encoded as a URI wants.
                use std::os::unix::ffi::OsStrExt;
                let mut uri = String::from("file:");
                for &b in path.as_os_str().as_bytes() {
                    if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
                        uri.push(char::from(b));
                    } else {
                        uri.push_str(&format!("%{b:02X}"));
                    }
                }
                uri.push_str("?immutable=1");
                connect(Path::new(&uri)).map_err(|_| open_error(path, err))?
            }
            Err(err) => return Err(open_error(path, err)),
        };
        let known = SCHEMA_VERSION;
        if found > known {
            return Err(StoreError::SchemaTooNew {
                path: path.to_owned(),
                found,
                known,
            });
        }
        if found < known {
            return Err(StoreError::SchemaTooOld {
                path: path.to_owned(),
                found,
                known,
            });
        }
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
            durability: None,
            checkpointer: Mutex::new(None),
            task_rows: Mutex::default(),
            spare: Mutex::default(),
            identity: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the database as it is now.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.read(|conn| Ok(user_version(conn)?))
    }

    /// Copies the WAL back into the database file (a PASSIVE checkpoint: it never waits for a
    /// reader or another writer). SQLite does this by itself inside the commit that takes the WAL
    /// past 1000 pages, and that commit then takes milliseconds instead of microseconds; a
    /// dispatcher that calls this while it is idle (waiting for attempts to end) takes that cost
    /// out of its turns. Optional: correctness never depends on it.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let conn = self.lock();
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(|err| StoreError::from(err).at(&self.path))
    }

    /// From now until [`SqliteStore::stop_background_checkpoints`] (or the store is dropped),
    /// the WAL is copied back into the database file by a thread of its own instead of inside
    /// the commit that makes it long (see `checkpoint.rs`). Where that thread cannot be had,
    /// nothing changes.
    pub fn checkpoint_in_background(&self) {
        let mut slot = self
            .checkpointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Checkpointer::start(&self.lock(), &self.path);
        }
    }

    /// How many checkpoints the background thread completed (copying the whole WAL back) since
    /// [`SqliteStore::checkpoint_in_background`]; `None` when no such thread runs.
    pub fn background_checkpoints(&self) -> Option<u64> {
        self.checkpointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(Checkpointer::completed)
    }

    /// Commits checkpoint by themselves again, and the thread is gone.
    pub fn stop_background_checkpoints(&self) {
        let taken = self
            .checkpointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(checkpointer) = taken {
            checkpointer.stop(&self.lock());
        }
    }

    /// Whether the database file this store writes is still the one at its path: a run whose
    /// database was deleted (or replaced) under it must stop rather than record into a file
    /// nobody will ever read. One `stat`, made before each commit.
    pub(crate) fn check_present(&self) -> Result<(), StoreError> {
        let Some(opened) = self.identity else {
            return Ok(());
        };
        if identity(&self.path) == Some(opened) {
            Ok(())
        } else {
            Err(StoreError::Vanished {
                path: self.path.clone(),
            })
        }
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while the lock was held dropped its transaction, which rolled back: the
        // connection is fine to use.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` in one IMMEDIATE transaction and commits it if `f` succeeds.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.lock();
        let run = || {
            let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        };
        run().map_err(|err: StoreError| err.at(&self.path))
    }

    /// Runs `f` in one read transaction, so that what it reads with several queries is one
    /// snapshot. While another thread uses this store's connection, on a spare one (see
    /// `spare`), or, when none can be opened, once that thread is done.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let run = |conn: &Connection| {
            let tx = Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
            let value = f(&tx)?;
            // Nothing was written: ending the transaction only releases the snapshot.
            tx.commit()?;
            Ok(value)
        };
        let read = match self.conn.try_lock() {
            Ok(conn) => run(&conn),
            Err(TryLockError::Poisoned(poisoned)) => run(&poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => match self.spare() {
                Some(spare) => {
                    let read = run(&spare);
                    self.spare
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .idle
                        .push(spare);
                    read
                }
                None => run(&self.lock()),
            },
        };
        read.map_err(|err: StoreError| err.at(&self.path))
    }

    /// A spare read-only connection: a kept one, or a new one while fewer than
    /// [`SPARE_CONNECTIONS`] are open. `None` when there are that many, busy, or where none can
    /// be opened (a database opened `immutable`, on a read-only directory).
    fn spare(&self) -> Option<Connection> {
        let mut spares = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = spares.idle.pop() {
            return Some(kept);
        }
        if spares.opened == SPARE_CONNECTIONS {
            return None;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags).ok()?;
        configure(&conn, None).ok()?;
        spares.opened += 1;
        Some(conn)
    }
}

/// The device and inode of the file at `path`, if there is one.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn open_error(path: &Path, source: rusqlite::Error) -> StoreError {
    match source.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
            path: path.to_owned(),
            source: source.into(),
        },
        _ => StoreError::Open {
            path: path.to_owned(),
            source: source.into(),
        },
    }
}

/// Settings that belong to each connection. `durability` is `None` for a read-only one, which
/// neither changes the journal mode nor commits anything.
fn configure(conn: &Connection, durability: Option<Durability>) -> rusqlite::Result<()> {
    // First, so that the statements below wait for a lock instead of failing.
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.pragma_update(None, "foreign_keys", true)?;
    // A statement that writes several rows keeps what it changes in a journal of its own, to be
    // undone should it fail half way: in memory, rather than in a file in /var/tmp written a
    // page at a time (14,000 writes of a 100,000-task run's recorder, and as many by the
    // run's record). Freed as each statement ends; nothing of a commit depends on it.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    if let Some(durability) = durability {
        // Only a database not yet made takes it; it must come before the switch to WAL.
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        // Switching a database to WAL needs it to itself, and SQLite answers "locked" at once,
        // without waiting, while another connection is making it (two runs started together
        // in a new project: the second failed to open the store). Tried again until the busy
        // timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mode: String = loop {
            match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
                Err(busy)
                    if busy.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                mode => break mode?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            // Readers could then block the writer; better to refuse than to surprise.
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!(
                    "the database cannot use WAL mode (it is in {mode} mode)"
                )),
            ));
        }
        conn.pragma_update(None, "synchronous", durability.pragma_value())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made now has pages of [`PAGE_SIZE`] and keeps statement journals in memory;
    /// one made with SQLite's 4 KiB pages keeps them, and works as before.
    #[test]
    fn new_databases_have_large_pages_and_old_ones_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let page_size = |path: &Path| -> i64 {
            Connection::open(path)
                .unwrap()
                .pragma_query_value(None, "page_size", |row| row.get(0))
                .unwrap()
        };
        let new = dir.path().join("new.db");
        let store = SqliteStore::open(&new).unwrap();
        assert_eq!(page_size(&new), PAGE_SIZE);
        let temp_store: i64 = store
            .lock()
            .pragma_query_value(None, "temp_store", |row| row.get(0))
            .unwrap();
        assert_eq!(temp_store, 2, "MEMORY");
        drop(store);

        let old = dir.path().join("old.db");
        let conn = Connection::open(&old).unwrap();
        conn.execute_batch(
            "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL; CREATE TABLE t (x);",
        )
        .unwrap();
        drop(conn);
        let store = SqliteStore::open(&old).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        drop(store);
        assert_eq!(page_size(&old), 4096);
    }

    /// Spare connections are kept and reused, and no more than [`SPARE_CONNECTIONS`] are open:
    /// a read beyond them waits for the store's own connection.
    #[test]
    fn spare_connections_are_few_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("baton.db")).unwrap();
        let held: Vec<Connection> = (0..SPARE_CONNECTIONS)
            .map(|_| store.spare().expect("a spare while fewer are open"))
            .collect();
        assert!(store.spare().is_none());
        store.spare.lock().unwrap().idle.extend(held);
        for _ in 0..2 * SPARE_CONNECTIONS {
            let kept = store.spare().expect("a kept one");
            store.spare.lock().unwrap().idle.push(kept);
        }
        assert_eq!(store.spare.lock().unwrap().opened, SPARE_CONNECTIONS);
    }
}
