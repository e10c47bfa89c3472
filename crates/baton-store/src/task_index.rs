//! Where each of a run's tasks is in the `tasks` table, kept between commits.
//!
//! A task's row is keyed by its index (`PRIMARY KEY (run_id, idx)`); events name it by its id,
//! which a second index (`UNIQUE (run_id, task_id)`) maps to the index. Looking the id up in that
//! index on every statement was a fifth of what recording a short task cost: two B-tree
//! descents comparing strings where one comparing integers does. A task's index never changes
//! once its row is in (rows are only ever inserted, at `task_count`), so the store keeps the
//! map for the run it records and each statement seeks the row by index, still checking the id
//! (`AND task_id = ?2`): should the map ever be wrong, a statement matches no row and the
//! commit fails as for an unknown task, it never touches another task's row.
//!
//! Tasks are keyed by a 32-bit hash of their id, not the id: 8 bytes a task instead of 40 or
//! more, about 1 MB on a 100,000-task run (whose peak memory is watched: `docs/PERFORMANCE.md`).
//! Ids that share a hash (about one pair in a 100,000-task run) are left out and looked up in
//! the table each time.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use baton_model::{RunId, TaskId};
use rusqlite::{Connection, OptionalExtension};

/// Marks a hash two of the run's tasks share: neither is in the map.
const SHARED: u32 = u32::MAX;

/// The row index of each task of one run, by a hash of its id.
#[derive(Debug, Default)]
pub(crate) struct TaskIndex {
    run: Option<RunId>,
    rows: HashMap<u32, u32>,
    hasher: RandomState,
}

impl TaskIndex {
    /// `task`'s row index in `run`, `None` if the run has no such task. The first call for a
    /// run reads every task's index at once.
    pub(crate) fn of(
        &mut self,
        conn: &Connection,
        run: &RunId,
        task: &TaskId,
    ) -> rusqlite::Result<Option<i64>> {
        if self.run.as_ref() != Some(run) {
            self.load(conn, run)?;
        }
        let hash = self.hash(task.as_str());
        match self.rows.get(&hash) {
            Some(&SHARED) => look_up(conn, run, task),
            Some(&idx) => Ok(Some(i64::from(idx))),
            None => {
                // Added since (a planner's task), or not the run's.
                let found = look_up(conn, run, task)?;
                if let Some(idx) = found.and_then(|idx| u32::try_from(idx).ok()) {
                    self.insert(hash, idx);
                }
                Ok(found)
            }
        }
    }

    /// Forgets everything: after a commit failed, the rows it inserted are not there.
    pub(crate) fn forget(&mut self) {
        self.run = None;
        self.rows = HashMap::new();
    }

    fn load(&mut self, conn: &Connection, run: &RunId) -> rusqlite::Result<()> {
        self.forget();
        let count: Option<i64> = conn
            .prepare_cached("SELECT task_count FROM runs WHERE id = ?1")?
            .query_row([run.as_str()], |row| row.get(0))
            .optional()?;
        self.rows
            .reserve(count.and_then(|n| usize::try_from(n).ok()).unwrap_or(0));
        let mut statement =
            conn.prepare_cached("SELECT task_id, idx FROM tasks WHERE run_id = ?1")?;
        let mut rows = statement.query([run.as_str()])?;
        while let Some(row) = rows.next()? {
            let task = row.get_ref(0)?.as_str()?;
            let hash = self.hash(task);
            if let Ok(idx) = u32::try_from(row.get::<_, i64>(1)?) {
                self.insert(hash, idx);
            }
        }
        self.run = Some(run.clone());
        Ok(())
    }

    fn hash(&self, task: &str) -> u32 {
        // SipHash's bits are all well mixed: the low half is as good a hash as the whole.
        self.hasher.hash_one(task) as u32
    }

    fn insert(&mut self, hash: u32, idx: u32) {
        self.rows
            .entry(hash)
            .and_modify(|known| {
                if *known != idx {
                    *known = SHARED;
                }
            })
            .or_insert(idx);
    }
}

fn look_up(conn: &Connection, run: &RunId, task: &TaskId) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT idx FROM tasks WHERE run_id = ?1 AND task_id = ?2")?
        .query_row([run.as_str(), task.as_str()], |row| row.get(0))
        .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(conn: &Connection) {
        conn.execute_batch(
            "CREATE TABLE tasks (run_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, \
             PRIMARY KEY (run_id, idx), UNIQUE (run_id, task_id)) WITHOUT ROWID;
             INSERT INTO tasks VALUES ('r', 'a', 0), ('r', 'b', 1), ('s', 'a', 7);
             CREATE TABLE runs (id TEXT PRIMARY KEY, task_count INTEGER NOT NULL);
             INSERT INTO runs VALUES ('r', 2), ('s', 1);",
        )
        .unwrap();
    }

    /// A database of two runs' tasks, `r` and its index.
    fn fixture() -> (Connection, RunId, TaskIndex) {
        let conn = Connection::open_in_memory().unwrap();
        table(&conn);
        (conn, RunId::new("r").unwrap(), TaskIndex::default())
    }

    fn id(s: &str) -> TaskId {
        TaskId::new(s).unwrap()
    }

    #[test]
    fn finds_a_run_s_tasks_and_those_added_later_and_no_others() {
        let (conn, r, mut index) = fixture();
        let s = RunId::new("s").unwrap();
        assert_eq!(index.of(&conn, &r, &id("b")).unwrap(), Some(1));
        assert_eq!(index.of(&conn, &r, &id("a")).unwrap(), Some(0));
        assert_eq!(index.of(&conn, &r, &id("zz")).unwrap(), None);
        conn.execute("INSERT INTO tasks VALUES ('r', 'c', 2)", [])
            .unwrap();
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
        // Another run's task of the same name is that run's.
        assert_eq!(index.of(&conn, &s, &id("a")).unwrap(), Some(7));
        assert_eq!(index.of(&conn, &s, &id("b")).unwrap(), None);
    }

    /// Two ids with one hash: neither is believed, both are looked up.
    #[test]
    fn a_shared_hash_is_looked_up_each_time() {
        let (conn, r, mut index) = fixture();
        index.of(&conn, &r, &id("a")).unwrap();
        let hash_of_b = index.hash("b");
        // As if `a` had hashed to `b`'s hash too.
        index.insert(hash_of_b, 0);
        assert_eq!(index.rows[&hash_of_b], SHARED);
        assert_eq!(index.of(&conn, &r, &id("b")).unwrap(), Some(1));
    }

    #[test]
    fn forgotten_after_a_failed_commit() {
        let (conn, r, mut index) = fixture();
        conn.execute_batch("BEGIN; INSERT INTO tasks VALUES ('r', 'c', 2);")
            .unwrap();
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
        conn.execute_batch("ROLLBACK; INSERT INTO tasks VALUES ('r', 'd', 2);")
            .unwrap();
        index.forget();
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), None);
        assert_eq!(index.of(&conn, &r, &id("d")).unwrap(), Some(2));
    }
}
