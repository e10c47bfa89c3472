//! The live view's picture of a run: the one fold of its events ([`RunView`]) and the little
//! it adds for people (since when a task waits, the budget), drawn as lines that fit a terminal.
//! What needs a person comes first, then what is working, each running agent with what it is
//! doing; finished tasks are not here: they scroll above, one line each, as they end.

use std::collections::HashMap;
use std::time::Duration;

use baton_model::{Event, EventKind, RunView, Stop, StopCause, TaskId, TaskState, format_duration};

use crate::{RunInfo, StateCounts, display_width, format_tokens, format_usd, terminal_safe};

/// What a task shown first is waiting for from a person.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Its `approval`: `baton approve` (or reject) lets it start.
    Approval,
    /// A person to resolve what it left (a conflict, a reviewer's doubt).
    Person,
}

/// A running agent that has said nothing for this long is shown as quiet (`BATON_QUIET_AFTER`
/// sets another, like `5m`).
pub const QUIET_AFTER: Duration = Duration::from_secs(60);

/// How long an agent may say nothing before it is shown as quiet: `BATON_QUIET_AFTER`, else
/// [`QUIET_AFTER`].
pub(crate) fn quiet_after_from_env() -> Duration {
    std::env::var("BATON_QUIET_AFTER")
        .ok()
        .and_then(|text| baton_model::parse_duration(&text).ok())
        .unwrap_or(QUIET_AFTER)
}

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// A run as the live view shows it.
#[derive(Debug, Clone)]
pub struct Board {
    view: RunView,
    run_id: String,
    name: String,
    started_at_ms: Option<i64>,
    budget_usd: Option<f64>,
    budget_tokens: Option<u64>,
    /// When each task that waits for approval began to wait.
    waiting_since: HashMap<TaskId, i64>,
    /// Why the run stops launching tasks, once it does.
    stopping: Option<Stop>,
    quiet_after: Duration,
    agents: std::collections::HashSet<TaskId>,
    /// Best-of tasks and their candidates at a time.
    best_of: HashMap<TaskId, u32>,
    /// Tasks a planner (or a `for_each`) added, each with the task that added it: running,
    /// they are shown under it.
    planned_by: HashMap<TaskId, TaskId>,
    /// What each planner added, in order (a re-plan's tasks after the first plan's).
    plans: HashMap<TaskId, Vec<TaskId>>,
    /// The latest line each running shell task printed, as its log last showed it (see
    /// [`Board::printed`]).
    printed: HashMap<TaskId, String>,
}

/// How lines are painted: ANSI colours on a terminal that wants them, else none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    Plain,
    Color,
}

impl Paint {
    /// Colours unless `NO_COLOR` is set (to anything but empty) or the terminal is dumb.
    pub fn from_env() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        if no_color || dumb {
            Self::Plain
        } else {
            Self::Color
        }
    }

    fn paint(self, code: &str, text: String) -> String {
        match self {
            Self::Plain => text,
            Self::Color => format!("\u{1b}[{code}m{text}\u{1b}[0m"),
        }
    }
}

/// One line of the picture before it is fitted and painted: its text and its colour.
struct Line {
    text: String,
    code: &'static str,
}

impl Line {
    fn new(code: &'static str, text: String) -> Self {
        Self { text, code }
    }
}

impl Board {
    pub fn new(info: &RunInfo) -> Self {
        Self {
            // Given to a reporter that wants it, as the live one does.
            view: info
                .view
                .clone()
                .unwrap_or_else(|| RunView::new(std::iter::empty())),
            run_id: info.run_id.to_string(),
            name: info.name.clone(),
            started_at_ms: info.started_at_ms,
            budget_usd: info.budget_usd,
            budget_tokens: info.budget_tokens,
            waiting_since: HashMap::new(),
            stopping: None,
            quiet_after: QUIET_AFTER,
            agents: info.agents.clone(),
            best_of: info.best_of.clone(),
            planned_by: HashMap::new(),
            plans: HashMap::new(),
            printed: HashMap::new(),
        }
    }

    /// The running tasks that are not agents', each with its latest attempt: whose logs the
    /// live view reads for [`Board::printed`].
    pub fn running_shell_tasks(&self) -> Vec<(TaskId, u32)> {
        self.view
            .tasks()
            .filter(|(id, task)| task.status == TaskState::Running && !self.agents.contains(*id))
            .filter_map(|(id, _)| Some((id.clone(), self.view.attempts(id).last()?.attempt)))
            .collect()
    }

    /// `task` printed `line` last (already made safe for a terminal): shown on its row while
    /// it runs.
    pub fn printed(&mut self, task: TaskId, line: String) {
        self.printed.insert(task, line);
    }

    /// Shows an agent as quiet once it said nothing for `quiet_after`.
    pub fn quiet_after(mut self, quiet_after: Duration) -> Self {
        self.quiet_after = quiet_after;
        self
    }

    pub fn view(&self) -> &RunView {
        &self.view
    }

    pub fn apply(&mut self, event: &Event) {
        self.view.apply(event);
        match &event.kind {
            EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
                self.started_at_ms.get_or_insert(event.at_ms);
                self.stopping = None;
            }
            EventKind::TaskWaiting { task } => {
                self.waiting_since.insert(task.clone(), event.at_ms);
            }
            EventKind::TaskDecided { task, .. } | EventKind::TaskFinished { task, .. } => {
                self.waiting_since.remove(task);
                self.printed.remove(task);
            }
            // What an earlier attempt printed is not this one's.
            EventKind::AttemptStarted { task, .. } => {
                self.printed.remove(task);
            }
            EventKind::RunStopping { reason, cause } => {
                self.stopping = Some(Stop {
                    cause: StopCause::of(reason, *cause),
                    reason: reason.clone(),
                });
            }
            EventKind::GraphExpanded {
                task: planner,
                added,
                tasks,
                ..
            } => {
                for id in added {
                    self.planned_by.insert(id.clone(), planner.clone());
                }
                self.plans
                    .entry(planner.clone())
                    .or_default()
                    .extend(added.iter().cloned());
                let kinds = tasks.as_array().into_iter().flatten().map(|t| {
                    t.get("action")
                        .and_then(|a| a.get("kind"))
                        .and_then(|k| k.as_str())
                });
                for (id, kind) in added.iter().zip(kinds) {
                    if kind == Some("agent") {
                        self.agents.insert(id.clone());
                    }
                }
                self.best_of
                    .extend(crate::plain::best_of_added(added, tasks));
            }
            EventKind::BudgetChanged { usd, tokens, .. } => {
                self.budget_usd = *usd;
                self.budget_tokens = *tokens;
            }
            _ => {}
        }
    }

    /// What every agent attempt spent: the exact figures of those that ended, the latest
    /// told of those still running.
    fn spent(&self) -> (u64, f64) {
        let mut tokens = 0;
        let mut usd = 0.0;
        for (_, attempt) in self.view.all_attempts() {
            if let Some(agent) = &attempt.agent {
                tokens += agent.input_tokens
                    + agent.output_tokens
                    + agent.cache_read_tokens
                    + agent.cache_write_tokens;
                usd += agent.cost_usd.unwrap_or(0.0);
            } else if attempt.ended_at_ms.is_none()
                && let Some(activity) = &attempt.activity
            {
                tokens += activity.tokens;
                usd += activity.cost_usd.unwrap_or(0.0);
            }
        }
        (tokens, usd)
    }

    /// The picture at `now_ms`, as at most `height` lines of at most `width` columns.
    pub fn frame(&self, now_ms: i64, width: usize, height: usize, paint: Paint) -> Vec<String> {
        let mut lines = vec![Line::new("1", self.header(now_ms, width))];
        let mut people = Vec::new();
        let mut running = Vec::new();
        for (id, task) in self.view.tasks() {
            match task.status {
                TaskState::Waiting => {
                    let since = self.waiting_since.get(id).copied();
                    people.push((since, self.waits(id, Wait::Approval, since, now_ms)));
                }
                TaskState::NeedsHuman => {
                    let mut line = self.waits(id, Wait::Person, task.ended_at_ms, now_ms);
                    if let Some(reason) = &task.reason {
                        line.text.push_str(&format!(": {reason}"));
                    }
                    people.push((task.ended_at_ms, line));
                }
                TaskState::Running => running.push(id),
                _ => {}
            }
        }
        // A run that stops at its soft budget waits for a person too: first among them.
        match &self.stopping {
            Some(Stop {
                cause: StopCause::SoftBudget,
                reason,
            }) => people.insert(
                0,
                (
                    Some(i64::MIN),
                    Line::new("33", format!("  ⏸ the run  waits at its budget: {reason}")),
                ),
            ),
            Some(Stop { reason, .. }) => {
                lines.push(Line::new("33", format!("  stopping: {reason}")));
            }
            None => {}
        }
        if !people.is_empty() {
            lines.push(Line::new("1;33", "needs you".to_owned()));
            // Longest waiting first.
            people.sort_by_key(|(since, _)| since.unwrap_or(i64::MAX));
            lines.extend(people.into_iter().map(|(_, line)| line));
        }
        if !running.is_empty() {
            lines.push(Line::new("1", "running".to_owned()));
            let rows = self.running_rows(running, now_ms);
            let room = height.saturating_sub(lines.len());
            let shown = if rows.len() > room {
                room.saturating_sub(1)
            } else {
                rows.len()
            };
            // What is left out is counted in tasks, not in lines (a planner's line is none).
            let more = rows[shown..].iter().filter(|(task, _)| *task).count();
            lines.extend(rows.into_iter().take(shown).map(|(_, line)| line));
            if more > 0 {
                lines.push(Line::new("2", format!("  … and {more} more running")));
            }
        }
        lines
            .into_iter()
            .take(height.max(1))
            .map(|line| paint.paint(line.code, fit(&terminal_safe(&line.text), width)))
            .collect()
    }

    /// `baton ID · `name` · 3/8 done (2 ok, 1 failed) · 2 running · 1m10s · 41.2k tokens ·
    /// $0.42 of $5.00`, fitted to `width` by leaving out the name, then the run's id.
    fn header(&self, now_ms: i64, width: usize) -> String {
        let counts = StateCounts::of(&self.view);
        let total = counts.total;
        let done = counts.finished();
        let mut parts = Vec::new();
        let ended: Vec<String> = [
            (counts.succeeded, "ok"),
            (counts.failed, "failed"),
            (counts.timed_out, "timed out"),
            (counts.cancelled, "cancelled"),
            (counts.blocked, "blocked"),
            (counts.skipped, "skipped"),
            (counts.other, "other"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, label)| format!("{n} {label}"))
        .collect();
        parts.push(if ended.is_empty() {
            format!("{done}/{total} done")
        } else {
            format!("{done}/{total} done ({})", ended.join(", "))
        });
        if counts.running > 0 {
            parts.push(format!("{} running", counts.running));
        }
        if counts.retrying > 0 {
            parts.push(format!("{} to retry", counts.retrying));
        }
        let waiting = self.view.count(TaskState::Waiting) + self.view.count(TaskState::NeedsHuman);
        if waiting > 0 {
            parts.push(format!(
                "{waiting} need{} you",
                if waiting == 1 { "s" } else { "" }
            ));
        }
        if let Some(start) = self.started_at_ms {
            parts.push(since(start, now_ms));
        }
        let (tokens, usd) = self.spent();
        if tokens > 0 || self.budget_tokens.is_some() {
            parts.push(match self.budget_tokens {
                Some(limit) => format!(
                    "{} of {} tokens",
                    format_tokens(tokens),
                    format_tokens(limit)
                ),
                None => format!("{} tokens", format_tokens(tokens)),
            });
        }
        if usd > 0.0 || self.budget_usd.is_some() {
            parts.push(match self.budget_usd {
                Some(limit) => format!("{} of {}", format_usd(usd), format_usd(limit)),
                None => format_usd(usd),
            });
        }
        let progress = parts.join(" · ");
        let name = terminal_safe(&self.name);
        [
            format!("baton {} · `{name}` · {progress}", self.run_id),
            format!("baton {} · {progress}", self.run_id),
            format!("baton · {progress}"),
        ]
        .into_iter()
        .find(|header| display_width(header) <= width)
        .unwrap_or_else(|| format!("baton · {progress}"))
    }

    /// `  ⏸ deploy  waits for approval for 1m02s: baton approve RUN deploy`.
    fn waits(&self, id: &TaskId, wait: Wait, since_ms: Option<i64>, now_ms: i64) -> Line {
        let what = match wait {
            Wait::Approval => "waits for approval",
            Wait::Person => "needs a person",
        };
        let mut text = format!("  ⏸ {id}  {what}");
        if let Some(at) = since_ms {
            text.push_str(&format!(" for {}", since(at, now_ms)));
        }
        if wait == Wait::Approval {
            text.push_str(&format!(
                " · baton approve {run} {id} (or reject)",
                run = self.run_id
            ));
        }
        Line::new("33", text)
    }

    /// The running tasks' lines, oldest first, each with whether it is a task's (else a
    /// planner's). Tasks a planner added are shown under a line of their planner's (how far
    /// its plan has got), by their own names, the group where its oldest task would be.
    fn running_rows(&self, running: Vec<&TaskId>, now_ms: i64) -> Vec<(bool, Line)> {
        // Under a planner, a task is shown by its name within the plan.
        let shown_as = |id: &TaskId| -> String {
            match self.planned_by.get(id) {
                Some(planner) => id
                    .as_str()
                    .strip_prefix(planner.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .unwrap_or(id.as_str())
                    .to_owned(),
                None => id.to_string(),
            }
        };
        // A planner's tasks sit two columns further in: their names are two narrower, so that
        // every row's time lines up.
        let indent = |id: &TaskId| {
            if self.planned_by.contains_key(id) {
                2
            } else {
                0
            }
        };
        let column = running
            .iter()
            .map(|id| display_width(&shown_as(id)) + indent(id))
            .max()
            .unwrap_or(0)
            .min(28);
        /// A task alone, or a planner's running tasks; with its oldest start.
        struct Group<'b> {
            started: i64,
            planner: Option<&'b TaskId>,
            members: Vec<(i64, Line)>,
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut of_planner: HashMap<&TaskId, usize> = HashMap::new();
        for id in running {
            let width = column.saturating_sub(indent(id));
            let (started, line) = self.working(id, &shown_as(id), width, now_ms);
            match self.planned_by.get(id) {
                Some(planner) => {
                    let at = *of_planner.entry(planner).or_insert_with(|| {
                        groups.push(Group {
                            started: i64::MAX,
                            planner: Some(planner),
                            members: Vec::new(),
                        });
                        groups.len() - 1
                    });
                    let group = &mut groups[at];
                    group.started = group.started.min(started);
                    group.members.push((started, line));
                }
                None => groups.push(Group {
                    started,
                    planner: None,
                    members: vec![(started, line)],
                }),
            }
        }
        groups.sort_by_key(|group| group.started);
        let mut rows = Vec::new();
        for Group {
            planner,
            mut members,
            ..
        } in groups
        {
            members.sort_by_key(|(started, _)| *started);
            if let Some(planner) = planner {
                rows.push((false, Line::new("2", self.plan_progress(planner))));
                for (_, mut line) in members {
                    line.text.insert_str(0, "  ");
                    rows.push((true, line));
                }
            } else {
                rows.extend(members.into_iter().map(|(_, line)| (true, line)));
            }
        }
        rows
    }

    /// `  ▾ plan  3 tasks: 1 done, 2 running`: a planner's plan, or a `for_each` task's
    /// instances.
    fn plan_progress(&self, planner: &TaskId) -> String {
        let planned = self.plans.get(planner).map_or(&[][..], Vec::as_slice);
        let (mut done, mut running) = (0, 0);
        for id in planned {
            match self.view.task(id).map(|t| t.status) {
                Some(TaskState::Running) => running += 1,
                Some(state) if state.is_terminal() => done += 1,
                _ => {}
            }
        }
        let count = match planned.len() {
            1 => "1 task".to_owned(),
            n => format!("{n} tasks"),
        };
        let mut text = format!("  ▾ {planner}  {count}: ");
        let waiting = planned.len() - done - running;
        let mut parts = vec![format!("{done} done"), format!("{running} running")];
        if waiting > 0 {
            parts.push(format!("{waiting} waiting"));
        }
        text.push_str(&parts.join(", "));
        text
    }

    /// A running task's line, naming it `name`, and when its attempt started.
    fn working(&self, id: &TaskId, name: &str, column: usize, now_ms: i64) -> (i64, Line) {
        let attempts = self.view.attempts(id);
        let attempt = attempts.last();
        let number = attempt.map_or(1, |a| a.attempt);
        // A best-of task's attempts are its candidates, N at a time: this round's.
        let round = self.best_of.get(id).map(|&n| n.max(1)).map(|n| {
            let first = (number - 1) / n * n + 1;
            let candidates: Vec<_> = attempts.iter().filter(|a| a.attempt >= first).collect();
            (n, (number - 1) / n + 1, candidates)
        });
        let started = match &round {
            Some((_, _, candidates)) => candidates.iter().map(|a| a.started_at_ms).min(),
            None => attempt.map(|a| a.started_at_ms),
        }
        .unwrap_or(now_ms);
        let spin = SPINNER[((now_ms / 100).rem_euclid(SPINNER.len() as i64)) as usize];
        let mut text = format!(
            "  {spin} {} {:>6}",
            crate::pad(name, column),
            since(started, now_ms)
        );
        match &round {
            Some((n, round, candidates)) => {
                let running = candidates
                    .iter()
                    .filter(|a| a.ended_at_ms.is_none())
                    .count();
                text.push_str(&format!("  best of {n}: {running} running"));
                if *round > 1 {
                    text.push_str(&format!(", round {round}"));
                }
            }
            None if number > 1 => text.push_str(&format!("  attempt {number}")),
            None => {}
        }
        // What the task is doing: of a best-of task's candidates, the running one that spoke
        // last (the last to start may have ended already).
        let attempt = match &round {
            Some((_, _, candidates)) => candidates
                .iter()
                .filter(|a| a.ended_at_ms.is_none())
                .max_by_key(|a| a.activity.as_ref().map_or(a.started_at_ms, |x| x.at_ms))
                .copied()
                .or(attempt),
            None => attempt,
        };
        let mut code = "";
        let quiet_after = self.quiet_after.as_millis() as i64;
        let activity = attempt.and_then(|a| a.activity.as_ref());
        if activity.is_none() && self.agents.contains(id) && now_ms - started >= quiet_after {
            // An agent that has not said a word since it started.
            text.push_str(&format!("  · quiet for {}", since(started, now_ms)));
            code = "33";
        }
        if activity.is_none()
            && let Some(line) = self.printed.get(id)
        {
            text.push_str(&format!("  › {line}"));
        }
        if let Some(activity) = activity {
            if let Some(doing) = &activity.doing {
                text.push_str(&format!("  {doing}"));
            }
            let quiet = now_ms.saturating_sub(activity.at_ms);
            if quiet >= quiet_after {
                text.push_str(&format!("  · quiet for {}", since(activity.at_ms, now_ms)));
                code = "33";
            }
            if activity.tokens > 0 {
                text.push_str(&format!("  · {} tokens", format_tokens(activity.tokens)));
            }
            if let Some(usd) = activity.cost_usd.filter(|usd| *usd > 0.0) {
                text.push_str(&format!(" {}", format_usd(usd)));
            }
        }
        (started, Line::new(code, text))
    }
}

/// `1m10s` from `from_ms` to `now_ms`, whole seconds from a minute on.
fn since(from_ms: i64, now_ms: i64) -> String {
    let ms = now_ms.saturating_sub(from_ms).max(0) as u64;
    let d = Duration::from_millis(ms);
    if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else {
        format_duration(d)
    }
}

/// `text` cut to `width` columns, with `…` where it was cut.
fn fit(text: &str, width: usize) -> String {
    if display_width(text) <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
