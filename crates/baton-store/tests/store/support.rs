use std::path::PathBuf;

use baton_model::{Event, EventKind, Outcome, RunId, TaskId, TaskState};
use baton_store::RunReader;
use baton_store::{AttemptOutput, NewRun, SqliteStore};

pub(crate) fn task(id: &str) -> TaskId {
    TaskId::new(id).unwrap()
}

pub(crate) fn run_id(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

pub(crate) fn event(at_ms: i64, kind: EventKind) -> Event {
    Event {
        seq: 0,
        at_ms,
        kind,
    }
}

pub(crate) fn started(at_ms: i64, id: &str, attempt: u32) -> Event {
    event(
        at_ms,
        EventKind::AttemptStarted {
            task: task(id),
            attempt,
            pid: Some(1000 + attempt),
        },
    )
}

pub(crate) fn finished(at_ms: i64, id: &str, attempt: u32, outcome: Outcome) -> Event {
    event(
        at_ms,
        EventKind::AttemptFinished {
            task: task(id),
            attempt,
            outcome,
            duration_ms: 10,
            agent: None,
            containment: None,
        },
    )
}

pub(crate) fn task_finished(at_ms: i64, id: &str, state: TaskState, reason: Option<&str>) -> Event {
    event(
        at_ms,
        EventKind::TaskFinished {
            task: task(id),
            state,
            reason: reason.map(str::to_owned),
        },
    )
}

pub(crate) fn output(id: &str, attempt: u32, text: &str) -> AttemptOutput {
    AttemptOutput {
        task: task(id),
        attempt,
        output: text.to_owned(),
        output_bytes: text.len() as u64,
        output_json: None,
        stderr_tail: String::new(),
        log_path: format!("logs/{id}.{attempt}.log"),
    }
}

pub(crate) fn new_run(id: &str, tasks: &[&str]) -> NewRun<'static> {
    NewRun {
        id: run_id(id),
        name: format!("graph-{id}"),
        graph_path: "graph.toml".into(),
        graph: &r#"{"tasks":[]}"#,
        concurrency: 4,
        started_at_ms: 1_000,
        tasks: tasks
            .iter()
            .enumerate()
            .map(|(idx, id)| (task(id), idx as u32))
            .collect(),
    }
}

/// Task ids `t0`, `t1`, … for a run of `n` tasks.
pub(crate) fn numbered(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("t{i}")).collect()
}

pub(crate) fn new_numbered_run(id: &str, n: usize) -> NewRun<'static> {
    let names = numbered(n);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    new_run(id, &names)
}

pub(crate) struct Db {
    pub dir: tempfile::TempDir,
}

impl Db {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join(".baton").join("baton.db")
    }

    pub(crate) fn open(&self) -> SqliteStore {
        SqliteStore::open(&self.path()).unwrap()
    }
}

/// Fails the test with the list of disagreements, if any.
pub(crate) fn assert_consistent(store: &SqliteStore, run: &RunId) {
    let problems = store.check_consistency(run).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}
