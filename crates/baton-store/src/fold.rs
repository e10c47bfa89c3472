//! A stored run's event log folded through [`RunView`], for the views that show a run from the
//! store (`baton watch`, a run taken over, the report): the same fold the tables are held to.

use std::collections::HashSet;

use baton_model::{RunId, RunView, TaskId};

use crate::{RunReader, StoreError};

/// How many events are read at a time.
const PAGE: u32 = 10_000;

/// The run's events so far, folded, and the `seq` of the last one (for reading on after it).
/// The fold starts from the tasks the run began with: those its planners added join it with
/// their `graph-expanded` events, as they did when the run went.
pub fn fold(store: &dyn RunReader, run: &RunId) -> Result<(RunView, u64), StoreError> {
    let mut view = initial_view(store, run)?;
    let mut after = 0;
    loop {
        let page = store.events(run, after, PAGE)?;
        for event in &page {
            view.apply(event);
        }
        match page.last() {
            Some(last) if page.len() as u32 == PAGE => after = last.seq,
            Some(last) => return Ok((view, last.seq)),
            None => return Ok((view, after)),
        }
    }
}

/// The run as it was created, before its first event: the tasks it began with, all pending.
pub fn initial_view(store: &dyn RunReader, run: &RunId) -> Result<RunView, StoreError> {
    let planned: HashSet<TaskId> = store
        .events_of_kind(run, baton_model::EventName::GraphExpanded)?
        .into_iter()
        .flat_map(|event| match event.kind {
            baton_model::EventKind::GraphExpanded { added, .. } => added,
            _ => Vec::new(),
        })
        .collect();
    let mut view = RunView::new(
        store
            .tasks(run)?
            .into_iter()
            .map(|task| task.task)
            .filter(|task| !planned.contains(task)),
    );
    // A submitted run (`baton run --detach`) starts queued: its `run-started` comes from the
    // worker that takes it. Any other run's log opens with its start.
    if store.last_seq(run)? == 0
        && store
            .run(run)?
            .is_some_and(|r| r.status == baton_model::RunState::Queued)
    {
        view = view.submitted();
    }
    Ok(view)
}
