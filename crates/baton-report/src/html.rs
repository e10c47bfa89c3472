//! `baton report`: a run as one self-contained HTML page (inline CSS, SVG and a few lines of
//! script; nothing fetched): the outcome and why, the task graph, a timeline of every attempt
//! with the critical path marked, concurrency over time, each task's details, and the spend by
//! engine and model. The page is laid out by a template (`report.html`); the drawings are
//! computed here, where the geometry is.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use baton_model::{Event, EventKind, Outcome, RunView, TaskId, TaskState, format_duration};
use serde::Serialize;

use crate::{RunResult, format_tokens, format_usd};

/// Above this many tasks the graph is not drawn (the timeline still is): a drawing of
/// thousands of boxes helps nobody; `baton graph` draws any size.
const MAX_DRAWN_TASKS: usize = 400;
/// The timeline's rows, at most.
const MAX_TIMELINE_ROWS: usize = 1500;

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
    /// The dashboard's token: the page's requests that act carry it.
    pub token: String,
    /// The run is over (or its driver gone): nothing more comes.
    pub finished: bool,
    pub resumable: bool,
    pub retryable: bool,
    /// It waits at its soft budget.
    pub soft_paused: bool,
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
    let page = Page::of(input);
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
    let page = Page::of(input);
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
    live: Option<LiveContext>,
    /// What waits for a person: tasks waiting for approval, and those that need one, with why.
    needs_you: Vec<Waiting>,
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
            cost: spend.cost_text(),
        }
    }
}

#[derive(Serialize)]
struct TaskCard {
    id: String,
    anchor: String,
    kind: &'static str,
    state: String,
    class: &'static str,
    open: bool,
    critical: bool,
    duration: Option<String>,
    attempts: Vec<AttemptRow>,
    cost: Option<String>,
    tokens: Option<String>,
    reason: Option<String>,
    planner: Option<String>,
    planned: Vec<String>,
    needs: Vec<String>,
    checks: Vec<CheckRow>,
    reviews: Vec<ReviewRow>,
    candidates: Option<CandidateList>,
    files: Vec<String>,
    lines: Option<String>,
    branch: Option<String>,
    scope_violations: Vec<String>,
    output: Option<String>,
    stderr: Option<String>,
    log: Option<String>,
}

#[derive(Serialize)]
struct AttemptRow {
    n: u32,
    started: String,
    duration: String,
    outcome: String,
    class: &'static str,
    engine: Option<String>,
    tokens: Option<String>,
    cost: Option<String>,
}

#[derive(Serialize)]
struct CheckRow {
    attempt: Option<u32>,
    round: u32,
    command: String,
    outcome: String,
    class: &'static str,
    duration: String,
    output: String,
}

#[derive(Serialize)]
struct ReviewRow {
    attempt: u32,
    verdict: String,
    reasons: Vec<String>,
}

#[derive(Serialize)]
struct CandidateList {
    why: String,
    list: Vec<CandidateRow>,
}

#[derive(Serialize)]
struct CandidateRow {
    n: u32,
    engine: String,
    passed: bool,
    won: bool,
    lines: u64,
    files: u32,
}

impl Page {
    fn of(input: &ReportInput<'_>) -> Self {
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
        let tasks = cards(input, &critical);
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
                stop_reason: input.view.run().stop_reason.clone(),
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
            live: input.live.clone().map(|live| LiveContext {
                script: serde_json::json!({
                    "run": live.run,
                    "token": live.token,
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

/// Columns by depth (the longest chain of needs before a task), rows in graph order within
/// each, a planner's tasks next to each other; boxes coloured by state; planners' tasks framed
/// together under the planner's name.
fn graph_svg(input: &ReportInput<'_>, critical: &[TaskId]) -> String {
    const W: i64 = 168;
    const H: i64 = 34;
    const GAP_X: i64 = 56;
    const GAP_Y: i64 = 14;
    const PAD: i64 = 24;
    let index: HashMap<&TaskId, usize> = input
        .graph
        .iter()
        .enumerate()
        .map(|(i, t)| (&t.id, i))
        .collect();
    // The tasks in an order where needs come first (Kahn's; a graph grown by planners and
    // fan-outs lists its new tasks last, and what waited for them gained them as needs), then
    // each task's depth: the longest chain of needs before it.
    let needs_of: Vec<Vec<usize>> = input
        .graph
        .iter()
        .map(|t| {
            t.needs
                .iter()
                .filter_map(|n| index.get(n).copied())
                .collect()
        })
        .collect();
    let order = topological(&needs_of);
    let mut depth = vec![0usize; input.graph.len()];
    for &i in &order {
        depth[i] = needs_of[i].iter().map(|&j| depth[j] + 1).max().unwrap_or(0);
    }
    let columns = depth.iter().max().map_or(0, |d| d + 1);
    let mut by_column: Vec<Vec<usize>> = vec![Vec::new(); columns];
    for (i, &d) in depth.iter().enumerate() {
        by_column[d].push(i);
    }
    // Each column in the order of what its tasks need (the mean row of their needs, one sweep
    // from left to right: fewer crossing edges), a planner's tasks kept together.
    let mut row_of = vec![0f64; input.graph.len()];
    for column in &mut by_column {
        let centre = |i: usize| {
            let rows: Vec<f64> = input.graph[i]
                .needs
                .iter()
                .filter_map(|n| index.get(n))
                .map(|&j| row_of[j])
                .collect();
            if rows.is_empty() {
                i as f64 / input.graph.len().max(1) as f64
            } else {
                rows.iter().sum::<f64>() / rows.len() as f64
            }
        };
        let group_of = |i: usize| {
            input.graph[i]
                .planner
                .as_ref()
                .and_then(|p| index.get(p).copied())
        };
        let mut group_centre: HashMap<usize, f64> = HashMap::new();
        for &i in column.iter() {
            if let Some(g) = group_of(i) {
                let c = centre(i);
                group_centre
                    .entry(g)
                    .and_modify(|m| *m = m.min(c))
                    .or_insert(c);
            }
        }
        let mut keyed: Vec<(f64, usize, f64, usize)> = column
            .iter()
            .map(|&i| {
                let own = centre(i);
                match group_of(i) {
                    Some(g) => (group_centre[&g], g, own, i),
                    None => (own, i, own, i),
                }
            })
            .collect();
        keyed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.total_cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        *column = keyed.into_iter().map(|k| k.3).collect();
        for (r, &i) in column.iter().enumerate() {
            row_of[i] = r as f64;
        }
    }
    // Rows top to bottom; a planner's group gets room for its frame and name.
    let mut at = vec![(0i64, 0i64); input.graph.len()];
    let mut bottom = 0i64;
    for (c, column) in by_column.iter().enumerate() {
        let mut y = PAD;
        let mut group: Option<&TaskId> = None;
        for &i in column {
            let this = input.graph[i].planner.as_ref();
            if this != group {
                if group.is_some() {
                    y += 10;
                }
                if this.is_some() {
                    y += 22;
                }
                group = this;
            }
            at[i] = (PAD + c as i64 * (W + GAP_X), y);
            y += H + GAP_Y;
        }
        if group.is_some() {
            y += 10;
        }
        bottom = bottom.max(y - GAP_Y);
    }
    let width = PAD * 2 + columns as i64 * (W + GAP_X) - GAP_X;
    let height = bottom + PAD;
    // What each task comes after, transitively: an edge another path already implies is not
    // drawn (a fan-out's instances need their task and its needs; the line from the task is
    // the one that says it).
    let mut before: Vec<Vec<bool>> = vec![vec![false; input.graph.len()]; input.graph.len()];
    for &i in &order {
        let mut set = vec![false; input.graph.len()];
        for &j in &needs_of[i] {
            set[j] = true;
            for (k, &b) in before[j].iter().enumerate() {
                set[k] |= b;
            }
        }
        before[i] = set;
    }
    let states: HashMap<&TaskId, TaskState> =
        input.view.tasks().map(|(id, t)| (id, t.status)).collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" style="max-width:100%;height:auto" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="task graph">"#
    );
    svg.push_str(r#"<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker></defs>"#);
    // Planners' groups, behind everything.
    let mut groups: BTreeMap<usize, (i64, i64, i64, i64)> = BTreeMap::new();
    for (i, task) in input.graph.iter().enumerate() {
        if let Some(p) = task.planner.as_ref().and_then(|p| index.get(p)) {
            let (x, y) = at[i];
            let g = groups.entry(*p).or_insert((x, y, x + W, y + H));
            *g = (g.0.min(x), g.1.min(y), g.2.max(x + W), g.3.max(y + H));
        }
    }
    for (p, (x0, y0, x1, y1)) in &groups {
        let _ = write!(
            svg,
            r#"<g class="group"><rect x="{}" y="{}" width="{}" height="{}" rx="10"/><text x="{}" y="{}">tasks of {}</text></g>"#,
            x0 - 8,
            y0 - 22,
            x1 - x0 + 16,
            y1 - y0 + 30,
            x0 - 2,
            y0 - 8,
            esc(input.graph[*p].id.as_str())
        );
    }
    for (i, task) in input.graph.iter().enumerate() {
        let needed: Vec<usize> = task
            .needs
            .iter()
            .filter_map(|n| index.get(n).copied())
            .collect();
        for &j in &needed {
            if needed.iter().any(|&m| m != j && before[m][j]) {
                continue;
            }
            let need = &input.graph[j].id;
            let (x0, y0) = (at[j].0 + W, at[j].1 + H / 2);
            let (x1, y1) = (at[i].0, at[i].1 + H / 2);
            let on_path = critical.contains(need) && critical.contains(&task.id);
            let mid = (x0 + x1) / 2;
            let _ = write!(
                svg,
                r#"<path class="edge{}" d="M{x0},{y0} C{mid},{y0} {mid},{y1} {x1},{y1}" marker-end="url(#arrow)"/>"#,
                if on_path { " critical" } else { "" }
            );
        }
    }
    for (i, task) in input.graph.iter().enumerate() {
        let (x, y) = at[i];
        let state = states.get(&task.id).copied().unwrap_or(TaskState::Pending);
        let label = task.id.local();
        let shown: String = if label.chars().count() > 22 {
            label.chars().take(21).chain(['…']).collect()
        } else {
            label.to_owned()
        };
        let _ = write!(
            svg,
            r##"<a href="#{anchor}"><g class="node {class}{critical}" data-task="{id}"><title>{id} · {state} · {kind}</title><rect x="{x}" y="{y}" width="{W}" height="{H}" rx="6"/><text x="{tx}" y="{ty}">{shown}</text><text class="kind" x="{kx}" y="{ty}">{kind}</text></g></a>"##,
            anchor = anchor(task.id.as_str()),
            class = state_class(state),
            critical = if critical.contains(&task.id) {
                " critical"
            } else {
                ""
            },
            id = esc(task.id.as_str()),
            state = state,
            kind = task.kind,
            tx = x + 10,
            ty = y + H / 2 + 4,
            kx = x + W - 8,
            shown = esc(&shown),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Indices in an order where each task's needs come before it; what a cycle (which a recorded
/// graph never has) leaves out comes last, in graph order.
fn topological(needs: &[Vec<usize>]) -> Vec<usize> {
    let mut waiting: Vec<usize> = needs.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); needs.len()];
    for (i, list) in needs.iter().enumerate() {
        for &j in list {
            dependents[j].push(i);
        }
    }
    let mut ready: std::collections::VecDeque<usize> =
        (0..needs.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(needs.len());
    let mut placed = vec![false; needs.len()];
    while let Some(i) = ready.pop_front() {
        order.push(i);
        placed[i] = true;
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push_back(d);
            }
        }
    }
    order.extend((0..needs.len()).filter(|&i| !placed[i]));
    order
}

/// One row per task that ran (by first start), one bar per attempt, coloured by how it
/// ended; a tick where its checks ran (a fix round follows a tick that failed); the critical
/// path's rows marked; exact times on hover.
fn gantt_svg(
    input: &ReportInput<'_>,
    start: i64,
    end: i64,
    critical: &[TaskId],
) -> (String, Option<String>) {
    const LABEL: i64 = 190;
    const PLOT: i64 = 840;
    const ROW: i64 = 20;
    const TOP: i64 = 26;
    let span = (end - start).max(1) as f64;
    let x = |ms: i64| LABEL + (((ms - start).max(0) as f64 / span) * PLOT as f64).round() as i64;
    let mut rows: Vec<(&TaskId, &[baton_model::AttemptView])> = input
        .view
        .tasks()
        .map(|(id, _)| (id, input.view.attempts(id)))
        .filter(|(_, attempts)| !attempts.is_empty())
        .collect();
    rows.sort_by_key(|(_, attempts)| attempts[0].started_at_ms);
    let waited: std::collections::HashSet<&TaskId> = input
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TaskWaiting { task } => Some(task),
            _ => None,
        })
        .collect();
    // A task that waited for a person and was rejected has no attempt, but its wait is a row.
    for (id, _) in input.view.tasks() {
        if waited.contains(id) && input.view.attempts(id).is_empty() {
            rows.push((id, &[]));
        }
    }
    let note = (rows.len() > MAX_TIMELINE_ROWS).then(|| {
        format!(
            "{} tasks ran: the first {MAX_TIMELINE_ROWS} to start are drawn",
            rows.len()
        )
    });
    rows.truncate(MAX_TIMELINE_ROWS);
    // Where each attempt's checks ran, and whether they passed.
    let mut checks: HashMap<(&TaskId, u32), Vec<(i64, bool)>> = HashMap::new();
    for event in input.events {
        if let EventKind::Checked {
            task: Some(task),
            attempt: Some(attempt),
            checks: results,
            ..
        } = &event.kind
        {
            checks
                .entry((task, *attempt))
                .or_default()
                .push((event.at_ms, results.iter().all(|c| c.passed())));
        }
    }
    // When each task waited for a person: from `task-waiting` to the decision (or now).
    let mut waits: HashMap<&TaskId, Vec<(i64, Option<i64>)>> = HashMap::new();
    for event in input.events {
        match &event.kind {
            EventKind::TaskWaiting { task } => {
                waits.entry(task).or_default().push((event.at_ms, None));
            }
            EventKind::TaskDecided { task, .. } | EventKind::TaskFinished { task, .. } => {
                if let Some(open) = waits
                    .get_mut(task)
                    .and_then(|w| w.last_mut())
                    .filter(|w| w.1.is_none())
                {
                    open.1 = Some(event.at_ms);
                }
            }
            _ => {}
        }
    }
    let height = TOP + rows.len() as i64 * ROW + 8;
    let width = LABEL + PLOT + 20;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="gantt" viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="timeline of attempts">"#
    );
    // The time axis: five ticks.
    for k in 0..=4 {
        let ms = start + ((end - start) as f64 * k as f64 / 4.0) as i64;
        let tx = x(ms);
        let _ = write!(
            svg,
            r#"<line class="tick" x1="{tx}" y1="{}" x2="{tx}" y2="{height}"/><text class="axis" x="{tx}" y="14" text-anchor="{}">{}</text>"#,
            TOP - 6,
            match k {
                0 => "start",
                4 => "end",
                _ => "middle",
            },
            took((ms - start) as u64)
        );
    }
    for (r, (id, attempts)) in rows.iter().enumerate() {
        let y = TOP + r as i64 * ROW;
        let on_path = critical.contains(id);
        let label: String = if id.as_str().chars().count() > 26 {
            id.as_str().chars().take(25).chain(['…']).collect()
        } else {
            id.as_str().to_owned()
        };
        let _ = write!(
            svg,
            r##"<a href="#{}"><text class="row{}" x="{}" y="{}" text-anchor="end">{}</text></a>"##,
            anchor(id.as_str()),
            if on_path { " critical" } else { "" },
            LABEL - 10,
            y + 14,
            esc(&label)
        );
        for (from, to) in waits.get(id).into_iter().flatten() {
            let to = to.unwrap_or(end);
            let _ = write!(
                svg,
                r#"<g class="wait"><title>{} waited for approval · {} → {} ({})</title><rect x="{}" y="{}" width="{}" height="{}" rx="3"/></g>"#,
                esc(id.as_str()),
                utc_ms(*from),
                utc_ms(to),
                took((to - from).max(0) as u64),
                x(*from),
                y + 5,
                (x(to) - x(*from)).max(2),
                ROW - 10
            );
        }
        for attempt in *attempts {
            let a_end = attempt.ended_at_ms.unwrap_or(end);
            let (x0, x1) = (x(attempt.started_at_ms), x(a_end));
            let class = outcome_class(attempt.outcome.as_ref());
            let outcome = attempt
                .outcome
                .as_ref()
                .map_or_else(|| "still running".to_owned(), ToString::to_string);
            let mut tip = format!(
                "{} · attempt {} · {} → {} ({}) · {}",
                id,
                attempt.attempt,
                utc_ms(attempt.started_at_ms),
                utc_ms(a_end),
                took((a_end - attempt.started_at_ms).max(0) as u64),
                outcome
            );
            if let Some(agent) = &attempt.agent {
                let _ = write!(tip, " · {}", agent.engine);
                if let Some(model) = &agent.model {
                    let _ = write!(tip, "/{model}");
                }
                let tokens = agent.input_tokens
                    + agent.output_tokens
                    + agent.cache_read_tokens
                    + agent.cache_write_tokens;
                let _ = write!(tip, " · {} tokens", format_tokens(tokens));
                if let Some(usd) = agent.cost_usd {
                    let _ = write!(tip, " {}", format_usd(usd));
                }
            }
            let _ = write!(
                svg,
                r#"<g class="bar {class}{critical}" data-task="{id}" data-attempt="{n}" data-status="{class}"><title>{tip}</title><rect x="{x0}" y="{y}" width="{w}" height="{h}" rx="3"/></g>"#,
                critical = if on_path { " critical" } else { "" },
                id = esc(id.as_str()),
                n = attempt.attempt,
                y = y + 3,
                w = (x1 - x0).max(2),
                h = ROW - 6,
                tip = esc(&tip),
            );
            for (at, passed) in checks.get(&(*id, attempt.attempt)).into_iter().flatten() {
                let cx = x(*at);
                let _ = write!(
                    svg,
                    r#"<line class="check {}" x1="{cx}" y1="{}" x2="{cx}" y2="{}"><title>checks {} at {}</title></line>"#,
                    if *passed { "pass" } else { "fail" },
                    y + 1,
                    y + ROW - 1,
                    if *passed { "passed" } else { "failed" },
                    utc_ms(*at)
                );
            }
        }
    }
    svg.push_str("</svg>");
    (svg, note)
}

/// How many attempts ran at each moment: a step line over the same time axis as the
/// timeline; and the most at once.
fn concurrency_svg(view: &RunView, start: i64, end: i64) -> (String, u32) {
    const LABEL: i64 = 190;
    const PLOT: i64 = 840;
    const H: i64 = 80;
    let mut changes: Vec<(i64, i32)> = Vec::new();
    for (_, attempt) in view.all_attempts() {
        changes.push((attempt.started_at_ms, 1));
        changes.push((attempt.ended_at_ms.unwrap_or(end), -1));
    }
    // Ends before starts at the same instant: a task that hands over to the next does not
    // count as two.
    changes.sort_by_key(|&(at, d)| (at, d));
    let mut running = 0i32;
    let mut peak = 0i32;
    let mut steps = vec![(start, 0i32)];
    for (at, d) in changes {
        running += d;
        // One step per instant: what starts and ends at the same moment is one change.
        match steps.last_mut() {
            Some(last) if last.0 == at => last.1 = running,
            _ => steps.push((at, running)),
        }
    }
    for step in &mut steps {
        step.1 = step.1.max(0);
        peak = peak.max(step.1);
    }
    steps.push((end, 0));
    let span = (end - start).max(1) as f64;
    let x = |ms: i64| LABEL + (((ms - start).max(0) as f64 / span) * PLOT as f64).round() as i64;
    let top = peak.max(1) as f64;
    let y = |n: i32| 8 + H - ((n as f64 / top) * H as f64).round() as i64;
    let mut d = format!("M{},{}", x(start), y(0));
    let mut last = 0;
    for (at, n) in &steps {
        let _ = write!(d, " L{},{} L{},{}", x(*at), y(last), x(*at), y(*n));
        last = *n;
    }
    let _ = write!(d, " L{},{} Z", x(end), y(0));
    let width = LABEL + PLOT + 20;
    let height = H + 24;
    let svg = format!(
        r#"<svg class="concurrency" viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="attempts running over time"><text class="axis" x="{lx}" y="{ty}" text-anchor="end">{peak} at most</text><text class="axis" x="{lx}" y="{by}" text-anchor="end">0</text><line class="tick" x1="{x0}" y1="{ty2}" x2="{x1}" y2="{ty2}"/><path class="area" d="{d}"><title>at most {peak} attempts at once</title></path></svg>"#,
        lx = LABEL - 10,
        ty = 8 + 10,
        by = 8 + H,
        x0 = LABEL,
        x1 = LABEL + PLOT,
        ty2 = y(peak),
    );
    (svg, peak.max(0) as u32)
}

fn cards(input: &ReportInput<'_>, critical: &[TaskId]) -> Vec<TaskCard> {
    let graph: HashMap<&str, &GraphTask> = input.graph.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut checks: HashMap<&str, Vec<CheckRow>> = HashMap::new();
    let mut reviews: HashMap<&str, Vec<ReviewRow>> = HashMap::new();
    for event in input.events {
        match &event.kind {
            EventKind::Checked {
                task: Some(task),
                attempt,
                checks: results,
                ..
            } => {
                let rows = checks.entry(task.as_str()).or_default();
                let round = rows
                    .iter()
                    .filter(|r| r.attempt == *attempt)
                    .map(|r| r.round)
                    .max()
                    .unwrap_or(0)
                    + 1;
                rows.extend(results.iter().map(|c| CheckRow {
                    attempt: *attempt,
                    round,
                    command: c.command.clone(),
                    outcome: c.outcome.to_string(),
                    class: outcome_class(Some(&c.outcome)),
                    duration: took(c.duration_ms),
                    output: c.output.clone(),
                }));
            }
            EventKind::Reviewed {
                task,
                attempt,
                review,
            } => reviews.entry(task.as_str()).or_default().push(ReviewRow {
                attempt: *attempt,
                verdict: review.verdict.to_string(),
                reasons: review.reasons.clone(),
            }),
            _ => {}
        }
    }
    input
        .result
        .tasks
        .iter()
        .map(|task| {
            let id = TaskId::new(task.id.clone()).ok();
            let attempts = id.as_ref().map_or(&[][..], |id| input.view.attempts(id));
            let shape = graph.get(task.id.as_str());
            let spend = task.agent.as_ref().map(|a| &a.spend);
            TaskCard {
                id: task.id.clone(),
                anchor: anchor(&task.id),
                kind: shape.map_or("task", |t| t.kind),
                state: task.state.to_string(),
                class: state_class(task.state),
                open: !matches!(
                    task.state,
                    TaskState::Succeeded | TaskState::Skipped | TaskState::Pending
                ),
                critical: id.as_ref().is_some_and(|id| critical.contains(id)),
                duration: task.duration_ms.map(took),
                attempts: attempts
                    .iter()
                    .map(|a| AttemptRow {
                        n: a.attempt,
                        started: utc_ms(a.started_at_ms),
                        duration: a.duration_ms.map_or_else(|| "running".to_owned(), took),
                        outcome: a
                            .outcome
                            .as_ref()
                            .map_or_else(|| "still running".to_owned(), ToString::to_string),
                        class: outcome_class(a.outcome.as_ref()),
                        engine: a.agent.as_ref().map(|agent| match &agent.model {
                            Some(model) => format!("{} · {model}", agent.engine),
                            None => agent.engine.clone(),
                        }),
                        tokens: a.agent.as_ref().map(|agent| {
                            format_tokens(
                                agent.input_tokens
                                    + agent.output_tokens
                                    + agent.cache_read_tokens
                                    + agent.cache_write_tokens,
                            )
                        }),
                        cost: a
                            .agent
                            .as_ref()
                            .and_then(|agent| agent.cost_usd)
                            .map(format_usd),
                    })
                    .collect(),
                cost: spend
                    .filter(|s| s.attempts > 0)
                    .map(crate::Spend::cost_text),
                tokens: spend
                    .filter(|s| s.attempts > 0)
                    .map(|s| format_tokens(s.tokens())),
                reason: task.reason.clone(),
                planner: shape
                    .and_then(|t| t.planner.as_ref())
                    .map(ToString::to_string),
                planned: task.planned.clone(),
                needs: shape.map_or_else(Vec::new, |t| {
                    t.needs.iter().map(ToString::to_string).collect()
                }),
                checks: checks.remove(task.id.as_str()).unwrap_or_default(),
                reviews: reviews.remove(task.id.as_str()).unwrap_or_default(),
                candidates: task.candidates.as_ref().map(|c| CandidateList {
                    why: c.why.clone(),
                    list: c
                        .list
                        .iter()
                        .map(|k| CandidateRow {
                            n: k.candidate,
                            engine: match &k.model {
                                Some(model) => format!("{} · {model}", k.engine),
                                None => k.engine.clone(),
                            },
                            passed: k.passed,
                            won: c.winner == Some(k.candidate),
                            lines: k.lines,
                            files: k.files,
                        })
                        .collect(),
                }),
                files: task.workspace.as_ref().map_or_else(Vec::new, |w| {
                    w.evidence.paths().map(str::to_owned).collect()
                }),
                lines: task
                    .workspace
                    .as_ref()
                    .map(|w| format!("+{} −{}", w.evidence.lines_added, w.evidence.lines_removed)),
                branch: task.workspace.as_ref().map(|w| w.branch.clone()),
                scope_violations: task
                    .workspace
                    .as_ref()
                    .map_or_else(Vec::new, |w| w.scope_violations.clone()),
                output: task.output.clone().filter(|o| !o.is_empty()),
                stderr: task.stderr.clone().filter(|o| !o.is_empty()),
                log: task.log.clone(),
            }
        })
        .collect()
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
