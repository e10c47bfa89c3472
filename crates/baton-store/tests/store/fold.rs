//! Property tests: the tables are the fold of the log. A random but valid event log of a small
//! run — every kind of event, attempts with every kind of outcome, retries, approvals, stops,
//! takeovers and resets — is committed through the real write path in random turns, and the
//! `runs`, `tasks` and `attempts` rows read back are, column for column, what
//! [`baton_model::RunView`] folds from the same events. The consistency check finds nothing.

use std::collections::BTreeMap;

use baton_model::{
    AgentUsage, Containment, Event, EventKind, Evidence, FailureClass, Outcome, RunState, RunView,
    TaskId, TaskState,
};
use baton_store::RunReader;
use baton_store::{AttemptOutput, RunLog, Store};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use crate::support::*;

/// A run of `tasks` tasks; `choices` drive what happens, `turns` how the log is cut into
/// commits.
#[derive(Debug, Clone)]
struct Case {
    tasks: usize,
    choices: Vec<u32>,
    turns: Vec<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..5,
        proptest::collection::vec(any::<u32>(), 0..120),
        proptest::collection::vec(1usize..9, 1..12),
    )
        .prop_map(|(tasks, choices, turns)| Case {
            tasks,
            choices,
            turns,
        })
}

/// The events, and each output with the index of the event whose turn carries it.
#[derive(Debug, Default)]
struct Log {
    events: Vec<Event>,
    outputs: Vec<(usize, AttemptOutput)>,
}

impl Log {
    /// Appends an event, 10 ms after the one before; returns its index.
    fn push(&mut self, kind: EventKind) -> usize {
        let at_ms = 1_000 + 10 * self.events.len() as i64;
        self.events.push(event(at_ms, kind));
        self.events.len() - 1
    }

    /// Ends `attempt` of `task` as `d` says, mostly with an output in the same turn.
    fn end_attempt(&mut self, task: &TaskId, attempt: u32, d: u32) {
        let ended = self.push(EventKind::AttemptFinished {
            task: task.clone(),
            attempt,
            outcome: outcome(d),
            duration_ms: u64::from(d % 100),
            agent: agent(d / 7),
            containment: containment(d / 3),
        });
        if !d.is_multiple_of(6) {
            self.outputs.push((ended, output(task, attempt, d)));
        }
    }
}

fn output(task: &TaskId, attempt: u32, c: u32) -> AttemptOutput {
    AttemptOutput {
        task: task.clone(),
        attempt,
        output: format!("out {c}"),
        output_bytes: u64::from(c % 10_000),
        output_json: c.is_multiple_of(2).then(|| format!("{{\"n\":{c}}}")),
        stderr_tail: format!("err {}", c % 7),
        log_path: format!("logs/{task}.{attempt}.{c}.log"),
    }
}

/// What the simulated driver knows of one task: the attempts started, and which have ended.
#[derive(Debug, Default, Clone)]
struct Attempts {
    started: BTreeMap<u32, bool>,
}

impl Attempts {
    fn highest(&self) -> u32 {
        self.started.keys().next_back().copied().unwrap_or(0)
    }

    /// A number after every one started: usually the next, sometimes one past it (a gap: an
    /// attempt whose start a crash lost). Never below the latest: the store refuses that.
    fn fresh(&self, c: u32) -> u32 {
        match c % 8 {
            0 => self.highest() + 2,
            _ => self.highest() + 1,
        }
    }

    /// A started attempt that has not ended, to end (an attempt ends once: the store refuses a
    /// second end).
    fn to_end(&self, c: u32) -> Option<u32> {
        let open: Vec<u32> = self
            .started
            .iter()
            .filter(|(_, ended)| !**ended)
            .map(|(n, _)| *n)
            .collect();
        (!open.is_empty()).then(|| open[c as usize % open.len()])
    }
}

fn outcome(c: u32) -> Outcome {
    match c % 18 {
        0..=3 => Outcome::Exited { code: 0 },
        4 => Outcome::Exited { code: 3 },
        5 => Outcome::Exited { code: -1 },
        6 => Outcome::Leaked { code: 0 },
        7 => Outcome::signaled(9),
        8 => Outcome::TimedOut,
        9 => Outcome::Cancelled,
        10 => Outcome::Interrupted,
        11 => Outcome::SpawnFailed {
            error: "No such file or directory".into(),
        },
        12 => Outcome::LaunchFailed {
            error: "cannot expand `run`".into(),
        },
        13 => Outcome::IdleTimeout { after_ms: 90_000 },
        14 => Outcome::AgentFailed {
            class: if c.is_multiple_of(2) {
                FailureClass::Infrastructure
            } else {
                FailureClass::Task
            },
            reason: "error_max_turns".into(),
            message: "out of turns".into(),
            retry_after_ms: (c.is_multiple_of(3)).then_some(1_500),
        },
        15 => Outcome::MergeConflict {
            incoming: "t0".into(),
            files: vec!["a.txt".into()],
        },
        16 => Outcome::VerifyFailed {
            command: "make check".into(),
            detail: "exit 2".into(),
        },
        _ => Outcome::OverBudget {
            limit: "task".into(),
            // Recorded before event schema 2 (no scope), or with it.
            scope: [None, Some(baton_model::BudgetScope::Run)][c as usize % 2],
            // Eighths: exact in binary, so sums compare exactly.
            spent_usd: (c.is_multiple_of(2)).then_some(0.625),
            tokens: 1_000,
        },
    }
}

fn agent(c: u32) -> Option<Box<AgentUsage>> {
    (c.is_multiple_of(3)).then(|| {
        Box::new(AgentUsage {
            engine: "claude".into(),
            model: Some("m".into()),
            session_id: (c.is_multiple_of(2)).then(|| format!("s{c}")),
            input_tokens: u64::from(c % 1_000),
            output_tokens: 7,
            cost_usd: (!c.is_multiple_of(5)).then(|| f64::from(c % 64) / 8.0),
            turns: Some(2),
            ..AgentUsage::default()
        })
    })
}

fn containment(c: u32) -> Option<Containment> {
    match c % 3 {
        0 => None,
        1 => Some(Containment::Cgroup),
        _ => Some(Containment::ProcessGroup),
    }
}

fn reason(c: u32) -> Option<String> {
    (!c.is_multiple_of(3)).then(|| format!("reason {}", c % 5))
}

/// The simulated driver: turns `choices` into a log the store accepts (events about known
/// tasks; every attempt started once, ended and given outputs only once started).
fn simulate(case: &Case) -> Log {
    let ids: Vec<TaskId> = numbered(case.tasks).iter().map(|id| task(id)).collect();
    let mut tasks = vec![Attempts::default(); case.tasks];
    let mut log = Log::default();
    log.push(EventKind::RunStarted {
        name: "g".into(),
        tasks: case.tasks as u32,
        concurrency: 2,
    });
    for &c in &case.choices {
        let i = (c as usize / 32) % case.tasks;
        let id = ids[i].clone();
        let d = c / 1024;
        match c % 32 {
            // A short task: its whole attempt, its output and its end, one after the other.
            0..=7 => {
                let attempt = tasks[i].fresh(d);
                tasks[i].started.insert(attempt, true);
                log.push(EventKind::AttemptStarted {
                    task: id.clone(),
                    attempt,
                    pid: Some(d % 5 + 100),
                });
                log.end_attempt(&id, attempt, d);
                let state = if d.is_multiple_of(4) {
                    TaskState::ALL[d as usize % TaskState::ALL.len()]
                } else {
                    TaskState::Succeeded
                };
                log.push(EventKind::TaskFinished {
                    task: id,
                    state,
                    // Not `reason(d)` (nor of `d / 2`): an attempt without output (`d` a
                    // multiple of 6) would always end its task without a reason.
                    reason: reason(d / 4),
                });
            }
            8..=11 => {
                let attempt = tasks[i].fresh(d);
                tasks[i].started.insert(attempt, false);
                let pid = match d % 4 {
                    0 => None,
                    1 => Some(u32::MAX),
                    _ => Some(d % 1_000),
                };
                log.push(EventKind::AttemptStarted {
                    task: id,
                    attempt,
                    pid,
                });
            }
            12..=15 => {
                let Some(attempt) = tasks[i].to_end(d) else {
                    continue;
                };
                tasks[i].started.insert(attempt, true);
                log.end_attempt(&id, attempt, d);
            }
            16..=17 => {
                let delay_ms = match d % 4 {
                    0 => 0,
                    1 => u64::MAX,
                    _ => u64::from(d % 10_000),
                };
                log.push(EventKind::RetryScheduled {
                    task: id,
                    attempt: tasks[i].highest() + 1,
                    delay_ms,
                });
            }
            18..=19 => {
                log.push(EventKind::TaskFinished {
                    task: id,
                    state: TaskState::ALL[d as usize % TaskState::ALL.len()],
                    reason: reason(d / 11),
                });
            }
            20 => {
                log.push(EventKind::TaskWaiting { task: id });
            }
            21 => {
                log.push(EventKind::TaskDecided {
                    task: id,
                    approved: d.is_multiple_of(2),
                    reason: reason(d),
                });
            }
            22 => {
                log.push(EventKind::TaskReset { task: id });
            }
            23 => {
                // Words only (event schema 1), or a recorded cause.
                log.push(EventKind::RunStopping {
                    reason: ["budget spent: $1", "cancelled", "stop"][d as usize % 3].into(),
                    cause: [None, Some(baton_model::StopCause::Killed)][d as usize % 2],
                });
            }
            24 => {
                log.push(EventKind::RunFinished {
                    state: RunState::ALL[d as usize % RunState::ALL.len()],
                });
            }
            25 => {
                let kind = if d.is_multiple_of(3) {
                    EventKind::RunStarted {
                        name: "g".into(),
                        tasks: case.tasks as u32,
                        concurrency: 2,
                    }
                } else {
                    EventKind::RunResumed {
                        retry: d.is_multiple_of(2),
                        worker: None,
                    }
                };
                log.push(kind);
            }
            26 => {
                log.push(EventKind::BudgetChanged {
                    usd: Some(2.5),
                    tokens: None,
                    soft_usd: None,
                    soft_tokens: Some(10),
                });
            }
            27 => {
                log.push(EventKind::ResultMerged {
                    branch: "baton/result".into(),
                    base: None,
                    commit: Some("abc".into()),
                    conflict_task: None,
                    conflict_with: Vec::new(),
                    conflict_files: Vec::new(),
                    error: None,
                });
            }
            28 => {
                log.push(EventKind::Checked {
                    task: (d.is_multiple_of(2)).then(|| id.clone()),
                    attempt: (d.is_multiple_of(2)).then(|| tasks[i].highest()),
                    checks: Vec::new(),
                    blamed: None,
                });
            }
            29 => {
                log.push(EventKind::WorkspaceCommitted(
                    baton_model::WorkspaceCommit {
                        task: id,
                        attempt: tasks[i].highest(),
                        branch: format!("baton/t{i}"),
                        start: None,
                        commit: None,
                        evidence: Evidence::default(),
                        scope_violations: Vec::new(),
                        links_left_out: Vec::new(),
                    },
                ));
            }
            // Another output for a started attempt, in the turn of the latest event.
            _ => {
                let started: Vec<u32> = tasks[i].started.keys().copied().collect();
                if started.is_empty() {
                    continue;
                }
                let attempt = started[d as usize % started.len()];
                log.outputs
                    .push((log.events.len() - 1, output(&id, attempt, d)));
            }
        }
    }
    log
}

/// The log cut into turns: each turn's events and outputs.
fn turns(case: &Case, log: &Log) -> Vec<(Vec<Event>, Vec<AttemptOutput>)> {
    let mut turns = Vec::new();
    let mut sizes = case.turns.iter().copied().cycle();
    let mut start = 0;
    while start < log.events.len() {
        let end = (start + sizes.next().unwrap()).min(log.events.len());
        let outputs = log
            .outputs
            .iter()
            .filter(|(at, _)| (start..end).contains(at))
            .map(|(_, output)| output.clone())
            .collect();
        turns.push((log.events[start..end].to_vec(), outputs));
        start = end;
    }
    turns
}

/// Whether some turn holds an attempt's start, its end, its output and its task's end, with
/// nothing else about the task between them: the projection's fast path. `with_output`: the
/// attempt's output is in that turn, or it has none there (a no-op task's attempt).
fn has_whole_attempt(turns: &[(Vec<Event>, Vec<AttemptOutput>)], with_output: bool) -> bool {
    turns.iter().any(|(events, outputs)| {
        events
            .windows(3)
            .any(|w| match (&w[0].kind, &w[1].kind, &w[2].kind) {
                (
                    EventKind::AttemptStarted { task, attempt, .. },
                    EventKind::AttemptFinished {
                        task: t1,
                        attempt: a1,
                        ..
                    },
                    EventKind::TaskFinished { task: t2, .. },
                ) => {
                    task == t1
                        && task == t2
                        && attempt == a1
                        && outputs
                            .iter()
                            .any(|o| o.task == *task && o.attempt == *attempt)
                            == with_output
                }
                _ => false,
            })
    })
}

/// Commits the case's log and compares what the store holds with the fold of the log.
fn check(case: &Case) -> Result<(), TestCaseError> {
    let db = Db::new();
    check_on(&db.open(), case)
}

/// [`check`] on any backend: the run claimed, its turns recorded under the lease.
fn check_on(store: &dyn Store, case: &Case) -> Result<(), TestCaseError> {
    let log = simulate(case);
    let new = new_numbered_run("r1", case.tasks);
    store.create_run(&new).unwrap();
    let run = new.id.clone();
    let me = baton_store::Driver {
        pid: 1,
        start_time: 1,
        host: "box".into(),
    };
    let lease = store
        .claim(&run, &me, 1_000, baton_store::LEASE_TERM, &|_| {
            baton_store::Liveness::Dead
        })
        .unwrap()
        .lease;
    let mut committed = Vec::new();
    for (events, outputs) in turns(case, &log) {
        let seqs = store
            .record(&run, lease, &events, &outputs)
            .map_err(|err| TestCaseError::fail(format!("commit failed: {err}")))?;
        for (mut event, seq) in events.into_iter().zip(seqs) {
            event.seq = seq;
            committed.push(event);
        }
    }
    let mut view = RunView::new(new.tasks.iter().map(|(id, _)| id.clone()));
    for event in &committed {
        view.apply(event);
    }
    prop_assert!(view.anomalies().is_empty(), "{:?}", view.anomalies());
    compare(store, &view, &log, case.tasks)?;
    let problems = store.check_consistency(&run).unwrap();
    prop_assert!(problems.is_empty(), "{problems:#?}");
    Ok(())
}

/// Every column of the run's rows against the fold (and, for outputs, which are not events,
/// against the outputs committed: an attempt keeps its last; a task, its latest attempt's).
fn compare(store: &dyn Store, view: &RunView, log: &Log, n: usize) -> Result<(), TestCaseError> {
    let run = run_id("r1");
    let record = store.run(&run).unwrap().unwrap();
    prop_assert_eq!(record.status, view.run().status);
    prop_assert_eq!(record.ended_at_ms, view.run().ended_at_ms);
    prop_assert_eq!(&record.stop, &view.run().stop);
    prop_assert_eq!(record.task_count as usize, n);
    prop_assert_eq!(record.started_at_ms, 1_000);

    let mut outputs: BTreeMap<(&TaskId, u32), &AttemptOutput> = BTreeMap::new();
    for (_, output) in &log.outputs {
        outputs.insert((&output.task, output.attempt), output);
    }

    let tasks = store.tasks(&run).unwrap();
    prop_assert_eq!(tasks.len(), n);
    for (idx, (stored, (id, folded))) in tasks.iter().zip(view.tasks()).enumerate() {
        prop_assert_eq!(&stored.task, id);
        prop_assert_eq!(stored.idx as usize, idx);
        prop_assert_eq!(stored.status, folded.status, "status of {}", id);
        prop_assert_eq!(stored.attempts, folded.attempts, "attempts of {}", id);
        prop_assert_eq!(
            stored.next_attempt,
            folded.next_attempt,
            "next_attempt of {}",
            id
        );
        prop_assert_eq!(
            stored.retry_at_ms,
            folded.retry_at_ms,
            "retry_at_ms of {}",
            id
        );
        prop_assert_eq!(
            stored.started_at_ms,
            folded.started_at_ms,
            "started of {}",
            id
        );
        prop_assert_eq!(stored.ended_at_ms, folded.ended_at_ms, "ended of {}", id);
        prop_assert_eq!(stored.exit_code, folded.exit_code, "exit_code of {}", id);
        prop_assert_eq!(&stored.reason, &folded.reason, "reason of {}", id);
        let latest = outputs.range((id, 0)..=(id, u32::MAX)).next_back();
        prop_assert_eq!(stored.output_attempt, latest.map(|((_, n), _)| *n));
        prop_assert_eq!(&stored.output, &latest.map(|(_, o)| o.output.clone()));
        prop_assert_eq!(stored.output_bytes, latest.map(|(_, o)| o.output_bytes));
        prop_assert_eq!(
            &stored.output_json,
            &latest.and_then(|(_, o)| o.output_json.clone())
        );
        prop_assert_eq!(
            &stored.stderr_tail,
            &latest.map(|(_, o)| o.stderr_tail.clone())
        );
        prop_assert_eq!(
            store.attempts(&run, id).unwrap().len(),
            view.attempts(id).len()
        );
    }

    let attempts = store.run_attempts(&run).unwrap();
    prop_assert_eq!(attempts.len(), view.all_attempts().count());
    for (stored, (id, folded)) in attempts.iter().zip(view.all_attempts()) {
        let which = format!("attempt {} of {id}", folded.attempt);
        prop_assert_eq!(&stored.task, id, "{}", which);
        prop_assert_eq!(stored.attempt, folded.attempt, "{}", which);
        prop_assert_eq!(stored.started_at_ms, folded.started_at_ms, "{}", which);
        prop_assert_eq!(stored.pid, folded.pid, "{}", which);
        prop_assert_eq!(stored.ended_at_ms, folded.ended_at_ms, "{}", which);
        prop_assert_eq!(&stored.outcome, &folded.outcome, "{}", which);
        prop_assert_eq!(stored.exit_code, folded.exit_code, "{}", which);
        prop_assert_eq!(stored.duration_ms, folded.duration_ms, "{}", which);
        prop_assert_eq!(stored.agent.as_ref(), folded.agent.as_deref(), "{}", which);
        prop_assert_eq!(stored.containment, folded.containment, "{}", which);
        let output = outputs.get(&(id, folded.attempt));
        prop_assert_eq!(
            &stored.output,
            &output.map(|o| o.output.clone()),
            "{}",
            which
        );
        prop_assert_eq!(stored.output_bytes, output.map(|o| o.output_bytes));
        prop_assert_eq!(
            &stored.output_json,
            &output.and_then(|o| o.output_json.clone())
        );
        prop_assert_eq!(&stored.stderr_tail, &output.map(|o| o.stderr_tail.clone()));
        prop_assert_eq!(&stored.log_path, &output.map(|o| o.log_path.clone()));
    }

    let summary = store.runs(1).unwrap().remove(0);
    prop_assert_eq!(&summary.counts, &view.counts());
    let agents: Vec<&AgentUsage> = view
        .all_attempts()
        .filter_map(|(_, attempt)| attempt.agent.as_deref())
        .collect();
    let tokens = (!agents.is_empty()).then(|| agents.iter().map(|a| a.tokens()).sum::<u64>());
    let costs: Vec<f64> = agents.iter().filter_map(|a| a.cost_usd).collect();
    let cost = (!costs.is_empty()).then(|| costs.iter().sum::<f64>());
    prop_assert_eq!(store.run_spend(&run).unwrap(), (tokens, cost));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_tables_are_the_fold_of_the_log(case in case()) {
        check(&case)?;
    }
}

proptest! {
    // Each case makes a database of its own on the server: fewer cases, the same logs.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn the_postgres_tables_are_the_fold_of_the_log(case in case()) {
        let url = baton_testpg::fresh_database();
        let store = baton_store::PgStore::open(&url).unwrap();
        check_on(&store, &case)?;
    }
}

/// The property is only as good as its logs: most cases must reach the projection's fast path
/// (a whole attempt in one turn, with its output and without one) and end some attempt
/// outside it.
#[test]
fn the_generated_logs_reach_every_path_of_the_projection() {
    let mut runner = TestRunner::deterministic();
    let strategy = case();
    let (mut whole, mut quiet, mut apart) = (0, 0, 0);
    for _ in 0..200 {
        let case = strategy.new_tree(&mut runner).unwrap().current();
        let log = simulate(&case);
        let turns = turns(&case, &log);
        whole += usize::from(has_whole_attempt(&turns, true));
        quiet += usize::from(has_whole_attempt(&turns, false));
        apart += usize::from(
            log.events
                .iter()
                .filter(|e| matches!(e.kind, EventKind::AttemptFinished { .. }))
                .count()
                > 2,
        );
    }
    assert!(
        whole > 100,
        "{whole} of 200 cases have a whole attempt in one turn"
    );
    assert!(
        quiet > 20,
        "{quiet} of 200 cases have a whole attempt without output in one turn"
    );
    assert!(apart > 100, "{apart} of 200 cases end several attempts");
}

/// Found setting the projection beside the fold: an event about a task the run lacks was
/// stored when its kind changes no column (`task-decided`, `workspace-committed`, `checked`),
/// and the consistency check then reported it. The store refuses it, like any other.
#[test]
fn an_event_about_a_task_the_run_lacks_is_refused_whatever_its_kind() {
    let db = Db::new();
    let store = db.open();
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    let ghost = task("ghost");
    for kind in [
        EventKind::TaskDecided {
            task: ghost.clone(),
            approved: true,
            reason: None,
        },
        EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
            task: ghost.clone(),
            attempt: 1,
            branch: "baton/ghost".into(),
            start: None,
            commit: None,
            evidence: Evidence::default(),
            scope_violations: Vec::new(),
            links_left_out: Vec::new(),
        }),
        EventKind::Checked {
            task: Some(ghost.clone()),
            attempt: Some(1),
            checks: Vec::new(),
            blamed: None,
        },
    ] {
        let err = store.commit(&run, &[event(5, kind)], &[]).unwrap_err();
        assert!(
            matches!(err, baton_store::StoreError::UnknownTask { ref task, .. } if *task == ghost),
            "{err:?}"
        );
    }
    assert_eq!(store.last_seq(&run).unwrap(), 0);
    let known = EventKind::Checked {
        task: Some(task("a")),
        attempt: Some(1),
        checks: Vec::new(),
        blamed: None,
    };
    store.commit(&run, &[event(6, known)], &[]).unwrap();
    assert_consistent(&store, &run);
}

/// On PostgreSQL too: a turn with an event about a task the run lacks, of any kind, is refused
/// whole, the events before it in the turn included.
#[test]
fn postgres_refuses_a_turn_about_a_task_the_run_lacks_whole() {
    let store: Box<dyn Store> =
        Box::new(baton_store::PgStore::open(&baton_testpg::fresh_database()).unwrap());
    store.create_run(&new_run("r1", &["a"])).unwrap();
    let run = run_id("r1");
    let me = baton_store::Driver {
        pid: 1,
        start_time: 1,
        host: "box".into(),
    };
    let lease = store
        .claim(&run, &me, 1_000, baton_store::LEASE_TERM, &|_| {
            baton_store::Liveness::Dead
        })
        .unwrap()
        .lease;
    let ghost = task("ghost");
    let known = event(4, EventKind::TaskWaiting { task: task("a") });
    for kind in [
        EventKind::TaskDecided {
            task: ghost.clone(),
            approved: true,
            reason: None,
        },
        EventKind::AgentActivity {
            task: ghost.clone(),
            attempt: 1,
            doing: None,
            tokens: 0,
            cost_usd: None,
        },
        EventKind::AttemptStarted {
            task: ghost.clone(),
            attempt: 1,
            pid: None,
        },
        EventKind::TaskFinished {
            task: ghost.clone(),
            state: baton_model::TaskState::Failed,
            reason: None,
        },
        EventKind::Checked {
            task: Some(ghost.clone()),
            attempt: Some(1),
            checks: Vec::new(),
            blamed: None,
        },
    ] {
        let err = store
            .record(&run, lease, &[known.clone(), event(5, kind)], &[])
            .unwrap_err();
        assert!(
            matches!(err, baton_store::StoreError::UnknownTask { ref task, .. } if *task == ghost),
            "{err:?}"
        );
    }
    assert_eq!(store.last_seq(&run).unwrap(), 0);
    assert_eq!(
        store.tasks(&run).unwrap()[0].status,
        baton_model::TaskState::Pending
    );
    store.record(&run, lease, &[known], &[]).unwrap();
    assert!(store.check_consistency(&run).unwrap().is_empty());
}
