use std::io;
use std::path::PathBuf;

use baton_model::{RunId, TaskId};
use rusqlite::ErrorCode;

/// Everything that can go wrong with the run database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot create the directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create the run database at {path}")]
    CreateFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot open the run database at {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: DriverError,
    },
    #[error("the run database at {path} is corrupt or is not a database")]
    Corrupt {
        path: PathBuf,
        #[source]
        source: DriverError,
    },
    #[error(
        "the run database at {path} has schema version {found}, newer than version {known} that \
         this baton knows; use a newer baton"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error(
        "the run database at {path} has schema version {found}, older than version {known}, \
         and this process cannot write it to migrate it: run any baton command where the \
         database is writable (`baton runs` migrates it), then read it here"
    )]
    SchemaTooOld {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error("cannot migrate the run database at {path} to schema version {version}")]
    Migrate {
        path: PathBuf,
        version: u32,
        #[source]
        source: DriverError,
    },
    #[error("BATON_SYNC is `{0}`; use `normal` or `full`")]
    BadSyncSetting(String),
    #[error("another process kept the run database locked for longer than the busy timeout")]
    Busy {
        #[source]
        source: DriverError,
    },
    #[error("run {run} is held by process {pid} on {host}")]
    RunHeld {
        run: RunId,
        pid: u32,
        start_time: u64,
        host: String,
    },
    /// The run was claimed by another driver since this one claimed it (its lease lapsed, or
    /// its process was judged dead): nothing more it writes about the run is recorded.
    #[error("run {run} was taken over by another process; this one no longer drives it")]
    LeaseLost { run: RunId },
    /// The database file was removed (or replaced) while this process wrote to it.
    #[error(
        "the run database at {path} was removed while the run was driven; nothing more can be \
         recorded"
    )]
    Vanished { path: PathBuf },
    #[error("there is no run {0}")]
    UnknownRun(RunId),
    #[error("run {0} already exists")]
    RunExists(RunId),
    #[error("run {run} has no task {task}")]
    UnknownTask { run: RunId, task: TaskId },
    #[error("task {task} of run {run} has no attempt {attempt}")]
    UnknownAttempt {
        run: RunId,
        task: TaskId,
        attempt: u32,
    },
    /// A second end of an attempt: the attempt number fences what is written about it.
    #[error("attempt {attempt} of task {task} of run {run} ended already: an attempt ends once")]
    AttemptEnded {
        run: RunId,
        task: TaskId,
        attempt: u32,
    },
    /// A start numbered below the task's latest attempt: attempt numbers only grow.
    #[error(
        "attempt {attempt} of task {task} of run {run} starts after a later one: attempt \
         numbers only grow"
    )]
    AttemptOutOfOrder {
        run: RunId,
        task: TaskId,
        attempt: u32,
    },
    #[error("attempt {attempt} of task {task} of run {run} was started already")]
    AttemptExists {
        run: RunId,
        task: TaskId,
        attempt: u32,
    },
    #[error("cannot encode an event as JSON")]
    Encode(#[source] serde_json::Error),
    /// The run's graph could not be written out as JSON (or was not UTF-8).
    #[error("cannot write the run's graph as JSON")]
    GraphJson(#[source] io::Error),
    #[error("event {seq} of run {run} cannot be decoded")]
    Decode {
        run: RunId,
        seq: u64,
        #[source]
        source: serde_json::Error,
    },
    /// A row of `event_batches` whose text is not lines of events (see `event_batches.rs`).
    #[error("the events of run {run} up to event {last_seq} are stored damaged")]
    BadEventBatch { run: RunId, last_seq: u64 },
    #[error("a value stored in the run database is not valid")]
    BadValue(#[source] DriverError),
    #[error("the run database failed")]
    Sqlite(#[source] DriverError),
    /// The PostgreSQL server named could not be reached, or refused the connection.
    #[error("cannot connect to the PostgreSQL server {server}")]
    Connect {
        server: String,
        #[source]
        source: DriverError,
    },
    #[error("cannot migrate the PostgreSQL database {server} to schema version {version} ({name})")]
    PgMigrate {
        server: String,
        version: u32,
        name: &'static str,
        #[source]
        source: DriverError,
    },
    #[error("the PostgreSQL database failed")]
    Postgres(#[source] DriverError),
    #[error("a value stored in the PostgreSQL database is not valid: {0}")]
    PgValue(String),
    /// The thread a run's commits are made on could not start, or ended before the run.
    #[error("the thread that records the run failed")]
    Recorder(#[source] io::Error),
}

impl From<rusqlite::Error> for StoreError {
    /// Sorts SQLite's errors into the ones a caller acts on. The path of a corrupt database is
    /// filled in by [`StoreError::at`] where the store knows it.
    fn from(source: rusqlite::Error) -> Self {
        match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Self::Busy {
                source: source.into(),
            },
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Self::Corrupt {
                path: PathBuf::new(),
                source: source.into(),
            },
            _ if matches!(
                source,
                rusqlite::Error::FromSqlConversionFailure(..)
                    | rusqlite::Error::IntegralValueOutOfRange(..)
                    | rusqlite::Error::InvalidColumnType(..)
            ) =>
            {
                Self::BadValue(source.into())
            }
            _ => Self::Sqlite(source.into()),
        }
    }
}

impl From<postgres::Error> for StoreError {
    fn from(source: postgres::Error) -> Self {
        Self::Postgres(source.into())
    }
}

/// What a database driver (SQLite's or PostgreSQL's) said, as the source of a [`StoreError`]:
/// its message and its causes, not its type, so that nothing outside the store names a
/// backend. What callers act on is sorted out when it is made.
#[derive(Debug)]
pub struct DriverError {
    error: Box<dyn std::error::Error + Send + Sync + 'static>,
    /// The server could not be reached (PostgreSQL's only): see
    /// [`StoreError::is_unreachable`].
    unreachable: bool,
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl From<rusqlite::Error> for DriverError {
    fn from(error: rusqlite::Error) -> Self {
        Self {
            error: Box::new(error),
            unreachable: false,
        }
    }
}

impl From<postgres::Error> for DriverError {
    fn from(error: postgres::Error) -> Self {
        // 57P01-57P03: the server is shutting down or starting up.
        let unreachable = error.is_closed()
            || error
                .code()
                .is_some_and(|code| code.code().starts_with("57P"))
            || std::error::Error::source(&error).is_some_and(|s| s.is::<io::Error>());
        Self {
            error: Box::new(error),
            unreachable,
        }
    }
}

impl StoreError {
    /// Whether the store could not be reached, rather than refusing what was asked: a server
    /// that restarted, went away or dropped the connection. What failed so may not have been
    /// done, or may have been done with the answer lost; the caller decides how to find out
    /// before it tries again. A SQLite file is never out of reach in this sense.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::Connect { .. } => true,
            Self::Postgres(err) => err.unreachable,
            _ => false,
        }
    }

    /// Names the database file in errors that are about the file itself.
    pub(crate) fn at(self, db: &std::path::Path) -> Self {
        match self {
            Self::Corrupt { path, source } if path.as_os_str().is_empty() => Self::Corrupt {
                path: db.to_owned(),
                source,
            },
            other => other,
        }
    }
}
