//! The table printed when a run ends, and the one-line verdict.

use std::fmt::Write;
use std::time::Duration;

use baton_model::{Outcome, TaskState, format_duration, format_size};

use crate::RunResult;

/// Above this many tasks the table lists only those that did not succeed.
const LIST_ALL_UP_TO: usize = 50;
/// Most rows in the table; the rest are counted.
const MAX_ROWS: usize = 200;

/// The full summary: a table of tasks, the verdict, and the concurrency timeline.
///
/// Nothing in it reaches a terminal raw: reasons and outcomes carry what tasks printed and the
/// names of files they made, so every cell is made [`terminal_safe`](crate::terminal_safe)
/// before the table is laid out, and the whole once more after.
pub fn render(result: &RunResult) -> String {
    render_to_fit(result, None)
}

/// [`render`], each row's detail shortened (what the task said, first) to fit a terminal
/// `width` columns wide: a row that wraps breaks the table apart.
pub fn render_to_fit(result: &RunResult, width: Option<usize>) -> String {
    let columns = Columns {
        width,
        ..Columns::default()
    };
    crate::terminal_safe(&render_table(result, columns)).into_owned()
}

/// The width of the terminal standard output is, if it is one.
pub fn stdout_width() -> Option<usize> {
    console::Term::stdout()
        .size_checked()
        .map(|(_, cols)| usize::from(cols))
}

/// The summary `baton status` prints: [`render`]'s, with a column saying what held each
/// task's last attempt's processes (`cgroup`, `process group`; `-` when none ran).
/// With `all`, every task is listed, however many.
pub fn render_status(result: &RunResult, all: bool, width: Option<usize>) -> String {
    let columns = Columns {
        containment: true,
        all,
        width,
    };
    crate::terminal_safe(&render_table(result, columns)).into_owned()
}

/// The optional columns of the table, and whether every row is listed.
#[derive(Debug, Clone, Copy, Default)]
struct Columns {
    containment: bool,
    all: bool,
    /// The terminal's width, when the table goes to one.
    width: Option<usize>,
}

/// What held an attempt's processes, for the table: `-` when no process ran.
fn containment(task: &crate::TaskResult) -> &'static str {
    match task.containment {
        Some(baton_model::Containment::Cgroup) => "cgroup",
        Some(baton_model::Containment::ProcessGroup) => "process group",
        None => "-",
    }
}

fn render_table(result: &RunResult, columns: Columns) -> String {
    let mut out = String::new();
    let rows: Vec<_> = result
        .tasks
        .iter()
        .filter(|t| {
            columns.all || result.tasks.len() <= LIST_ALL_UP_TO || t.state != TaskState::Succeeded
        })
        .collect();
    let hidden = result.tasks.len() - rows.len();
    let shown = if columns.all { rows.len() } else { MAX_ROWS };
    if !rows.is_empty() {
        let id_width = rows
            .iter()
            .map(|t| crate::display_width(&t.id))
            .max()
            .unwrap_or(4)
            .clamp(4, 40);
        // `process group` is the widest value.
        let held = |value: &str| {
            if columns.containment {
                format!("{value:<13}  ")
            } else {
                String::new()
            }
        };
        // `succeeded_with_warnings` is wider than the others: the column takes it when shown.
        let state_width = rows
            .iter()
            .take(shown)
            .map(|t| t.state.as_str().len())
            .max()
            .unwrap_or(0)
            .max(11);
        let _ = writeln!(
            out,
            "{}  {:<state_width$}  {:>8}  {:>7}  {}DETAIL",
            crate::pad("TASK", id_width),
            "STATE",
            "ATTEMPTS",
            "TIME",
            held("CONTAINMENT")
        );
        for task in rows.iter().take(shown) {
            let time = task
                .duration_ms
                .map(|ms| format_duration(Duration::from_millis(ms)))
                .unwrap_or_else(|| "-".into());
            let prefix = format!(
                "{}  {:<state_width$}  {:>8}  {:>7}  {}",
                crate::pad(&task.id, id_width),
                task.state.as_str(),
                task.attempts,
                time,
                held(containment(task)),
            );
            let room = columns
                .width
                .map(|w| w.saturating_sub(crate::display_width(&prefix)));
            let _ = writeln!(out, "{prefix}{}", detail(task, result, room));
        }
        if rows.len() > shown {
            let _ = writeln!(out, "… and {} more", rows.len() - shown);
        }
    }
    if hidden > 0 || rows.len() > shown {
        let mut line = String::new();
        if hidden > 0 {
            line = format!(
                "{hidden} succeeded task{} not listed",
                if hidden == 1 { "" } else { "s" }
            );
        }
        let _ = writeln!(
            out,
            "{}{}`baton status {} --all` lists every task",
            line,
            if line.is_empty() { "" } else { "; " },
            result.run.id
        );
    }
    append_why(&mut out, result);
    if let Some(timeline) = &result.timeline
        && !timeline.running.is_empty()
    {
        let _ = writeln!(
            out,
            "concurrency {} (peak {} of {})",
            timeline.sparkline(),
            timeline.peak,
            result.run.concurrency
        );
    }
    if let Some(spend) = &result.spend {
        let _ = writeln!(out, "{}", spend.line());
    }
    let _ = writeln!(out, "{}", verdict(result));
    out
}

/// A task's DETAIL cell; with `room`, what the task said is shortened so that the cell fits
/// in that many columns, where it can be.
fn detail(task: &crate::TaskResult, result: &RunResult, room: Option<usize>) -> String {
    let run = result.run.id.as_str();
    let mut parts = Vec::new();
    let mut quote_at = None;
    if let Some(reason) = &task.reason {
        parts.push(reason.clone());
    } else if task.state == TaskState::Waiting {
        // A task id is a shell word as it is: letters, digits, `_`, `-`, `.`, never a leading `-`.
        parts.push(format!(
            "waits for approval: `baton approve {run} {id}` or `baton reject {run} {id}`",
            id = task.id
        ));
    } else if !matches!(
        task.state,
        TaskState::Succeeded | TaskState::SucceededWithWarnings
    ) && let Some(outcome) = &task.outcome
    {
        parts.push(outcome.to_string());
    }
    // What the task last said: on failure its stderr is usually the explanation; when a
    // check failed, what the check said.
    let said = if let Some(check) = &task.check {
        last_line(&check.output)
    } else if let Some(Outcome::InvalidPlan { .. }) = &task.outcome {
        // The first problem, not the last line (a `help:`).
        task.output.as_deref().and_then(first_problem)
    } else if task.state.is_failure() {
        // A known tool's own summary and first failure, else the last line said.
        crate::failure_line(
            task.output.as_deref().unwrap_or_default(),
            task.stderr.as_deref().unwrap_or_default(),
        )
        .and_then(|line| cell_of(&line, FAILURE_CELL))
        .or_else(|| task.stderr.as_deref().and_then(last_line))
        .or_else(|| task.output.as_deref().and_then(last_line))
    } else if matches!(
        task.state,
        TaskState::Succeeded | TaskState::SucceededWithWarnings
    ) {
        task.output.as_deref().and_then(last_line)
    } else {
        None
    };
    if let Some(review) = &task.review {
        let mut text = format!("reviewed: {}", review.verdict);
        if let Some(first) = review.reasons.first() {
            text.push_str(&format!(" ({first})"));
        }
        parts.push(text);
    }
    if !task.replanned_after.is_empty() {
        let local = |id: &str| id.rsplit_once('/').map_or(id, |(_, l)| l).to_owned();
        let failed: Vec<String> = task.replanned_after.iter().map(|id| local(id)).collect();
        parts.push(format!(
            "re-planned {}× (after {} failed)",
            failed.len(),
            failed.join(", then ")
        ));
    }
    if !task.planned.is_empty() {
        // A planner's output is its plan, a `for_each` task's its instances: how they ended
        // says more (the task's own state is of its own attempt).
        let local = |id: &str| {
            id.rsplit_once('/')
                .map_or(id, |(_, local)| local)
                .to_owned()
        };
        let not_ok: Vec<String> = task
            .planned
            .iter()
            .filter_map(|id| result.tasks.iter().find(|t| &t.id == id))
            .filter(|t| {
                !matches!(
                    t.state,
                    TaskState::Succeeded | TaskState::SucceededWithWarnings
                )
            })
            .map(|t| local(&t.id))
            .collect();
        let n = task.planned.len();
        let tasks = if n == 1 { "task" } else { "tasks" };
        if not_ok.is_empty() {
            let names: Vec<String> = task.planned.iter().map(|id| local(id)).collect();
            parts.push(format!("added {n} {tasks}: {}", names.join(", ")));
        } else {
            parts.push(format!(
                "{} of {n} added {tasks} did not succeed: {}",
                not_ok.len(),
                not_ok.join(", ")
            ));
        }
    } else if let Some(last) = said {
        quote_at = Some(parts.len());
        parts.push(format!("“{last}”"));
    }
    if let Some(workspace) = &task.workspace {
        let e = &workspace.evidence;
        if !e.files.is_empty() {
            parts.push(format!(
                "{} file{} +{} -{}",
                e.files.len(),
                if e.files.len() == 1 { "" } else { "s" },
                e.lines_added,
                e.lines_removed
            ));
        }
        if !workspace.scope_violations.is_empty() {
            parts.push(format!(
                "outside its scope: {}",
                crate::terminal_safe(&workspace.scope_violations.join(", "))
            ));
        }
    }
    if let Some(candidates) = &task.candidates {
        parts.push(format!(
            "best of {}: {}",
            candidates.list.len(),
            candidates.why
        ));
    }
    if let Some(agent) = &task.agent {
        parts.extend(agent.fallbacks());
        // An engine that reports nothing (a command one) is said to once, in the spend line.
        if !agent.spend.reported_nothing() {
            parts.push(format!(
                "{} · {} tokens",
                agent.spend.cost_text(),
                crate::format_tokens(agent.spend.tokens())
            ));
        }
        if !agent.permission_denials.is_empty() {
            parts.push(format!("denied: {}", agent.permission_denials.join(", ")));
        }
    }
    if task.output_bytes > 4096 {
        parts.push(format!("{} of output", format_size(task.output_bytes)));
    }
    if let (Some(room), Some(at)) = (room, quote_at) {
        let over = crate::display_width(&parts.join(" · ")).saturating_sub(room);
        let len = parts[at].chars().count();
        // Never shorter than a dozen characters: past that, the row wraps instead.
        let target = len.saturating_sub(over).max(12);
        if over > 0 && target < len {
            // `“`, what is kept, `…”`.
            let inner: String = parts[at].chars().skip(1).take(target - 3).collect();
            parts[at] = format!("“{}…”", inner.trim_end_matches('…'));
        }
    }
    crate::terminal_safe(&parts.join(" · ")).into_owned()
}

/// Tasks whose check failed, each shown in full below the table at most.
const CHECKS_SHOWN: usize = 5;
/// Lines of a failed check's output shown below the table.
const CHECK_TAIL_LINES: usize = 10;

/// Below the table, per task whose check failed: which check, the end of what it printed, and
/// the command that shows all of it.
fn failed_checks(result: &RunResult) -> String {
    let mut out = String::new();
    let failed: Vec<_> = result
        .tasks
        .iter()
        .filter_map(|t| t.check.as_deref().map(|c| (t, c)))
        .collect();
    for (task, check) in failed.iter().take(CHECKS_SHOWN) {
        let _ = writeln!(
            out,
            "\n{}: check {} `{}` failed: {}",
            task.id,
            check.number,
            crate::terminal_safe(&check.command),
            check.outcome
        );
        check_tail(&mut out, &check.output);
        let _ = writeln!(
            out,
            "  all of it: `baton logs {} {} --phase check`",
            result.run.id, task.id
        );
    }
    if failed.len() > CHECKS_SHOWN {
        let _ = writeln!(
            out,
            "\n… and {} more tasks whose check failed",
            failed.len() - CHECKS_SHOWN
        );
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// Below the table, the end of what each failed task printed (its stdout's, then its
/// stderr's last lines), as a failed check's is shown: the row's one line is seldom all of it.
fn failed_tails(result: &RunResult) -> String {
    let mut out = String::new();
    let failed: Vec<_> = result
        .tasks
        .iter()
        .filter(|t| matches!(t.state, TaskState::Failed | TaskState::TimedOut))
        .filter(|t| t.check.is_none() && t.agent.is_none())
        .filter(|t| {
            !matches!(
                t.outcome,
                Some(Outcome::InvalidPlan { .. } | Outcome::OverBudget { .. })
            )
        })
        .collect();
    for task in failed.iter().take(CHECKS_SHOWN) {
        let said: String = [task.output.as_deref(), task.stderr.as_deref()]
            .into_iter()
            .flatten()
            .map(str::trim_end)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if said.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}: the end of what it printed:", task.id);
        check_tail(&mut out, &said);
        let _ = writeln!(
            out,
            "  all of it: `baton logs {} {}`",
            result.run.id, task.id
        );
    }
    if failed.len() > CHECKS_SHOWN {
        let _ = writeln!(
            out,
            "\n… and {} more failed tasks: `baton status {} --json` has each one's output",
            failed.len() - CHECKS_SHOWN,
            result.run.id
        );
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The last lines of what a check printed, indented under its line.
fn check_tail(out: &mut String, output: &str) {
    let lines: Vec<&str> = output.trim_end().lines().collect();
    if lines.is_empty() {
        let _ = writeln!(out, "  (it printed nothing)");
        return;
    }
    let from = lines.len().saturating_sub(CHECK_TAIL_LINES);
    if from > 0 {
        let _ = writeln!(out, "  │ …");
    }
    for line in &lines[from..] {
        let _ = writeln!(out, "  │ {}", crate::terminal_safe(line));
    }
}

/// Below the table, when merging needs a person: what did not merge, with what, in which
/// files, and the commands that resolve it ([`RunResult::next`]).
fn merge_trouble(result: &RunResult) -> String {
    let mut out = String::new();
    let merged = result.result.as_ref();
    if let Some(conflict) = merged.and_then(|m| m.conflict.as_ref()) {
        let with = conflict
            .with
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let files = conflict.files.join(", ");
        let _ = writeln!(
            out,
            "\nthe result did not merge: `{}` conflicts with {} in {}",
            conflict.task,
            if with.is_empty() {
                "the tasks merged before it".into()
            } else {
                with
            },
            files
        );
        if result.next.first().is_some_and(|c| c.starts_with("# in ")) {
            // The tasks that need both have the same merge in progress: resolved there, their
            // branches carry it into the result.
            let _ = writeln!(
                out,
                "resolve it where the tasks that need both have it, then resume the run:"
            );
            for command in &result.next {
                let _ = writeln!(out, "  {command}");
            }
            out.push('\n');
            return out;
        }
        let _ = writeln!(
            out,
            "resolve it on `{}`'s branch, in its worktree, then resume the run:",
            conflict.task
        );
        let merges = result
            .next
            .iter()
            .take_while(|c| c.contains(" merge "))
            .count();
        for (i, command) in result.next.iter().enumerate() {
            if i == merges {
                let _ = writeln!(out, "  # there: edit {files} to keep what both changed");
            }
            let _ = writeln!(out, "  {command}");
        }
    } else if let Some(failed) = merged.and_then(|m| m.check.as_ref()) {
        let check = &failed.check;
        let _ = writeln!(
            out,
            "\nthe run's check {} on the merged result failed: `{}`: {}",
            check.number,
            crate::terminal_safe(&check.command),
            check.outcome
        );
        check_tail(&mut out, &check.output);
        if let Some(log) = &check.log {
            let _ = writeln!(out, "  all of it: {log}");
        }
        match &failed.blamed {
            Some(blamed) => {
                let _ = writeln!(
                    out,
                    "it first fails after merging `{blamed}` (bisected): see what it changed with"
                );
                for command in &result.next {
                    let _ = writeln!(out, "  {command}");
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "no task's merge was found to make it fail: it may fail on the run's base already"
                );
            }
        }
    } else if let Some(error) = merged.and_then(|m| m.error.as_ref()) {
        let _ = writeln!(out, "\nthe result could not be merged: {error}");
    } else if let Some((task, incoming, files)) =
        result.tasks.iter().find_map(|t| match &t.outcome {
            Some(baton_model::Outcome::MergeConflict { incoming, files })
                if t.state == TaskState::NeedsHuman =>
            {
                Some((&t.id, incoming, files.join(", ")))
            }
            _ => None,
        })
    {
        let _ = writeln!(
            out,
            "\n`{task}` needs a person: its dependencies' changes conflict: merging `{incoming}` conflicts in {files}"
        );
        let _ = writeln!(
            out,
            "resolve it in `{task}`'s worktree, where the merge waits, then resume the run:"
        );
        for command in &result.next {
            let _ = writeln!(out, "  {command}");
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The last non-empty line of an output, shortened for a table cell.
fn last_line(text: &str) -> Option<String> {
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    cell(line)
}

/// An invalid plan's first problem, without what every line of it repeats: `1:22: a plan's
/// env takes literal values…` of `plan of plan:1:22: error: a plan's env …`.
fn first_problem(text: &str) -> Option<String> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("help:"))?;
    let line = match line.strip_prefix("plan of ") {
        Some(rest) => rest.split_once(':').map_or(rest, |(_, at)| at),
        None => line,
    };
    cell(&line.replacen(" error: ", " ", 1))
}

/// How much of a failure's reason line the table shows: more than of a last line, since it
/// is the one line that says what went wrong.
const FAILURE_CELL: usize = 100;

/// `line` made safe for a terminal and shortened for a table cell.
fn cell(line: &str) -> Option<String> {
    cell_of(line, 60)
}

/// `line` made safe for a terminal and shortened to `most` characters.
fn cell_of(line: &str, most: usize) -> Option<String> {
    let clean = crate::terminal_safe(line);
    Some(if clean.chars().count() > most {
        format!("{}…", clean.chars().take(most - 1).collect::<String>())
    } else {
        clean.into_owned()
    })
}

/// Why a run did not succeed, below the table: the checks that failed and their tails, a
/// conflict or a check the merge broke, and what to type next. Empty for a run that succeeded.
pub fn why(result: &RunResult) -> String {
    let mut out = String::new();
    append_why(&mut out, result);
    out
}

fn append_why(out: &mut String, result: &RunResult) {
    out.push_str(&failed_checks(result));
    out.push_str(&failed_tails(result));
    let trouble = merge_trouble(result);
    let succeeded = matches!(
        result.run.state,
        baton_model::RunState::Succeeded | baton_model::RunState::SucceededWithWarnings
    );
    if let Some(merged) = result.result.as_ref().filter(|_| succeeded) {
        // The run's checks on its result, which passed (a failed one is told above).
        for check in &merged.verified {
            let _ = writeln!(
                out,
                "verified: `{}` {} in {}",
                check.command,
                if check.passed { "passed" } else { "failed" },
                format_duration(Duration::from_millis(check.duration_ms))
            );
        }
    }
    if trouble.is_empty() && !result.next.is_empty() {
        // What to type next: for a run that did not succeed, how to go on; for one that
        // changed files, where its work is and how to take it.
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        if let Some(merged) = result.result.as_ref().filter(|_| succeeded) {
            let _ = writeln!(out, "the work is on branch {}", merged.branch);
        }
        let _ = writeln!(out, "next:");
        for command in &result.next {
            let _ = writeln!(out, "  {command}");
        }
        out.push('\n');
    }
    out.push_str(&trouble);
}

/// One line: `baton: `quickstart` succeeded in 3.1s: 7 tasks, 7 ok, 8 attempts (run …)`.
pub fn verdict(result: &RunResult) -> String {
    let t = &result.totals;
    let plural = |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut counts = vec![plural(t.tasks, "task", "tasks")];
    for (n, label) in [
        (t.succeeded, "ok"),
        (t.failed, "failed"),
        (t.timed_out, "timed out"),
        (t.cancelled, "cancelled"),
        (t.blocked, "blocked"),
        (t.skipped, "skipped"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {label}"));
        }
    }
    let needs_human = result
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::NeedsHuman)
        .count();
    if needs_human > 0 {
        counts.push(format!("{needs_human} need a person"));
    }
    counts.push(plural(t.attempts, "attempt", "attempts"));
    let waiting = [
        t.succeeded,
        t.failed,
        t.timed_out,
        t.cancelled,
        t.blocked,
        t.skipped,
    ]
    .iter()
    .fold(t.tasks, |left, n| left.saturating_sub(*n));
    if result.run.state == baton_model::RunState::Waiting {
        counts.push(format!("{waiting} waiting"));
    }
    if result.run.state == baton_model::RunState::Queued {
        // Submitted (`baton run --detach`): nothing has run, and no time is spent yet.
        return format!(
            "baton: `{}` queued for a worker: {} (run {})",
            crate::terminal_safe(&result.run.name),
            plural(t.tasks, "task", "tasks"),
            result.run.id
        );
    }
    let mut line = format!(
        "baton: `{}` {} in {}: {} (run {})",
        crate::terminal_safe(&result.run.name),
        result.run.state,
        format_duration(Duration::from_millis(result.run.duration_ms)),
        counts.join(", "),
        result.run.id
    );
    if result.run.state == baton_model::RunState::Waiting {
        line.push_str(&format!(
            "\nbaton: its soft budget is reached; go on with `baton approve {id}`, or raise the budget with `baton resume {id} --raise-budget USD`",
            id = result.run.id
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> RunResult {
        serde_json::from_value(serde_json::json!({
            "schema": 1,
            "run": {"id": "20261130-000000-abcd", "name": "held", "state": "failed",
                    "graph": "g.toml", "started_at_ms": 0, "duration_ms": 1200,
                    "concurrency": 2},
            "totals": {"tasks": 3, "succeeded": 2, "failed": 0, "timed_out": 0,
                       "cancelled": 0, "blocked": 1, "skipped": 0, "attempts": 2},
            "tasks": [
                {"id": "agent", "state": "succeeded", "attempts": 1, "duration_ms": 900,
                 "output_bytes": 0, "containment": "cgroup"},
                {"id": "shell", "state": "succeeded", "attempts": 1, "duration_ms": 3,
                 "output_bytes": 0, "containment": "process_group"},
                {"id": "after", "state": "blocked", "attempts": 0, "output_bytes": 0,
                 "reason": "needs `x`, which failed"}
            ]
        }))
        .unwrap()
    }

    /// A row wider than the terminal wraps and breaks the table apart (seen in tmux at 110
    /// columns: an agent's cost and tokens on a line of their own): what the task said is
    /// shortened first, and the rest of the cell is kept whole.
    #[test]
    fn a_row_is_fitted_to_the_terminal_by_shortening_what_the_task_said() {
        let mut result = result();
        result.tasks[0].output = Some(
            "1. GET /users lists users. 2. POST /users creates one. 3. DELETE removes one."
                .to_owned(),
        );
        result.tasks[0].output_bytes = 90;
        result.tasks[0].reason = None;
        let wide = render_to_fit(&result, None);
        let row = |text: &str| {
            text.lines()
                .find(|l| l.starts_with("agent"))
                .unwrap()
                .to_owned()
        };
        let full = row(&wide);
        assert!(full.contains("POST /users creates one."), "{full}");
        for width in [60, 70, 90] {
            let fitted = row(&render_to_fit(&result, Some(width)));
            assert!(
                crate::display_width(&fitted) <= width,
                "{width}: {fitted} ({} columns)",
                crate::display_width(&fitted)
            );
            assert!(fitted.contains("“1. GET"), "{fitted}");
            assert!(fitted.contains("…”"), "{fitted}");
        }
        // Room enough: nothing shortened.
        assert_eq!(row(&render_to_fit(&result, Some(400))), full);
    }

    #[test]
    fn status_says_what_held_each_task_and_the_run_summary_does_not() {
        let status = render_status(&result(), false, None);
        let table: Vec<&str> = status.lines().take(4).collect();
        assert_eq!(
            table,
            [
                "TASK   STATE        ATTEMPTS     TIME  CONTAINMENT    DETAIL",
                "agent  succeeded           1    900ms  cgroup         ",
                "shell  succeeded           1      3ms  process group  ",
                "after  blocked             0        -  -              needs `x`, which failed",
            ]
        );
        let summary = render(&result());
        assert!(!summary.contains("CONTAINMENT"), "{summary}");
        assert!(!summary.contains("cgroup"), "{summary}");
        assert!(
            summary.starts_with("TASK   STATE        ATTEMPTS     TIME  DETAIL\n"),
            "{summary}"
        );
    }
}
