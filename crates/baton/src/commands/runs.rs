use std::time::Duration;

use std::fmt::Write;

use baton_model::{TaskState, format_duration, format_utc};
use serde::Serialize;

use super::records;
use crate::cli::RunsArgs;
use crate::exit::{self, Failure};
use crate::out;

/// One line of `baton runs --json` (schema 1).
#[derive(Debug, Serialize)]
struct RunLine {
    id: String,
    name: String,
    state: baton_model::RunState,
    graph: String,
    started_at_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at_ms: Option<i64>,
    duration_ms: Option<u64>,
    tasks: u32,
    succeeded: u32,
    failed: u32,
    blocked: u32,
    /// Tokens and dollars spent by agent tasks; `null` for a run without agent attempts.
    tokens: Option<u64>,
    cost_usd: Option<f64>,
}

#[derive(Debug, Serialize)]
struct RunList {
    schema: u32,
    runs: Vec<RunLine>,
}

pub(super) fn runs(args: RunsArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    // No store file yet is no runs yet: an empty list, as for a store whose runs were pruned.
    let summaries = match records::open_if_recorded(store_url)? {
        Some(store) => store.runs(args.limit)?,
        None => Vec::new(),
    };
    let lines: Vec<RunLine> = summaries
        .into_iter()
        .map(|s| RunLine {
            id: s.run.id.to_string(),
            name: s.run.name.clone(),
            state: records::effective_state(&s.run),
            graph: s.run.graph_path.clone(),
            started_at_ms: s.run.started_at_ms,
            ended_at_ms: s.run.ended_at_ms,
            duration_ms: s
                .run
                .ended_at_ms
                .map(|e| e.saturating_sub(s.run.started_at_ms).max(0) as u64),
            tasks: s.run.task_count,
            succeeded: s.count(TaskState::Succeeded),
            failed: s.count(TaskState::Failed)
                + s.count(TaskState::TimedOut)
                + s.count(TaskState::Cancelled),
            blocked: s.count(TaskState::Blocked),
            tokens: s.tokens,
            cost_usd: s.cost_usd,
        })
        .collect();
    if args.json {
        let list = RunList {
            schema: 1,
            runs: lines,
        };
        out::json("the list of runs", &list)?;
        return Ok(exit::SUCCESS);
    }
    // A run's name is the graph file's `name`: shown, not acted on by the terminal (as all
    // text `out` prints), and made safe here already so that the column is as wide as shown.
    let lines: Vec<RunLine> = lines
        .into_iter()
        .map(|l| RunLine {
            name: baton_report::terminal_safe(&l.name).into_owned(),
            ..l
        })
        .collect();
    if lines.is_empty() {
        out::line("the list of runs", "no runs recorded yet")?;
        return Ok(exit::SUCCESS);
    }
    let name_width = lines
        .iter()
        .map(|l| baton_report::display_width(&l.name))
        .max()
        .unwrap_or(4)
        .clamp(4, 30);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{:<20}  {}  {:<23}  {:<20}  {:>8}  {:>5}  {:>5}  {:>6}  {:>7}  {:>6}  {:>4}",
        "RUN",
        baton_report::pad("NAME", name_width),
        "STATE",
        "STARTED",
        "DURATION",
        "TASKS",
        "OK",
        "FAILED",
        "BLOCKED",
        "TOKENS",
        "COST"
    );
    for l in &lines {
        let duration = l.duration_ms.map_or_else(
            || "-".to_owned(),
            |ms| format_duration(Duration::from_millis(ms)),
        );
        let _ = writeln!(
            text,
            "{:<20}  {}  {:<23}  {:<20}  {:>8}  {:>5}  {:>5}  {:>6}  {:>7}  {:>6}  {:>4}",
            l.id,
            baton_report::pad(&l.name, name_width),
            l.state.as_str(),
            format_utc(l.started_at_ms),
            duration,
            l.tasks,
            l.succeeded,
            l.failed,
            l.blocked,
            l.tokens
                .map_or_else(|| "-".to_owned(), baton_report::format_tokens),
            l.cost_usd
                .map_or_else(|| "-".to_owned(), baton_report::format_usd)
        );
    }
    out::text("the list of runs", &text)?;
    Ok(exit::SUCCESS)
}
