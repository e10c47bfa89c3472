//! Reading what runs recorded: the store, opened read-only so that a reader never blocks the
//! process driving a run, and runs named by id, prefix or `latest`.

use baton_model::{RunId, RunState};
use baton_runner::driver;
use std::path::Path;

use baton_store::{RunRecord, SqliteStore, Store, StoreError};

use crate::exit::Failure;
use crate::project::{Project, StoreAt};

/// The store of this project, read-only.
pub(crate) fn open(store_url: Option<&str>) -> Result<Box<dyn Store>, Failure> {
    open_with_project(store_url).map(|(_, store)| store)
}

/// The store for reading and writing, created and migrated if needed: the one place that names
/// a store's backend.
pub(crate) fn open_for_writing(at: &StoreAt) -> Result<Box<dyn Store>, Failure> {
    let path = match at {
        StoreAt::Postgres(url) => return Ok(Box::new(open_postgres(url)?)),
        StoreAt::Sqlite(path) => path.as_path(),
    };
    let store = SqliteStore::open(path).map_err(|e| {
        let context = match read_only(path) {
            Some(why) => format!(
                "the run store at {} cannot be written ({why}): this command records into it; \
                 make it writable, or name another with `--store sqlite:PATH` \
                 (`baton runs`, `status`, `logs` and `events` read it as it is)",
                path.display()
            ),
            None => format!("cannot open the run store at {}", path.display()),
        };
        Failure::Internal(anyhow::Error::new(e).context(context))
    })?;
    Ok(Box::new(store))
}

/// A PostgreSQL store: unreachable, it is baton that cannot work (exit 3), and the error names
/// the server (never its password).
pub(crate) fn open_postgres(url: &str) -> Result<baton_store::PgStore, Failure> {
    let store = baton_store::PgStore::open(url).map_err(|e| match e {
        StoreError::Connect { server, source } => Failure::Internal(anyhow::anyhow!(
            "cannot reach the run store at {server} ({source}): is the server running, and may \
             this user connect to that database?"
        )),
        e => Failure::Internal(anyhow::Error::new(e).context(format!(
            "cannot open the run store at {}",
            baton_store::describe_server(url)
        ))),
    })?;
    // Every machine of a run stamps its times on the server's clock (leases are measured on
    // it already): a machine whose clock is off cannot make a 15 s run last an hour.
    if let Ok(offset) = store.clock_offset_ms() {
        baton_model::follow_clock(offset);
    }
    Ok(store)
}

/// The store with a work queue `what` needs (workers share runs through one): the project's
/// store if it has one (PostgreSQL), else the error that says how to name one.
pub(crate) fn postgres_for(
    project: &Project,
    store_url: Option<&str>,
    what: &str,
) -> Result<std::sync::Arc<dyn baton_store::QueueStore>, Failure> {
    match project.store_at(store_url).map_err(Failure::BadInput)? {
        StoreAt::Postgres(url) => Ok(std::sync::Arc::new(open_postgres(&url)?)),
        StoreAt::Sqlite(path) => Err(Failure::BadInput(format!(
            "{what} needs a PostgreSQL store that workers share, not the file {}: name one with \
             `--store postgres://USER@HOST:PORT/DB` (or BATON_STORE)",
            path.display()
        ))),
    }
}

/// Why the store at `path` cannot be written, if that is so: the file, or the directory that
/// must hold its journal beside it, is on a read-only file system or not writable by us.
fn read_only(path: &Path) -> Option<String> {
    use nix::unistd::{AccessFlags, access};
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    [path, dir]
        .into_iter()
        .find_map(|p| match access(p, AccessFlags::W_OK) {
            Err(nix::errno::Errno::EROFS) => {
                Some(format!("{} is on a read-only file system", p.display()))
            }
            Err(nix::errno::Errno::EACCES) => Some(format!("{} is not writable", p.display())),
            _ => None,
        })
}

/// The store, read-only, or `None` when its file does not exist yet (nothing was recorded
/// here): for `baton runs`, to which that is an empty list rather than an error.
pub(crate) fn open_if_recorded(store_url: Option<&str>) -> Result<Option<Box<dyn Store>>, Failure> {
    let project = Project::discover()?;
    let at = project.store_at(store_url).map_err(Failure::BadInput)?;
    if !at.exists() {
        return Ok(None);
    }
    open_at(project, &at).map(|(_, store)| Some(store))
}

/// The project and its store, read-only.
pub(crate) fn open_with_project(
    store_url: Option<&str>,
) -> Result<(Project, Box<dyn Store>), Failure> {
    let project = Project::discover()?;
    let at = project.store_at(store_url).map_err(Failure::BadInput)?;
    open_at(project, &at)
}

fn open_at(project: Project, at: &StoreAt) -> Result<(Project, Box<dyn Store>), Failure> {
    let path = match at {
        StoreAt::Postgres(url) => return Ok((project, Box::new(open_postgres(url)?))),
        StoreAt::Sqlite(path) => path.as_path(),
    };
    if !path.exists() {
        return Err(Failure::BadInput(format!(
            "no runs are recorded here ({} does not exist); `baton run FILE` records one",
            path.display()
        )));
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Err(Failure::BadInput(format!(
            "{} is empty (0 bytes), not a baton store yet: no runs are recorded in it; \
             `baton run FILE` records one there, or delete the file",
            path.display()
        )));
    }
    let store = SqliteStore::open_readonly_upgrading(path).map_err(|e| match e {
        StoreError::SchemaTooOld { found: 0, .. } => Failure::BadInput(format!(
            "{} is an SQLite database without baton's tables (schema version 0), not a baton \
             store: no runs are recorded in it; name baton's store with `--store sqlite:PATH`, \
             or move this file away",
            path.display()
        )),
        e => Failure::Internal(
            anyhow::Error::new(e).context(format!("cannot read {}", path.display())),
        ),
    })?;
    Ok((project, Box::new(store)))
}

/// The run a user named: an exact id, a unique prefix of one, or `latest` (also when `None`).
pub(crate) fn resolve(store: &dyn Store, name: Option<&str>) -> Result<RunRecord, Failure> {
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
/// Whether more is to come of `run`: it runs, or it waits for a worker to take it (a
/// follower of a submitted run waits for it, rather than end before it began).
pub(crate) fn goes_on(run: &RunRecord) -> bool {
    matches!(effective_state(run), RunState::Running | RunState::Queued)
}

pub(crate) fn effective_state(run: &RunRecord) -> RunState {
    let gone = run.driver.as_ref().is_none_or(|d| !driver::is_alive(d));
    baton_model::observed(run.status, gone)
}
