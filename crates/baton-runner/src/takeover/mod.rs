//! Taking over a recorded run: `baton resume` (continue a run whose driver died, or that was
//! cancelled) and `baton retry` (run a finished run's failures again). Both append to the same
//! run, so its history stays whole: the new attempts are numbered after the old ones.

use std::collections::BTreeSet;

use baton_attempt::launch::HeldOutput;
use baton_attempt::leftovers::Unfinished;
use baton_attempt::stamp::now_ms;
use baton_graph::Graph;
use baton_model::{Event, EventKind, Outcome, RunId, RunState, TaskId, TaskState};
use baton_store::{RunReader, Store, StoreError, TaskRecord};

mod past;

pub(crate) use past::adoptable;
use past::{carried_candidates, warned_before};

/// How a run is taken over.
#[derive(Debug, Clone)]
pub enum Takeover {
    /// Finish an interrupted, cancelled or waiting run. Attempts cut short by the crash count
    /// against `retries` only if `charge_retries`. `budget` changes the run's budget first: a
    /// run waiting at its soft limit needs one to go on.
    Resume {
        charge_retries: bool,
        budget: Option<BudgetChange>,
        /// `--reload`: the graph file as it is now defines the tasks from here on.
        reload: Option<Reload>,
        /// The worker taking the run over (its coordinator is gone); `None`: a person's
        /// command (`baton resume`, `baton approve`).
        by_worker: Option<String>,
    },
    /// Run again the given tasks of a finished run (all that did not succeed when empty), with
    /// what they need that did not succeed and what they blocked; `budget` changes the run's
    /// budget first.
    Retry {
        tasks: Vec<TaskId>,
        budget: Option<BudgetChange>,
        reload: Option<Reload>,
    },
}

impl Takeover {
    /// The graph file read again, when asked (`--reload`).
    pub fn reload(&self) -> Option<&Reload> {
        match self {
            Takeover::Resume { reload, .. } | Takeover::Retry { reload, .. } => reload.as_ref(),
        }
    }
}

/// A run's graph file read again for `baton retry --reload` / `resume --reload`: its tasks
/// as they are defined now, checked against what the run recorded ([`compare_with_file`]).
#[derive(Debug, Clone)]
pub struct Reload {
    pub graph: Box<Graph>,
    /// The tasks whose definitions changed.
    pub changed: Vec<TaskId>,
}

/// How a run's graph file differs from the graph the run recorded (before planners added
/// to it; as last reloaded, if it was).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FileChanges {
    /// Tasks whose definitions differ (their command, prompt, settings).
    pub changed: Vec<TaskId>,
    /// Why the file cannot stand for the run's graph: tasks added, removed, renamed or
    /// reordered, or their `needs` changed. A run's records are the tasks it had.
    pub refused: Vec<String>,
    /// The run's own settings (`[run]`, the name) differ.
    pub settings: bool,
}

impl FileChanges {
    pub fn any(&self) -> bool {
        !self.changed.is_empty() || !self.refused.is_empty() || self.settings
    }
}

/// How `file` (the run's graph file, loaded and validated now) differs from what `run`
/// recorded.
pub fn compare_with_file(
    store: &dyn Store,
    run: &RunId,
    file: &Graph,
) -> Result<FileChanges, crate::RunError> {
    let recorded = baton_view::base_graph(store, run).map_err(TakeoverError::from)?;
    let mut changes = FileChanges::default();
    let ids = |g: &Graph| g.tasks().iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    let (before, now) = (ids(&recorded), ids(file));
    for id in before.iter().filter(|id| !now.contains(id)) {
        changes
            .refused
            .push(format!("task `{id}` is no longer in the file"));
    }
    for id in now.iter().filter(|id| !before.contains(id)) {
        changes.refused.push(format!("task `{id}` is new"));
    }
    if changes.refused.is_empty() && before != now {
        changes
            .refused
            .push("the tasks are in another order".to_owned());
    }
    let json = |t: &baton_graph::Task| serde_json::to_value(t).unwrap_or_default();
    for task in recorded.tasks() {
        let Some(index) = file.index_of(task.id.as_str()) else {
            continue;
        };
        let theirs = file.task(index);
        let names = |g: &Graph, needs: &[u32]| -> Vec<String> {
            needs.iter().map(|&n| g.task(n).id.to_string()).collect()
        };
        if names(&recorded, &task.needs) != names(file, &theirs.needs) {
            changes
                .refused
                .push(format!("task `{}` needs other tasks now", task.id));
        } else if json(task) != json(theirs) {
            changes.changed.push(task.id.clone());
        }
    }
    changes.settings = recorded.name() != file.name()
        || serde_json::to_value(recorded.run_settings()).ok()
            != serde_json::to_value(file.run_settings()).ok();
    Ok(changes)
}

/// What a person decided about a run's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BudgetChange {
    /// Go on past the soft limit, up to the hard one (`baton approve RUN`).
    Approve,
    /// A new hard limit in dollars; the soft limit is lifted (`--raise-budget USD`).
    RaiseUsd(f64),
}

/// Why a run cannot be taken over.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error("no run `{0}` is recorded")]
    UnknownRun(RunId),
    #[error(transparent)]
    Recorded(#[from] baton_view::RecordedGraphError),
    #[error("run {run} is {state}; {hint}")]
    NotApplicable {
        run: RunId,
        state: RunState,
        hint: String,
    },
    #[error("run {run} has no task `{task}`")]
    UnknownTask { run: RunId, task: TaskId },
    /// `baton retry` of a run whose tasks all succeeded: nothing is recorded.
    #[error("nothing to retry: every task of run {0} succeeded")]
    NothingToRetry(RunId),
    #[error(
        "run {run} is waiting at its soft budget ({spent}); approve it with `baton approve {run}`, \
         or raise its budget with `baton resume {run} --raise-budget USD`"
    )]
    WaitingForBudget { run: RunId, spent: String },
}

/// What the dispatcher starts from when it takes a run over.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    /// Tasks that keep their recorded end, with the attempts they made.
    pub terminal: Vec<(u32, TaskState, u32)>,
    /// Tasks to run (again), with the attempts they already made.
    pub again: Vec<(u32, u32)>,
    /// Attempts an earlier coordinator started that still run on workers, adopted: not run
    /// again, their ends taken as they come.
    pub running: Vec<(u32, u32)>,
    pub charge_retries: bool,
    /// Outputs of succeeded tasks, for the dependents that still run.
    pub outputs: Vec<(u32, HeldOutput)>,
    /// Recorded before anything else: the takeover, attempts the crash cut short, resets.
    pub opening: Vec<Event>,
    /// The run's budget when a person changed it (now or at an earlier takeover); `None`:
    /// the graph file's.
    pub budget: Option<baton_graph::Budget>,
    /// What went before earned the run a warning (it can succeed only with warnings).
    pub warnings: bool,
    /// Each task goes on with the engine of its `fallback` chain its attempts reached (a
    /// resume); a retry starts each chain again from the task's own engine.
    pub recall_engines: bool,
    /// Best-of candidates (task, recorded attempt) that had ended in the round a crash cut
    /// short: the task's next round counts them as its own and runs only the others.
    pub carried: Vec<(u32, u32)>,
}

/// The run's budget as last decided: the latest `budget-changed` event's, else the graph's.
fn current_budget(
    store: &dyn Store,
    graph: &Graph,
    run: &RunId,
) -> Result<(baton_graph::Budget, bool), crate::RunError> {
    match store.last_event_of_kind(run, baton_model::EventName::BudgetChanged)? {
        Some(Event {
            kind:
                EventKind::BudgetChanged {
                    usd,
                    tokens,
                    soft_usd,
                    soft_tokens,
                },
            ..
        }) => Ok((
            baton_graph::Budget {
                usd,
                tokens,
                soft_usd,
                soft_tokens,
            },
            true,
        )),
        _ => Ok((graph.run_settings().budget.clone(), false)),
    }
}

/// Works out what to run again. `effective` is the run's state as readers see it
/// (`interrupted` when its driver is gone). `adopted`: attempts (task index, attempt) still
/// running on workers that the takeover keeps rather than records interrupted.
pub(crate) fn plan_takeover(
    store: &dyn Store,
    graph: &Graph,
    run: &RunId,
    effective: RunState,
    how: &Takeover,
    launched: &std::collections::HashMap<TaskId, u32>,
    adopted: &[(u32, u32)],
) -> Result<Restored, crate::RunError> {
    let records = store.tasks(run)?;
    let mut restored = Restored::default();
    let stopped = BudgetStopped::read(store, run, effective, &records)?;
    let mut again = which_again(store, graph, run, effective, how, &records, &stopped)?;
    if let Takeover::Resume { charge_retries, .. } = how {
        restored.charge_retries = *charge_retries;
        restored.recall_engines = true;
    }
    restored.warnings = warned_before(store, run)?;
    let at_ms = now_ms();
    open_takeover(store, graph, run, how, at_ms, &mut restored)?;
    let settled = match how {
        Takeover::Resume { .. } => settle(store, run, &records, at_ms, &mut again, &mut restored)?,
        Takeover::Retry { .. } => Settled::default(),
    };
    let unrecorded = interrupted(
        store,
        run,
        &records,
        launched,
        adopted,
        at_ms,
        &mut restored,
    )?;
    if matches!(how, Takeover::Resume { .. }) {
        restored.carried = carried_candidates(store, graph, run, &records, &again)?;
    }
    for t in &records {
        if let Some(&(_, attempt)) = adopted.iter().find(|(task, _)| *task == t.idx) {
            // Queued, and perhaps running, before its start was recorded: recorded now.
            if attempt > t.attempts {
                restored.opening.push(Event {
                    seq: 0,
                    at_ms,
                    kind: EventKind::AttemptStarted {
                        task: t.task.clone(),
                        attempt,
                        pid: None,
                    },
                });
            }
            restored.running.push((t.idx, attempt));
        } else if again.contains(&t.idx) {
            let attempts = if unrecorded.contains(&t.idx) {
                launched[&t.task]
            } else {
                t.attempts
            };
            restored.again.push((t.idx, attempts));
            if t.status == TaskState::Pending && !unrecorded.contains(&t.idx) {
                continue;
            }
            restored.opening.push(Event {
                seq: 0,
                at_ms,
                kind: EventKind::TaskReset {
                    task: t.task.clone(),
                },
            });
        } else {
            let status = if settled.succeeded.contains(&t.idx) {
                TaskState::Succeeded
            } else if let Some(&(_, state)) = settled.decided.iter().find(|(i, _)| *i == t.idx) {
                state
            } else {
                t.status
            };
            restored.terminal.push((t.idx, status, t.attempts));
            if status == TaskState::Succeeded {
                // What it changed is read back from its branch when the workspaces are set up.
                restored.outputs.push((t.idx, recorded_output(t)));
            }
        }
    }
    Ok(restored)
}

/// Whether a run's budget stopped it, and which of its failed tasks an agent's budget stopped:
/// they go on with the run when a person gives it more.
#[derive(Default)]
struct BudgetStopped {
    run: bool,
    over_budget: BTreeSet<u32>,
}

impl BudgetStopped {
    fn read(
        store: &dyn Store,
        run: &RunId,
        effective: RunState,
        records: &[TaskRecord],
    ) -> Result<Self, crate::RunError> {
        // A run its budget stopped goes on when a person gives it more.
        let budget_stop = effective == RunState::Failed
            && store
                .run(run)?
                .and_then(|r| r.stop)
                .is_some_and(|stop| stop.cause == baton_model::StopCause::BudgetSpent);
        // The failed tasks an agent's budget stopped: they go on with the run's.
        let mut over_budget = BTreeSet::new();
        if budget_stop {
            for task in records.iter().filter(|t| t.status == TaskState::Failed) {
                let last = store.attempts(run, &task.task)?.pop();
                if let Some(Outcome::OverBudget { .. }) = last.and_then(|a| a.outcome) {
                    over_budget.insert(task.idx);
                }
            }
        }
        Ok(Self {
            run: budget_stop,
            over_budget,
        })
    }
}

/// The tasks a takeover runs again: for `baton resume`, what did not end (and, after a
/// cancel, what it stopped; after a budget stop, what the budget left undone); for `baton
/// retry`, the failures it names. Refuses a takeover the run's state does not allow.
fn which_again(
    store: &dyn Store,
    graph: &Graph,
    run: &RunId,
    effective: RunState,
    how: &Takeover,
    records: &[TaskRecord],
    stopped: &BudgetStopped,
) -> Result<BTreeSet<u32>, crate::RunError> {
    let (budget_stop, over_budget) = (stopped.run, &stopped.over_budget);
    Ok(match how {
        Takeover::Resume { budget, .. } => {
            match effective {
                RunState::Interrupted | RunState::Running => {}
                RunState::Cancelled => {}
                // A person resolved what conflicted (on the tasks' branches): try again.
                RunState::NeedsHuman => {}
                RunState::Waiting if budget.is_some() => {}
                RunState::Failed if budget_stop && budget.is_some() => {}
                RunState::Failed if budget_stop => {
                    return Err(TakeoverError::NotApplicable {
                        run: run.clone(),
                        state: effective,
                        hint: format!(
                            "its budget stopped it: give it more with `baton resume {run} --raise-budget USD`"
                        ),
                    }
                    .into());
                }
                RunState::Waiting => {
                    let spent = store.run_spend(run)?.1.map_or_else(
                        || "nothing spent".to_owned(),
                        |usd| format!("${usd:.2} spent"),
                    );
                    return Err(TakeoverError::WaitingForBudget {
                        run: run.clone(),
                        spent,
                    }
                    .into());
                }
                state => {
                    return Err(TakeoverError::NotApplicable {
                        run: run.clone(),
                        state,
                        hint: format!(
                            "only an interrupted, cancelled, waiting or needs_human run can be resumed; `baton retry {run}` runs a finished run's failures again"
                        ),
                    }
                    .into());
                }
            }
            records
                .iter()
                .filter(|t| {
                    !t.status.is_terminal()
                        || (effective == RunState::Cancelled
                            && matches!(t.status, TaskState::Cancelled | TaskState::Skipped))
                        || (effective == RunState::NeedsHuman
                            && matches!(t.status, TaskState::NeedsHuman | TaskState::Blocked))
                        // What the budget left undone, stopped or blocked.
                        || (budget_stop
                            && (matches!(
                                t.status,
                                TaskState::Skipped | TaskState::Cancelled | TaskState::Blocked
                            ) || over_budget.contains(&t.idx)))
                })
                .map(|t| t.idx)
                .collect()
        }
        Takeover::Retry { tasks, .. } => {
            if matches!(effective, RunState::Running | RunState::Interrupted) {
                return Err(TakeoverError::NotApplicable {
                    run: run.clone(),
                    state: effective,
                    hint: format!("it has not finished; `baton resume {run}` continues it"),
                }
                .into());
            }
            retry_selection(graph, run, records, tasks)?
        }
    })
}

/// The takeover's opening events: the run resumed, the graph reloaded, the budget a person
/// changed (and the one a takeover before set, kept).
fn open_takeover(
    store: &dyn Store,
    graph: &Graph,
    run: &RunId,
    how: &Takeover,
    at_ms: i64,
    restored: &mut Restored,
) -> Result<(), crate::RunError> {
    restored.opening.push(Event {
        seq: 0,
        at_ms,
        kind: EventKind::RunResumed {
            retry: matches!(how, Takeover::Retry { .. }),
            worker: match how {
                Takeover::Resume { by_worker, .. } => by_worker.clone(),
                Takeover::Retry { .. } => None,
            },
        },
    });
    if let Some(reload) = how.reload() {
        restored.opening.push(Event {
            seq: 0,
            at_ms,
            kind: EventKind::GraphReloaded {
                graph: reload.graph.to_stored_json(),
                changed: reload.changed.clone(),
            },
        });
    }
    let (mut budget, changed_before) = current_budget(store, graph, run)?;
    if let Takeover::Resume {
        budget: Some(change),
        ..
    }
    | Takeover::Retry {
        budget: Some(change),
        ..
    } = how
    {
        match change {
            BudgetChange::Approve => {}
            BudgetChange::RaiseUsd(usd) => budget.usd = Some(*usd),
        }
        // Either way a person looked at the spend: no more pausing in this run.
        budget.soft_usd = None;
        budget.soft_tokens = None;
        restored.opening.push(Event {
            seq: 0,
            at_ms,
            kind: EventKind::BudgetChanged {
                usd: budget.usd,
                tokens: budget.tokens,
                soft_usd: None,
                soft_tokens: None,
            },
        });
        restored.budget = Some(budget);
    } else if changed_before {
        restored.budget = Some(budget);
    }
    Ok(())
}

/// What a resume settles without running it: tasks whose success was recorded but not their
/// end, and tasks a reviewer left to a person that the person decided since.
#[derive(Default)]
struct Settled {
    succeeded: Vec<u32>,
    decided: Vec<(u32, TaskState)>,
}

/// A task whose last attempt's success was recorded but not the task's own end (the two can
/// land in different commits when a turn is split) succeeded: finish it, don't run it again.
/// Tasks a reviewer left to a person, decided since: accepted or failed, not run again.
fn settle(
    store: &dyn Store,
    run: &RunId,
    records: &[TaskRecord],
    at_ms: i64,
    again: &mut BTreeSet<u32>,
    restored: &mut Restored,
) -> Result<Settled, crate::RunError> {
    let mut settled = Settled::default();
    let attempts = store.run_attempts(run)?;
    let decisions = store.decisions(run)?;
    for t in records.iter().filter(|t| t.status == TaskState::NeedsHuman) {
        let Some(last) = attempts
            .iter()
            .filter(|a| a.task == t.task)
            .max_by_key(|a| a.attempt)
        else {
            continue;
        };
        if !matches!(&last.outcome, Some(Outcome::Reviewed { verdict }) if verdict.asks_a_person())
        {
            continue;
        }
        let Some(decision) = decisions
            .iter()
            .find(|d| d.task == t.task && d.at_ms >= last.started_at_ms)
        else {
            continue;
        };
        let state = if decision.approved {
            TaskState::Succeeded
        } else {
            TaskState::Failed
        };
        again.remove(&t.idx);
        settled.decided.push((t.idx, state));
        restored.opening.push(Event {
            seq: 0,
            at_ms,
            kind: EventKind::TaskDecided {
                task: t.task.clone(),
                approved: decision.approved,
                reason: decision.reason.clone(),
            },
        });
        restored.opening.push(Event {
            seq: 0,
            at_ms,
            kind: EventKind::TaskFinished {
                task: t.task.clone(),
                state,
                reason: (!decision.approved).then(|| match &decision.reason {
                    Some(why) => format!("a person rejected its work: {why}"),
                    None => "a person rejected its work".to_owned(),
                }),
            },
        });
    }
    for t in records.iter().filter(|t| !t.status.is_terminal()) {
        let last = attempts
            .iter()
            .filter(|a| a.task == t.task)
            .max_by_key(|a| a.attempt);
        if last.is_some_and(|a| {
            a.attempt == t.attempts && a.outcome.as_ref().is_some_and(Outcome::is_success)
        }) {
            again.remove(&t.idx);
            settled.succeeded.push(t.idx);
            restored.opening.push(Event {
                seq: 0,
                at_ms,
                kind: EventKind::TaskFinished {
                    task: t.task.clone(),
                    state: TaskState::Succeeded,
                    reason: None,
                },
            });
        }
    }
    Ok(settled)
}

/// Attempts in flight when the driver died, recorded as interrupted (their processes are ended
/// by the caller, `kill_leftovers`), and attempts it launched whose start it did not get to
/// record (see `launch_log`): they ran, perhaps to the end; recorded as started and
/// interrupted, so that the record says so and the task's next attempt has a number of its
/// own. Returns the tasks that had such unrecorded launches.
fn interrupted(
    store: &dyn Store,
    run: &RunId,
    records: &[TaskRecord],
    launched: &std::collections::HashMap<TaskId, u32>,
    adopted: &[(u32, u32)],
    at_ms: i64,
    restored: &mut Restored,
) -> Result<BTreeSet<u32>, crate::RunError> {
    let is_adopted = |task: &TaskId, attempt: u32| {
        records
            .iter()
            .find(|t| &t.task == task)
            .is_some_and(|t| adopted.contains(&(t.idx, attempt)))
    };
    for attempt in store.open_attempts(run)? {
        if is_adopted(&attempt.task, attempt.attempt) {
            continue;
        }
        restored.opening.push(Event {
            seq: 0,
            at_ms,
            kind: EventKind::AttemptFinished {
                task: attempt.task.clone(),
                attempt: attempt.attempt,
                outcome: Outcome::Interrupted,
                duration_ms: at_ms.saturating_sub(attempt.started_at_ms).max(0) as u64,
                agent: None,
                containment: None,
            },
        });
    }
    let mut unrecorded: BTreeSet<u32> = BTreeSet::new();
    for t in records
        .iter()
        .filter(|t| !t.status.is_terminal() && !adopted.iter().any(|(task, _)| *task == t.idx))
    {
        let noted = launched.get(&t.task).copied().unwrap_or(0);
        for attempt in t.attempts + 1..=noted {
            unrecorded.insert(t.idx);
            for kind in [
                EventKind::AttemptStarted {
                    task: t.task.clone(),
                    attempt,
                    pid: None,
                },
                EventKind::AttemptFinished {
                    task: t.task.clone(),
                    attempt,
                    outcome: Outcome::Interrupted,
                    duration_ms: 0,
                    agent: None,
                    containment: None,
                },
            ] {
                restored.opening.push(Event {
                    seq: 0,
                    at_ms,
                    kind,
                });
            }
        }
    }
    Ok(unrecorded)
}

/// The tasks `baton retry` runs again: the named ones (all that did not succeed when none are
/// named), everything they need that did not succeed, and everything below them that did not
/// succeed (it was blocked or skipped because of them).
fn retry_selection(
    graph: &Graph,
    run: &RunId,
    records: &[TaskRecord],
    named: &[TaskId],
) -> Result<BTreeSet<u32>, crate::RunError> {
    let ok = |i: u32| {
        records
            .iter()
            .find(|t| t.idx == i)
            .is_some_and(|t| t.status == TaskState::Succeeded)
    };
    let mut seeds = Vec::new();
    if named.is_empty() {
        seeds.extend((0..graph.len() as u32).filter(|&i| !ok(i)));
    } else {
        for id in named {
            let index = graph
                .index_of(id.as_str())
                .ok_or_else(|| TakeoverError::UnknownTask {
                    run: run.clone(),
                    task: id.clone(),
                })?;
            seeds.push(index);
        }
    }
    if seeds.is_empty() {
        return Err(TakeoverError::NothingToRetry(run.clone()).into());
    }
    let mut chosen: BTreeSet<u32> = seeds.iter().copied().collect();
    // Upward: what a chosen task needs and did not get.
    let mut stack = seeds.clone();
    while let Some(t) = stack.pop() {
        for &need in &graph.task(t).needs {
            if !ok(need) && chosen.insert(need) {
                stack.push(need);
            }
        }
    }
    // Downward: what waited on a chosen task.
    let mut stack: Vec<u32> = chosen.iter().copied().collect();
    while let Some(t) = stack.pop() {
        for &dependent in graph.dependents(t) {
            if !ok(dependent) && chosen.insert(dependent) {
                stack.push(dependent);
            }
        }
    }
    Ok(chosen)
}

/// Cancels a run whose driver died: ends the process groups it left, records its attempts in
/// flight as interrupted, its unfinished tasks as cancelled (those that were running) or
/// skipped, and the run as cancelled. Refuses, naming it, while a live process drives the run.
pub fn cancel_abandoned(store: &dyn Store, run: &RunId) -> Result<(), crate::RunError> {
    let lease = crate::driver::claim(store, run)?.lease;
    let result = (|| {
        let at_ms = now_ms();
        crate::kill_leftovers(run, &unfinished(store, run)?);
        let open = store.open_attempts(run)?;
        let mut events = Vec::new();
        let event = |kind| Event {
            seq: 0,
            at_ms,
            kind,
        };
        for attempt in &open {
            events.push(event(EventKind::AttemptFinished {
                task: attempt.task.clone(),
                attempt: attempt.attempt,
                outcome: Outcome::Interrupted,
                duration_ms: at_ms.saturating_sub(attempt.started_at_ms).max(0) as u64,
                agent: None,
                containment: None,
            }));
        }
        events.push(event(EventKind::RunStopping {
            reason: "cancelled after its driver died".into(),
            cause: Some(baton_model::StopCause::DriverDied),
        }));
        for task in store.tasks(run)? {
            if task.status.is_terminal() {
                continue;
            }
            let was_running = open.iter().any(|a| a.task == task.task);
            events.push(event(EventKind::TaskFinished {
                task: task.task.clone(),
                state: if was_running {
                    TaskState::Cancelled
                } else {
                    TaskState::Skipped
                },
                reason: Some(if was_running {
                    "run cancelled".into()
                } else {
                    "not started: run cancelled".into()
                }),
            }));
        }
        let cancelled = baton_model::Ending {
            stopped: Some(baton_model::Stopped::ByPerson),
            ..Default::default()
        };
        events.push(event(EventKind::RunFinished {
            state: cancelled.state(),
        }));
        store.record(run, lease, &events, &[])?;
        Ok(())
    })();
    let _ = store.release(run, lease);
    result
}

/// What a run taken over recalls of its agents: what they spent goes on `meter` (it counts
/// against the run's budget), and each task whose last attempt the machinery cut short after
/// the agent got somewhere continues that attempt's session.
pub(crate) fn recall_agents(
    store: &dyn Store,
    graph: &Graph,
    run: &RunId,
    meter: &baton_attempt::budget::Meter,
) -> Result<std::collections::HashMap<u32, baton_attempt::launch::Continue>, baton_store::StoreError>
{
    let mut last: std::collections::HashMap<u32, baton_store::AttemptRecord> = Default::default();
    for attempt in store.run_attempts(run)? {
        let Some(task) = graph.index_of(attempt.task.as_str()) else {
            continue;
        };
        if let Some(usage) = &attempt.agent {
            meter.finish((task, attempt.attempt), usage);
        }
        if last.get(&task).is_none_or(|l| l.attempt < attempt.attempt) {
            last.insert(task, attempt);
        }
    }
    Ok(last
        .into_iter()
        .filter_map(|(task, attempt)| {
            let session = baton_attempt::unit::continued_session(
                attempt.outcome.as_ref()?,
                attempt.agent.as_ref()?,
            )?;
            Some((task, session))
        })
        .collect())
}

/// A recorded task's output, as a takeover (or a planner's new task that needs it) reads it
/// back. What it changed is read from its branch, where that matters.
pub fn recorded_output(record: &baton_store::TaskRecord) -> HeldOutput {
    HeldOutput {
        text: record.output.clone().unwrap_or_default(),
        json: record
            .output_json
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok()),
        files_changed: Vec::new(),
    }
}

/// The attempts of `run` whose processes a dead driver may have left, read from the store
/// before a takeover records anything.
pub fn unfinished(store: &dyn RunReader, run: &RunId) -> Result<Unfinished, StoreError> {
    let mut unfinished = Unfinished::default();
    for task in store.tasks(run)? {
        unfinished.recorded(task.task.as_str(), task.attempts);
    }
    for attempt in store.open_attempts(run)? {
        unfinished.open(attempt.task.as_str(), attempt.attempt, attempt.pid);
    }
    Ok(unfinished)
}
