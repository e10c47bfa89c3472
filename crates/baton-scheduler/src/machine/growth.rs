//! How the state machine takes a growing graph: new tasks (a planner's answer, a `for_each`
//! task's instances) and re-plans (a planned task's failure held while its planner plans what
//! is left again).

use std::cmp::Reverse;

use baton_model::{OnFailure, TaskState};

use super::{Action, Cause, Phase, Scheduler, needs_of};
use crate::plan::{Adjacency, Plan, Replanned, priorities};

impl Scheduler {
    /// Grows the run to `plan`, which holds every task so far, in the same order, and new ones
    /// after them (a planner's answer: see `baton_graph::Graph::extended`). Tasks already
    /// known keep their state; those whose needs grew wait for the new ones too. A new task
    /// waits for its needs that have not succeeded; one that needs a failure is blocked at once
    /// (under `on_failure = "block"`), and all are skipped if the run is stopping: the
    /// returned actions say so. Call it before the input that ends the planner's attempt.
    pub fn extend(&mut self, plan: &Plan, replanned: Option<&Replanned>) -> Vec<Action> {
        let old = self.phase.len();
        let n = plan.tasks.len();
        debug_assert!(n >= old, "a plan only grows");
        let mut out = Vec::new();
        let dependents = Adjacency::build(
            n,
            plan.tasks
                .iter()
                .enumerate()
                .flat_map(|(i, t)| t.needs.iter().map(move |&d| (d, i as u32))),
        );
        self.conflicts = Adjacency::build(
            n,
            plan.tasks
                .iter()
                .enumerate()
                .flat_map(|(i, t)| t.conflicts.iter().map(move |&c| (i as u32, c))),
        );
        if let Some(replanned) = replanned {
            // What the new plan replaces ends; the failures it was made for are its now.
            for &r in &replanned.retired {
                if !matches!(self.phase[r as usize], Phase::Done(_) | Phase::Running) {
                    self.finish(r, TaskState::Skipped, Cause::Replaced, &mut out);
                }
                self.forget_held(r);
            }
            self.forget_held(replanned.planner);
        }
        for task in &plan.tasks[old..] {
            self.retries.push(task.retries);
            self.engines.push(super::engines::Chain::of(task));
            self.backoff.push(task.backoff);
            self.retry_infrastructure_only
                .push(task.retry_infrastructure_only);
            self.needs_approval.push(task.needs_approval);
            self.approved.push(false);
            self.phase.push();
            self.attempts.push(0);
            self.uncharged.push(0);
            // Counted below, once every new task has a phase.
            self.remaining.push(0);
            self.replanned_by.push(task.replanned_by);
            self.replans_left.push(task.replans);
            let running = task
                .conflicts
                .iter()
                .filter(|&&c| (c as usize) < old && self.phase[c as usize] == Phase::Running)
                .count() as u32;
            self.running_conflicts.push(running);
        }
        self.dependents = dependents;
        self.needs = needs_of(plan);
        self.replaced = plan.tasks.iter().map(|t| t.replaced).collect();
        // Needs added (a planner's dependents wait for its tasks) and dropped (a re-plan's
        // dependents no longer wait for what it replaced): `remaining` counts every need not
        // yet satisfied, whatever the task's own phase, as `release_dependents` expects.
        for (i, task) in plan.tasks.iter().enumerate() {
            self.remaining[i] = task.needs.iter().filter(|&&d| !self.satisfies(d)).count() as u32;
        }
        let counts: Vec<u32> = plan.tasks.iter().map(|t| t.needs.len() as u32).collect();
        self.priority = priorities(&counts, &self.dependents);
        let queued: Vec<u32> = self.ready.drain().map(|(_, Reverse(t))| t).collect();
        for t in queued {
            self.ready.push((self.priority[t as usize], Reverse(t)));
        }
        // Every task that waits: a new one, or a known one whose needs changed (a re-plan
        // dropped what it replaced).
        for t in 0..n as u32 {
            let i = t as usize;
            if self.phase[i] != Phase::Waiting {
                continue; // running, done, or blocked already by an earlier one's failure
            }
            if let Some(cause) = self.stop {
                // Known tasks were skipped when the run stopped; these are new.
                self.finish(t, TaskState::Skipped, Cause::Stopped(cause), &mut out);
                continue;
            }
            let failed = plan.tasks[i].needs.iter().copied().find(|&d| {
                matches!(self.phase[d as usize], Phase::Done(state) if state != TaskState::Succeeded)
                    && !self.is_held(d)
            });
            match failed {
                // Under `stop`, a failure that a re-plan replaced did not stop the run: what
                // needs it can never run either way.
                Some(d) if self.on_failure != OnFailure::Continue => {
                    self.any_blocked = true;
                    self.finish(t, TaskState::Blocked, Cause::DependencyFailed(d), &mut out);
                    self.block_dependents(t, &mut out);
                }
                _ if self.remaining[i] == 0 => self.enqueue(t),
                _ => {}
            }
        }
        self.fill(&mut out);
        out
    }

    /// A re-plan replaced the failures `planner` held, and those the planners among them held.
    pub(super) fn forget_held(&mut self, planner: u32) {
        for held in self.held.remove(&planner).unwrap_or_default() {
            self.forget_held(held);
        }
    }

    /// Whether `task` failed and a re-plan holds its failure.
    pub(super) fn is_held(&self, task: u32) -> bool {
        self.held.values().any(|held| held.contains(&task))
    }

    /// Whether `task`'s end lets its dependents go: it succeeded, or it ended at all and the
    /// run goes on past failures.
    pub(super) fn satisfies(&self, task: u32) -> bool {
        match self.phase[task as usize] {
            Phase::Done(TaskState::Succeeded) => true,
            // A failure a re-plan holds is passed on (or not) later.
            Phase::Done(_) => self.on_failure == OnFailure::Continue && !self.is_held(task),
            _ => false,
        }
    }

    /// Whether `task`, a planner, is asked again: one of its tasks failed, and it re-plans.
    pub fn replanning(&self, task: u32) -> bool {
        self.held.contains_key(&task)
    }

    /// A planner whose re-plan failed passes on the failures it held (and theirs, for the
    /// planners among them).
    pub(super) fn release_held(&mut self, planner: u32, out: &mut Vec<Action>) {
        for held in self.held.remove(&planner).unwrap_or_default() {
            self.any_failed = true;
            if self.stop.is_none() {
                self.apply_policy(held, out);
            }
            self.release_held(held, out);
        }
    }

    /// Holds `task`'s failure for its planner's re-plan, if it has one left (or is re-planning
    /// already), and sends the planner to re-plan. Whether it did.
    pub(super) fn hold_for_replan(
        &mut self,
        task: u32,
        state: TaskState,
        cause: Cause,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(planner) = self.replanned_by[task as usize] else {
            return false;
        };
        let p = planner as usize;
        let replanning = self.held.contains_key(&planner);
        // A planner that needs what failed for good can never run again.
        let doomed = self.needs.of(planner).iter().any(|&n| {
            matches!(self.phase[n as usize], Phase::Done(s) if s != TaskState::Succeeded)
                && !self.is_held(n)
        });
        if cause != Cause::Outcome
            || doomed
            || self.stop.is_some()
            || !matches!(state, TaskState::Failed | TaskState::TimedOut)
            || (!replanning && self.replans_left[p] == 0)
            || (!replanning && self.phase[p] != Phase::Done(TaskState::Succeeded))
        {
            return false;
        }
        self.finish(task, state, cause, out);
        self.held.entry(planner).or_default().push(task);
        if !replanning {
            self.replans_left[p] -= 1;
            // The planner runs again: what waits for it waits for its new answer, and its
            // new attempt has its retries whole.
            self.done -= 1;
            self.uncharged[p] = self.attempts[p];
            for idx in 0..self.dependents.of(planner).len() {
                let d = self.dependents.of(planner)[idx];
                self.remaining[d as usize] += 1;
                // One that was ready (or waiting to be retried) waits again: its entry in the
                // ready heap, or its retry timer, is stale now.
                if matches!(
                    self.phase[d as usize],
                    Phase::Queued
                        | Phase::Parked
                        | Phase::Deferred
                        | Phase::Approval
                        | Phase::Backoff
                ) {
                    self.phase.set(d, Phase::Waiting);
                }
            }
            // A planner among another's tasks while that one re-plans waits for it first.
            if self.remaining[p] == 0 {
                self.enqueue(planner);
            } else {
                self.phase.set(planner, Phase::Waiting);
            }
            out.push(Action::Replan {
                planner,
                failed: task,
            });
        }
        true
    }
}
