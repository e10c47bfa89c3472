//! Property test: a graph that grows while it runs (planners' answers spliced in with
//! `Scheduler::extend`, as the dispatcher does) never starts a task before its needs, never
//! runs two tasks whose scopes conflict at once, never exceeds the concurrency limit, and ends
//! every task, old and new, exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use baton_model::{OnFailure, Outcome, TaskState};
use baton_scheduler::{Action, Input, Plan, PlanTask, Replanned, Scheduler, StopCause};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    plan: Plan,
    /// Which tasks plan (their success adds tasks), and how many re-plans each may make.
    planners: BTreeMap<u32, u32>,
    choices: Vec<u32>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..12, 1u32..4, 0usize..3).prop_flat_map(|(n, concurrency, policy)| {
        let edges = proptest::collection::vec((0..n, 0..n), 0..n * 2);
        let conflicts = proptest::collection::vec((0..n, 0..n), 0..n);
        let planners = proptest::collection::btree_map(0..n as u32, 0u32..3, 0..=n.min(4));
        let choices = proptest::collection::vec(any::<u32>(), 300);
        (edges, conflicts, planners, choices).prop_map(
            move |(edges, conflicts, planners, choices)| {
                let mut tasks: Vec<PlanTask> = (0..n)
                    .map(|_| PlanTask {
                        retries: 1,
                        backoff: Duration::from_millis(10),
                        ..PlanTask::default()
                    })
                    .collect();
                for (a, b) in edges
                    .into_iter()
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| (a.min(b), a.max(b)))
                    .collect::<BTreeSet<_>>()
                {
                    tasks[b].needs.push(a as u32);
                }
                for (a, b) in conflicts
                    .into_iter()
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| (a.min(b), a.max(b)))
                    .collect::<BTreeSet<_>>()
                {
                    tasks[a].conflicts.push(b as u32);
                    tasks[b].conflicts.push(a as u32);
                }
                for (&p, &replans) in &planners {
                    tasks[p as usize].replans = replans;
                }
                Case {
                    plan: Plan {
                        tasks,
                        concurrency,
                        on_failure: [OnFailure::Block, OnFailure::Continue, OnFailure::Stop]
                            [policy],
                    },
                    planners,
                    choices,
                }
            },
        )
    })
}

/// Tasks that wait for `task`, directly or not.
fn downstream(plan: &Plan, task: u32) -> BTreeSet<u32> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![task];
    while let Some(t) = stack.pop() {
        for (i, other) in plan.tasks.iter().enumerate() {
            if other.needs.contains(&t) && seen.insert(i as u32) {
                stack.push(i as u32);
            }
        }
    }
    seen
}

/// A planner's answer as `Graph::expansion` + `extended` make it: `k` tasks, roots needing the
/// planner, others siblings before them or tasks not downstream of the planner; what waited
/// for the planner now waits for all of them. Some new tasks plan too.
fn grow(
    plan: &mut Plan,
    planners: &mut BTreeMap<u32, u32>,
    parents: &mut BTreeMap<u32, u32>,
    planner: u32,
    mut pick: impl FnMut() -> u32,
) {
    let old = plan.tasks.len() as u32;
    // The nearest planner above that re-plans (as the dispatcher's plan says).
    let replanned_by = if planners.get(&planner).is_some_and(|&r| r > 0) {
        Some(planner)
    } else {
        plan.tasks[planner as usize].replanned_by
    };
    let k = pick() % 4;
    let below = downstream(plan, planner);
    for j in 0..k {
        let me = old + j;
        let mut task = PlanTask {
            retries: pick() % 2,
            backoff: Duration::from_millis(10),
            replanned_by,
            ..PlanTask::default()
        };
        parents.insert(me, planner);
        if j > 0 && pick().is_multiple_of(2) {
            task.needs.push(old + pick() % j);
        }
        let other = pick() % old;
        if other != planner && !below.contains(&other) && pick().is_multiple_of(3) {
            task.needs.push(other);
        }
        if !task.needs.iter().any(|&d| d >= old) {
            task.needs.insert(0, planner);
        }
        task.needs.dedup();
        if pick().is_multiple_of(3) {
            let c = pick() % me;
            task.conflicts.push(c);
            plan.tasks[c as usize].conflicts.push(me);
        }
        if pick().is_multiple_of(4) {
            let replans = pick() % 3;
            task.replans = replans;
            planners.insert(me, replans);
        }
        plan.tasks.push(task);
    }
    // What waits for the planner waits for the new tasks too; not its own earlier tasks
    // (after a re-plan), which need it only to start after it.
    let under = |mut t: u32| {
        while let Some(&p) = parents.get(&t) {
            if p == planner {
                return true;
            }
            t = p;
        }
        false
    };
    for d in below {
        if d < old && !under(d) && plan.tasks[d as usize].needs.contains(&planner) {
            plan.tasks[d as usize].needs.extend(old..old + k);
        }
    }
}

#[derive(Default)]
struct World {
    running: BTreeMap<u32, u32>,
    timers: BTreeSet<u32>,
    terminal: BTreeMap<u32, TaskState>,
    finished: bool,
    /// Planners asked to re-plan, not answered yet.
    replanning: BTreeSet<u32>,
}

impl World {
    fn apply(&mut self, plan: &Plan, actions: Vec<Action>) {
        for action in actions {
            assert!(!self.finished, "action after the run finished: {action:?}");
            match action {
                Action::Launch { task, attempt } => {
                    assert!(
                        !self.terminal.contains_key(&task),
                        "launch of finished {task}"
                    );
                    assert!(
                        self.running.insert(task, attempt).is_none(),
                        "double launch {task}"
                    );
                    assert!(self.running.len() <= plan.concurrency as usize);
                    for &need in &plan.tasks[task as usize].needs {
                        let ok = self.terminal.get(&need) == Some(&TaskState::Succeeded)
                            || (plan.on_failure == OnFailure::Continue
                                && self.terminal.contains_key(&need));
                        assert!(ok, "{task} started before its need {need} ended well");
                    }
                    for &other in &plan.tasks[task as usize].conflicts {
                        assert!(
                            !self.running.contains_key(&other),
                            "conflicting {task} and {other} run together"
                        );
                    }
                }
                Action::RetryLater { task, .. } => assert!(self.timers.insert(task)),
                Action::Finished { task, state, .. } => {
                    assert!(
                        self.terminal.insert(task, state).is_none(),
                        "{task} ended twice"
                    );
                }
                Action::StopRunning { .. } => {}
                Action::Replan { planner, failed } => {
                    assert_eq!(
                        self.terminal.get(&failed).map(|s| s.is_failure()),
                        Some(true)
                    );
                    assert!(
                        self.replanning.insert(planner),
                        "{planner} re-plans twice at once"
                    );
                    // It runs again.
                    assert_eq!(self.terminal.remove(&planner), Some(TaskState::Succeeded));
                }
                Action::AwaitApproval { .. } => panic!("no approvals here"),
                Action::RunFinished { .. } => {
                    assert!(self.running.is_empty());
                    self.finished = true;
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_growing_graph_keeps_every_rule(case in case()) {
        let mut plan = case.plan.clone();
        let mut planners = case.planners.clone();
        let mut parents: BTreeMap<u32, u32> = BTreeMap::new();
        let mut planned: BTreeSet<u32> = BTreeSet::new();
        let mut sched = Scheduler::new(&plan, 3);
        let mut world = World::default();
        world.apply(&plan, sched.handle(Input::Start));
        let mut choices = case.choices.iter().copied().cycle();
        for _ in 0..10_000 {
            if world.finished {
                break;
            }
            let c = choices.next().unwrap();
            let input = if c.is_multiple_of(101) {
                Input::Stop(StopCause::Cancelled)
            } else if !world.timers.is_empty() && (c.is_multiple_of(5) || world.running.is_empty()) {
                let task = *world.timers.iter().nth(c as usize % world.timers.len()).unwrap();
                world.timers.remove(&task);
                Input::RetryDue { task }
            } else if !world.running.is_empty() {
                let (&task, &attempt) =
                    world.running.iter().nth(c as usize % world.running.len()).unwrap();
                world.running.remove(&task);
                let outcome = if (c / 7) % 4 == 3 {
                    Outcome::Exited { code: 1 }
                } else {
                    Outcome::Exited { code: 0 }
                };
                if outcome.is_success() && world.replanning.remove(&task) {
                    // A re-plan: what had not started is replaced, and what waited for the
                    // planner no longer waits for it or for the failures.
                    // Everything it added, and what the planners among them added.
                    let subtasks: Vec<u32> = parents
                        .keys()
                        .copied()
                        .filter(|&t| {
                            let mut at = t;
                            while let Some(&p) = parents.get(&at) {
                                if p == task {
                                    return true;
                                }
                                at = p;
                            }
                            false
                        })
                        .collect();
                    let retired: Vec<u32> = subtasks
                        .iter()
                        .copied()
                        .filter(|t| !world.terminal.contains_key(t) && !world.running.contains_key(t))
                        .collect();
                    let dropped: BTreeSet<u32> = subtasks
                        .iter()
                        .copied()
                        .filter(|t| {
                            retired.contains(t)
                                || world.terminal.get(t).is_some_and(|s| s.is_failure())
                        })
                        .collect();
                    for t in downstream(&plan, task) {
                        if !subtasks.contains(&t) && plan.tasks[t as usize].needs.contains(&task) {
                            plan.tasks[t as usize].needs.retain(|n| !dropped.contains(n));
                        }
                    }
                    grow(&mut plan, &mut planners, &mut parents, task, || choices.next().unwrap());
                    let actions = sched.extend(&plan, Some(&Replanned { planner: task, retired }));
                    world.apply(&plan, actions);
                } else if outcome.is_success() && planners.contains_key(&task) && planned.insert(task) {
                    grow(&mut plan, &mut planners, &mut parents, task, || choices.next().unwrap());
                    let actions = sched.extend(&plan, None);
                    world.apply(&plan, actions);
                }
                Input::Finished { task, attempt, outcome }
            } else {
                panic!("nothing runs, no timers, and the run is not over: {:?}", world.terminal);
            };
            let actions = sched.handle(input);
            world.apply(&plan, actions);
        }
        prop_assert!(world.finished, "the run did not finish");
        prop_assert_eq!(world.terminal.len(), plan.tasks.len());
        for (task, state) in &world.terminal {
            prop_assert_eq!(sched.state(*task), *state);
        }
    }
}
