//! Where each of a run's tasks is in the `tasks` table, kept between commits.
//!
//! A task's row is keyed by its index (`PRIMARY KEY (run_id, idx)`); events name it by its id,
//! which a second index (`UNIQUE (run_id, task_id)`) maps to the index. Looking the id up in that
//! index on every statement was a fifth of what recording a short task cost: two B-tree
//! descents comparing strings where one comparing integers does. A task's index never changes
//! once its row is in (rows are only ever inserted, at `task_count`), so the store keeps the
//! map for the run it records and each statement seeks the row by index, still checking the id
//! (`AND +task_id = ?2`), so that a wrong index could only fail a commit, never touch another
//! task's row (a short task's attempt row is inserted with the index its task's update matched:
//! `whole_attempts.rs`).
//!
//! Tasks are keyed by a 32-bit hash of their id, not the id: a hash and an index, about 10
//! bytes a task with the map's own, instead of 40 or more; about 1 MB on a 100,000-task run
//! (whose peak memory is watched: `docs/PERFORMANCE.md`).
//! The map therefore holds every task of the run, so that two that share a hash (about one
//! pair in a 100,000-task run) are always seen to: both are then left out and looked up in the
//! table each time. Every task is in it because it is read whole whenever the run's
//! `task_count` or start is not what it was read at (at the start of each commit: another
//! process may have added tasks while it held the run, or deleted it and made another under its
//! id), a task added by a commit joins it at once, and after a failed commit, or a run deleted
//! through this store, it is forgotten.

use std::collections::HashMap;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use baton_model::{RunId, TaskId};
use rusqlite::{Connection, OptionalExtension};

/// Marks a hash two of the run's tasks share: neither is in the map.
const SHARED: u32 = u32::MAX;

/// The row index of each task of one run, by a hash of its id.
#[derive(Debug, Default)]
pub(crate) struct TaskIndex {
    /// The run, and its `task_count` and start when its tasks were read.
    run: Option<(RunId, i64, i64)>,
    /// Keyed by `hasher`'s hash of each id, itself hashed again by the map: foldhash, not
    /// std's SipHash, whose two hashes a lookup were a twentieth of recording a short task.
    /// Both are seeded at random, so no graph can choose ids that share a hash (which would
    /// only send their lookups to the table, as `SHARED` does).
    rows: HashMap<u32, u32, RandomState>,
    hasher: RandomState,
}

impl TaskIndex {
    /// Makes the map `run`'s, as it is in the table: read again unless it was read for this
    /// run and the run still has `task_count` tasks and started at `started_at_ms` (its row's
    /// columns, which each commit reads anyway).
    pub(crate) fn current(
        &mut self,
        conn: &Connection,
        run: &RunId,
        task_count: i64,
        started_at_ms: i64,
    ) -> rusqlite::Result<()> {
        match &self.run {
            Some((known, count, started))
                if known == run && (*count, *started) == (task_count, started_at_ms) =>
            {
                Ok(())
            }
            _ => self.load(conn, run, task_count, started_at_ms),
        }
    }

    /// `task`'s row index in `run`, `None` if the run has no such task.
    pub(crate) fn of(
        &mut self,
        conn: &Connection,
        run: &RunId,
        task: &TaskId,
    ) -> rusqlite::Result<Option<i64>> {
        if !self.is_of(run) {
            return look_up(conn, run, task);
        }
        match self.rows.get(&self.hash(task.as_str())) {
            Some(&SHARED) => look_up(conn, run, task),
            Some(&idx) => Ok(Some(i64::from(idx))),
            // Every task of the run is in the map: this one is not the run's.
            None => Ok(None),
        }
    }

    /// `task` was just added to `run` (a planner's): it joins the map.
    pub(crate) fn added(
        &mut self,
        conn: &Connection,
        run: &RunId,
        task: &TaskId,
    ) -> rusqlite::Result<()> {
        if !self.is_of(run) {
            return Ok(());
        }
        let idx = look_up(conn, run, task)?.and_then(|idx| u32::try_from(idx).ok());
        match (idx, &mut self.run) {
            (Some(idx), Some((_, count, _))) => {
                *count += 1;
                self.insert(self.hash(task.as_str()), idx);
            }
            _ => self.forget(),
        }
        Ok(())
    }

    /// The map of run `run` as just created with `tasks` (each with its index) at
    /// `started_at_ms`: what reading its rows back would give, without reading them (a
    /// 100,000-task run's first commit spent 40 ms on it).
    pub(crate) fn created(&mut self, run: &RunId, tasks: &[(TaskId, u32)], started_at_ms: i64) {
        self.forget();
        self.rows.reserve(tasks.len());
        for (task, idx) in tasks {
            self.insert(self.hash(task.as_str()), *idx);
        }
        self.run = Some((run.clone(), tasks.len() as i64, started_at_ms));
    }

    /// Forgets everything: after a commit failed, the rows it inserted are not there.
    pub(crate) fn forget(&mut self) {
        self.run = None;
        self.rows = HashMap::default();
    }

    fn is_of(&self, run: &RunId) -> bool {
        self.run.as_ref().is_some_and(|(known, ..)| known == run)
    }

    fn load(
        &mut self,
        conn: &Connection,
        run: &RunId,
        count: i64,
        started: i64,
    ) -> rusqlite::Result<()> {
        self.forget();
        self.rows.reserve(usize::try_from(count).unwrap_or(0));
        let mut statement =
            conn.prepare_cached("SELECT task_id, idx FROM tasks WHERE run_id = ?1")?;
        let mut rows = statement.query([run.as_str()])?;
        while let Some(row) = rows.next()? {
            let task = row.get_ref(0)?.as_str()?;
            let hash = self.hash(task);
            match u32::try_from(row.get::<_, i64>(1)?) {
                Ok(idx) => self.insert(hash, idx),
                // Not an index this map can hold: the task is looked up each time.
                Err(_) => {
                    self.rows.insert(hash, SHARED);
                }
            }
        }
        self.run = Some((run.clone(), count, started));
        Ok(())
    }

    fn hash(&self, task: &str) -> u32 {
        // foldhash's bits are all mixed: the low half is as good a hash as the whole.
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
             CREATE TABLE runs (id TEXT PRIMARY KEY, task_count INTEGER NOT NULL, \
             started_at_ms INTEGER NOT NULL);
             INSERT INTO runs VALUES ('r', 2, 0), ('s', 1, 0);",
        )
        .unwrap();
    }

    /// A database of two runs' tasks, `r` and its index.
    fn fixture() -> (Connection, RunId, TaskIndex) {
        let conn = Connection::open_in_memory().unwrap();
        table(&conn);
        (conn, RunId::new("r").unwrap(), TaskIndex::default())
    }

    /// Adds task `id` at `idx` to run `r`, as a planner's task is.
    fn add(conn: &Connection, id: &str, idx: i64) {
        conn.execute(
            "INSERT INTO tasks VALUES ('r', ?1, ?2)",
            rusqlite::params![id, idx],
        )
        .unwrap();
        conn.execute(
            "UPDATE runs SET task_count = task_count + 1 WHERE id = 'r'",
            [],
        )
        .unwrap();
    }

    /// [`TaskIndex::current`] with the run's row as a commit reads it.
    fn current(index: &mut TaskIndex, conn: &Connection, run: &RunId) {
        let (count, started) = conn
            .query_row(
                "SELECT task_count, started_at_ms FROM runs WHERE id = ?1",
                [run.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        index.current(conn, run, count, started).unwrap();
    }

    fn id(s: &str) -> TaskId {
        TaskId::new(s).unwrap()
    }

    /// A run just created is known without reading its rows: no table is there to read, and
    /// a commit of the run as created (its count, its start) keeps what was made.
    #[test]
    fn a_run_just_created_is_known_without_reading_it_back() {
        let empty = Connection::open_in_memory().unwrap();
        let r = RunId::new("r").unwrap();
        let mut index = TaskIndex::default();
        index.created(&r, &[(id("a"), 0), (id("b"), 1), (id("c/d"), 2)], 5);
        index.current(&empty, &r, 3, 5).unwrap();
        assert_eq!(index.of(&empty, &r, &id("c/d")).unwrap(), Some(2));
        assert_eq!(index.of(&empty, &r, &id("a")).unwrap(), Some(0));
        assert_eq!(index.of(&empty, &r, &id("z")).unwrap(), None);
        // Another count is another run under that id: read again (here, there is no table).
        assert!(index.current(&empty, &r, 4, 5).is_err());
    }

    #[test]
    fn finds_a_run_s_tasks_and_those_added_later_and_no_others() {
        let (conn, r, mut index) = fixture();
        let s = RunId::new("s").unwrap();
        current(&mut index, &conn, &r);
        assert_eq!(index.of(&conn, &r, &id("b")).unwrap(), Some(1));
        assert_eq!(index.of(&conn, &r, &id("a")).unwrap(), Some(0));
        assert_eq!(index.of(&conn, &r, &id("zz")).unwrap(), None);
        add(&conn, "c", 2);
        index.added(&conn, &r, &id("c")).unwrap();
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
        // Another run's task of the same name is that run's.
        current(&mut index, &conn, &s);
        assert_eq!(index.of(&conn, &s, &id("a")).unwrap(), Some(7));
        assert_eq!(index.of(&conn, &s, &id("b")).unwrap(), None);
        // A run never read is looked up.
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
    }

    /// Tasks another process added while it held the run are read at the next commit.
    #[test]
    fn a_run_grown_elsewhere_is_read_again() {
        let (conn, r, mut index) = fixture();
        current(&mut index, &conn, &r);
        add(&conn, "c", 2);
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), None);
        current(&mut index, &conn, &r);
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
    }

    /// Two ids with one hash: neither is believed, both are looked up, however the second
    /// came (read with the run, or added since).
    #[test]
    fn a_shared_hash_is_looked_up_each_time() {
        let (conn, r, mut index) = fixture();
        current(&mut index, &conn, &r);
        let hash_of_b = index.hash("b");
        // As if `a` (index 0) had hashed to `b`'s hash too.
        index.insert(hash_of_b, 0);
        assert_eq!(index.rows[&hash_of_b], SHARED);
        assert_eq!(index.of(&conn, &r, &id("b")).unwrap(), Some(1));
        // A task added since whose hash is `a`'s.
        add(&conn, "c", 2);
        let hash_of_c = index.hash("c");
        index.rows.insert(hash_of_c, 0);
        index.added(&conn, &r, &id("c")).unwrap();
        assert_eq!(index.rows[&hash_of_c], SHARED);
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
    }

    #[test]
    fn forgotten_after_a_failed_commit() {
        let (conn, r, mut index) = fixture();
        current(&mut index, &conn, &r);
        conn.execute_batch("BEGIN").unwrap();
        add(&conn, "c", 2);
        index.added(&conn, &r, &id("c")).unwrap();
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), Some(2));
        conn.execute_batch("ROLLBACK").unwrap();
        add(&conn, "d", 2);
        index.forget();
        current(&mut index, &conn, &r);
        assert_eq!(index.of(&conn, &r, &id("c")).unwrap(), None);
        assert_eq!(index.of(&conn, &r, &id("d")).unwrap(), Some(2));
    }
}
