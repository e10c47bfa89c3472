//! Schema migrations, tracked by `PRAGMA user_version`.

use std::path::Path;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::StoreError;

/// Migration `i` takes the schema from version `i` to version `i + 1`. Append only: a released
/// migration never changes.
pub(crate) const MIGRATIONS: &[&str] = &[
    include_str!("migrations/v1_core.sql"),
    include_str!("migrations/v2_driver.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Applies the migrations the database lacks, each in its own IMMEDIATE transaction so that two
/// processes opening a fresh database at once cannot both apply one.
pub(crate) fn migrate(
    conn: &Connection,
    path: &Path,
    migrations: &[&str],
) -> Result<(), StoreError> {
    let known = migrations.len() as u32;
    loop {
        let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        // Read inside the write lock: another process may have migrated since we looked.
        let found = user_version(&tx)?;
        if found > known {
            return Err(StoreError::SchemaTooNew {
                path: path.to_owned(),
                found,
                known,
            });
        }
        if found == known {
            return Ok(());
        }
        let version = found + 1;
        let step = |tx: &Transaction<'_>| {
            tx.execute_batch(migrations[found as usize])?;
            tx.pragma_update(None, "user_version", version)
        };
        step(&tx).map_err(|source| StoreError::Migrate {
            path: path.to_owned(),
            version,
            source,
        })?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use baton_model::{RunId, TaskId};

    use super::*;
    use crate::{Driver, Durability, NewRun, SqliteStore};

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: RunId::new(id).unwrap(),
            name: "old".into(),
            graph_path: "graph.toml".into(),
            graph_json: "{}".into(),
            concurrency: 2,
            started_at_ms: 1,
            tasks: vec![(TaskId::new("a").unwrap(), 0)],
        }
    }

    #[test]
    fn opening_a_version_1_database_migrates_it_and_keeps_its_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        {
            let old =
                SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]).unwrap();
            assert_eq!(old.schema_version().unwrap(), 1);
            old.create_run(&new_run("r1")).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = RunId::new("r1").unwrap();
        assert_eq!(store.run(&run).unwrap().unwrap().name, "old");
        // Version 2's columns work on the migrated run.
        let me = Driver {
            pid: 1,
            start_time: 2,
            host: "h".into(),
        };
        store.claim_driver(&run, &me, |_| true).unwrap();
        assert_eq!(store.run(&run).unwrap().unwrap().driver, Some(me));
    }

    #[test]
    fn a_database_newer_than_this_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open(&path).unwrap());
        let older_build = SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]);
        let err = older_build.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::SchemaTooNew {
                    found: 2,
                    known: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("use a newer baton"), "{err}");
    }

    #[test]
    fn a_reader_refuses_an_old_database_instead_of_misreading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]).unwrap());
        let err = SqliteStore::open_readonly(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooOld { found: 1, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn a_failing_migration_leaves_the_database_at_the_last_good_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let broken = [MIGRATIONS[0], "CREATE TABLE x (a); THIS IS NOT SQL;"];
        let err = SqliteStore::open_migrated(&path, Durability::Normal, &broken).unwrap_err();
        assert!(
            matches!(err, StoreError::Migrate { version: 2, .. }),
            "{err:?}"
        );
        let store =
            SqliteStore::open_migrated(&path, Durability::Normal, &MIGRATIONS[..1]).unwrap();
        assert_eq!(store.schema_version().unwrap(), 1);
    }
}
