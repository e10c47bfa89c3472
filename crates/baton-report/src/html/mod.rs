//! `baton report`: a run as one self-contained HTML page (inline CSS, SVG and a few lines of
//! script; nothing fetched): the outcome and why, the task graph, a timeline of every attempt
//! with the critical path marked, concurrency over time, each task's details, and the spend by
//! engine and model. The page is laid out by a template (`report.html`); the drawings are
//! computed here, where the geometry is.

use std::collections::HashMap;
use std::fmt::Write;

use baton_model::{Event, Outcome, RunView, TaskId, TaskState, format_duration};
use serde::Serialize;

use crate::{RunResult, format_tokens};

mod cards;
mod graph;
mod timeline;

use cards::{TaskCard, cards};
use graph::graph_svg;
use timeline::{concurrency_svg, gantt_svg};

/// Above this many tasks the graph is not drawn (the timeline still is): a drawing of
/// thousands of boxes helps nobody; `baton graph` draws any size.
const MAX_DRAWN_TASKS: usize = 400;
/// The timeline's rows, at most.
const MAX_TIMELINE_ROWS: usize = 1500;
/// Task cards on one page: a run of more tasks is shown a page at a time (the report file:
/// its first page), those that need a look first. A card is a few KB: 50,000 of them made a
/// 52 MB page.
const CARDS_PER_PAGE: usize = 300;

/// A task of the run's graph as drawn: its id, what it needs, the planner that added it.
#[derive(Debug, Clone)]
pub struct GraphTask {
    pub id: TaskId,
    pub needs: Vec<TaskId>,
    pub planner: Option<TaskId>,
    /// `agent`, `shell`, `planner`.
    pub kind: &'static str,
}

/// Everything the report shows: the run's result, its events (folded for attempts; read for
/// checks and reviews), and its graph.
pub struct ReportInput<'a> {
    pub result: &'a RunResult,
    pub view: &'a RunView,
    pub events: &'a [Event],
    pub graph: &'a [GraphTask],
    /// When the report is made: the end of what is still running.
    pub now_ms: i64,
    /// Served by `baton serve`: the page follows the run and has its buttons.
    pub live: Option<Live>,
}

/// What the dashboard's page knows beyond the report's.
#[derive(Debug, Clone, Serialize)]
pub struct Live {
    pub run: String,
    /// Where the dashboard's pages are (`/` and a path of its own): links and requests start
    /// with it.
    pub base: String,
    /// What the page's requests that act carry beside the dashboard's cookie: a key of the
    /// dashboard's own, not its token (a page saved or shown keeps no token).
    pub act_key: String,
    /// The run is over (or its driver gone): nothing more comes.
    pub finished: bool,
    pub resumable: bool,
    pub retryable: bool,
    /// It waits at its soft budget.
    pub soft_paused: bool,
    /// Which page of the task cards (0: the first), when there are more than one.
    #[serde(default)]
    pub page: usize,
}

/// What the dashboard's task page shows beyond the task's card.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskExtras {
    /// What the task changed on its branch, as a unified diff.
    pub diff: Option<String>,
    /// The attempt whose log the page streams.
    pub attempt: Option<u32>,
}

fn templates() -> Result<minijinja::Environment<'static>, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.add_template("style.css", include_str!("style.css"))?;
    env.add_template("card.html", include_str!("card.html"))?;
    env.add_template("actions.js", include_str!("actions.js"))?;
    env.add_template("report.html", include_str!("report.html"))?;
    env.add_template("task.html", include_str!("task.html"))?;
    Ok(env)
}

/// The page.
pub fn render(input: &ReportInput<'_>) -> Result<String, minijinja::Error> {
    let env = templates()?;
    let page = Page::of(
        input,
        Cards::Page(input.live.as_ref().map_or(0, |l| l.page)),
    );
    env.get_template("report.html")?.render(&page)
}

/// The dashboard's page of one task: its card, its diff, its log as it grows, its buttons.
/// `None` when the run has no such task.
pub fn render_task(
    input: &ReportInput<'_>,
    task: &str,
    extras: &TaskExtras,
) -> Result<Option<String>, minijinja::Error> {
    let env = templates()?;
    let page = Page::of(input, Cards::Task(task));
    let Some(card) = page.tasks.iter().find(|t| t.id == task) else {
        return Ok(None);
    };
    let diff: Vec<DiffLine> = extras
        .diff
        .as_deref()
        .unwrap_or_default()
        .lines()
        .map(|line| DiffLine {
            class: match line.as_bytes().first() {
                _ if line.starts_with("+++") || line.starts_with("---") => "file",
                Some(b'+') => "add",
                Some(b'-') => "del",
                Some(b'@') => "hunk",
                _ if line.starts_with("diff ") => "file",
                _ => "",
            },
            text: line.to_owned(),
        })
        .collect();
    env.get_template("task.html")?
        .render(minijinja::context! {
            run => page.run,
            live => page.live,
            t => card,
            diff => diff,
            attempt => extras.attempt,
        })
        .map(Some)
}

#[derive(Serialize)]
struct DiffLine {
    class: &'static str,
    text: String,
}

/// The colour class of a task's state.
fn state_class(state: TaskState) -> &'static str {
    match state {
        TaskState::Succeeded => "ok",
        TaskState::SucceededWithWarnings => "warn",
        TaskState::Failed | TaskState::TimedOut => "bad",
        TaskState::Cancelled | TaskState::Skipped => "off",
        TaskState::Blocked => "blocked",
        TaskState::Waiting | TaskState::NeedsHuman => "human",
        TaskState::Running => "run",
        TaskState::Pending | TaskState::Ready => "todo",
    }
}

/// The colour class of how an attempt ended (`None`: it has not).
fn outcome_class(outcome: Option<&Outcome>) -> &'static str {
    match outcome {
        None => "run",
        Some(o) if o.is_success() => "ok",
        Some(Outcome::TimedOut | Outcome::IdleTimeout { .. }) => "slow",
        Some(Outcome::Cancelled) => "off",
        Some(Outcome::Interrupted) => "lost",
        Some(Outcome::Reviewed { .. }) => "warn",
        Some(_) => "bad",
    }
}

fn utc_ms(ms: i64) -> String {
    let secs = baton_model::format_utc(ms);
    // `2026-12-01 16:46:09Z` → with milliseconds, for exact times on hover.
    match secs.strip_suffix('Z') {
        Some(head) => format!("{head}.{:03}Z", ms.rem_euclid(1000)),
        None => secs,
    }
}

fn took(ms: u64) -> String {
    format_duration(std::time::Duration::from_millis(ms))
}

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The anchor of a task's details (ids take letters of any script, `/` and `.`).
fn anchor(id: &str) -> String {
    let mut out = String::from("t-");
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            let _ = write!(out, ".{b:02x}");
        }
    }
    out
}

#[derive(Serialize)]
struct Page {
    run: RunHead,
    verdict: String,
    why: String,
    next: Vec<String>,
    totals: Vec<Count>,
    spend: Option<SpendTable>,
    graph_svg: minijinja::Value,
    graph_note: Option<String>,
    gantt_svg: minijinja::Value,
    gantt_note: Option<String>,
    concurrency_svg: minijinja::Value,
    peak: u32,
    critical: Vec<String>,
    tasks: Vec<TaskCard>,
    /// The run has more tasks than one page shows: which these are.
    paging: Option<Paging>,
    live: Option<LiveContext>,
    /// What waits for a person: tasks waiting for approval, and those that need one, with why.
    needs_you: Vec<Waiting>,
}

/// Which task cards a page shows.
enum Cards<'a> {
    /// Page `n` (0: the first) of [`CARDS_PER_PAGE`].
    Page(usize),
    /// One task's (its own page).
    Task(&'a str),
}

/// Where a page of task cards is among all of them.
#[derive(Serialize)]
struct Paging {
    /// 1-based, as a person counts.
    first: usize,
    last: usize,
    total: usize,
    /// Pages before and after this one (0-based), where there are.
    prev: Option<usize>,
    next: Option<usize>,
}

/// The tasks (indices into the result's) a page shows, and where they are among all. Up to
/// [`CARDS_PER_PAGE`], all in file order; beyond, those that need a look (not succeeded or
/// skipped) first, then the rest, a page at a time.
fn shown(input: &ReportInput<'_>, which: &Cards<'_>) -> (Vec<usize>, Option<Paging>) {
    let tasks = &input.result.tasks;
    if let Cards::Task(id) = which {
        return (
            tasks.iter().position(|t| t.id == *id).into_iter().collect(),
            None,
        );
    }
    let Cards::Page(page) = *which else {
        unreachable!()
    };
    if tasks.len() <= CARDS_PER_PAGE {
        return ((0..tasks.len()).collect(), None);
    }
    let settled = |t: &crate::TaskResult| {
        matches!(
            t.state,
            TaskState::Succeeded | TaskState::SucceededWithWarnings | TaskState::Skipped
        )
    };
    let order: Vec<usize> = (0..tasks.len())
        .filter(|&i| !settled(&tasks[i]))
        .chain((0..tasks.len()).filter(|&i| settled(&tasks[i])))
        .collect();
    let pages = order.len().div_ceil(CARDS_PER_PAGE);
    let page = page.min(pages - 1);
    let from = page * CARDS_PER_PAGE;
    let to = (from + CARDS_PER_PAGE).min(order.len());
    (
        order[from..to].to_vec(),
        Some(Paging {
            first: from + 1,
            last: to,
            total: order.len(),
            prev: page.checked_sub(1),
            next: (page + 1 < pages).then_some(page + 1),
        }),
    )
}

#[derive(Serialize)]
struct Waiting {
    id: String,
    anchor: String,
    approval: bool,
    reason: Option<String>,
}

#[derive(Serialize)]
struct LiveContext {
    #[serde(flatten)]
    live: Live,
    /// What the page's script is given.
    script: serde_json::Value,
}

#[derive(Serialize)]
struct RunHead {
    id: String,
    name: String,
    state: String,
    class: &'static str,
    graph: String,
    started: String,
    duration: String,
    concurrency: u32,
    stop_reason: Option<String>,
}

#[derive(Serialize)]
struct Count {
    label: &'static str,
    n: u32,
    class: &'static str,
}

#[derive(Serialize)]
struct SpendTable {
    rows: Vec<SpendRow>,
    total: SpendRow,
}

#[derive(Serialize)]
struct SpendRow {
    engine: String,
    model: String,
    attempts: u32,
    input: String,
    output: String,
    cache_read: String,
    cache_write: String,
    cost: String,
}

impl SpendRow {
    fn of(engine: String, model: String, spend: &crate::Spend) -> Self {
        Self {
            engine,
            model,
            attempts: spend.attempts,
            input: format_tokens(spend.input_tokens),
            output: format_tokens(spend.output_tokens),
            cache_read: format_tokens(spend.cache_read_tokens),
            cache_write: format_tokens(spend.cache_write_tokens),
            cost: if spend.reported_nothing() {
                "not reported".to_owned()
            } else {
                spend.cost_text()
            },
        }
    }
}

impl Page {
    fn of(input: &ReportInput<'_>, which: Cards<'_>) -> Self {
        let result = input.result;
        let run = &result.run;
        let start = run.started_at_ms;
        let end = run.ended_at_ms.unwrap_or(input.now_ms).max(start);
        let t = &result.totals;
        let totals = vec![
            Count {
                label: "tasks",
                n: t.tasks,
                class: "",
            },
            Count {
                label: "ok",
                n: t.succeeded,
                class: "ok",
            },
            Count {
                label: "failed",
                n: t.failed,
                class: "bad",
            },
            Count {
                label: "timed out",
                n: t.timed_out,
                class: "bad",
            },
            Count {
                label: "cancelled",
                n: t.cancelled,
                class: "off",
            },
            Count {
                label: "blocked",
                n: t.blocked,
                class: "blocked",
            },
            Count {
                label: "skipped",
                n: t.skipped,
                class: "off",
            },
            Count {
                label: "attempts",
                n: t.attempts,
                class: "",
            },
        ]
        .into_iter()
        .filter(|c| c.n > 0 || c.label == "tasks")
        .collect();
        let spend = result.spend.as_ref().map(|spend| SpendTable {
            rows: spend
                .by_model
                .iter()
                .map(|m| {
                    SpendRow::of(
                        m.engine.clone(),
                        m.model.clone().unwrap_or_default(),
                        &m.spend,
                    )
                })
                .collect(),
            total: SpendRow::of("all".to_owned(), String::new(), &spend.total),
        });
        let critical = critical_path(input);
        let (graph_svg, graph_note) = if input.graph.len() > MAX_DRAWN_TASKS {
            (
                String::new(),
                Some(format!(
                    "{} tasks: the graph is drawn up to {MAX_DRAWN_TASKS}; `baton graph FILE --format dot` draws any size",
                    input.graph.len()
                )),
            )
        } else {
            (graph_svg(input, &critical), None)
        };
        let (gantt_svg, gantt_note) = gantt_svg(input, start, end, &critical);
        let (concurrency_svg, peak) = concurrency_svg(input.view, start, end);
        let (indices, paging) = shown(input, &which);
        let tasks = cards(input, &critical, &indices);
        let needs_you = result
            .tasks
            .iter()
            .filter(|t| matches!(t.state, TaskState::Waiting | TaskState::NeedsHuman))
            .map(|t| Waiting {
                id: t.id.clone(),
                anchor: anchor(&t.id),
                approval: t.state == TaskState::Waiting,
                reason: t.reason.clone(),
            })
            .collect();
        Page {
            needs_you,
            run: RunHead {
                id: run.id.clone(),
                name: run.name.clone(),
                state: run.state.to_string(),
                class: match run.state {
                    baton_model::RunState::Succeeded => "ok",
                    baton_model::RunState::SucceededWithWarnings => "warn",
                    baton_model::RunState::Running => "run",
                    baton_model::RunState::Waiting | baton_model::RunState::NeedsHuman => "human",
                    baton_model::RunState::Cancelled | baton_model::RunState::Interrupted => "off",
                    _ => "bad",
                },
                graph: run.graph.clone(),
                started: utc_ms(start),
                duration: took(end.saturating_sub(start) as u64),
                concurrency: run.concurrency,
                stop_reason: input.view.run().stop.as_ref().map(|s| s.reason.clone()),
            },
            verdict: crate::summary::verdict(result)
                .trim_start_matches("baton: ")
                .to_owned(),
            why: crate::summary::why(result).trim().to_owned(),
            next: result.next.clone(),
            totals,
            spend,
            graph_svg: minijinja::Value::from_safe_string(graph_svg),
            graph_note,
            gantt_svg: minijinja::Value::from_safe_string(gantt_svg),
            gantt_note,
            concurrency_svg: minijinja::Value::from_safe_string(concurrency_svg),
            peak,
            critical: critical.iter().map(|id| id.to_string()).collect(),
            tasks,
            paging,
            live: input.live.clone().map(|live| LiveContext {
                script: serde_json::json!({
                    "run": live.run,
                    "base": live.base,
                    "act_key": live.act_key,
                    "finished": live.finished,
                }),
                live,
            }),
        }
    }
}

/// The chain of tasks that decided when the run ended: from the task that ended last, back
/// through the need of each that ended last (what it waited for), as it happened.
fn critical_path(input: &ReportInput<'_>) -> Vec<TaskId> {
    let ends: HashMap<&TaskId, i64> = input
        .view
        .tasks()
        .filter_map(|(id, task)| {
            let last = input
                .view
                .attempts(id)
                .iter()
                .filter_map(|a| a.ended_at_ms)
                .max();
            task.ended_at_ms.or(last).map(|end| (id, end))
        })
        .filter(|(id, _)| !input.view.attempts(id).is_empty())
        .collect();
    let needs: HashMap<&TaskId, &[TaskId]> = input
        .graph
        .iter()
        .map(|t| (&t.id, t.needs.as_slice()))
        .collect();
    let Some(mut at) = ends
        .iter()
        .max_by_key(|(id, end)| (**end, std::cmp::Reverse(**id)))
        .map(|(id, _)| *id)
    else {
        return Vec::new();
    };
    let mut path = vec![at.clone()];
    while let Some(before) = needs.get(at).and_then(|needs| {
        needs
            .iter()
            .filter_map(|n| ends.get(n).map(|e| (n, *e)))
            .max_by_key(|(_, e)| *e)
    }) {
        if path.contains(before.0) {
            break;
        }
        path.push(before.0.clone());
        at = before.0;
    }
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_safe_for_any_id() {
        assert_eq!(anchor("plan/api"), "t-plan.2fapi");
        assert_eq!(anchor("build-1"), "t-build-1");
        assert_eq!(anchor("日本"), "t-.e6.97.a5.e6.9c.ac");
    }

    #[test]
    fn text_is_escaped_for_markup() {
        assert_eq!(
            esc("<b>\"x\" & 'y'</b>"),
            "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;"
        );
    }
}
