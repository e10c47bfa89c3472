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

#[test]
fn empty_plan_finishes_at_once() {
    let plan = Plan {
        tasks: vec![],
        concurrency: 1,
        on_failure: OnFailure::Block,
    };
    let mut sched = Scheduler::new(&plan, 0);
    assert_eq!(
        sched.handle(Input::Start),
        vec![Action::RunFinished {
            state: RunState::Succeeded
        }]
    );
}

#[test]
fn failure_blocks_the_chain_below_it() {
    let mut sched = Scheduler::new(&chain_plan(3, OnFailure::Block), 0);
    assert_eq!(
        sched.handle(Input::Start),
        vec![Action::Launch {
            task: 0,
            attempt: 1
        }]
    );
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: Outcome::Exited { code: 2 },
    });
    let states: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Finished { task, state, .. } => Some((*task, *state)),
            _ => None,
        })
        .collect();
    assert_eq!(
        states,
        vec![
            (0, TaskState::Failed),
            (1, TaskState::Blocked),
            (2, TaskState::Blocked)
        ]
    );
    assert_eq!(
        actions.last(),
        Some(&Action::RunFinished {
            state: RunState::Failed
        })
    );
}

#[test]
fn retry_then_success() {
    let mut plan = chain_plan(1, OnFailure::Block);
    plan.tasks[0].retries = 2;
    plan.tasks[0].backoff = Duration::from_secs(1);
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: Outcome::Exited { code: 1 },
    });
    let [
        Action::RetryLater {
            task: 0,
            attempt: 2,
            delay,
        },
    ] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert!(*delay >= Duration::from_millis(500) && *delay < Duration::from_millis(1500));
    // Waiting for its retry, it is what the store records after `retry-scheduled`.
    assert_eq!(sched.state(0), TaskState::Pending);
    assert_eq!(
        sched.handle(Input::RetryDue { task: 0 }),
        vec![Action::Launch {
            task: 0,
            attempt: 2
        }]
    );
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 2,
        outcome: Outcome::Exited { code: 0 },
    });
    assert_eq!(
        actions.last(),
        Some(&Action::RunFinished {
            state: RunState::Succeeded
        })
    );
}

#[test]
fn an_agent_task_retries_only_the_machinery_s_failures_and_honours_retry_after() {
    let agent_failed = |class, retry_after_ms| Outcome::AgentFailed {
        class,
        reason: "r".into(),
        message: "m".into(),
        retry_after_ms,
    };
    let mut plan = chain_plan(2, OnFailure::Continue);
    for task in &mut plan.tasks {
        task.needs.clear();
        task.retries = 3;
        task.backoff = Duration::from_millis(10);
        task.retry_infrastructure_only = true;
    }
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    // An overloaded API asked for 30 s: more than the backoff.
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: agent_failed(FailureClass::Infrastructure, Some(30_000)),
    });
    assert_eq!(
        actions,
        [Action::RetryLater {
            task: 0,
            attempt: 2,
            delay: Duration::from_secs(30)
        }]
    );
    // The agent's own failure is final.
    let actions = sched.handle(Input::Finished {
        task: 1,
        attempt: 1,
        outcome: agent_failed(FailureClass::Task, None),
    });
    assert!(
        matches!(
            actions.as_slice(),
            [Action::Finished {
                task: 1,
                state: TaskState::Failed,
                ..
            }]
        ),
        "{actions:?}"
    );
    // A hung CLI is the machinery's too, and ends as timed out when retries run out.
    let mut plan = chain_plan(1, OnFailure::Block);
    plan.tasks[0].retry_infrastructure_only = true;
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: Outcome::IdleTimeout { after_ms: 5 },
    });
    assert!(
        matches!(
            actions.first(),
            Some(Action::Finished {
                state: TaskState::TimedOut,
                ..
            })
        ),
        "{actions:?}"
    );
}

#[test]
fn a_declined_launch_waits_for_an_attempt_to_end_and_a_budget_stop_skips_it() {
    let mut plan = chain_plan(3, OnFailure::Block);
    for task in &mut plan.tasks {
        task.needs.clear();
    }
    plan.concurrency = 2;
    let mut sched = Scheduler::new(&plan, 0);
    let launched = sched.handle(Input::Start);
    assert_eq!(launched.len(), 2, "{launched:?}");
    // The dispatcher could not afford task 1: it is not offered again at once...
    assert_eq!(
        sched.handle(Input::Declined {
            task: 1,
            attempt: 1
        }),
        vec![Action::Launch {
            task: 2,
            attempt: 1
        }]
    );
    assert_eq!(
        sched.handle(Input::Declined {
            task: 2,
            attempt: 1
        }),
        vec![]
    );
    assert_eq!(sched.state(1), TaskState::Ready);
    // ...but when an attempt ends, it is, with the same attempt number.
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: Outcome::Exited { code: 0 },
    });
    assert!(
        actions.contains(&Action::Launch {
            task: 1,
            attempt: 1
        }),
        "{actions:?}"
    );
    assert!(
        actions.contains(&Action::Launch {
            task: 2,
            attempt: 1
        }),
        "{actions:?}"
    );
    // Declined again, and the budget is spent: skipped, and the run failed.
    sched.handle(Input::Declined {
        task: 2,
        attempt: 1,
    });
    let actions = sched.handle(Input::Stop(StopCause::BudgetSpent));
    assert!(
        actions.contains(&Action::Finished {
            task: 2,
            state: TaskState::Skipped,
            cause: baton_scheduler::Cause::Stopped(StopCause::BudgetSpent)
        }),
        "{actions:?}"
    );
    let actions = sched.handle(Input::Finished {
        task: 1,
        attempt: 1,
        outcome: Outcome::Cancelled,
    });
    assert_eq!(
        actions.last(),
        Some(&Action::RunFinished {
            state: RunState::Failed
        })
    );
}

#[test]
fn a_launch_declined_after_the_stop_is_skipped() {
    let mut plan = chain_plan(2, OnFailure::Block);
    plan.tasks[1].needs.clear();
    plan.concurrency = 1;
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: Outcome::Exited { code: 0 },
    });
    assert_eq!(
        actions,
        [
            Action::Finished {
                task: 0,
                state: TaskState::Succeeded,
                cause: baton_scheduler::Cause::Outcome
            },
            Action::Launch {
                task: 1,
                attempt: 1
            }
        ]
    );
    sched.handle(Input::Stop(StopCause::BudgetSpent));
    let actions = sched.handle(Input::Declined {
        task: 1,
        attempt: 1,
    });
    assert_eq!(
        actions,
        [
            Action::Finished {
                task: 1,
                state: TaskState::Skipped,
                cause: baton_scheduler::Cause::Stopped(StopCause::BudgetSpent)
            },
            Action::RunFinished {
                state: RunState::Failed
            }
        ]
    );
}

#[test]
fn a_task_that_needs_approval_waits_without_holding_a_slot() {
    let mut plan = chain_plan(3, OnFailure::Block);
    // 0 needs approval; 1 does not and runs meanwhile; 2 needs 0.
    plan.tasks[1].needs.clear();
    plan.tasks[2].needs = vec![0];
    plan.tasks[0].needs_approval = true;
    plan.concurrency = 1;
    let mut sched = Scheduler::new(&plan, 0);
    let actions = sched.handle(Input::Start);
    assert!(
        actions.contains(&Action::AwaitApproval { task: 0 }),
        "{actions:?}"
    );
    assert!(
        actions.contains(&Action::Launch {
            task: 1,
            attempt: 1
        }),
        "{actions:?}"
    );
    assert_eq!(sched.state(0), TaskState::Waiting);
    assert!(sched.awaits_approval());
    sched.handle(Input::Finished {
        task: 1,
        attempt: 1,
        outcome: Outcome::Exited { code: 0 },
    });
    // Nothing runs, yet the run is not over: it waits for the person.
    assert!(!sched.is_finished());
    let actions = sched.handle(Input::Approved { task: 0 });
    assert_eq!(
        actions,
        [Action::Launch {
            task: 0,
            attempt: 1
        }]
    );
    assert!(!sched.awaits_approval());

    // Rejected: fails at once, and blocks what needs it.
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    assert!(sched.awaits_approval());
    let actions = sched.handle(Input::Rejected { task: 0 });
    assert!(!sched.awaits_approval());
    assert!(
        actions.contains(&Action::Finished {
            task: 0,
            state: TaskState::Failed,
            cause: baton_scheduler::Cause::Rejected
        }),
        "{actions:?}"
    );
    assert_eq!(sched.state(2), TaskState::Blocked);

    // Stopped: it waits no more.
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    sched.handle(Input::Stop(StopCause::Cancelled));
    assert_eq!(sched.state(0), TaskState::Skipped);
    assert!(!sched.awaits_approval());
}

#[test]
fn a_continued_task_numbers_on_and_gets_its_retries_back() {
    let mut plan = chain_plan(2, OnFailure::Block);
    plan.tasks[0].retries = 1;
    let mut sched = Scheduler::new(&plan, 0);
    sched.restore(1, TaskState::Succeeded, 1);
    // Two attempts were made before a crash; they are not charged.
    sched.continue_after(0, 2, false);
    assert_eq!(
        sched.handle(Input::Start),
        vec![Action::Launch {
            task: 0,
            attempt: 3
        }]
    );
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 3,
        outcome: Outcome::Exited { code: 1 },
    });
    assert!(
        matches!(
            actions[0],
            Action::RetryLater {
                task: 0,
                attempt: 4,
                ..
            }
        ),
        "{actions:?}"
    );

    // Charged: the same two attempts use up the one retry.
    let mut sched = Scheduler::new(&plan, 0);
    sched.restore(1, TaskState::Succeeded, 1);
    sched.continue_after(0, 2, true);
    sched.handle(Input::Start);
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 3,
        outcome: Outcome::Exited { code: 1 },
    });
    assert!(
        matches!(
            actions[0],
            Action::Finished {
                task: 0,
                state: TaskState::Failed,
                ..
            }
        ),
        "{actions:?}"
    );
}

/// A takeover adopts an attempt still running on a worker: it is not launched again, it holds
/// its slot and its scope meanwhile, and its end is taken as any other's.
#[test]
fn an_adopted_attempt_is_not_launched_again_and_holds_its_slot_and_scope() {
    let mut plan = chain_plan(3, OnFailure::Block);
    plan.concurrency = 2;
    plan.tasks[1].needs.clear();
    plan.tasks[2].needs.clear();
    // 0 and 2 write the same files.
    plan.tasks[0].conflicts = vec![2];
    plan.tasks[2].conflicts = vec![0];
    plan.tasks[0].retries = 1;
    let mut sched = Scheduler::new(&plan, 0);
    // Its second attempt runs (the first was not charged: it was cut short).
    sched.adopt(0, 2, false);
    // Not 0 again, not 2 (its scope is held): 1, in the one slot left.
    assert_eq!(
        sched.handle(Input::Start),
        vec![Action::Launch {
            task: 1,
            attempt: 1
        }]
    );
    assert_eq!(sched.state(0), TaskState::Running);
    // A failure of the adopted attempt has its retry left, numbered on.
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 2,
        outcome: Outcome::Exited { code: 1 },
    });
    assert!(
        matches!(
            actions[0],
            Action::RetryLater {
                task: 0,
                attempt: 3,
                ..
            }
        ),
        "{actions:?}"
    );
    // Its scope is free while it waits to retry: 2 starts.
    assert!(
        actions.contains(&Action::Launch {
            task: 2,
            attempt: 1
        }),
        "{actions:?}"
    );
}

#[test]
fn a_restored_failure_blocks_what_was_not_restored_below_it() {
    let mut sched = Scheduler::new(&chain_plan(3, OnFailure::Block), 0);
    sched.restore(0, TaskState::Failed, 1);
    let actions = sched.handle(Input::Start);
    let blocked: Vec<u32> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Finished {
                task,
                state: TaskState::Blocked,
                ..
            } => Some(*task),
            _ => None,
        })
        .collect();
    assert_eq!(blocked, vec![1, 2]);
    assert_eq!(
        actions.last(),
        Some(&Action::RunFinished {
            state: RunState::Failed
        })
    );
}

#[test]
fn longest_chain_starts_first() {
    // 0 alone; 1 -> 2 -> 3. With one slot, 1 must go before 0.
    let mut plan = chain_plan(4, OnFailure::Block);
    plan.tasks[1].needs.clear();
    plan.tasks[0].needs.clear();
    plan.tasks[2].needs = vec![1];
    plan.concurrency = 1;
    let mut sched = Scheduler::new(&plan, 0);
    assert_eq!(
        sched.handle(Input::Start),
        vec![Action::Launch {
            task: 1,
            attempt: 1
        }]
    );
}

#[test]
fn conflicting_scopes_wait_for_each_other() {
    let mut plan = chain_plan(2, OnFailure::Block);
    plan.tasks[1].needs.clear();
    plan.tasks[0].conflicts = vec![1];
    plan.tasks[1].conflicts = vec![0];
    let mut sched = Scheduler::new(&plan, 0);
    assert_eq!(
        sched.handle(Input::Start),
        vec![Action::Launch {
            task: 0,
            attempt: 1
        }]
    );
    let actions = sched.handle(Input::Finished {
        task: 0,
        attempt: 1,
        outcome: Outcome::Exited { code: 0 },
    });
    assert!(actions.contains(&Action::Launch {
        task: 1,
        attempt: 1
    }));
}

#[test]
fn stop_on_failure_cancels_running_and_skips_the_rest() {
    let mut plan = chain_plan(4, OnFailure::Stop);
    for t in &mut plan.tasks[..3] {
        t.needs.clear();
    }
    plan.concurrency = 2;
    let mut sched = Scheduler::new(&plan, 0);
    let launched = sched.handle(Input::Start);
    assert_eq!(launched.len(), 2);
    let Action::Launch { task: first, .. } = launched[0] else {
        panic!()
    };
    let Action::Launch { task: second, .. } = launched[1] else {
        panic!()
    };
    let actions = sched.handle(Input::Finished {
        task: first,
        attempt: 1,
        outcome: Outcome::Exited { code: 1 },
    });
    assert!(actions.contains(&Action::StopRunning {
        cause: StopCause::TaskFailed,
        immediate: false
    }));
    let skipped = actions
        .iter()
        .filter(|a| {
            matches!(
                a,
                Action::Finished {
                    state: TaskState::Skipped,
                    ..
                }
            )
        })
        .count();
    assert_eq!(skipped, 2);
    let actions = sched.handle(Input::Finished {
        task: second,
        attempt: 1,
        outcome: Outcome::Cancelled,
    });
    assert_eq!(
        actions.last(),
        Some(&Action::RunFinished {
            state: RunState::Failed
        })
    );
}

#[test]
fn stops_only_escalate() {
    let mut plan = chain_plan(2, OnFailure::Block);
    plan.tasks[1].needs.clear();
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    let actions = sched.handle(Input::Stop(StopCause::Cancelled));
    assert_eq!(
        actions,
        vec![Action::StopRunning {
            cause: StopCause::Cancelled,
            immediate: false
        }]
    );
    assert_eq!(sched.handle(Input::Stop(StopCause::TaskFailed)), vec![]);
    assert_eq!(
        sched.handle(Input::Stop(StopCause::Killed)),
        vec![Action::StopRunning {
            cause: StopCause::Killed,
            immediate: true
        }]
    );
}

#[test]
fn a_hundred_thousand_tasks_schedule_in_linear_time() {
    // Not a timing assertion: this only proves the work completes; benches/ measures it.
    let n = 100_000u32;
    let tasks = (0..n)
        .map(|i| PlanTask {
            needs: if i < 10 { vec![] } else { vec![i / 2, i - 7] },
            ..PlanTask::default()
        })
        .collect();
    let plan = Plan {
        tasks,
        concurrency: 64,
        on_failure: OnFailure::Block,
    };
    let mut sched = Scheduler::new(&plan, 0);
    let mut queue: Vec<(u32, u32)> = Vec::new();
    let mut finished = 0;
    let mut pending = sched.handle(Input::Start);
    loop {
        for action in pending.drain(..) {
            match action {
                Action::Launch { task, attempt } => queue.push((task, attempt)),
                Action::Finished { .. } => finished += 1,
                Action::RunFinished { state } => {
                    assert_eq!(state, RunState::Succeeded);
                    assert_eq!(finished, n);
                    return;
                }
                other => panic!("{other:?}"),
            }
        }
        let (task, attempt) = queue.pop().expect("work left");
        pending = sched.handle(Input::Finished {
            task,
            attempt,
            outcome: Outcome::Exited { code: 0 },
        });
    }
}

#[test]
fn a_machinery_failure_hands_over_to_the_next_engine_at_once_with_its_retries_whole() {
    let mut plan = chain_plan(1, OnFailure::Block);
    plan.tasks[0].retries = 1;
    plan.tasks[0].retry_infrastructure_only = true;
    plan.tasks[0].fallbacks = 2;
    let overloaded = Outcome::AgentFailed {
        class: FailureClass::Infrastructure,
        reason: "api_error_529".into(),
        message: "overloaded".into(),
        retry_after_ms: Some(60_000),
    };
    let own_error = Outcome::AgentFailed {
        class: FailureClass::Task,
        reason: "agent_error".into(),
        message: "no".into(),
        retry_after_ms: None,
    };
    let mut sched = Scheduler::new(&plan, 0);
    sched.handle(Input::Start);
    assert_eq!(sched.engine(0), 0);
    let assert_failed = |actions: &[Action]| {
        let failed = Action::Finished {
            task: 0,
            state: TaskState::Failed,
            cause: baton_scheduler::Cause::Outcome,
        };
        assert_eq!(actions.first(), Some(&failed), "{actions:?}");
    };
    let finish = |sched: &mut Scheduler, attempt, outcome: &Outcome| {
        sched.handle(Input::Finished {
            task: 0,
            attempt,
            outcome: outcome.clone(),
        })
    };
    // The API's retry-after is its engine's, not the next one's: no wait.
    let actions = finish(&mut sched, 1, &overloaded);
    assert_eq!(
        actions,
        [Action::RetryLater {
            task: 0,
            attempt: 2,
            delay: Duration::ZERO
        }]
    );
    assert_eq!(sched.engine(0), 1);
    sched.handle(Input::RetryDue { task: 0 });
    // An account out of credit is no outage, yet another engine may do the task.
    let broke = Outcome::AgentFailed {
        class: FailureClass::Task,
        reason: baton_model::OUT_OF_CREDIT.into(),
        message: "insufficient_quota".into(),
        retry_after_ms: None,
    };
    assert!(baton_scheduler::hands_over(&broke, false));
    assert!(!baton_scheduler::hands_over(&own_error, false));
    assert!(baton_scheduler::hands_over(&own_error, true));
    // The task's own failure does not switch engines, nor (agent default) is it retried.
    let mut other = Scheduler::new(&plan, 0);
    other.handle(Input::Start);
    let actions = finish(&mut other, 1, &own_error);
    assert_failed(&actions);
    assert_eq!(other.engine(0), 0);
    // Engine 1 overloaded too: engine 2, the last.
    finish(&mut sched, 2, &overloaded);
    sched.handle(Input::RetryDue { task: 0 });
    assert_eq!(sched.engine(0), 2);
    // The last engine has the task's one retry, whole, then fails for good.
    let actions = finish(&mut sched, 3, &overloaded);
    assert!(
        matches!(actions[0], Action::RetryLater { attempt: 4, .. }),
        "{actions:?}"
    );
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::RetryLater { delay, .. } if delay.is_zero()))
    );
    assert_eq!(sched.engine(0), 2);
    sched.handle(Input::RetryDue { task: 0 });
    let actions = finish(&mut sched, 4, &overloaded);
    assert_failed(&actions);

    // A takeover puts the task back where its attempts left it, its retries counted from
    // its last switch.
    let mut resumed = Scheduler::new(&plan, 0);
    resumed.continue_after(0, 2, true);
    resumed.recall_engine(0, [(1, &overloaded), (2, &own_error)]);
    assert_eq!(resumed.engine(0), 1);
    resumed.handle(Input::Start);
    let actions = finish(&mut resumed, 3, &overloaded);
    assert_eq!(resumed.engine(0), 2, "{actions:?}");
}
