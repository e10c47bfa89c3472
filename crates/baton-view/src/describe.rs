//! One line per event for people: what `baton events` prints.

use std::time::Duration;

use baton_model::{Event, EventKind, TaskId, format_utc};

/// `#12 2026-11-30 04:01:41Z attempt-finished build#1: exit 0 in 812ms`. Reasons and outcomes
/// carry what tasks printed and the names of files they made: `out` shows them terminal-safe.
pub fn describe(event: &Event) -> String {
    let detail = match &event.kind {
        EventKind::RunStarted {
            name,
            tasks,
            concurrency,
        } => {
            format!("`{name}`: {tasks} tasks, concurrency {concurrency}")
        }
        EventKind::RunStopping { reason, .. } => reason.clone(),
        EventKind::RunFinished { state } => state.to_string(),
        EventKind::RunResumed { retry: true, .. } => "by `baton retry`".to_owned(),
        EventKind::RunResumed {
            worker: Some(worker),
            ..
        } => format!("taken over by worker {worker}: its coordinator was gone"),
        EventKind::RunResumed { .. } => "by `baton resume`".to_owned(),
        EventKind::TaskReset { task } => format!("{task}: to run again"),
        EventKind::GraphExpanded {
            task,
            attempt,
            added,
            ..
        } => {
            let names: Vec<&str> = added.iter().map(TaskId::as_str).collect();
            format!("{task}#{attempt}: added {}", names.join(", "))
        }
        EventKind::GraphReloaded { changed, .. } => {
            let names: Vec<&str> = changed.iter().map(TaskId::as_str).collect();
            format!("the graph file read again; changed: {}", names.join(", "))
        }
        EventKind::TaskWaiting { task } => format!("{task}: waits for approval"),
        EventKind::Replanning { task, failed } => {
            format!("{task}: `{failed}` failed; asked to plan what is left")
        }
        EventKind::Picked { task, why, .. } => format!("{task}: {why}"),
        EventKind::AgentActivity {
            task,
            attempt,
            doing,
            tokens,
            cost_usd,
        } => {
            let mut text = format!("{task}#{attempt}:");
            if let Some(doing) = doing {
                text.push_str(&format!(" {doing} ·"));
            }
            text.push_str(&format!(" {} tokens", baton_report::format_tokens(*tokens)));
            if let Some(usd) = cost_usd {
                text.push_str(&format!(" {}", baton_report::format_usd(*usd)));
            }
            text
        }
        EventKind::Reviewed {
            task,
            attempt,
            review,
        } => {
            let mut text = format!("{task}#{attempt}: {}", review.verdict);
            if !review.reasons.is_empty() {
                text.push_str(&format!(": {}", review.reasons.join("; ")));
            }
            text
        }
        EventKind::TaskDecided {
            task,
            approved,
            reason,
        } => match (approved, reason) {
            (true, _) => format!("{task}: approved"),
            (false, Some(reason)) => format!("{task}: rejected: {reason}"),
            (false, None) => format!("{task}: rejected"),
        },
        EventKind::Checked {
            task,
            attempt,
            checks,
            blamed,
        } => {
            let who = match (task, attempt) {
                (Some(task), Some(attempt)) => format!("{task}#{attempt}"),
                (Some(task), None) => task.to_string(),
                _ => "the result".to_owned(),
            };
            let each: Vec<String> = checks
                .iter()
                .map(|c| {
                    format!(
                        "`{}` {}",
                        c.command,
                        if c.passed() {
                            "passed".to_owned()
                        } else {
                            c.outcome.to_string()
                        }
                    )
                })
                .collect();
            match blamed {
                Some(culprit) => format!(
                    "{who}: {}; first failing after merging `{culprit}`",
                    each.join(", ")
                ),
                None => format!("{who}: {}", each.join(", ")),
            }
        }
        EventKind::ResultMerged {
            branch,
            commit,
            conflict_task,
            conflict_with,
            conflict_files,
            error,
            ..
        } => match (commit, conflict_task, error) {
            (_, _, Some(error)) => format!("{branch}: {error}"),
            (_, Some(task), _) => format!(
                "{branch}: `{task}` conflicts with {} in {}",
                if conflict_with.is_empty() {
                    "what was merged before it".to_owned()
                } else {
                    conflict_with
                        .iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                conflict_files.join(", ")
            ),
            (Some(commit), _, _) => format!("{branch} at {}", &commit[..commit.len().min(12)]),
            (None, None, None) => branch.clone(),
        },
        EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit {
            task,
            attempt,
            branch,
            commit,
            evidence,
            scope_violations,
            links_left_out,
            ..
        }) => {
            let mut text = match commit {
                Some(commit) => format!(
                    "{task}#{attempt}: {} files (+{} -{}) on {branch} at {}",
                    evidence.files.len(),
                    evidence.lines_added,
                    evidence.lines_removed,
                    &commit[..commit.len().min(12)]
                ),
                None => format!("{task}#{attempt}: no changes on {branch}"),
            };
            if !scope_violations.is_empty() {
                text.push_str(&format!(
                    "; outside its scope: {}",
                    scope_violations.join(", ")
                ));
            }
            if !links_left_out.is_empty() {
                text.push_str(&format!(
                    "; links out of its worktree left out: {}",
                    links_left_out.join(", ")
                ));
            }
            text
        }
        EventKind::BudgetChanged {
            usd,
            tokens,
            soft_usd,
            soft_tokens,
        } => {
            let mut text = baton_report::budget_text(*usd, *tokens);
            if soft_usd.is_some() || soft_tokens.is_some() {
                text.push_str(&format!(
                    ", pausing at {}",
                    baton_report::budget_text(*soft_usd, *soft_tokens)
                ));
            }
            text
        }
        EventKind::AttemptStarted { task, attempt, pid } => match pid {
            Some(pid) => format!("{task}#{attempt} (pid {pid})"),
            None => format!("{task}#{attempt}"),
        },
        EventKind::AttemptFinished {
            task,
            attempt,
            outcome,
            duration_ms,
            agent,
            ..
        } => {
            let mut line = format!(
                "{task}#{attempt}: {outcome} in {}",
                baton_model::format_duration(Duration::from_millis(*duration_ms))
            );
            if let Some(agent) = agent {
                line.push_str(&format!(", {} tokens", agent.tokens()));
                if let Some(cost) = agent.cost_usd {
                    line.push_str(&format!(", ${cost:.4}"));
                }
            }
            line
        }
        EventKind::RetryScheduled {
            task,
            attempt,
            delay_ms,
        } => format!(
            "{task}#{attempt} in {}",
            baton_model::format_duration(Duration::from_millis(*delay_ms))
        ),
        EventKind::AttemptLost {
            task,
            attempt,
            worker,
        } => format!("{task}#{attempt}: worker {worker} lost; runs again elsewhere"),
        EventKind::TaskFinished {
            task,
            state,
            reason,
        } => match reason {
            Some(reason) => format!("{task}: {state} ({reason})"),
            None => format!("{task}: {state}"),
        },
    };
    let ms = event.at_ms.rem_euclid(1000);
    let stamp = format_utc(event.at_ms);
    // `2026-11-30 04:01:41Z` with milliseconds before the zone.
    let stamp = format!("{}.{ms:03}Z", stamp.trim_end_matches('Z'));
    format!("#{} {stamp} {} {detail}", event.seq, event.kind.name())
}
