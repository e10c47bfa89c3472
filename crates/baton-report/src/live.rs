use std::collections::HashMap;
use std::time::Duration;

use baton_model::{Event, EventKind, TaskId, TaskState};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::plain::{TaskClock, describe_finish, describe_retry};
use crate::{Reporter, RunInfo, RunResult, StateCounts};

/// Running tasks shown with their own line; more are summed up in the header.
const MAX_TASK_LINES: usize = 16;
/// Above this many tasks, successes are not listed one by one, only counted.
const LIST_SUCCESSES_UP_TO: u32 = 200;

/// The live view on a terminal: a header with counts by state, one line per running task with
/// its elapsed time, and a line printed above them as each task ends.
pub struct LiveReporter {
    multi: MultiProgress,
    header: ProgressBar,
    bars: HashMap<TaskId, ProgressBar>,
    counts: StateCounts,
    clock: TaskClock,
    list_successes: bool,
    run_id: Option<String>,
}

impl LiveReporter {
    pub fn new() -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(
            ProgressStyle::with_template("{spinner:.cyan} [{elapsed_precise}] {msg}")
                .expect("static template"),
        );
        header.enable_steady_tick(Duration::from_millis(100));
        Self {
            multi,
            header,
            bars: HashMap::new(),
            counts: StateCounts::default(),
            clock: TaskClock::default(),
            list_successes: true,
            run_id: None,
        }
    }

    fn task_style() -> ProgressStyle {
        ProgressStyle::with_template("  {spinner:.green} {elapsed:>4} {msg}")
            .expect("static template")
    }

    fn println(&self, line: String) {
        // `println` on a hidden target (not a terminal) is silently dropped, which is right.
        // Reasons carry what tasks printed and the names of files they made.
        let _ = self.multi.println(crate::terminal_safe(&line));
    }
}

impl Default for LiveReporter {
    fn default() -> Self {
        Self::new()
    }
}

impl Reporter for LiveReporter {
    fn run_started(&mut self, info: &RunInfo) {
        self.counts = StateCounts::new(info.tasks);
        self.counts.earlier = info.earlier;
        self.list_successes = info.tasks <= LIST_SUCCESSES_UP_TO;
        self.run_id = Some(info.run_id.to_string());
        self.println(format!(
            "baton: run {} of `{}`: {} task{}, concurrency {}",
            info.run_id,
            info.name,
            info.tasks,
            if info.tasks == 1 { "" } else { "s" },
            info.concurrency
        ));
        self.header.set_message(self.counts.to_string());
    }

    fn events(&mut self, events: &[Event]) {
        for event in events {
            self.counts.apply(&event.kind);
            self.clock.apply(event);
            match &event.kind {
                EventKind::AttemptStarted { task, attempt, .. } => {
                    if self.bars.len() < MAX_TASK_LINES {
                        let bar = self.multi.add(ProgressBar::new_spinner());
                        bar.set_style(Self::task_style());
                        let retry = if *attempt > 1 {
                            format!(" (attempt {attempt})")
                        } else {
                            String::new()
                        };
                        bar.set_message(format!("{task}{retry}"));
                        bar.enable_steady_tick(Duration::from_millis(100));
                        self.bars.insert(task.clone(), bar);
                    }
                }
                EventKind::AttemptFinished { task, .. } => {
                    if let Some(bar) = self.bars.remove(task) {
                        bar.finish_and_clear();
                        self.multi.remove(&bar);
                    }
                }
                EventKind::RetryScheduled {
                    task,
                    attempt,
                    delay_ms,
                } => self.println(describe_retry(task, *attempt, *delay_ms)),
                EventKind::TaskFinished {
                    task,
                    state,
                    reason,
                } => {
                    if *state != TaskState::Succeeded || self.list_successes {
                        let timing = self.clock.finished(task, event.at_ms);
                        self.println(describe_finish(task, *state, reason.as_deref(), timing));
                    }
                }
                EventKind::RunStopping { reason } => {
                    self.println(format!("baton: stopping: {reason}"));
                }
                EventKind::RunResumed { retry } => self.println(format!(
                    "baton: {} the run",
                    if *retry {
                        "retrying tasks of"
                    } else {
                        "resuming"
                    }
                )),
                EventKind::BudgetChanged { usd, tokens, .. } => {
                    self.println(format!(
                        "baton: budget now {}",
                        crate::spend::budget_text(*usd, *tokens)
                    ));
                }
                EventKind::GraphExpanded { task, added, .. } => {
                    self.println(crate::plain::describe_added(task, added));
                    self.header.set_message(self.counts.to_string());
                }
                EventKind::TaskWaiting { task } => {
                    self.println(format!(
                        "baton: {task} waits for approval: `baton approve {run} {task}` or `baton reject {run} {task}`",
                        run = self.run_id.as_deref().unwrap_or("RUN")
                    ));
                }
                EventKind::WorkspaceCommitted {
                    task,
                    scope_violations,
                    ..
                } if !scope_violations.is_empty() => {
                    self.println(format!(
                        "baton: {task} changed files outside its scope: {}",
                        scope_violations.join(", ")
                    ));
                }
                EventKind::Reviewed { task, review, .. } => {
                    self.println(crate::plain::describe_review(task, review));
                }
                EventKind::Replanning { task, failed } => {
                    self.println(format!(
                        "baton: {failed} failed: {task} plans what is left again"
                    ));
                }
                EventKind::Picked { task, why, .. } => {
                    self.println(format!("baton: {task}: {why}"));
                }
                EventKind::RunStarted { .. }
                | EventKind::RunFinished { .. }
                | EventKind::TaskReset { .. }
                | EventKind::WorkspaceCommitted { .. }
                | EventKind::ResultMerged { .. }
                | EventKind::Checked { .. }
                | EventKind::TaskDecided { .. } => {}
            }
        }
        self.header.set_message(self.counts.to_string());
    }

    fn run_finished(&mut self, _: &RunResult) {
        for (_, bar) in self.bars.drain() {
            bar.finish_and_clear();
        }
        self.header.finish_and_clear();
        let _ = self.multi.clear();
    }
}
