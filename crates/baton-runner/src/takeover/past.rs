//! What a takeover reads back of the run's past beyond its tasks' states: the attempts it
//! may adopt from the queue, the best-of candidates that had ended in a round cut short, and
//! whether what went before earned the run a warning.

use std::collections::BTreeSet;

use baton_graph::Graph;
use baton_model::{EventKind, Outcome, RunId};
use baton_store::{RunReader, Store, StoreError, TaskRecord};

/// The attempts of `run` a coordinator taking it over from another may adopt, if the queue
/// still holds them: those recorded started and not ended, and the next attempt of each
/// unfinished task that has none open (queued in the moment before its start was recorded:
/// the queue and the log are two commits). Only of tasks that run one attempt at a time (a
/// best-of task's running candidates run again; those that had ended are carried:
/// [`carried_candidates`]).
pub(crate) fn adoptable(
    store: &dyn RunReader,
    graph: &Graph,
    run: &RunId,
) -> Result<Vec<(u32, u32)>, StoreError> {
    let one_at_a_time = |task: u32| graph.task(task).candidate_count() <= 1;
    let mut keep: std::collections::BTreeMap<u32, u32> = std::collections::BTreeMap::new();
    for record in store.tasks(run)? {
        if !record.status.is_terminal() && one_at_a_time(record.idx) {
            keep.insert(record.idx, record.attempts + 1);
        }
    }
    for open in store.open_attempts(run)? {
        if let Some(task) = graph.index_of(open.task.as_str())
            && one_at_a_time(task)
        {
            keep.insert(task, open.attempt);
        }
    }
    Ok(keep.into_iter().collect())
}

/// The candidates of each best-of task to run again that had ended in its last round (cut
/// short by the crash): recorded, they are not paid for twice (finding 13).
pub(super) fn carried_candidates(
    store: &dyn Store,
    graph: &Graph,
    run: &RunId,
    records: &[TaskRecord],
    again: &BTreeSet<u32>,
) -> Result<Vec<(u32, u32)>, StoreError> {
    let mut carried = Vec::new();
    for t in records.iter().filter(|t| again.contains(&t.idx)) {
        let n = graph.task(t.idx).candidate_count();
        if n <= 1 || t.attempts == 0 {
            continue;
        }
        let round = t.attempts.div_ceil(n);
        let first = (round - 1) * n + 1;
        for attempt in store.attempts(run, &t.task)? {
            let ended = attempt
                .outcome
                .as_ref()
                .is_some_and(|o| !matches!(o, Outcome::Interrupted));
            if ended && (first..=round * n).contains(&attempt.attempt) {
                carried.push((t.idx, attempt.attempt));
            }
        }
    }
    Ok(carried)
}

/// Whether what the run recorded so far earns it a warning, as the driver that saw it
/// happen knew: a failure its planner planned around, a task that changed files outside its
/// scope, a reviewer that accepted work with warnings. A takeover starts from this; the
/// warning otherwise lived only in the memory of the process that died.
pub(super) fn warned_before(store: &dyn Store, run: &RunId) -> Result<bool, StoreError> {
    use baton_model::EventName;
    if store
        .last_event_of_kind(run, EventName::Replanning)?
        .is_some()
    {
        return Ok(true);
    }
    let reviewed = store.events_of_kind(run, EventName::Reviewed)?;
    if reviewed.iter().any(|e| {
        matches!(&e.kind, EventKind::Reviewed { review, .. }
            if review.verdict == baton_model::ReviewVerdict::VerifiedWithWarnings)
    }) {
        return Ok(true);
    }
    Ok(store
        .events_of_kind(run, EventName::WorkspaceCommitted)?
        .iter()
        .any(|e| {
            matches!(&e.kind, EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit { scope_violations, .. })
                if !scope_violations.is_empty())
        }))
}
