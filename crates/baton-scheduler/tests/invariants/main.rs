//! Property tests: random DAGs, random outcomes, random stops. Whatever happens, every task
//! ends in exactly one terminal state, nothing starts before what it needs has succeeded, and
//! neither the concurrency limit nor scope exclusion is ever violated.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use baton_model::{FailureClass, OnFailure, Outcome, RunState, TaskState};
use baton_scheduler::{Action, Input, Plan, PlanTask, Scheduler, StopCause};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    plan: Plan,
    /// Drives the simulated world: which running attempt finishes next, how, and when stops come.
    choices: Vec<u32>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..28, 1u32..5, 0usize..3).prop_flat_map(|(n, concurrency, policy)| {
        let edges = proptest::collection::vec((0..n, 0..n), 0..n * 2);
        let conflicts = proptest::collection::vec((0..n, 0..n), 0..n);
        let retries = proptest::collection::vec(0u32..3, n);
        let choices = proptest::collection::vec(any::<u32>(), 200);
        (edges, conflicts, retries, choices).prop_map(
            move |(edges, conflicts, retries, choices)| {
                let mut tasks: Vec<PlanTask> = (0..n)
                    .map(|i| PlanTask {
                        retries: retries[i],
                        backoff: Duration::from_millis(10),
                        ..PlanTask::default()
                    })
                    .collect();
                // Edges always point from a lower index to a higher one: acyclic by construction.
                let edges: BTreeSet<(usize, usize)> = edges
                    .into_iter()
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| (a.min(b), a.max(b)))
                    .collect();
                for (a, b) in edges {
                    tasks[b].needs.push(a as u32);
                }
                let pairs: BTreeSet<(usize, usize)> = conflicts
                    .into_iter()
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| (a.min(b), a.max(b)))
                    .collect();
                for (a, b) in pairs {
                    tasks[a].conflicts.push(b as u32);
                    tasks[b].conflicts.push(a as u32);
                }
                let on_failure = [OnFailure::Block, OnFailure::Continue, OnFailure::Stop][policy];
                Case {
                    plan: Plan {
                        tasks,
                        concurrency,
                        on_failure,
                    },
                    choices,
                }
            },
        )
    })
}

struct World {
    running: BTreeMap<u32, u32>,
    timers: BTreeSet<u32>,
    terminal: BTreeMap<u32, TaskState>,
    succeeded: BTreeSet<u32>,
    run_state: Option<RunState>,
}

impl World {
    fn apply(&mut self, plan: &Plan, actions: Vec<Action>) {
        for action in actions {
            assert!(
                self.run_state.is_none(),
                "action after the run finished: {action:?}"
            );
            match action {
                Action::Launch { task, attempt } => {
                    assert!(
                        !self.terminal.contains_key(&task),
                        "launch of finished task {task}"
                    );
                    assert!(
                        self.running.insert(task, attempt).is_none(),
                        "double launch {task}"
                    );
                    assert!(
                        self.running.len() <= plan.concurrency as usize,
                        "concurrency {} exceeded",
                        plan.concurrency
                    );
                    for &need in &plan.tasks[task as usize].needs {
                        let ok = self.succeeded.contains(&need)
                            || (plan.on_failure == OnFailure::Continue
                                && self.terminal.contains_key(&need));
                        assert!(
                            ok,
                            "task {task} started before its need {need} finished well"
                        );
                    }
                    for &other in &plan.tasks[task as usize].conflicts {
                        assert!(
                            !self.running.contains_key(&other),
                            "conflicting tasks {task} and {other} run together"
                        );
                    }
                    assert!(attempt <= 1 + plan.tasks[task as usize].retries);
                }
                Action::RetryLater { task, .. } => {
                    assert!(self.timers.insert(task));
                }
                Action::Finished { task, state, .. } => {
                    assert!(state.is_terminal());
                    assert!(
                        self.terminal.insert(task, state).is_none(),
                        "task {task} finished twice"
                    );
                    assert!(!self.running.contains_key(&task) || state == TaskState::Cancelled);
                    if state == TaskState::Succeeded {
                        self.succeeded.insert(task);
                    }
                }
                Action::StopRunning { .. } => {}
                Action::AwaitApproval { .. } => panic!("no task of these plans needs approval"),
                Action::Replan { .. } => panic!("no task of these plans re-plans"),
                Action::RunFinished { state } => {
                    assert!(self.running.is_empty());
                    self.run_state = Some(state);
                }
            }
        }
    }
}

fn simulate(case: &Case) -> (World, Scheduler) {
    let mut sched = Scheduler::new(&case.plan, 7);
    let mut world = World {
        running: BTreeMap::new(),
        timers: BTreeSet::new(),
        terminal: BTreeMap::new(),
        succeeded: BTreeSet::new(),
        run_state: None,
    };
    world.apply(&case.plan, sched.handle(Input::Start));
    let mut choices = case.choices.iter().copied().cycle();
    let mut stopping = false;
    for _ in 0..10_000 {
        if world.run_state.is_some() {
            break;
        }
        let c = choices.next().unwrap();
        let input = if c % 97 == 0 && !stopping {
            stopping = c % 2 == 0;
            Input::Stop(match c % 3 {
                0 => StopCause::Killed,
                1 => StopCause::BudgetSpent,
                _ => StopCause::Cancelled,
            })
        } else if c % 89 == 1 {
            Input::Pause
        } else if c % 13 == 0 && !world.running.is_empty() {
            // The dispatcher could not afford a launch. As it does, it stops the run for
            // want of budget when nothing else runs that could free some.
            let (&task, &attempt) = world
                .running
                .iter()
                .nth(c as usize % world.running.len())
                .unwrap();
            world.running.remove(&task);
            let actions = sched.handle(Input::Declined { task, attempt });
            world.apply(&case.plan, actions);
            if world.running.is_empty() && world.run_state.is_none() {
                Input::Stop(StopCause::BudgetSpent)
            } else {
                continue;
            }
        } else if !world.timers.is_empty() && (c % 5 == 0 || world.running.is_empty()) {
            let task = *world
                .timers
                .iter()
                .nth(c as usize % world.timers.len())
                .unwrap();
            world.timers.remove(&task);
            Input::RetryDue { task }
        } else if !world.running.is_empty() {
            let (&task, &attempt) = world
                .running
                .iter()
                .nth(c as usize % world.running.len())
                .unwrap();
            world.running.remove(&task);
            let outcome = match (c / 7) % 5 {
                0..=2 => Outcome::Exited { code: 0 },
                3 => Outcome::Exited { code: 1 },
                _ if stopping => Outcome::Cancelled,
                _ => Outcome::TimedOut,
            };
            Input::Finished {
                task,
                attempt,
                outcome,
            }
        } else {
            panic!(
                "nothing running, no timers, yet the run is not finished: {:?}",
                world.terminal
            );
        };
        let actions = sched.handle(input);
        world.apply(&case.plan, actions);
    }
    (world, sched)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_task_ends_in_exactly_one_terminal_state(case in case()) {
        let (world, sched) = simulate(&case);
        let n = case.plan.tasks.len();
        prop_assert!(world.run_state.is_some(), "run did not finish");
        if world.run_state == Some(RunState::Waiting) {
            // Paused: nothing runs, what is left is left for later, and none of it is lost.
            prop_assert!(world.running.is_empty());
            prop_assert!(world.terminal.len() < n);
            for task in 0..n as u32 {
                let state = sched.state(task);
                prop_assert_eq!(world.terminal.get(&task).copied().unwrap_or(state), state);
                prop_assert!(state != TaskState::Running);
            }
            return Ok(());
        }
        prop_assert_eq!(world.terminal.len(), n);
        for (task, state) in &world.terminal {
            prop_assert_eq!(sched.state(*task), *state);
        }
        // The run's state agrees with its tasks.
        let failed = world.terminal.values().any(|s| s.is_failure());
        match world.run_state.unwrap() {
            RunState::Succeeded => prop_assert!(world.terminal.values().all(|s| *s == TaskState::Succeeded)),
            // Tasks left undone for want of budget fail the run too.
            RunState::Failed => prop_assert!(failed || sched.stop_cause() == Some(StopCause::BudgetSpent)),
            RunState::Cancelled => prop_assert!(sched.stop_cause() >= Some(StopCause::Cancelled)),
            other => prop_assert!(false, "unexpected run state {other:?}"),
        }
    }

    #[test]
    fn blocked_tasks_have_a_failed_ancestor(case in case()) {
        let (world, _) = simulate(&case);
        for (task, state) in &world.terminal {
            if *state == TaskState::Blocked {
                prop_assert_eq!(case.plan.on_failure, OnFailure::Block);
                let needs = &case.plan.tasks[*task as usize].needs;
                prop_assert!(needs.iter().any(|n| matches!(
                    world.terminal.get(n),
                    Some(TaskState::Failed | TaskState::TimedOut | TaskState::Cancelled | TaskState::Blocked)
                )));
            }
        }
    }
}

fn chain_plan(n: usize, on_failure: OnFailure) -> Plan {
    Plan {
        tasks: (0..n)
            .map(|i| PlanTask {
                needs: if i == 0 { vec![] } else { vec![i as u32 - 1] },
                ..PlanTask::default()
            })
            .collect(),
        concurrency: 4,
        on_failure,
    }
}

mod cases;
