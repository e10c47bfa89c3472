//! Each task's card: its attempts, checks, reviews, candidates, changes and output.

use std::collections::HashMap;

use baton_model::{EventKind, TaskId, TaskState};
use serde::Serialize;

use super::{GraphTask, ReportInput, anchor, outcome_class, state_class, took, utc_ms};
use crate::{format_tokens, format_usd};

#[derive(Serialize)]
pub(super) struct TaskCard {
    pub(super) id: String,
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

/// The cards of the run's tasks at `shown` (indices into the result's tasks), in that order.
pub(super) fn cards(
    input: &ReportInput<'_>,
    critical: &[TaskId],
    shown: &[usize],
) -> Vec<TaskCard> {
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
    shown
        .iter()
        .filter_map(|&i| input.result.tasks.get(i))
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
                // An engine that reports nothing is said to once, in the spend table.
                cost: spend
                    .filter(|s| s.attempts > 0 && !s.reported_nothing())
                    .map(crate::Spend::cost_text),
                tokens: spend
                    .filter(|s| s.attempts > 0 && !s.reported_nothing())
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
