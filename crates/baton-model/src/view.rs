//! The one fold of a run's event log: [`RunView`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::{
    AgentUsage, Containment, Event, EventKind, Outcome, RunState, Stop, StopCause, TaskId,
    TaskState,
};

/// The run's own columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHead {
    pub status: RunState,
    pub ended_at_ms: Option<i64>,
    /// Why the run stopped launching tasks, once it has.
    pub stop: Option<Stop>,
}

/// One task's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskView {
    pub status: TaskState,
    /// The highest attempt number started.
    pub attempts: u32,
    /// Set while a retry waits for its backoff: the attempt that will run, and when.
    pub next_attempt: Option<u32>,
    pub retry_at_ms: Option<i64>,
    /// Start of the first attempt.
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    /// The exit code of the latest attempt, once it has ended.
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
}

/// One attempt's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptView {
    pub attempt: u32,
    pub started_at_ms: i64,
    pub pid: Option<u32>,
    pub ended_at_ms: Option<i64>,
    pub outcome: Option<Outcome>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub agent: Option<Box<AgentUsage>>,
    pub containment: Option<Containment>,
    /// What the agent was last seen doing while the attempt ran (`agent-activity`).
    pub activity: Option<Activity>,
}

/// A running agent's latest `agent-activity`.
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    /// Its latest tool call or edit, where it said one.
    pub doing: Option<String>,
    pub at_ms: i64,
    pub tokens: u64,
    pub cost_usd: Option<f64>,
}

/// Something in the log that cannot be applied; `seq` is the event's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    /// The run was given the same task twice; the second is left out.
    DuplicateTask {
        task: TaskId,
    },
    UnknownTask {
        seq: u64,
        task: TaskId,
    },
    StartedAgain {
        seq: u64,
        task: TaskId,
        attempt: u32,
    },
    NeverStarted {
        seq: u64,
        task: TaskId,
        attempt: u32,
    },
    /// A start numbered below the task's latest attempt: attempt numbers only grow.
    StartedOutOfOrder {
        seq: u64,
        task: TaskId,
        attempt: u32,
    },
    /// A second end of an attempt: an attempt ends once.
    EndedAgain {
        seq: u64,
        task: TaskId,
        attempt: u32,
    },
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateTask { task } => write!(f, "task {task} is in the run twice"),
            Self::UnknownTask { seq, task } => {
                write!(f, "event {seq} is about task {task}, which the run lacks")
            }
            Self::StartedAgain { seq, task, attempt } => {
                write!(f, "event {seq} starts attempt {attempt} of {task} again")
            }
            Self::NeverStarted { seq, task, attempt } => write!(
                f,
                "event {seq} ends attempt {attempt} of {task}, which never started"
            ),
            Self::StartedOutOfOrder { seq, task, attempt } => write!(
                f,
                "event {seq} starts attempt {attempt} of {task} after a later one"
            ),
            Self::EndedAgain { seq, task, attempt } => {
                write!(f, "event {seq} ends attempt {attempt} of {task} again")
            }
        }
    }
}

/// A run's state, folded from its events. It starts where a new run starts (`running`, every
/// task `pending`, in graph order) and applies events one at a time, each in O(1). What it
/// holds after the whole log is what the store's `runs`, `tasks` and `attempts` tables hold for
/// the run, column for column, except the outputs of attempts, which are not events (they
/// travel beside them, as the store's `AttemptOutput`) and are left out here, and a running
/// agent's latest activity, which the views show and the tables do not keep.
///
/// | event | change |
/// |---|---|
/// | `run-started`, `run-resumed` | run `running`, no end, no stop reason (a takeover reopens it) |
/// | `run-stopping` | run's `stop` (cause and reason) |
/// | `run-finished` | run status and end |
/// | `attempt-started` | new attempt (start, pid); task `running`, `attempts` = highest started, start = first attempt's; end, reason, exit code and pending retry cleared |
/// | `attempt-finished` | attempt end, outcome, exit code, duration, agent usage, containment; the task's exit code, if it is the task's latest attempt |
/// | `retry-scheduled` | task `pending`, `next_attempt` and `retry_at_ms` (= event time + delay) |
/// | `agent-activity` | the attempt's `activity` (kept where the event names no tool) |
/// | `task-waiting` | task `waiting` |
/// | `task-reset` | task `pending`; reason, end and pending retry cleared (the exit code stays) |
/// | `task-finished` | task status, reason and end; pending retry cleared |
/// | `graph-expanded` | the tasks added, `pending`, after the others |
/// | anything else | nothing |
///
/// Every function is total: an event the log should not hold (about a task the run lacks, an
/// attempt started twice, the end of an attempt never started) changes nothing and is kept as
/// an [`Anomaly`]. The store refuses to record such an event, so a stored log has none.
#[derive(Debug, Clone)]
pub struct RunView {
    run: RunHead,
    ids: Vec<TaskId>,
    tasks: Vec<TaskView>,
    /// Each task's attempts, by attempt number.
    attempts: Vec<Vec<AttemptView>>,
    index: HashMap<TaskId, usize>,
    /// Tasks per state, indexed like [`TaskState::ALL`].
    counts: [u32; TaskState::ALL.len()],
    anomalies: Vec<Anomaly>,
    /// Best-of tasks, by index: the attempt their latest pick made their result, and the
    /// attempts that were its candidates.
    picks: HashMap<usize, (u32, Vec<u32>)>,
}

impl RunView {
    /// A run as it is created: `running`, with `tasks` (in graph order) all `pending`.
    /// A run submitted for a worker (`baton run --detach`), before any event: queued. Its
    /// `run-started` makes it running like any other.
    pub fn submitted(mut self) -> Self {
        self.run.status = RunState::Queued;
        self
    }

    pub fn new(tasks: impl IntoIterator<Item = TaskId>) -> Self {
        let mut view = Self {
            run: RunHead {
                status: RunState::Running,
                ended_at_ms: None,
                stop: None,
            },
            ids: Vec::new(),
            tasks: Vec::new(),
            attempts: Vec::new(),
            index: HashMap::new(),
            counts: [0; TaskState::ALL.len()],
            anomalies: Vec::new(),
            picks: HashMap::new(),
        };
        let tasks = tasks.into_iter();
        // Room for all of them at once: 100,000 tasks grown into would rehash the index
        // seventeen times.
        let (n, _) = tasks.size_hint();
        view.ids.reserve(n);
        view.tasks.reserve(n);
        view.attempts.reserve(n);
        view.index.reserve(n);
        for task in tasks {
            view.add_task(task);
        }
        view
    }

    /// A task joins the run, `pending`, after the others.
    fn add_task(&mut self, task: TaskId) {
        if self.index.contains_key(&task) {
            self.anomalies.push(Anomaly::DuplicateTask { task });
            return;
        }
        self.index.insert(task.clone(), self.ids.len());
        self.ids.push(task);
        self.tasks.push(TaskView::fresh());
        self.attempts.push(Vec::new());
        self.counts[slot(TaskState::Pending)] += 1;
    }

    /// Applies one event, as the table in the type's docs says.
    pub fn apply(&mut self, event: &Event) {
        let at = event.at_ms;
        // The index of the task the event is about, if it is about one.
        let task = match event.kind.task() {
            None => None,
            Some(task) => match self.index.get(task) {
                Some(&i) => Some(i),
                None => {
                    self.anomalies.push(Anomaly::UnknownTask {
                        seq: event.seq,
                        task: task.clone(),
                    });
                    return;
                }
            },
        };
        match (&event.kind, task) {
            (EventKind::RunStarted { .. } | EventKind::RunResumed { .. }, _) => {
                self.run = RunHead {
                    status: RunState::Running,
                    ended_at_ms: None,
                    stop: None,
                };
            }
            (EventKind::RunStopping { reason, cause }, _) => {
                self.run.stop = Some(Stop {
                    cause: StopCause::of(reason, *cause),
                    reason: reason.clone(),
                });
            }
            (EventKind::RunFinished { state }, _) => {
                self.run.status = *state;
                self.run.ended_at_ms = Some(at);
            }
            (EventKind::AttemptStarted { task, attempt, pid }, Some(i)) => {
                self.start(event.seq, i, task, *attempt, at, *pid);
            }
            (EventKind::AttemptFinished { .. }, Some(i)) => self.finish(event, i),
            (
                EventKind::RetryScheduled {
                    attempt, delay_ms, ..
                },
                Some(i),
            ) => {
                self.set_status(i, TaskState::Pending);
                let task = &mut self.tasks[i];
                task.next_attempt = Some(*attempt);
                task.retry_at_ms =
                    Some(at.saturating_add(i64::try_from(*delay_ms).unwrap_or(i64::MAX)));
            }
            (
                EventKind::AgentActivity {
                    attempt,
                    doing,
                    tokens,
                    cost_usd,
                    ..
                },
                Some(i),
            ) => {
                if let Some(view) = find(&mut self.attempts[i], *attempt) {
                    let doing = doing
                        .clone()
                        .or_else(|| view.activity.as_ref().and_then(|a| a.doing.clone()));
                    view.activity = Some(Activity {
                        doing,
                        at_ms: at,
                        tokens: *tokens,
                        cost_usd: *cost_usd,
                    });
                }
            }
            (EventKind::TaskWaiting { .. }, Some(i)) => self.set_status(i, TaskState::Waiting),
            (EventKind::TaskReset { .. }, Some(i)) => {
                self.set_status(i, TaskState::Pending);
                let task = &mut self.tasks[i];
                task.reason = None;
                task.ended_at_ms = None;
                task.next_attempt = None;
                task.retry_at_ms = None;
            }
            (EventKind::TaskFinished { state, reason, .. }, Some(i)) => {
                self.set_status(i, *state);
                let task = &mut self.tasks[i];
                task.reason.clone_from(reason);
                task.ended_at_ms = Some(at);
                task.next_attempt = None;
                task.retry_at_ms = None;
            }
            (EventKind::GraphExpanded { added, .. }, Some(_)) => {
                for task in added {
                    self.add_task(task.clone());
                }
            }
            // A best-of task's exit code is its winner's, whichever candidate ended last.
            (EventKind::Picked { candidates, .. }, Some(i)) => {
                // As long as no later attempt started (the store's projection checks the same).
                if let Some((winner, last)) = event.kind.picked_attempt()
                    && self.tasks[i].attempts <= last
                {
                    if let Some(view) = find(&mut self.attempts[i], winner) {
                        self.tasks[i].exit_code = view.exit_code;
                    }
                    let attempts = candidates.iter().map(|c| c.attempt).collect();
                    self.picks.insert(i, (winner, attempts));
                }
            }
            (
                EventKind::TaskDecided { .. }
                | EventKind::Reviewed { .. }
                | EventKind::Picked { .. }
                | EventKind::Replanning { .. }
                | EventKind::AttemptLost { .. }
                | EventKind::BudgetChanged { .. }
                | EventKind::GraphReloaded { .. }
                | EventKind::WorkspaceCommitted(_)
                | EventKind::ResultMerged { .. }
                | EventKind::Checked { .. },
                _,
            ) => {}
            // An event about a task always has one: `task` is `None` only for the others.
            (_, None) => {}
        }
    }

    /// `attempt-finished` of task `i`.
    fn finish(&mut self, event: &Event, i: usize) {
        let EventKind::AttemptFinished {
            task,
            attempt,
            outcome,
            duration_ms,
            agent,
            containment,
        } = &event.kind
        else {
            return;
        };
        let Some(view) = find(&mut self.attempts[i], *attempt) else {
            self.anomalies.push(Anomaly::NeverStarted {
                seq: event.seq,
                task: task.clone(),
                attempt: *attempt,
            });
            return;
        };
        if view.ended_at_ms.is_some() {
            self.anomalies.push(Anomaly::EndedAgain {
                seq: event.seq,
                task: task.clone(),
                attempt: *attempt,
            });
            return;
        }
        let code = outcome.exit_code();
        view.ended_at_ms = Some(event.at_ms);
        view.outcome = Some(outcome.clone());
        view.exit_code = code;
        view.duration_ms = Some(*duration_ms);
        view.agent.clone_from(agent);
        view.containment = *containment;
        let task = &mut self.tasks[i];
        if task.attempts == *attempt {
            task.exit_code = code;
        }
    }

    /// `attempt-started` of task `i`.
    fn start(
        &mut self,
        seq: u64,
        i: usize,
        task: &TaskId,
        attempt: u32,
        at: i64,
        pid: Option<u32>,
    ) {
        let attempts = &mut self.attempts[i];
        // Attempts start in order: a number at or below the latest is refused, as the store
        // refuses it (the number fences what is written about the attempt).
        if let Some(last) = attempts.last()
            && last.attempt >= attempt
        {
            self.anomalies.push(
                if last.attempt == attempt || find(attempts, attempt).is_some() {
                    Anomaly::StartedAgain {
                        seq,
                        task: task.clone(),
                        attempt,
                    }
                } else {
                    Anomaly::StartedOutOfOrder {
                        seq,
                        task: task.clone(),
                        attempt,
                    }
                },
            );
            return;
        }
        attempts.push(AttemptView {
            attempt,
            started_at_ms: at,
            pid,
            ended_at_ms: None,
            outcome: None,
            exit_code: None,
            duration_ms: None,
            agent: None,
            containment: None,
            activity: None,
        });
        self.set_status(i, TaskState::Running);
        let view = &mut self.tasks[i];
        view.attempts = view.attempts.max(attempt);
        view.started_at_ms = view.started_at_ms.or(Some(at));
        view.ended_at_ms = None;
        view.reason = None;
        view.exit_code = None;
        view.next_attempt = None;
        view.retry_at_ms = None;
    }

    /// Task `i`'s status, kept counted.
    fn set_status(&mut self, i: usize, status: TaskState) {
        let task = &mut self.tasks[i];
        self.counts[slot(task.status)] -= 1;
        self.counts[slot(status)] += 1;
        task.status = status;
    }

    /// The run's own columns.
    pub fn run(&self) -> &RunHead {
        &self.run
    }

    /// Every task with its id, in graph order.
    pub fn tasks(&self) -> impl Iterator<Item = (&TaskId, &TaskView)> {
        self.ids.iter().zip(&self.tasks)
    }

    pub fn task(&self, task: &TaskId) -> Option<&TaskView> {
        self.index.get(task).map(|&i| &self.tasks[i])
    }

    /// A best-of task's latest pick: the attempt it made the task's result, and the attempts
    /// that were its candidates.
    pub fn picked(&self, task: &TaskId) -> Option<(u32, &[u32])> {
        let (winner, candidates) = self.picks.get(self.index.get(task)?)?;
        Some((*winner, candidates))
    }

    /// A task's attempts by number (none for a task the run lacks).
    pub fn attempts(&self, task: &TaskId) -> &[AttemptView] {
        self.index.get(task).map_or(&[], |&i| &self.attempts[i])
    }

    /// Every attempt with its task's id: by task, in graph order, then by attempt number.
    pub fn all_attempts(&self) -> impl Iterator<Item = (&TaskId, &AttemptView)> {
        self.ids
            .iter()
            .zip(&self.attempts)
            .flat_map(|(id, attempts)| attempts.iter().map(move |attempt| (id, attempt)))
    }

    /// How many tasks are in `state`.
    pub fn count(&self, state: TaskState) -> u32 {
        self.counts[slot(state)]
    }

    /// Tasks per state, leaving out the states no task is in.
    pub fn counts(&self) -> BTreeMap<TaskState, u32> {
        TaskState::ALL
            .into_iter()
            .map(|state| (state, self.count(state)))
            .filter(|&(_, n)| n != 0)
            .collect()
    }

    /// What could not be applied, in the order met.
    pub fn anomalies(&self) -> &[Anomaly] {
        &self.anomalies
    }
}

impl TaskView {
    /// A task as a new run records it.
    fn fresh() -> Self {
        Self {
            status: TaskState::Pending,
            attempts: 0,
            next_attempt: None,
            retry_at_ms: None,
            started_at_ms: None,
            ended_at_ms: None,
            exit_code: None,
            reason: None,
        }
    }
}

/// Where `state` is counted: its place in [`TaskState::ALL`].
fn slot(state: TaskState) -> usize {
    state as usize
}

/// Attempt number `attempt` among attempts ordered by number; the latest is looked at first.
fn find(attempts: &mut [AttemptView], attempt: u32) -> Option<&mut AttemptView> {
    let index = match attempts.last() {
        Some(last) if last.attempt == attempt => attempts.len() - 1,
        _ => attempts
            .binary_search_by_key(&attempt, |a| a.attempt)
            .ok()?,
    };
    Some(&mut attempts[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> TaskId {
        TaskId::new(name).unwrap()
    }

    fn at(at_ms: i64, kind: EventKind) -> Event {
        Event {
            seq: at_ms as u64,
            at_ms,
            kind,
        }
    }

    fn started(at_ms: i64, task: &str, attempt: u32) -> Event {
        at(
            at_ms,
            EventKind::AttemptStarted {
                task: id(task),
                attempt,
                pid: Some(7),
            },
        )
    }

    fn finished(at_ms: i64, task: &str, attempt: u32, code: i32) -> Event {
        at(
            at_ms,
            EventKind::AttemptFinished {
                task: id(task),
                attempt,
                outcome: Outcome::Exited { code },
                duration_ms: 5,
                agent: None,
                containment: Some(Containment::Cgroup),
            },
        )
    }

    #[test]
    fn a_new_run_is_running_with_every_task_pending() {
        let view = RunView::new([id("b"), id("a")]);
        assert_eq!(view.run().status, RunState::Running);
        let ids: Vec<&str> = view.tasks().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["b", "a"]);
        assert_eq!(view.counts(), BTreeMap::from([(TaskState::Pending, 2)]));
        assert!(view.anomalies().is_empty());
    }

    #[test]
    fn a_retry_then_a_success() {
        let mut view = RunView::new([id("a")]);
        for event in [
            started(10, "a", 1),
            finished(20, "a", 1, 3),
            at(
                21,
                EventKind::RetryScheduled {
                    task: id("a"),
                    attempt: 2,
                    delay_ms: 100,
                },
            ),
        ] {
            view.apply(&event);
        }
        let a = view.task(&id("a")).unwrap();
        assert_eq!(
            (a.status, a.next_attempt, a.retry_at_ms, a.exit_code),
            (TaskState::Pending, Some(2), Some(121), Some(3))
        );
        for event in [
            started(130, "a", 2),
            finished(140, "a", 2, 0),
            at(
                141,
                EventKind::TaskFinished {
                    task: id("a"),
                    state: TaskState::Succeeded,
                    reason: None,
                },
            ),
        ] {
            view.apply(&event);
        }
        let a = view.task(&id("a")).unwrap();
        assert_eq!(
            (a.status, a.attempts, a.started_at_ms, a.ended_at_ms),
            (TaskState::Succeeded, 2, Some(10), Some(141))
        );
        assert_eq!(
            (a.next_attempt, a.retry_at_ms, a.exit_code),
            (None, None, Some(0))
        );
        let attempts = view.attempts(&id("a"));
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].exit_code, Some(3));
        assert_eq!(attempts[1].containment, Some(Containment::Cgroup));
        assert_eq!(view.counts(), BTreeMap::from([(TaskState::Succeeded, 1)]));
    }

    #[test]
    fn an_earlier_attempt_ending_late_leaves_the_task_exit_code() {
        let mut view = RunView::new([id("a")]);
        for event in [
            started(1, "a", 1),
            started(2, "a", 2),
            finished(3, "a", 2, 4),
            finished(4, "a", 1, 9),
        ] {
            view.apply(&event);
        }
        assert_eq!(view.task(&id("a")).unwrap().exit_code, Some(4));
    }

    #[test]
    fn what_cannot_be_applied_is_an_anomaly_not_a_change() {
        let mut view = RunView::new([id("a"), id("a")]);
        view.apply(&started(1, "a", 1));
        view.apply(&started(2, "a", 1));
        view.apply(&started(3, "ghost", 1));
        view.apply(&finished(4, "a", 5, 0));
        let messages: Vec<String> = view.anomalies().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "task a is in the run twice",
                "event 2 starts attempt 1 of a again",
                "event 3 is about task ghost, which the run lacks",
                "event 4 ends attempt 5 of a, which never started",
            ]
        );
        assert_eq!(view.attempts(&id("a")).len(), 1);
        assert_eq!(view.attempts(&id("a"))[0].started_at_ms, 1);
        assert_eq!(view.counts(), BTreeMap::from([(TaskState::Running, 1)]));
    }

    #[test]
    fn an_attempts_number_fences_it_starts_only_grow_and_it_ends_once() {
        let mut view = RunView::new([id("a")]);
        view.apply(&started(1, "a", 3));
        view.apply(&started(2, "a", 1));
        view.apply(&started(3, "a", 3));
        view.apply(&finished(4, "a", 3, 0));
        view.apply(&finished(5, "a", 3, 1));
        let numbers: Vec<u32> = view.attempts(&id("a")).iter().map(|a| a.attempt).collect();
        assert_eq!(
            numbers,
            [3],
            "a gap is fine, a start below the latest is not"
        );
        let ended = &view.attempts(&id("a"))[0];
        assert_eq!((ended.ended_at_ms, ended.exit_code), (Some(4), Some(0)));
        assert_eq!(view.task(&id("a")).unwrap().attempts, 3);
        let anomalies: Vec<String> = view.anomalies().iter().map(ToString::to_string).collect();
        assert_eq!(
            anomalies,
            [
                "event 2 starts attempt 1 of a after a later one",
                "event 3 starts attempt 3 of a again",
                "event 5 ends attempt 3 of a again",
            ]
        );
    }

    #[test]
    fn each_state_is_counted_in_its_own_slot() {
        for (i, state) in TaskState::ALL.into_iter().enumerate() {
            assert_eq!(slot(state), i);
        }
    }

    #[test]
    fn a_takeover_reopens_the_run() {
        let mut view = RunView::new([id("a")]);
        view.apply(&at(
            1,
            EventKind::RunStopping {
                reason: "cancelled".into(),
                cause: Some(StopCause::Cancelled),
            },
        ));
        view.apply(&at(
            2,
            EventKind::RunFinished {
                state: RunState::Cancelled,
            },
        ));
        assert_eq!(
            *view.run(),
            RunHead {
                status: RunState::Cancelled,
                ended_at_ms: Some(2),
                stop: Some(Stop {
                    cause: StopCause::Cancelled,
                    reason: "cancelled".into()
                }),
            }
        );
        view.apply(&at(
            3,
            EventKind::RunResumed {
                retry: false,
                worker: None,
            },
        ));
        assert_eq!(view.run().status, RunState::Running);
        assert_eq!(view.run().ended_at_ms, None);
        assert_eq!(view.run().stop, None);
    }
}
