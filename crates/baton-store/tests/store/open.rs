//! Opening: where the file goes, who may read it, and what is refused.

use std::os::unix::fs::PermissionsExt;

use baton_store::RunReader;
use baton_store::{Durability, RunLog, SCHEMA_VERSION, SqliteStore, StoreError};

use crate::support::*;

#[test]
fn open_creates_a_private_directory_and_file_in_wal_mode() {
    let db = Db::new();
    let store = db.open();
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode(db.path().parent().unwrap()) & 0o777, 0o700);
    assert_eq!(mode(&db.path()) & 0o777, 0o600);
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);

    let conn = rusqlite::Connection::open(db.path()).unwrap();
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
}

#[test]
fn a_database_opens_with_either_durability() {
    let db = Db::new();
    let store = SqliteStore::open_with(&db.path(), Durability::Full).unwrap();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    // Reopening with the default is allowed: durability is per connection, not per file.
    drop(store);
    let store = SqliteStore::open_with(&db.path(), Durability::Normal).unwrap();
    assert!(store.run(&run_id("r1")).unwrap().is_some());
}

#[test]
fn a_file_that_is_not_a_database_is_reported_as_corrupt() {
    let db = Db::new();
    std::fs::create_dir_all(db.path().parent().unwrap()).unwrap();
    std::fs::write(db.path(), vec![b'x'; 8192]).unwrap();
    let err = SqliteStore::open(&db.path()).unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { ref path, .. } if *path == db.path()),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("is corrupt or is not a database"),
        "{err}"
    );
}

#[test]
fn a_reader_does_not_create_a_missing_database() {
    let db = Db::new();
    let err = SqliteStore::open_readonly(&db.path()).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(!db.path().exists());
}

#[test]
fn a_reader_cannot_write() {
    let db = Db::new();
    drop(db.open());
    let reader = SqliteStore::open_readonly(&db.path()).unwrap();
    assert!(reader.create_run(&new_run("r1", &["a"])).is_err());
    assert!(reader.runs(10).unwrap().is_empty());
}
