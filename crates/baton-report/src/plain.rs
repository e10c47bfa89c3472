use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use baton_model::{Event, EventKind, TaskId, TaskState, format_duration};

use crate::{Reporter, RunInfo, RunResult, StateCounts};

/// Line-by-line progress for logs and pipes (no cursor movement): a line per task that ends,
/// per retry, and per stop, on standard error.
pub struct PlainReporter<W: Write> {
    out: W,
    counts: StateCounts,
    clock: TaskClock,
    list_successes: bool,
    /// The run's id once it started, for the commands a line tells people to type.
    run_id: String,
}

impl<W: Write> PlainReporter<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            counts: StateCounts::default(),
            clock: TaskClock::default(),
            list_successes: true,
            run_id: String::new(),
        }
    }
}

impl<W: Write> Reporter for PlainReporter<W> {
    fn run_started(&mut self, info: &RunInfo) {
        self.counts = StateCounts::new(info.tasks);
        self.counts.earlier = info.earlier;
        self.list_successes = info.tasks <= 200;
        self.run_id = info.run_id.to_string();
        self.clock = TaskClock::with_best_of(info.best_of.clone());
        let _ = writeln!(
            self.out,
            "baton: run {} of `{}`: {} task{}, concurrency {}",
            info.run_id,
            crate::terminal_safe(&info.name),
            info.tasks,
            if info.tasks == 1 { "" } else { "s" },
            info.concurrency
        );
    }

    fn events(&mut self, events: &[Event]) {
        for event in events {
            self.counts.apply(&event.kind);
            self.clock.apply(event);
            let line = match &event.kind {
                EventKind::RetryScheduled {
                    task,
                    attempt,
                    delay_ms,
                } => describe_retry(task, *attempt, *delay_ms),
                EventKind::AttemptLost {
                    task,
                    attempt,
                    worker,
                } => describe_lost(task, *attempt, worker),
                EventKind::TaskFinished {
                    task,
                    state,
                    reason,
                } => {
                    // Forgotten by the clock whether or not its line is printed: a run of
                    // 100,000 tasks kept every success's start until the run ended.
                    let took = self.clock.finished(task, event.at_ms);
                    if *state == TaskState::Succeeded && !self.list_successes {
                        continue;
                    }
                    describe_finish(task, *state, reason.as_deref(), took)
                }
                EventKind::RunStopping { reason, .. } => format!("baton: stopping: {reason}"),
                EventKind::GraphExpanded { task, added, .. } => describe_added(task, added),
                EventKind::Reviewed { task, review, .. } => describe_review(task, review),
                EventKind::Picked { task, why, .. } => format!("baton: {task}: {why}"),
                EventKind::Replanning { task, failed } => {
                    format!("baton: {failed} failed: {task} plans what is left again")
                }
                EventKind::TaskWaiting { task } => format!(
                    "baton: {task} waits for approval: `baton approve {run} {task}` or `baton reject {run} {task}`",
                    run = self.run_id
                ),
                _ => continue,
            };
            // Reasons carry what tasks printed and the names of files they made.
            let _ = writeln!(self.out, "{}", crate::terminal_safe(&line));
        }
        let _ = self.out.flush();
    }

    fn run_finished(&mut self, _: &RunResult) {}
}

/// `baton: plan added 3 tasks: api, db, glue`: a planner answered, a `for_each` fanned out.
pub(crate) fn describe_added(task: &TaskId, added: &[TaskId]) -> String {
    let names: Vec<&str> = added.iter().map(TaskId::local).collect();
    format!(
        "baton: {task} added {} task{}: {}",
        added.len(),
        if added.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// `baton: api reviewed: rejected: the tests do not cover errors`.
pub(crate) fn describe_review(task: &TaskId, review: &baton_model::Review) -> String {
    let mut line = format!("baton: {task} reviewed: {}", review.verdict);
    if let Some(first) = review.reasons.first() {
        line.push_str(&format!(": {first}"));
        if review.reasons.len() > 1 {
            line.push_str(&format!(" (and {} more)", review.reasons.len() - 1));
        }
    }
    line
}

/// `  ↻ t3: worker w2 lost: attempt 1 runs again elsewhere`.
pub(crate) fn describe_lost(task: &TaskId, attempt: u32, worker: &str) -> String {
    format!("  ↻ {task}: worker {worker} lost: attempt {attempt} runs again elsewhere")
}

pub(crate) fn describe_retry(task: &TaskId, attempt: u32, delay_ms: u64) -> String {
    format!(
        "  ↻ {task}: retrying in {} (attempt {attempt})",
        format_duration(Duration::from_millis(delay_ms))
    )
}

/// When each task started and how many attempts it made, from the events, so that a finished
/// task's line can say how long it took.
#[derive(Debug, Default)]
pub(crate) struct TaskClock {
    started: HashMap<TaskId, (i64, u32)>,
    /// Best-of tasks and their candidates at a time: their attempts are counted in rounds.
    best_of: HashMap<TaskId, u32>,
}

/// How long a finished task took, and how many tries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Took {
    took: Duration,
    attempts: u32,
    /// A best-of task's candidates at a time.
    best_of: Option<u32>,
}

impl TaskClock {
    /// Tells the clock which tasks are best-of tasks (from [`RunInfo::best_of`]).
    pub(crate) fn with_best_of(best_of: HashMap<TaskId, u32>) -> Self {
        Self {
            started: HashMap::new(),
            best_of,
        }
    }

    pub(crate) fn apply(&mut self, event: &Event) {
        match &event.kind {
            EventKind::AttemptStarted { task, attempt, .. } => {
                let entry = self.started.entry(task.clone()).or_insert((event.at_ms, 0));
                entry.1 = *attempt;
            }
            EventKind::GraphExpanded { added, tasks, .. } => {
                self.best_of.extend(best_of_added(added, tasks));
            }
            _ => {}
        }
    }

    /// Time since the task's first attempt started, and its attempts; forgets the task.
    pub(crate) fn finished(&mut self, task: &TaskId, at_ms: i64) -> Option<Took> {
        let (start, attempts) = self.started.remove(task)?;
        Some(Took {
            took: Duration::from_millis(at_ms.saturating_sub(start).max(0) as u64),
            attempts,
            best_of: self.best_of.get(task).copied(),
        })
    }
}

/// The best-of tasks among those a planner added (`graph-expanded`: their ids, and the tasks
/// as the graph stores them), each with its candidates at a time.
pub(crate) fn best_of_added<'a>(
    added: &'a [TaskId],
    tasks: &'a serde_json::Value,
) -> impl Iterator<Item = (TaskId, u32)> + 'a {
    let counts = tasks.as_array().into_iter().flatten().map(|t| {
        t.get("candidates")
            .and_then(|c| c.as_array())
            .map_or(0, |c| c.len() as u32)
    });
    added
        .iter()
        .zip(counts)
        .filter(|&(_, n)| n > 1)
        .map(|(id, n)| (id.clone(), n))
}

pub(crate) fn describe_finish(
    task: &TaskId,
    state: TaskState,
    reason: Option<&str>,
    timing: Option<Took>,
) -> String {
    let mark = match state {
        TaskState::Succeeded | TaskState::SucceededWithWarnings => "✓",
        TaskState::Blocked | TaskState::Skipped => "⊘",
        _ => "✗",
    };
    let mut line = format!("  {mark} {task}: {state}");
    if let Some(Took {
        took,
        attempts,
        best_of,
    }) = timing
    {
        line.push_str(&format!(" in {}", format_duration(took)));
        match best_of {
            // Its attempts are candidates, N at a time: a round is one try of the task.
            Some(n) => {
                let rounds = attempts.div_ceil(n.max(1));
                line.push_str(&format!(" (best of {n}"));
                if rounds > 1 {
                    line.push_str(&format!(", {rounds} rounds"));
                }
                line.push(')');
            }
            None if attempts > 1 => line.push_str(&format!(" ({attempts} attempts)")),
            None => {}
        }
    }
    if let Some(reason) = reason {
        line.push_str(&format!(": {reason}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use baton_model::{Event, EventKind, TaskId, TaskState};

    use super::*;

    fn started(at_ms: i64, task: &str, attempt: u32) -> Event {
        Event {
            seq: 0,
            at_ms,
            kind: EventKind::AttemptStarted {
                task: TaskId::new(task).unwrap(),
                attempt,
                pid: None,
            },
        }
    }

    /// A success not listed (a run of more than 200 tasks) is forgotten all the same.
    #[test]
    fn the_clock_forgets_a_task_that_ended_unlisted() {
        let mut reporter = PlainReporter::new(Vec::new());
        reporter.run_started(&RunInfo {
            run_id: baton_model::RunId::new("20261203-120000-ab12").unwrap(),
            name: "many".to_owned(),
            tasks: 1_000,
            concurrency: 2,
            earlier: 0,
            view: Some(baton_model::RunView::new([TaskId::new("quiet").unwrap()])),
            started_at_ms: Some(0),
            budget_usd: None,
            budget_tokens: None,
            agents: Default::default(),
            best_of: HashMap::new(),
            logs: None,
        });
        let task = TaskId::new("quiet").unwrap();
        let before = reporter.out.len();
        reporter.events(&[
            started(1_000, "quiet", 1),
            Event {
                seq: 0,
                at_ms: 2_000,
                kind: EventKind::TaskFinished {
                    task,
                    state: TaskState::Succeeded,
                    reason: None,
                },
            },
        ]);
        assert_eq!(
            reporter.out.len(),
            before,
            "no line for a success of a large run"
        );
        assert!(reporter.clock.started.is_empty());
    }

    /// A finished task says how many tries it took; a best-of task's attempts are candidates,
    /// counted in rounds.
    #[test]
    fn a_finished_tasks_line_counts_attempts_or_rounds_of_candidates() {
        let mut clock = TaskClock::with_best_of([(TaskId::new("pick").unwrap(), 3)].into());
        for attempt in 1..=3 {
            clock.apply(&started(1_000, "pick", attempt));
        }
        clock.apply(&started(1_000, "once", 1));
        for attempt in 1..=2 {
            clock.apply(&started(1_000, "again", attempt));
        }
        let line = |clock: &mut TaskClock, task: &str| {
            let task = TaskId::new(task).unwrap();
            let took = clock.finished(&task, 3_500);
            describe_finish(&task, TaskState::Succeeded, None, took)
        };
        assert_eq!(
            line(&mut clock, "pick"),
            "  ✓ pick: succeeded in 2.5s (best of 3)"
        );
        assert_eq!(line(&mut clock, "once"), "  ✓ once: succeeded in 2.5s");
        assert_eq!(
            line(&mut clock, "again"),
            "  ✓ again: succeeded in 2.5s (2 attempts)"
        );
        for attempt in 1..=6 {
            clock.apply(&started(1_000, "pick", attempt));
        }
        assert_eq!(
            line(&mut clock, "pick"),
            "  ✓ pick: succeeded in 2.5s (best of 3, 2 rounds)"
        );
        // A best-of task a planner added is learned from its `graph-expanded`.
        clock.apply(&Event {
            seq: 0,
            at_ms: 1_000,
            kind: EventKind::GraphExpanded {
                task: TaskId::new("plan").unwrap(),
                attempt: 1,
                added: vec![TaskId::new("one").unwrap(), TaskId::new("two").unwrap()],
                tasks: serde_json::json!([
                    { "id": "one", "candidates": [{ "engine": "a" }, { "engine": "b" }] },
                    { "id": "two" }
                ]),
                replaces: Vec::new(),
            },
        });
        for attempt in 1..=2 {
            clock.apply(&started(1_000, "one", attempt));
            clock.apply(&started(1_000, "two", attempt));
        }
        assert_eq!(
            line(&mut clock, "one"),
            "  ✓ one: succeeded in 2.5s (best of 2)"
        );
        assert_eq!(
            line(&mut clock, "two"),
            "  ✓ two: succeeded in 2.5s (2 attempts)"
        );
    }
}
