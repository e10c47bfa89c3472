use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use baton_model::{Event, EventKind, TaskState};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::plain::{TaskClock, describe_finish, describe_retry};
use crate::{Board, Paint, Reporter, RunInfo, RunResult};

/// How often the picture is drawn again: elapsed times and spinners move between events.
const REDRAW: Duration = Duration::from_millis(100);
/// How often the running shell tasks' logs are read for their latest line.
const READ_LOGS_EVERY: u32 = 5;
/// Above this many tasks, successes are not listed one by one, only counted.
const LIST_SUCCESSES_UP_TO: u32 = 200;

/// The live view on a terminal: the [`Board`] (the run's header, what needs a person, what
/// runs and what each agent is doing), drawn in place by a thread of its own ten times a
/// second, with a line printed above it as each task ends. The drawing is indicatif's: it
/// redraws only the lines it drew, in one write.
pub struct LiveReporter {
    bar: ProgressBar,
    board: Arc<Mutex<Option<Board>>>,
    stop: Arc<AtomicBool>,
    drawer: Option<JoinHandle<()>>,
    clock: TaskClock,
    list_successes: bool,
    run_id: String,
    paint: Paint,
}

impl LiveReporter {
    pub fn new() -> Self {
        Self::to(ProgressDrawTarget::stderr_with_hz(20), Paint::from_env())
    }

    fn to(target: ProgressDrawTarget, paint: Paint) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(ProgressStyle::with_template("{msg}").expect("static template"));
        Self {
            bar,
            board: Arc::new(Mutex::new(None)),
            stop: Arc::new(AtomicBool::new(false)),
            drawer: None,
            clock: TaskClock::default(),
            list_successes: true,
            run_id: String::new(),
            paint,
        }
    }

    fn println(&self, line: String) {
        // `println` on a hidden target (not a terminal) is dropped, which is right.
        // Reasons carry what tasks printed and the names of files they made.
        self.bar.println(crate::terminal_safe(&line));
    }

    fn start_drawing(&mut self, logs: Option<std::path::PathBuf>) {
        let (bar, board, stop, paint) = (
            self.bar.clone(),
            Arc::clone(&self.board),
            Arc::clone(&self.stop),
            self.paint,
        );
        let drawer = std::thread::Builder::new()
            .name("baton-live".to_owned())
            .spawn(move || {
                let term = console::Term::stderr();
                let mut turn = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(logs) = &logs
                        && turn.is_multiple_of(READ_LOGS_EVERY)
                    {
                        read_latest_lines(&board, logs);
                    }
                    turn = turn.wrapping_add(1);
                    let (rows, cols) = term.size();
                    let frame = board.lock().ok().and_then(|board| {
                        board.as_ref().map(|board| {
                            board.frame(
                                baton_model::now_ms(),
                                usize::from(cols).max(20),
                                usize::from(rows).saturating_sub(2).max(3),
                                paint,
                            )
                        })
                    });
                    if let Some(frame) = frame {
                        bar.set_message(frame.join("\n"));
                    }
                    std::thread::sleep(REDRAW);
                }
            });
        // Without a thread the picture is drawn as events come.
        self.drawer = drawer.ok();
    }
}

/// Gives the board the latest line each running shell task printed, read from the end of its
/// log in `logs` (off the board's lock: reading files holds up no event).
fn read_latest_lines(board: &Mutex<Option<Board>>, logs: &std::path::Path) {
    let running = match board.lock() {
        Ok(board) => board
            .as_ref()
            .map(Board::running_shell_tasks)
            .unwrap_or_default(),
        Err(_) => return,
    };
    let lines: Vec<_> = running
        .into_iter()
        .filter_map(|(task, attempt)| {
            let path = logs.join(baton_layout::AttemptLog::Task.file_name(&task, attempt));
            Some((task, latest_line(&path)?))
        })
        .collect();
    if let Ok(mut board) = board.lock()
        && let Some(board) = board.as_mut()
    {
        for (task, line) in lines {
            board.printed(task, line);
        }
    }
}

/// The last line with something on it at the end of the file at `path` (its last 4 KiB),
/// made safe for a terminal and cut to 200 characters.
fn latest_line(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 4096;
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut bytes = Vec::with_capacity(TAIL as usize);
    file.take(TAIL).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    // A progress bar redraws its line with `\r`: what shows is after the last one.
    let line = text
        .lines()
        .rev()
        .filter_map(|l| l.rsplit('\r').map(str::trim).find(|l| !l.is_empty()))
        .next()?;
    let safe = crate::terminal_safe(line);
    Some(safe.chars().take(200).collect())
}

impl Default for LiveReporter {
    fn default() -> Self {
        Self::new()
    }
}

impl Reporter for LiveReporter {
    /// The board starts from it.
    fn wants_view(&self) -> bool {
        true
    }

    fn run_started(&mut self, info: &RunInfo) {
        self.list_successes = info.tasks <= LIST_SUCCESSES_UP_TO;
        self.run_id = info.run_id.to_string();
        self.clock = TaskClock::with_best_of(info.best_of.clone());
        self.println(format!(
            "baton: run {} of `{}`: {} task{}, concurrency {}",
            info.run_id,
            info.name,
            info.tasks,
            if info.tasks == 1 { "" } else { "s" },
            info.concurrency
        ));
        if let Ok(mut board) = self.board.lock() {
            *board = Some(Board::new(info).quiet_after(crate::board::quiet_after_from_env()));
        }
        if !self.bar.is_hidden() {
            self.start_drawing(info.logs.clone());
        }
    }

    fn events(&mut self, events: &[Event]) {
        if let Ok(mut board) = self.board.lock()
            && let Some(board) = board.as_mut()
        {
            for event in events {
                board.apply(event);
            }
        }
        for event in events {
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
                } => crate::plain::describe_lost(task, *attempt, worker),
                EventKind::TaskFinished {
                    task,
                    state,
                    reason,
                } if *state != TaskState::Succeeded || self.list_successes => {
                    let timing = self.clock.finished(task, event.at_ms);
                    describe_finish(task, *state, reason.as_deref(), timing)
                }
                EventKind::RunStopping { reason, .. } => format!("baton: stopping: {reason}"),
                EventKind::RunResumed { retry: true, .. } => {
                    "baton: retrying tasks of the run".to_owned()
                }
                EventKind::RunResumed {
                    worker: Some(worker),
                    ..
                } => format!("baton: worker {worker} took the run over (its coordinator was gone)"),
                EventKind::RunResumed { .. } => "baton: resuming the run".to_owned(),
                EventKind::BudgetChanged { usd, tokens, .. } => format!(
                    "baton: budget now {}",
                    crate::spend::budget_text(*usd, *tokens)
                ),
                EventKind::GraphExpanded { task, added, .. } => {
                    crate::plain::describe_added(task, added)
                }
                EventKind::TaskWaiting { task } => format!(
                    "baton: {task} waits for approval: `baton approve {run} {task}` or `baton reject {run} {task}`",
                    run = self.run_id
                ),
                EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
                    task,
                    scope_violations,
                    ..
                }) if !scope_violations.is_empty() => format!(
                    "baton: {task} changed files outside its scope: {}",
                    scope_violations.join(", ")
                ),
                EventKind::Reviewed { task, review, .. } => {
                    crate::plain::describe_review(task, review)
                }
                EventKind::Replanning { task, failed } => {
                    format!("baton: {failed} failed: {task} plans what is left again")
                }
                EventKind::Picked { task, why, .. } => format!("baton: {task}: {why}"),
                _ => continue,
            };
            self.println(line);
        }
    }

    fn run_finished(&mut self, _: &RunResult) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(drawer) = self.drawer.take() {
            let _ = drawer.join();
        }
        self.bar.finish_and_clear();
    }
}

impl Drop for LiveReporter {
    fn drop(&mut self) {
        // A run that failed before its end still takes its picture away.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(drawer) = self.drawer.take() {
            let _ = drawer.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::latest_line;

    #[test]
    fn the_latest_line_is_the_last_with_something_on_it_as_a_terminal_would_show_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t.1.log");
        assert_eq!(latest_line(&log), None, "no log yet");
        std::fs::write(&log, "compiling\n\ttest a ... ok\n\n  \n").unwrap();
        assert_eq!(latest_line(&log).as_deref(), Some("test a ... ok"));
        // A progress bar: what shows is what came after the last carriage return.
        std::fs::write(&log, "fetch\n 10%\r 55%\r 90%\r").unwrap();
        assert_eq!(latest_line(&log).as_deref(), Some("90%"));
        // Escape sequences a task prints do not reach the terminal as such.
        std::fs::write(&log, "\u{1b}]0;title\u{7}\u{1b}[2Jdone\n").unwrap();
        let line = latest_line(&log).unwrap();
        assert!(!line.contains('\u{1b}'), "{line:?}");
        assert!(line.ends_with("done"), "{line:?}");
        // Only the end of a long log is read, and a long line is cut.
        let long = format!("{}\n{}\n", "x".repeat(1 << 20), "y".repeat(500));
        std::fs::write(&log, long).unwrap();
        assert_eq!(latest_line(&log).unwrap(), "y".repeat(200));
    }
}
