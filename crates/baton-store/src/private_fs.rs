//! The database holds task outputs, which may contain secrets a task printed: only its owner may
//! read it.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::path::Path;

#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

/// Creates `dir` and any missing parents; the directories created are private (0700).
pub(crate) fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir)
}

/// Creates `file` as private (0600) if it does not exist yet. SQLite gives its `-wal` and `-shm`
/// files the permissions of the database file.
///
/// An existing file is never opened: closing any descriptor of a file drops every POSIX lock
/// the process holds on it, SQLite's among them, and a process that opens its database again
/// while it holds connections to it (a run's recorder, the dashboard) would leave them
/// unlocked. Another process closing its connection then takes itself for the last one and
/// removes the WAL they read (SQLITE_IOERR_SHORT_READ).
pub(crate) fn create_file(file: &Path) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    match options.open(file) {
        Ok(created) => {
            drop(created);
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}
