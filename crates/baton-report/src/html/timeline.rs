//! The timeline (a bar per attempt, check ticks, approval waits) and concurrency over time, as
//! SVG on one time axis.

use std::collections::HashMap;
use std::fmt::Write;

use baton_model::{EventKind, RunView, TaskId};

use super::{MAX_TIMELINE_ROWS, ReportInput, anchor, esc, outcome_class, took, utc_ms};
use crate::{format_tokens, format_usd};

/// One row per task that ran (by first start), one bar per attempt, coloured by how it
/// ended; a tick where its checks ran (a fix round follows a tick that failed); the critical
/// path's rows marked; exact times on hover.
pub(super) fn gantt_svg(
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
                // An engine that reports nothing (a command one) is not shown as 0 tokens.
                if tokens > 0 || agent.cost_usd.is_some() {
                    let _ = write!(tip, " · {} tokens", format_tokens(tokens));
                }
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
pub(super) fn concurrency_svg(view: &RunView, start: i64, end: i64) -> (String, u32) {
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
