use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use baton_model::{Ending, FailureClass, OnFailure, Outcome, RunState, Stopped, TaskState};

use crate::backoff::backoff_delay;

mod engines;
mod growth;
mod phases;
use crate::plan::{Adjacency, Plan, priorities};
pub use engines::hands_over;
use phases::Phases;

/// Something that happened, fed to [`Scheduler::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Begin the run: launches the first tasks.
    Start,
    /// An attempt ended.
    Finished {
        task: u32,
        attempt: u32,
        outcome: Outcome,
    },
    /// The backoff timer armed by [`Action::RetryLater`] fired.
    RetryDue { task: u32 },
    /// The dispatcher did not start a launch it was given (the run's budget could not cover
    /// it): the task goes back to the ready queue as if never launched. Normally followed by
    /// a stop.
    Declined { task: u32, attempt: u32 },
    /// Stop the run.
    Stop(StopCause),
    /// A person approved a task that waits for approval (or will: a decision can come early).
    Approved { task: u32 },
    /// A person rejected a task: it fails without running.
    Rejected { task: u32 },
    /// Start nothing more, let what runs finish, then end the run as `waiting` with the rest
    /// left as it is, for a later takeover to continue (the run's soft budget was reached).
    /// A stop overrides a pause: what is left is then skipped as usual.
    Pause,
}

/// Why a run stops early. Ordered: a stop only ever escalates (a Ctrl-C after a failure stop
/// turns it into a cancellation; a second Ctrl-C into an immediate kill), never the reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StopCause {
    /// A task failed under `on_failure = "stop"`.
    TaskFailed,
    /// The run's budget is spent: nothing more starts. Running attempts are asked to stop
    /// (`StopRunning`); the dispatcher leaves to each agent's budget watcher when and whether
    /// (an agent whose answer is in keeps it).
    BudgetSpent,
    /// The user asked: Ctrl-C or `baton cancel`. Running tasks get TERM, then KILL.
    Cancelled,
    /// The user insisted (a second Ctrl-C): running tasks are killed at once.
    Killed,
}

/// What the dispatcher must do (and record) as a consequence of an input.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start attempt `attempt` (1 for the first) of `task`.
    Launch { task: u32, attempt: u32 },
    /// Arm a timer; feed [`Input::RetryDue`] when it fires. `attempt` is the one that will run.
    RetryLater {
        task: u32,
        attempt: u32,
        delay: Duration,
    },
    /// `task` reached a terminal state, never to change in this run.
    Finished {
        task: u32,
        state: TaskState,
        cause: Cause,
    },
    /// Stop every running attempt: TERM then KILL, or KILL at once when `immediate`.
    StopRunning { cause: StopCause, immediate: bool },
    /// `task` is ready and waits for a person's approval.
    AwaitApproval { task: u32 },
    /// `failed`, one of planner `planner`'s tasks, failed for good: its failure is held and
    /// the planner runs again (a `Launch` follows) to re-plan what is left.
    Replan { planner: u32, failed: u32 },
    /// Every task is terminal and nothing runs: the run is over.
    RunFinished { state: RunState },
}

/// Why a task ended in its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Its own last attempt decided it.
    Outcome,
    /// It needs this task, which failed.
    DependencyFailed(u32),
    /// The run stopped before it could start or finish.
    Stopped(StopCause),
    /// A person rejected it.
    Rejected,
    /// Its planner re-planned, and the new plan replaces it.
    Replaced,
}

/// Where one task is. The attempt counter lives beside it in `Scheduler::attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for `remaining` dependencies.
    Waiting,
    /// In the ready heap.
    Queued,
    /// Ready, but a task with a conflicting scope is running.
    Parked,
    /// Ready, and waiting for a person's approval.
    Approval,
    /// Ready, but the dispatcher declined to start it (the run's budget could not cover it
    /// while others run): waits for the next attempt to end.
    Deferred,
    Running,
    /// Failed; waiting for its retry timer.
    Backoff,
    Done(TaskState),
}

/// Per task, the tasks it needs.
fn needs_of(plan: &Plan) -> Adjacency {
    Adjacency::build(
        plan.tasks.len(),
        plan.tasks
            .iter()
            .enumerate()
            .flat_map(|(i, t)| t.needs.iter().map(move |&n| (i as u32, n))),
    )
}

/// The scheduler's whole state. See the crate docs.
#[derive(Debug)]
pub struct Scheduler {
    concurrency: u32,
    on_failure: OnFailure,
    retries: Vec<u32>,
    backoff: Vec<Duration>,
    retry_infrastructure_only: Vec<bool>,
    dependents: Adjacency,
    /// Per task, what it needs (the reverse of `dependents`).
    needs: Adjacency,
    conflicts: Adjacency,
    priority: Vec<u32>,
    phase: Phases,
    /// Dependencies not yet satisfied, per task.
    remaining: Vec<u32>,
    /// Running tasks whose scope conflicts with this one's, per task.
    running_conflicts: Vec<u32>,
    /// Attempts launched so far, per task.
    attempts: Vec<u32>,
    /// Attempts that do not count against `retries` (made before a resume or retry, or on an
    /// engine it fell back from), per task.
    uncharged: Vec<u32>,
    /// Per task, the engine of its chain its next attempt runs on.
    engines: Vec<engines::Chain>,
    ready: BinaryHeap<(u32, Reverse<u32>)>,
    running: u32,
    done: u32,
    stop: Option<StopCause>,
    /// Tasks in [`Phase::Deferred`].
    deferred: Vec<u32>,
    needs_approval: Vec<bool>,
    approved: Vec<bool>,
    /// [`Input::Pause`] arrived: nothing more starts.
    paused: bool,
    any_failed: bool,
    /// A task waits for a person (its dependencies' changes conflict).
    any_needs_human: bool,
    any_blocked: bool,
    finished: bool,
    rng: fastrand::Rng,
    /// Per task, the planner that re-plans when it fails for good.
    replanned_by: Vec<Option<u32>>,
    /// Per planner, the re-plans left.
    replans_left: Vec<u32>,
    /// Per task, whether a re-plan replaced it (it failed, or had not started).
    replaced: Vec<bool>,
    /// Planners re-planning now, with the failures they hold (passed on if the re-plan
    /// fails, replaced if it succeeds).
    held: std::collections::HashMap<u32, Vec<u32>>,
}

impl Scheduler {
    /// A scheduler for `plan`. `seed` drives the backoff jitter, so a test can replay a run.
    pub fn new(plan: &Plan, seed: u64) -> Self {
        let n = plan.tasks.len();
        let dependents = Adjacency::build(
            n,
            plan.tasks
                .iter()
                .enumerate()
                .flat_map(|(i, t)| t.needs.iter().map(move |&d| (d, i as u32))),
        );
        let conflicts = Adjacency::build(
            n,
            plan.tasks
                .iter()
                .enumerate()
                .flat_map(|(i, t)| t.conflicts.iter().map(move |&c| (i as u32, c))),
        );
        let remaining: Vec<u32> = plan.tasks.iter().map(|t| t.needs.len() as u32).collect();
        let priority = priorities(&remaining, &dependents);
        let needs = needs_of(plan);
        Self {
            concurrency: plan.concurrency.max(1),
            on_failure: plan.on_failure,
            retries: plan.tasks.iter().map(|t| t.retries).collect(),
            engines: plan.tasks.iter().map(engines::Chain::of).collect(),
            backoff: plan.tasks.iter().map(|t| t.backoff).collect(),
            retry_infrastructure_only: plan
                .tasks
                .iter()
                .map(|t| t.retry_infrastructure_only)
                .collect(),
            dependents,
            needs,
            conflicts,
            priority,
            phase: Phases::new(n),
            remaining,
            running_conflicts: vec![0; n],
            attempts: vec![0; n],
            uncharged: vec![0; n],
            ready: BinaryHeap::new(),
            running: 0,
            done: 0,
            stop: None,
            deferred: Vec::new(),
            needs_approval: plan.tasks.iter().map(|t| t.needs_approval).collect(),
            approved: vec![false; plan.tasks.len()],
            paused: false,
            any_failed: false,
            any_needs_human: false,
            any_blocked: false,
            finished: false,
            rng: fastrand::Rng::with_seed(seed),
            replanned_by: plan.tasks.iter().map(|t| t.replanned_by).collect(),
            replans_left: plan.tasks.iter().map(|t| t.replans).collect(),
            replaced: plan.tasks.iter().map(|t| t.replaced).collect(),
            held: std::collections::HashMap::new(),
        }
    }

    /// Marks tasks that already reached a terminal state in an earlier process (resume), with
    /// the attempts they used. Call before [`Input::Start`]. A succeeded task releases its
    /// dependents; any other terminal state is kept as is and does not block anything by
    /// itself (the caller decides what to re-run and passes only what stays final).
    pub fn restore(&mut self, task: u32, state: TaskState, attempts: u32) {
        debug_assert!(state.is_terminal());
        let i = task as usize;
        if self.phase[i] != Phase::Waiting {
            return;
        }
        self.attempts[i] = attempts;
        self.phase.set(task, Phase::Done(state));
        self.done += 1;
        self.any_needs_human |= state == TaskState::NeedsHuman;
        self.any_blocked |= state == TaskState::Blocked;
        // A planned task's failure is its planner's to re-plan (or was replaced): what it
        // means is decided at the start, once every task is restored.
        if state.is_failure() && self.replanned_by[i].is_some() {
            return;
        }
        self.any_failed |= state.is_failure();
        if state == TaskState::Succeeded || self.on_failure == OnFailure::Continue {
            for &d in self.dependents.of(task) {
                self.remaining[d as usize] -= 1;
            }
        }
    }

    /// Continues a task that will run again (after a crash, or `baton retry`): its attempt
    /// numbers go on after the `used` ones recorded, and those count against its `retries` only
    /// if `charge`. Call before [`Input::Start`].
    pub fn continue_after(&mut self, task: u32, used: u32, charge: bool) {
        let i = task as usize;
        self.attempts[i] = used;
        self.uncharged[i] = if charge { 0 } else { used };
    }

    /// Marks attempt `attempt` of `task` as running already: an earlier coordinator started it
    /// and it still runs (on a worker), so a takeover adopts it instead of running it again.
    /// It holds its concurrency slot and its scope as if launched here; its end comes as any
    /// other's. The attempts before it count against `retries` only if `charge`. Call before
    /// [`Input::Start`].
    pub fn adopt(&mut self, task: u32, attempt: u32, charge: bool) {
        let i = task as usize;
        if self.phase[i] != Phase::Waiting || attempt == 0 {
            return;
        }
        self.continue_after(task, attempt - 1, charge);
        self.phase.set(task, Phase::Running);
        self.attempts[i] = attempt;
        self.running += 1;
        for &c in self.conflicts.of(task) {
            self.running_conflicts[c as usize] += 1;
        }
    }

    /// Puts a task that will run again where its recorded attempts left it in its chain of
    /// engines: `history` is its attempts' numbers and outcomes, in order. Call after
    /// [`Scheduler::continue_after`].
    pub fn recall_engine<'o>(
        &mut self,
        task: u32,
        history: impl IntoIterator<Item = (u32, &'o Outcome)>,
    ) {
        let i = task as usize;
        for (attempt, outcome) in history {
            if self.engines[i].hand_over(outcome) {
                self.uncharged[i] = self.uncharged[i].max(attempt);
            }
        }
    }

    /// The engine of `task`'s chain its next attempt runs on: 0 is its own, 1 its first
    /// fallback, and so on.
    pub fn engine(&self, task: u32) -> u32 {
        self.engines[task as usize].at
    }

    /// Applies one input and returns what follows from it, in order.
    pub fn handle(&mut self, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Start => self.start(&mut out),
            Input::Finished {
                task,
                attempt,
                outcome,
            } => self.attempt_finished(task, attempt, &outcome, &mut out),
            Input::RetryDue { task } => {
                let i = task as usize;
                if self.phase[i] == Phase::Backoff {
                    if self.remaining[i] == 0 {
                        self.enqueue(task);
                    } else {
                        // Its planner re-plans meanwhile (it waits for the new plan), or failed
                        // doing so (it is blocked, as it would have been had it waited).
                        self.phase.set(task, Phase::Waiting);
                        let failed = self.needs.of(task).iter().copied().find(|&n| {
                            matches!(self.phase[n as usize], Phase::Done(s) if s != TaskState::Succeeded)
                                && !self.is_held(n)
                        });
                        if let Some(n) = failed.filter(|_| self.on_failure != OnFailure::Continue) {
                            self.any_blocked = true;
                            self.finish(
                                task,
                                TaskState::Blocked,
                                Cause::DependencyFailed(n),
                                &mut out,
                            );
                            self.block_dependents(task, &mut out);
                        }
                    }
                }
            }
            Input::Stop(cause) => self.begin_stop(cause, &mut out),
            Input::Pause => self.paused = true,
            Input::Approved { task } => {
                let i = task as usize;
                self.approved[i] = true;
                if self.phase[i] == Phase::Approval {
                    self.enqueue(task);
                }
            }
            Input::Rejected { task } => {
                if !matches!(self.phase[task as usize], Phase::Done(_) | Phase::Running) {
                    self.fail(task, TaskState::Failed, Cause::Rejected, &mut out);
                }
            }
            Input::Declined { task, attempt } => {
                let i = task as usize;
                if self.phase[i] == Phase::Running && self.attempts[i] == attempt {
                    self.release_slot(task);
                    self.attempts[i] -= 1;
                    match self.stop {
                        // Launched just before the stop: it never started, like the rest.
                        Some(cause) => {
                            self.finish(task, TaskState::Skipped, Cause::Stopped(cause), &mut out)
                        }
                        None => {
                            self.phase.set(task, Phase::Deferred);
                            self.deferred.push(task);
                        }
                    }
                }
            }
        }
        self.fill(&mut out);
        self.check_end(&mut out);
        out
    }

    /// The state of a task as the rest of baton names it.
    /// Where `task` is, in the words of the record: a task waiting for its retry is `pending`
    /// (as `retry-scheduled` leaves it in the store), one whose needs are met and that waits
    /// only for a slot, its scope or the budget is `ready` (no event records that: the store
    /// still says `pending`).
    pub fn state(&self, task: u32) -> TaskState {
        match self.phase[task as usize] {
            Phase::Waiting | Phase::Backoff => TaskState::Pending,
            Phase::Queued | Phase::Parked | Phase::Deferred => TaskState::Ready,
            Phase::Approval => TaskState::Waiting,
            Phase::Running => TaskState::Running,
            Phase::Done(state) => state,
        }
    }

    /// Whether the run pauses ([`Input::Pause`]): nothing more starts.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether any task waits for a person's decision ([`Action::AwaitApproval`]).
    pub fn awaits_approval(&self) -> bool {
        self.phase.awaiting() > 0
    }

    pub fn attempts(&self, task: u32) -> u32 {
        self.attempts[task as usize]
    }

    pub fn running(&self) -> u32 {
        self.running
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    pub fn stop_cause(&self) -> Option<StopCause> {
        self.stop
    }

    pub fn len(&self) -> usize {
        self.phase.len()
    }

    pub fn is_empty(&self) -> bool {
        self.phase.is_empty()
    }

    fn start(&mut self, out: &mut Vec<Action>) {
        // A restored run may hold failures whose dependents were not restored as blocked (the
        // user asked to re-run only a dependent): block them now, as the failure would have.
        for i in 0..self.phase.len() as u32 {
            let at = i as usize;
            if !matches!(self.phase[at], Phase::Done(state) if state.is_failure()) {
                continue;
            }
            match self.replanned_by[at] {
                // A re-plan replaced it: nothing waits for it any more (under `continue`, as
                // restoring any other failure, it lets its dependents go).
                Some(_) if self.replaced[at] && self.on_failure == OnFailure::Continue => {
                    self.release_dependents(i);
                }
                Some(_) if self.replaced[at] => {}
                // Its planner was re-planning when the run stopped: it goes on doing so.
                Some(p) if !matches!(self.phase[p as usize], Phase::Done(_)) => {
                    self.held.entry(p).or_default().push(i);
                }
                Some(_) => {
                    self.any_failed = true;
                    match self.on_failure {
                        OnFailure::Continue => self.release_dependents(i),
                        _ => self.block_dependents(i, out),
                    }
                }
                None if self.on_failure == OnFailure::Block => self.block_dependents(i, out),
                None => {}
            }
        }
        for i in 0..self.phase.len() as u32 {
            if self.phase[i as usize] == Phase::Waiting && self.remaining[i as usize] == 0 {
                self.enqueue(i);
            }
        }
    }

    fn enqueue(&mut self, task: u32) {
        self.phase.set(task, Phase::Queued);
        self.ready
            .push((self.priority[task as usize], Reverse(task)));
    }

    /// Launches ready tasks while there is room.
    fn fill(&mut self, out: &mut Vec<Action>) {
        if self.stop.is_some() || self.paused {
            return;
        }
        while self.running < self.concurrency {
            let Some((_, Reverse(task))) = self.ready.pop() else {
                break;
            };
            let i = task as usize;
            if self.phase[i] != Phase::Queued {
                continue;
            }
            if self.needs_approval[i] && !self.approved[i] {
                self.phase.set(task, Phase::Approval);
                out.push(Action::AwaitApproval { task });
                continue;
            }
            if self.running_conflicts[i] > 0 {
                self.phase.set(task, Phase::Parked);
                continue;
            }
            self.phase.set(task, Phase::Running);
            self.attempts[i] += 1;
            self.running += 1;
            for &c in self.conflicts.of(task) {
                self.running_conflicts[c as usize] += 1;
            }
            out.push(Action::Launch {
                task,
                attempt: self.attempts[i],
            });
        }
    }

    fn attempt_finished(
        &mut self,
        task: u32,
        attempt: u32,
        outcome: &Outcome,
        out: &mut Vec<Action>,
    ) {
        let i = task as usize;
        // A report about anything but the attempt in flight is stale: ignore it.
        if self.phase[i] != Phase::Running || self.attempts[i] != attempt {
            return;
        }
        self.release_slot(task);
        // What was deferred for want of budget gets another look now that an attempt ended
        // (not on a decline: that would offer the declined tasks again and again).
        for deferred in std::mem::take(&mut self.deferred) {
            if self.phase[deferred as usize] == Phase::Deferred {
                self.enqueue(deferred);
            }
        }

        if outcome.is_success() {
            self.finish(task, TaskState::Succeeded, Cause::Outcome, out);
            self.release_dependents(task);
            return;
        }
        if *outcome == Outcome::Cancelled {
            let cause = self.stop.map_or(Cause::Outcome, Cause::Stopped);
            self.fail(task, TaskState::Cancelled, cause, out);
            return;
        }
        if self.stop.is_none() && self.engines[i].hand_over(outcome) {
            // The next engine, at once and with its retries whole: the last one's own
            // retries of its API are behind it, and its `retry-after` is not this one's.
            self.uncharged[i] = attempt;
            return self.again_at_once(task, attempt, out);
        }
        if self.stop.is_none() && *outcome == Outcome::Interrupted {
            // Lost with the worker that ran it (its lease lapsed): no fault of the task's, so
            // not one of its retries; another worker takes it at once.
            self.uncharged[i] += 1;
            return self.again_at_once(task, attempt, out);
        }
        let retryable = match outcome.failure_class() {
            Some(FailureClass::Infrastructure) => true,
            Some(FailureClass::Task) => !self.retry_infrastructure_only[i],
            None => false,
        };
        if self.stop.is_none() && retryable && attempt - self.uncharged[i] <= self.retries[i] {
            let next = attempt + 1;
            // An API that said how long to wait knows better than our backoff.
            let delay = backoff_delay(self.backoff[i], next, self.rng.f64())
                .max(outcome.retry_after().unwrap_or_default());
            self.phase.set(task, Phase::Backoff);
            out.push(Action::RetryLater {
                task,
                attempt: next,
                delay,
            });
            return;
        }
        let state = match outcome {
            Outcome::TimedOut | Outcome::IdleTimeout { .. } => TaskState::TimedOut,
            Outcome::MergeConflict { .. } => TaskState::NeedsHuman,
            Outcome::Reviewed { verdict } if verdict.asks_a_person() => TaskState::NeedsHuman,
            _ => TaskState::Failed,
        };
        self.fail(task, state, Cause::Outcome, out);
    }

    /// `task` runs again without waiting: the attempt after `attempt`.
    fn again_at_once(&mut self, task: u32, attempt: u32, out: &mut Vec<Action>) {
        self.phase.set(task, Phase::Backoff);
        out.push(Action::RetryLater {
            task,
            attempt: attempt + 1,
            delay: Duration::ZERO,
        });
    }

    /// A running task stops occupying its concurrency slot and its scope.
    fn release_slot(&mut self, task: u32) {
        self.running -= 1;
        for &c in self.conflicts.of(task) {
            let count = &mut self.running_conflicts[c as usize];
            *count -= 1;
            if *count == 0 && self.phase[c as usize] == Phase::Parked {
                // Inlined `enqueue`: `self.conflicts` is borrowed by the loop.
                self.phase.set(c, Phase::Queued);
                self.ready.push((self.priority[c as usize], Reverse(c)));
            }
        }
    }

    fn finish(&mut self, task: u32, state: TaskState, cause: Cause, out: &mut Vec<Action>) {
        self.phase.set(task, Phase::Done(state));
        self.done += 1;
        out.push(Action::Finished { task, state, cause });
    }

    fn release_dependents(&mut self, task: u32) {
        for idx in 0..self.dependents.of(task).len() {
            let d = self.dependents.of(task)[idx];
            let di = d as usize;
            self.remaining[di] -= 1;
            if self.remaining[di] == 0 && self.phase[di] == Phase::Waiting {
                self.enqueue(d);
            }
        }
    }

    /// A task failed for good: apply the failure policy — unless its planner re-plans, which
    /// holds the failure meanwhile.
    fn fail(&mut self, task: u32, state: TaskState, cause: Cause, out: &mut Vec<Action>) {
        if self.hold_for_replan(task, state, cause, out) {
            return;
        }
        if state == TaskState::NeedsHuman {
            self.any_needs_human = true;
        } else {
            self.any_failed = true;
        }
        self.finish(task, state, cause, out);
        if self.stop.is_some() {
            return;
        }
        self.apply_policy(task, out);
        self.release_held(task, out);
    }

    fn apply_policy(&mut self, task: u32, out: &mut Vec<Action>) {
        match self.on_failure {
            OnFailure::Continue => self.release_dependents(task),
            OnFailure::Block => self.block_dependents(task, out),
            OnFailure::Stop => self.begin_stop(StopCause::TaskFailed, out),
        }
    }

    /// Blocks everything downstream of `failed` that has not finished. Each task is blocked at
    /// most once, so all blocking in a run costs O(V + E).
    fn block_dependents(&mut self, failed: u32, out: &mut Vec<Action>) {
        let mut stack = vec![failed];
        while let Some(t) = stack.pop() {
            for idx in 0..self.dependents.of(t).len() {
                let d = self.dependents.of(t)[idx];
                // A task that runs (a planned task whose planner's re-plan failed) ends as it
                // will; one that ended stays as it is.
                if matches!(self.phase[d as usize], Phase::Done(_) | Phase::Running) {
                    continue;
                }
                self.any_blocked = true;
                self.finish(d, TaskState::Blocked, Cause::DependencyFailed(failed), out);
                stack.push(d);
                // A planner blocked while it waited to re-plan passes on what it held.
                if self.held.contains_key(&d) {
                    self.release_held(d, out);
                }
            }
        }
    }

    fn begin_stop(&mut self, cause: StopCause, out: &mut Vec<Action>) {
        if self.finished || self.stop.is_some_and(|current| current >= cause) {
            return;
        }
        let first = self.stop.is_none();
        self.stop = Some(cause);
        if self.running > 0 {
            out.push(Action::StopRunning {
                cause,
                immediate: cause == StopCause::Killed,
            });
        }
        if !first {
            return;
        }
        for task in 0..self.phase.len() as u32 {
            let state = match self.phase[task as usize] {
                Phase::Waiting
                | Phase::Queued
                | Phase::Parked
                | Phase::Deferred
                | Phase::Approval => TaskState::Skipped,
                Phase::Backoff => TaskState::Cancelled,
                Phase::Running | Phase::Done(_) => continue,
            };
            self.finish(task, state, Cause::Stopped(cause), out);
        }
        self.ready.clear();
    }

    fn check_end(&mut self, out: &mut Vec<Action>) {
        if self.finished || self.running > 0 {
            return;
        }
        let ending = self.ending();
        // Paused with work left: what is left waits for a person; retry timers still armed
        // are dropped with the run (their tasks run again when it is continued).
        if !ending.paused_with_work_left && self.done as usize != self.phase.len() {
            return;
        }
        self.finished = true;
        out.push(Action::RunFinished {
            state: ending.state(),
        });
    }

    /// What the run's end depends on, as far as its tasks are concerned: the dispatcher adds
    /// how their results merge, and [`Ending::state`] decides.
    pub fn ending(&self) -> Ending {
        Ending {
            stopped: self.stop.map(|cause| match cause {
                StopCause::TaskFailed => Stopped::TaskFailed,
                StopCause::BudgetSpent => Stopped::BudgetSpent,
                StopCause::Cancelled | StopCause::Killed => Stopped::ByPerson,
            }),
            paused_with_work_left: self.paused
                && self.stop.is_none()
                && (self.done as usize) < self.phase.len(),
            any_failed: self.any_failed,
            any_needs_human: self.any_needs_human,
            any_blocked: self.any_blocked,
            ..Ending::default()
        }
    }
}
