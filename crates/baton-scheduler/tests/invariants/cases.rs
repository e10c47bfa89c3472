//! The scheduler case by case: blocking, retries, declined launches, approvals, continued and
//! adopted attempts, priorities, scopes, stops, scale, engine fallbacks.

use super::*;

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
