//! Reading what runs recorded: the store, opened read-only so that a reader never blocks the
//! process driving a run, and runs named by id, prefix or `latest`.

use baton_model::{RunId, RunState};
use baton_runner::driver;
use baton_store::{RunRecord, SqliteStore, Store};

use crate::exit::Failure;
use crate::project::Project;

/// The store of this project, read-only.
pub fn open(store_url: Option<&str>) -> Result<Box<dyn Store>, Failure> {
    open_with_project(store_url).map(|(_, store)| store)
}

/// The store at `path` for reading and writing, created and migrated if needed: the one place
/// that names a store's backend.
pub fn open_for_writing(path: &std::path::Path) -> Result<Box<dyn Store>, Failure> {
    let store = SqliteStore::open(path).map_err(|e| {
        Failure::Internal(
            anyhow::Error::new(e)
                .context(format!("cannot open the run store at {}", path.display())),
        )
    })?;
    Ok(Box::new(store))
}

/// The project and its store, read-only.
pub fn open_with_project(store_url: Option<&str>) -> Result<(Project, Box<dyn Store>), Failure> {
    let project = Project::discover()?;
    let path = project.store_path(store_url).map_err(Failure::BadInput)?;
    if !path.exists() {
        return Err(Failure::BadInput(format!(
            "no runs are recorded here ({} does not exist); `baton run FILE` records one",
            path.display()
        )));
    }
    let store = SqliteStore::open_readonly(&path).map_err(|e| {
        Failure::Internal(anyhow::Error::new(e).context(format!("cannot read {}", path.display())))
    })?;
    Ok((project, Box::new(store)))
}

/// The run a user named: an exact id, a unique prefix of one, or `latest` (also when `None`).
pub fn resolve(store: &dyn Store, name: Option<&str>) -> Result<RunRecord, Failure> {
    let latest = || -> Result<RunRecord, Failure> {
        store
            .latest_run()?
            .ok_or_else(|| Failure::BadInput("no runs are recorded yet".into()))
    };
    let Some(name) = name.filter(|n| *n != "latest") else {
        return latest();
    };
    if let Ok(id) = RunId::new(name)
        && let Some(run) = store.run(&id)?
    {
        return Ok(run);
    }
    let matches: Vec<RunRecord> = store
        .runs(u32::MAX)?
        .into_iter()
        .map(|s| s.run)
        .filter(|r| r.id.as_str().starts_with(name))
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().expect("one match")),
        0 => Err(Failure::BadInput(format!(
            "no run `{name}` is recorded; `baton runs` lists them"
        ))),
        n => Err(Failure::BadInput(format!(
            "`{name}` matches {n} runs ({}…); give more of the id",
            matches
                .iter()
                .take(3)
                .map(|r| r.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// A run's state as a reader should see it: a run recorded as running whose driver is gone
/// was interrupted. Detected from the driver's pid and start time, not guessed.
pub fn effective_state(run: &RunRecord) -> RunState {
    let gone = run.driver.as_ref().is_none_or(|d| !driver::is_alive(d));
    baton_model::observed(run.status, gone)
}
