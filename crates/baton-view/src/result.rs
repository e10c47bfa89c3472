use baton_model::{Containment, EventName, Outcome, RunId};
use baton_report::{
    FailedCheck, MergedResult, RESULT_SCHEMA_VERSION, ResultCheck, ResultConflict, RunResult,
    RunSection, RunSpend, Spend, TaskAgent, TaskResult, Totals, timeline,
};
use baton_store::{Store, StoreError};

/// Per task, the ids of other tasks: a planner's, those its answers added.
type TasksOf = std::collections::HashMap<baton_model::TaskId, Vec<String>>;

/// The run's tasks, in graph order with each planner's tasks right after it (as `status` and
/// the report show them), read on a thread of their own while `walk` (the run's attempts) goes
/// on on this one: on a connection each where the store has two, a 100,000-task run's result
/// read in 0.1 s less.
fn tasks_beside(
    store: &dyn Store,
    run: &RunId,
    walk: impl FnOnce() -> Result<(), StoreError>,
) -> Result<Vec<baton_store::TaskRecord>, StoreError> {
    std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("result-tasks".into())
            .spawn_scoped(scope, || store.tasks(run));
        let walked = walk();
        let tasks = match reader {
            Ok(reader) => reader
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => store.tasks(run),
        };
        walked?;
        let mut records = tasks?;
        records.sort_by_key(|t| t.idx);
        Ok(nested_order(records))
    })
}

/// `key`'s value in `map`, taken out. A lookup hashes its key even in an empty map, and most
/// of what a result gathers per task (checks, reviews, picks, plans) is empty for most runs:
/// seven such lookups for each of a 100,000-task run's tasks were a tenth of reading its
/// result back.
fn take<K, Q, V>(map: &mut std::collections::HashMap<K, V>, key: &Q) -> Option<V>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    if map.is_empty() {
        None
    } else {
        map.remove(key)
    }
}

/// A task's last attempt: its number, outcome, log and containment.
type LastAttempt = (u32, Option<Outcome>, Option<String>, Option<Containment>);

/// Each task's last attempt, by the task's index in the run. The attempts are read in
/// task-index order and the tasks looked up in it too: a map keyed by task id cost a cache
/// miss at each of a 100,000-task run's lookups (a third of assembling its result).
#[derive(Default)]
struct LastAttempts(Vec<Option<LastAttempt>>);

impl LastAttempts {
    fn for_tasks(tasks: usize) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(tasks, || None);
        Self(slots)
    }

    fn get(&self, idx: u32) -> Option<&LastAttempt> {
        self.0.get(idx as usize)?.as_ref()
    }

    fn take(&mut self, idx: u32) -> Option<LastAttempt> {
        self.0.get_mut(idx as usize)?.take()
    }

    fn set(&mut self, idx: u32, attempt: LastAttempt) {
        let idx = idx as usize;
        if self.0.len() <= idx {
            self.0.resize_with(idx + 1, || None);
        }
        self.0[idx] = Some(attempt);
    }
}

/// A task's index in the run by its id, for the few lookups by id (checks, reviews): made the
/// first time one is asked for.
struct IndexOf<'r> {
    records: &'r [baton_store::TaskRecord],
    map: std::cell::OnceCell<std::collections::HashMap<&'r str, u32>>,
}

impl<'r> IndexOf<'r> {
    fn new(records: &'r [baton_store::TaskRecord]) -> Self {
        Self {
            records,
            map: std::cell::OnceCell::new(),
        }
    }

    fn get(&self, task: &baton_model::TaskId) -> Option<u32> {
        self.map
            .get_or_init(|| {
                self.records
                    .iter()
                    .map(|t| (t.task.as_str(), t.idx))
                    .collect()
            })
            .get(task.as_str())
            .copied()
    }
}

/// The run result document, read back from the store: what is printed is what was recorded.
///
/// `state_dir` is the project's `.baton/`, where the run's worktrees are: a run that needs a
/// person is told which one to resolve, and how.
pub fn build_result(
    store: &dyn Store,
    run: &RunId,
    state_dir: &std::path::Path,
) -> Result<RunResult, StoreError> {
    build_observed_result(store, run, state_dir, None)
}

/// [`build_result`] for a run whose state was observed to be `state` rather than what its
/// record says (a run recorded as running whose driver is dead is interrupted): the result,
/// and what to type next, are of that state.
pub fn build_observed_result(
    store: &dyn Store,
    run: &RunId,
    state_dir: &std::path::Path,
    state: Option<baton_model::RunState>,
) -> Result<RunResult, StoreError> {
    let mut record = store
        .run(run)?
        .ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
    if let Some(state) = state {
        record.status = state;
    }
    let (mut planned, mut replanned) = plans(store, run)?;
    let started = record.started_at_ms;
    let ended = record.ended_at_ms;
    let run_ms = ended
        .unwrap_or_else(baton_model::now_ms)
        .saturating_sub(started)
        .max(0) as u64;
    // The run's driven stretches: from each start or takeover to its end — the run's finish,
    // or (when its driver died) the last thing its attempts did before the next takeover.
    let mut driven = Driven::read(store, run)?;

    // Per task, the last attempt's outcome and log, read one attempt at a time (a 100,000-task
    // run's attempts held at once would double its memory).
    let task_count = usize::try_from(record.task_count).unwrap_or(0);
    let mut last = LastAttempts::for_tasks(task_count);
    let mut intervals = Vec::with_capacity(task_count);
    // A run still going: its open attempts run now, and count in the timeline up to now. (In
    // a run whose driver died they ended unrecorded: left out.)
    let open_until = (record.status == baton_model::RunState::Running).then_some(run_ms);
    let mut spend: Option<RunSpend> = None;
    let mut agents: std::collections::HashMap<baton_model::TaskId, (u32, TaskAgent)> =
        std::collections::HashMap::new();
    let mut picks = picks(store, run)?;
    let winning = |task: &baton_model::TaskId| {
        let pick = picks.get(task)?;
        let w = pick.winner?;
        pick.list
            .iter()
            .find(|c| c.candidate == w)
            .map(|c| c.attempt)
    };
    let records = tasks_beside(store, run, || {
        store.each_attempt(run, &mut |attempt| {
            driven.saw(attempt.started_at_ms);
            if let Some(end) = attempt.ended_at_ms {
                driven.saw(end);
            }
            if let Some(usage) = &attempt.agent {
                spend.get_or_insert_with(RunSpend::default).add(usage);
                let (number, agent) = agents.entry(attempt.task.clone()).or_insert_with(|| {
                    (
                        0,
                        TaskAgent {
                            engine: usage.engine.clone(),
                            model: None,
                            session_id: None,
                            turns: None,
                            tool_calls: 0,
                            permission_denials: Vec::new(),
                            engines: Vec::new(),
                            spend: Spend::default(),
                        },
                    )
                });
                agent.spend.add(usage);
                agent.tool_calls += usage.tool_calls;
                agent.engines.push(baton_report::AttemptEngine {
                    attempt: attempt.attempt,
                    engine: usage.engine.clone(),
                    model: usage.model.clone(),
                });
                if attempt.attempt > *number {
                    *number = attempt.attempt;
                    agent.engine = usage.engine.clone();
                    agent.model = usage.model.clone();
                    agent.session_id = usage.session_id.clone();
                    agent.turns = usage.turns;
                    agent.permission_denials = usage.permission_denials.clone();
                }
            }
            let start = attempt.started_at_ms.saturating_sub(started).max(0) as u64;
            match attempt.ended_at_ms {
                Some(end) => intervals.push((start, end.saturating_sub(started).max(0) as u64)),
                None => intervals.extend(open_until.map(|now| (start, now))),
            }
            let newer = match winning(&attempt.task) {
                Some(won) => attempt.attempt == won,
                None => last
                    .get(attempt.task_idx)
                    .is_none_or(|(number, ..)| attempt.attempt > *number),
            };
            if newer {
                last.set(
                    attempt.task_idx,
                    (
                        attempt.attempt,
                        attempt.outcome,
                        attempt.log_path,
                        attempt.containment,
                    ),
                );
            }
        })
    })?;

    let mut workspaces = task_workspaces(store, run, &winning)?;
    let index_of = IndexOf::new(&records);
    let mut checks = failed_checks(store, run, &last, &index_of)?;
    let mut reviews = last_reviews(store, run, &last, &index_of)?;
    drop(index_of);
    let tasks: Vec<TaskResult> = records
        .into_iter()
        .map(|t| {
            let (outcome, log, containment) = last
                .take(t.idx)
                .map(|(_, outcome, log, containment)| (outcome, log, containment))
                .unwrap_or_default();
            // A check's failure is the task's only while its outcome says so (a task that a
            // later round fixed has none).
            let check = take(&mut checks, &t.task)
                .filter(|_| matches!(outcome, Some(Outcome::VerifyFailed { .. })))
                .map(Box::new);
            let review = take(&mut reviews, &t.task);
            // To the scheduler and the record it succeeded; its result says its reviewer had
            // reservations.
            let state = match &review {
                Some(r)
                    if t.status == baton_model::TaskState::Succeeded
                        && r.verdict == baton_model::ReviewVerdict::VerifiedWithWarnings =>
                {
                    baton_model::TaskState::SucceededWithWarnings
                }
                _ => t.status,
            };
            TaskResult {
                id: t.task.to_string(),
                state,
                attempts: t.attempts,
                duration_ms: match (t.started_at_ms, t.ended_at_ms) {
                    (Some(s), Some(e)) => Some(e.saturating_sub(s).max(0) as u64),
                    _ => None,
                },
                outcome,
                exit_code: t.exit_code,
                reason: t.reason,
                output: t.output,
                output_bytes: t.output_bytes.unwrap_or(0),
                stderr: t.stderr_tail.filter(|s| !s.is_empty()),
                log,
                agent: take(&mut agents, &t.task).map(|(_, mut agent)| {
                    agent.engines.sort_by_key(|a| a.attempt);
                    let first = agent.engines.first().map(|a| &a.engine);
                    // A best-of task's engines are its candidates', said there.
                    if picks.contains_key(&t.task)
                        || agent.engines.iter().all(|a| Some(&a.engine) == first)
                    {
                        // One engine throughout: `engine` says it.
                        agent.engines.clear();
                    }
                    Box::new(agent)
                }),
                workspace: take(&mut workspaces, t.task.as_str()).map(Box::new),
                containment,
                check,
                review,
                planned: take(&mut planned, &t.task).unwrap_or_default(),
                replanned_after: take(&mut replanned, &t.task).unwrap_or_default(),
                candidates: take(&mut picks, &t.task).map(Box::new),
            }
        })
        .collect();
    let merged = merged_result(store, run, state_dir)?;
    let worktrees = state_dir.join("worktrees").join(run.as_str());
    let next = next_steps(run, merged.as_ref(), &tasks, &record, &worktrees);
    Ok(RunResult {
        schema: RESULT_SCHEMA_VERSION,
        run: RunSection {
            id: record.id.to_string(),
            name: record.name.clone(),
            state: record.status,
            graph: record.graph_path.clone(),
            started_at_ms: started,
            ended_at_ms: ended,
            duration_ms: driven.total(ended),
            span_ms: run_ms,
            concurrency: record.concurrency,
        },
        totals: Totals::from_tasks(&tasks),
        timeline: Some(timeline(&intervals, run_ms)),
        spend,
        tasks,
        result: merged,
        next,
    })
}

/// Per planner, the tasks its answers added; per planner asked again, the tasks whose failure
/// sent it back.
fn plans(store: &dyn Store, run: &RunId) -> Result<(TasksOf, TasksOf), StoreError> {
    let mut planned: std::collections::HashMap<baton_model::TaskId, Vec<String>> =
        std::collections::HashMap::new();
    let mut replanned: std::collections::HashMap<baton_model::TaskId, Vec<String>> =
        std::collections::HashMap::new();
    for event in store.events_of_kind(run, EventName::Replanning)? {
        if let baton_model::EventKind::Replanning { task, failed } = event.kind {
            replanned.entry(task).or_default().push(failed.to_string());
        }
    }
    for event in store.events_of_kind(run, EventName::GraphExpanded)? {
        if let baton_model::EventKind::GraphExpanded { task, added, .. } = event.kind {
            planned
                .entry(task)
                .or_default()
                .extend(added.iter().map(ToString::to_string));
        }
    }
    Ok((planned, replanned))
}

/// Best-of tasks: their last attempt's candidates, and the attempt that won, whose end and
/// work are the task's.
fn picks(
    store: &dyn Store,
    run: &RunId,
) -> Result<std::collections::HashMap<baton_model::TaskId, baton_report::TaskCandidates>, StoreError>
{
    let mut picks: std::collections::HashMap<baton_model::TaskId, baton_report::TaskCandidates> =
        std::collections::HashMap::new();
    for event in store.events_of_kind(run, EventName::Picked)? {
        if let baton_model::EventKind::Picked {
            task,
            candidates,
            winner,
            why,
        } = event.kind
        {
            picks.insert(
                task,
                baton_report::TaskCandidates {
                    winner,
                    why,
                    list: candidates,
                },
            );
        }
    }
    Ok(picks)
}

/// What each task's worktree holds: its last recorded commit's evidence (a best-of task's, its
/// winner's, on the task's own branch).
fn task_workspaces(
    store: &dyn Store,
    run: &RunId,
    winning: &dyn Fn(&baton_model::TaskId) -> Option<u32>,
) -> Result<std::collections::HashMap<String, baton_report::TaskWorkspace>, StoreError> {
    let mut workspaces: std::collections::HashMap<String, baton_report::TaskWorkspace> =
        std::collections::HashMap::new();
    for event in store.events_of_kind(run, EventName::WorkspaceCommitted)? {
        if let baton_model::EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
            task,
            attempt,
            mut branch,
            commit,
            evidence,
            scope_violations,
            ..
        }) = event.kind
        {
            // A best-of task's work is its winner's, on the task's own branch now.
            if let Some(won) = winning(&task) {
                if attempt != won {
                    continue;
                }
                if let Some((own, _)) = branch.rsplit_once('@') {
                    branch = own.to_owned();
                }
            }
            let entry = workspaces.entry(task.to_string());
            let previous = match &entry {
                std::collections::hash_map::Entry::Occupied(o) => o.get().commit.clone(),
                std::collections::hash_map::Entry::Vacant(_) => None,
            };
            entry.insert_entry(baton_report::TaskWorkspace {
                branch,
                // An attempt that changed nothing leaves the branch where it was.
                commit: commit.or(previous),
                evidence,
                scope_violations,
            });
        }
    }
    Ok(workspaces)
}

/// Per task, the check that failed in its last attempt's last round of checks, with its log.
fn failed_checks(
    store: &dyn Store,
    run: &RunId,
    last: &LastAttempts,
    index_of: &IndexOf<'_>,
) -> Result<std::collections::HashMap<baton_model::TaskId, FailedCheck>, StoreError> {
    let mut checks: std::collections::HashMap<baton_model::TaskId, FailedCheck> =
        std::collections::HashMap::new();
    for event in store.events_of_kind(run, EventName::Checked)? {
        if let baton_model::EventKind::Checked {
            task: Some(task),
            attempt: Some(attempt),
            checks: results,
            ..
        } = event.kind
        {
            let Some((number, _, log, _)) = index_of.get(&task).and_then(|idx| last.get(idx))
            else {
                continue;
            };
            if *number != attempt {
                continue;
            }
            // A later round's checks replace an earlier round's.
            checks.remove(&task);
            if let Some((i, failed)) = results.into_iter().enumerate().find(|(_, c)| !c.passed()) {
                let n = i + 1;
                let log = log.as_deref().and_then(|log| {
                    let dir = std::path::Path::new(log).parent()?;
                    Some(
                        dir.join(
                            baton_layout::AttemptLog::Check(n as u32).file_name(&task, attempt),
                        )
                        .display()
                        .to_string(),
                    )
                });
                checks.insert(
                    task,
                    FailedCheck {
                        number: n as u32,
                        command: failed.command,
                        outcome: failed.outcome,
                        output: failed.output,
                        log,
                    },
                );
            }
        }
    }
    Ok(checks)
}

/// Per task, its last attempt's last review.
fn last_reviews(
    store: &dyn Store,
    run: &RunId,
    last: &LastAttempts,
    index_of: &IndexOf<'_>,
) -> Result<std::collections::HashMap<baton_model::TaskId, baton_model::Review>, StoreError> {
    let mut reviews: std::collections::HashMap<baton_model::TaskId, baton_model::Review> =
        std::collections::HashMap::new();
    for event in store.events_of_kind(run, EventName::Reviewed)? {
        if let baton_model::EventKind::Reviewed {
            task,
            attempt,
            review,
        } = event.kind
            && index_of
                .get(&task)
                .and_then(|idx| last.get(idx))
                .is_some_and(|(number, ..)| *number == attempt)
        {
            reviews.insert(task, review);
        }
    }
    Ok(reviews)
}

/// Tasks in graph order, except that the tasks a planner added follow it (and theirs follow
/// them): the order people read a grown graph in.
fn nested_order(records: Vec<baton_store::TaskRecord>) -> Vec<baton_store::TaskRecord> {
    if !records.iter().any(|t| t.task.is_nested()) {
        return records;
    }
    let position: std::collections::HashMap<&str, usize> = records
        .iter()
        .enumerate()
        .map(|(i, t)| (t.task.as_str(), i))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); records.len()];
    let mut roots = Vec::new();
    for (i, t) in records.iter().enumerate() {
        match t.task.parent().and_then(|p| position.get(p)) {
            Some(&parent) => children[parent].push(i),
            None => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(records.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    let mut slots: Vec<Option<baton_store::TaskRecord>> = records.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// The run's last merge of its result, as recorded.
fn merged_result(
    store: &dyn Store,
    run: &RunId,
    state_dir: &std::path::Path,
) -> Result<Option<MergedResult>, StoreError> {
    let Some(merge) = store.events_of_kind(run, EventName::ResultMerged)?.pop() else {
        return Ok(None);
    };
    let at = merge.seq;
    let baton_model::EventKind::ResultMerged {
        branch,
        commit,
        conflict_task,
        conflict_with,
        conflict_files,
        error,
        ..
    } = merge.kind
    else {
        return Ok(None);
    };
    let mut last = MergedResult {
        branch,
        commit,
        conflict: conflict_task.map(|task| ResultConflict {
            worktree: Some(
                state_dir
                    .join("worktrees")
                    .join(run.as_str())
                    .join(task.replace('/', "+"))
                    .display()
                    .to_string(),
            ),
            task,
            with: conflict_with,
            files: conflict_files,
        }),
        error,
        check: None,
        verified: Vec::new(),
    };
    // The run's checks on that merge (the run's own `checked` events: no task).
    let dirs = baton_layout::RunDirs::new(state_dir, run);
    for event in store.events_of_kind(run, EventName::Checked)? {
        if event.seq < at {
            continue;
        }
        if let baton_model::EventKind::Checked {
            task: None,
            checks,
            blamed,
            ..
        } = event.kind
        {
            last.verified = checks
                .iter()
                .map(|c| baton_report::VerifiedCheck {
                    command: c.command.clone(),
                    passed: c.passed(),
                    duration_ms: c.duration_ms,
                })
                .collect();
            last.check = checks
                .into_iter()
                .enumerate()
                .find(|(_, c)| !c.passed())
                .map(|(i, failed)| ResultCheck {
                    check: FailedCheck {
                        number: i as u32 + 1,
                        log: Some(
                            dirs.run_check_log(baton_layout::RunCheck::Verify, i + 1)
                                .display()
                                .to_string(),
                        ),
                        command: failed.command,
                        outcome: failed.outcome,
                        output: failed.output,
                    },
                    blamed,
                });
        }
    }
    Ok(Some(last))
}

/// What to type next when a merge needs a person: on the branch of the task that did not
/// merge (in its worktree, kept for this), merge the branches it collides with, resolve the
/// files, commit, and resume the run, which merges again (and runs again the tasks whose
/// dependencies conflicted).
fn next_steps(
    run: &RunId,
    merged: Option<&MergedResult>,
    tasks: &[TaskResult],
    record: &baton_store::RunRecord,
    worktrees: &std::path::Path,
) -> Vec<String> {
    let mut next = Vec::new();
    let conflict = merged.and_then(|m| m.conflict.as_ref());
    // A task whose dependencies conflicted has their merge in progress in its worktree: once
    // resolved there, its branch carries both into the result, and the result's own conflict
    // (the same one, met merging the branches in order) goes with it. So its recipe is the
    // one given; a conflict left after the resume is told then.
    let dependents_conflict = tasks.iter().any(|t| {
        t.state == baton_model::TaskState::NeedsHuman
            && matches!(t.outcome, Some(Outcome::MergeConflict { .. }))
            && worktrees.join(t.id.replace('/', "+")).join(".git").exists()
    });
    if let Some(conflict) = conflict.filter(|_| !dependents_conflict) {
        let dir = shell_word(conflict.worktree.as_deref().unwrap_or("."));
        for with in &conflict.with {
            next.push(format!(
                "git -C {dir} merge baton/{run}/{}",
                with.replace('/', "+")
            ));
        }
        next.push(format!("git -C {dir} commit -a --no-edit"));
    }
    if let Some(check) = merged.and_then(|m| m.check.as_ref()) {
        // What the blamed task changed is where the failure is.
        if let Some(blamed) = &check.blamed {
            next.push(format!("baton diff {run} {}", shell_word(blamed)));
        }
    }
    for task in tasks
        .iter()
        .filter(|t| t.state == baton_model::TaskState::NeedsHuman)
    {
        if let Some(Outcome::Reviewed { verdict }) = &task.outcome
            && verdict.asks_a_person()
        {
            // Its reviewer left its work to a person: `baton diff` shows it.
            let id = shell_word(&task.id);
            next.push(format!("baton diff {run} {id}"));
            next.push(format!("baton approve {run} {id}"));
            next.push(format!("baton reject {run} {id} --reason '…'"));
            continue;
        }
        let Some(Outcome::MergeConflict { files, .. }) = &task.outcome else {
            continue;
        };
        let dir = worktrees.join(task.id.replace('/', "+"));
        if !dir.join(".git").exists() {
            continue;
        }
        let dir = shell_word(&dir.display().to_string());
        next.push(format!(
            "# in {dir}: edit {} to keep what both changed",
            files.join(", ")
        ));
        next.push(format!("git -C {dir} commit -a --no-edit"));
    }
    let needs_human = tasks
        .iter()
        .any(|t| t.state == baton_model::TaskState::NeedsHuman);
    if conflict.is_some() || needs_human {
        next.push(format!("baton resume {run}"));
    }
    if merged.is_some_and(|m| m.conflict.is_some() || m.check.is_some()) || needs_human {
        return next;
    }
    next.extend(what_else(run, tasks, record, merged));
    next
}

/// What to type next for a run that did not succeed, merging aside: approve what waits, give
/// a stopped budget more, look at what failed and run it again, finish what was cut short.
fn what_else(
    run: &RunId,
    tasks: &[TaskResult],
    record: &baton_store::RunRecord,
    merged: Option<&MergedResult>,
) -> Vec<String> {
    use baton_model::{RunState, TaskState};
    let mut next = Vec::new();
    let state = record.status;
    let budget_stop = record
        .stop
        .as_ref()
        .is_some_and(|stop| stop.cause == baton_model::StopCause::BudgetSpent);
    match state {
        RunState::Waiting => {
            let waiting: Vec<&TaskResult> = tasks
                .iter()
                .filter(|t| t.state == TaskState::Waiting)
                .collect();
            for task in &waiting {
                let id = shell_word(&task.id);
                next.push(format!("baton approve {run} {id}"));
                next.push(format!("baton reject {run} {id} --reason '…'"));
            }
            if waiting.is_empty() {
                // Paused at its soft budget.
                next.push(format!("baton approve {run}"));
                next.push(format!("baton resume {run} --raise-budget USD"));
            }
        }
        RunState::Failed if budget_stop => {
            next.push(format!("baton resume {run} --raise-budget USD"));
        }
        // An agent the run's budget stopped: the same tasks again need more of it.
        RunState::Failed | RunState::Blocked if tasks.iter().any(stopped_by_run_budget) => {
            next.push(format!("baton retry {run} --raise-budget USD"));
        }
        RunState::Failed | RunState::Blocked => {
            let failed = tasks
                .iter()
                .filter(|t| matches!(t.state, TaskState::Failed | TaskState::TimedOut));
            for task in failed.take(3) {
                next.push(format!("baton logs {run} {}", shell_word(&task.id)));
            }
            next.push(format!("baton retry {run}"));
        }
        RunState::Interrupted | RunState::Cancelled => {
            next.push(format!("baton resume {run}"));
        }
        // A run still going has nothing to type yet unless a task waits for a person (a run
        // whose driver died is observed as interrupted, above); one that succeeded, nothing.
        RunState::Running => {
            for task in tasks.iter().filter(|t| t.state == TaskState::Waiting) {
                let id = shell_word(&task.id);
                next.push(format!("baton approve {run} {id}"));
                next.push(format!("baton reject {run} {id} --reason '…'"));
            }
        }
        // Waits for a worker: `baton workers` says whether one is there to take it.
        RunState::Queued => next.push("baton workers".to_owned()),
        // Where the work went: on the result branch, to look at and take.
        RunState::Succeeded | RunState::SucceededWithWarnings
            if merged.is_some_and(|m| m.commit.is_some())
                && tasks.iter().any(|t| {
                    t.workspace
                        .as_ref()
                        .is_some_and(|w| !w.evidence.files.is_empty())
                }) =>
        {
            next.push(format!("baton diff {run} --stat"));
            next.push(format!("baton apply {run}"));
        }
        RunState::Succeeded | RunState::SucceededWithWarnings | RunState::NeedsHuman => {}
    }
    next
}

/// Whether `task` failed because the run's budget ran out under it (not its own budget).
fn stopped_by_run_budget(task: &TaskResult) -> bool {
    matches!(
        &task.outcome,
        Some(Outcome::OverBudget { limit, scope, .. })
            if baton_model::BudgetScope::of(limit, *scope) == baton_model::BudgetScope::Run
    )
}

/// `word` as one shell word: as it is when nothing in it is special to a shell, else quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._+-=:@%,".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The stretches of time a run was driven: a `baton retry` an hour later does not make the run
/// an hour long.
struct Driven {
    /// When each stretch began (the run's start, each takeover), in order.
    opened: Vec<i64>,
    /// When the run finished, each time it did.
    finished: Vec<i64>,
    /// Per stretch, the latest moment one of its attempts started or ended.
    last_seen: Vec<i64>,
}

impl Driven {
    fn read(store: &dyn Store, run: &RunId) -> Result<Self, StoreError> {
        let at = |kind: EventName| -> Result<Vec<i64>, StoreError> {
            Ok(store
                .events_of_kind(run, kind)?
                .iter()
                .map(|e| e.at_ms)
                .collect())
        };
        let mut opened = at(EventName::RunStarted)?;
        opened.extend(at(EventName::RunResumed)?);
        opened.sort_unstable();
        let finished = at(EventName::RunFinished)?;
        Ok(Self {
            last_seen: opened.clone(),
            opened,
            finished,
        })
    }

    /// An attempt did something at `at`.
    fn saw(&mut self, at: i64) {
        let i = self.opened.partition_point(|&open| open <= at);
        if let Some(last) = i.checked_sub(1).and_then(|i| self.last_seen.get_mut(i)) {
            *last = (*last).max(at);
        }
    }

    /// Milliseconds driven in all; the last stretch of a run still going ends now.
    fn total(&self, ended: Option<i64>) -> u64 {
        let mut total = 0i64;
        for (i, &open) in self.opened.iter().enumerate() {
            let next = self.opened.get(i + 1).copied();
            let finish = self
                .finished
                .iter()
                .copied()
                .find(|&f| f >= open && next.is_none_or(|n| f < n));
            let end = match (finish, next, ended) {
                (Some(finish), _, _) => finish,
                // Its driver died: it ended with the last thing its attempts did.
                (None, Some(_), _) => self.last_seen[i],
                (None, None, Some(ended)) => ended,
                (None, None, None) => baton_model::now_ms(),
            };
            total += end.saturating_sub(open).max(0);
        }
        total as u64
    }
}
