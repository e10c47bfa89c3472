//! Planners (`expand = true`): what baton tells one beside its goal, how its answer is checked
//! (the attempt unit checks it and, with fix rounds left, sends it back; the dispatcher splices
//! it into the graph), and what it is told when the answer will not do.

use std::path::Path;

use baton_graph::{Graph, TaskIndex, describe_limits, plan_text};

/// Most entries of the repository's layout shown to a planner.
const LAYOUT_ENTRIES: usize = 80;
/// Most entries shown of one top-level directory.
const DIR_ENTRIES: usize = 12;
/// Most of the run's task ids offered as needs.
const NAMED_TASKS: usize = 50;

/// The JSON schema of a plan, for engines that hold an answer to one. Loose on purpose: it
/// says the shape (so the model answers with tasks), and baton's own validation, which names
/// every problem with its line, says the rest.
pub const PLAN_SCHEMA: &str = r#"{"type":"object","properties":{"task":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"prompt":{"type":"string"},"run":{"type":"string"},"needs":{"type":"array","items":{"type":"string"}},"scope":{"type":"array","items":{"type":"string"}},"verify":{"type":"array","items":{"type":"string"}},"estimate":{"type":"object","properties":{"minutes":{"type":"number"},"usd":{"type":"number"}}}},"required":["id"]}}},"required":["task"]}"#;

/// [`PLAN_SCHEMA`] as OpenAI's strict structured outputs take one (Codex's `--output-schema`):
/// every property listed as required, none other allowed; a field a task leaves out is `null`,
/// which the graph file's walker reads as absent. So a Codex plan has these fields only.
pub const PLAN_SCHEMA_STRICT: &str = r#"{"type":"object","additionalProperties":false,"required":["task"],"properties":{"task":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["id","prompt","run","needs","scope","verify","estimate"],"properties":{"id":{"type":"string"},"prompt":{"type":["string","null"]},"run":{"type":["string","null"]},"needs":{"type":["array","null"],"items":{"type":"string"}},"scope":{"type":["array","null"],"items":{"type":"string"}},"verify":{"type":["array","null"],"items":{"type":"string"}},"estimate":{"type":["object","null"],"additionalProperties":false,"required":["minutes","usd"],"properties":{"minutes":{"type":["number","null"]},"usd":{"type":["number","null"]}}}}}}}}"#;

/// Why a planner's answer was not taken.
#[derive(Debug, Clone)]
pub struct Rejected {
    /// Every problem, as `plan of TASK:LINE:COL: error: …` lines with their help.
    pub errors: String,
    pub problems: u32,
}

/// The plan in `answer`, valid for `graph` (its JSON, as handed to the planner's dependents),
/// or everything wrong with it.
pub fn check_answer(
    graph: &Graph,
    planner: TaskIndex,
    answer: &str,
    dropped: &[TaskIndex],
) -> Result<String, Rejected> {
    let text = plan_text(answer).map_err(|error| Rejected {
        errors: error,
        problems: 1,
    })?;
    match graph.replacement(planner, text, dropped) {
        Ok(_) => Ok(text.to_owned()),
        Err(error) => Err(Rejected {
            problems: error.diagnostics.len().max(1) as u32,
            errors: error.to_string(),
        }),
    }
}

/// Why an answer baton kept only part of is not a plan: it was longer than baton keeps of a
/// planner's answer (its plain stdout, cut in the middle), which a JSON parser would only
/// call an unexpected token. `None` for an answer that is whole.
pub fn cut_answer(stdout: &baton_exec::Captured, answer: &str) -> Option<Rejected> {
    let cut = stdout.cut_bytes > 0 && answer.contains(" cut …]\n");
    cut.then(|| Rejected {
        errors: format!(
            "the plan answer is {}, more than baton keeps of a planner's answer ({}): plan \
             fewer, larger tasks",
            baton_model::format_size(stdout.total_bytes),
            baton_model::format_size(crate::launch::PLAN_ANSWER_LIMIT as u64)
        ),
        problems: 1,
    })
}

/// What a planner is told when its answer will not do, in the same session where the engine
/// can continue one.
pub fn fix_message(rejected: &Rejected, round: u32, of: u32) -> String {
    format!(
        "baton could not take your plan (fix round {round} of {of}):\n\n{}\n\nAnswer again with \
         the whole corrected plan, as one JSON object.",
        rejected.errors
    )
}

/// What baton tells a planner beside its goal: the answer's shape, its limits, the tasks it
/// may build on and the repository's layout.
pub fn preamble(graph: &Graph, planner: TaskIndex, root: &Path) -> String {
    let task = graph.task(planner);
    let mut text = format!(
        "You are a planner in a run of baton, which runs tasks in parallel, each agent in its \
         own git worktree, and merges their work. Do not change any files yourself. Split the \
         goal you are given into tasks and answer with the plan: one JSON object, alone or in \
         one ```json block, of this shape:\n\n\
         {{\"task\": [\n  {{\"id\": \"schema\", \"prompt\": \"…\", \"scope\": [\"migrations/**\"]}},\n  \
         {{\"id\": \"api\", \"prompt\": \"…\", \"needs\": [\"schema\"], \"scope\": [\"src/api/**\"], \
         \"verify\": [\"cargo test -p api\"]}}\n]}}\n\n\
         Each task takes the fields of a task in a baton graph file. `id`: letters, digits, `-`, \
         `_`, `.` (it becomes `{id}/ID`). `prompt`: complete instructions for a coding agent \
         that sees only them and the repository (or `run`: a shell command). `needs`: ids of \
         the tasks that must finish first (their results are handed over). `scope`: globs of \
         the files the task may change; tasks whose scopes overlap never run at once, so give \
         disjoint scopes to work that can go in parallel. `verify`: shell commands that check \
         the task's work. `estimate`: `{{\"minutes\": …, \"usd\": …}}`, what you expect the task \
         to take and cost, shown to the person who decides whether the plan runs. Also \
         `engine`, `model`, `timeout`, `retries`, `fix_attempts`.\n",
        id = task.id
    );
    if let Some(limits) = describe_limits(graph, planner) {
        text.push_str(&format!("Limits: {limits}.\n"));
    }
    let others = buildable(graph, planner);
    if !others.is_empty() {
        text.push_str(&format!(
            "Tasks of the run a planned task may also need: {}.\n",
            others
        ));
    }
    let layout = layout(root);
    if !layout.is_empty() {
        text.push_str(&format!("The repository's top level:\n{layout}"));
    }
    text
}

/// The run's tasks a planned task may name in `needs`: those that do not wait for the planner.
fn buildable(graph: &Graph, planner: TaskIndex) -> String {
    let mut waits = vec![false; graph.len()];
    let mut stack = vec![planner];
    waits[planner as usize] = true;
    while let Some(t) = stack.pop() {
        for &d in graph.dependents(t) {
            if !std::mem::replace(&mut waits[d as usize], true) {
                stack.push(d);
            }
        }
    }
    let ids: Vec<&str> = graph
        .tasks()
        .iter()
        .enumerate()
        .filter(|(i, _)| !waits[*i])
        .map(|(_, t)| t.id.as_str())
        .collect();
    let mut shown = ids
        .iter()
        .take(NAMED_TASKS)
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > NAMED_TASKS {
        shown.push_str(&format!(" and {} more", ids.len() - NAMED_TASKS));
    }
    shown
}

/// The top level of the repository, a line per entry, a directory with its first entries.
fn layout(root: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(root) else {
        return String::new();
    };
    let mut names: Vec<(String, bool)> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), dir)
        })
        .filter(|(name, _)| !matches!(name.as_str(), ".git" | ".baton"))
        .collect();
    names.sort();
    let mut out = String::new();
    for (shown, (name, dir)) in names.iter().enumerate() {
        if shown == LAYOUT_ENTRIES {
            out.push_str(&format!("  … and {} more\n", names.len() - shown));
            break;
        }
        if !dir {
            out.push_str(&format!("  {name}\n"));
            continue;
        }
        let mut inside: Vec<String> = std::fs::read_dir(root.join(name))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| {
                        let slash = if e.file_type().is_ok_and(|t| t.is_dir()) {
                            "/"
                        } else {
                            ""
                        };
                        format!("{}{slash}", e.file_name().to_string_lossy())
                    })
                    .collect()
            })
            .unwrap_or_default();
        inside.sort();
        let more = inside.len().saturating_sub(DIR_ENTRIES);
        inside.truncate(DIR_ENTRIES);
        let mut line = format!("  {name}/: {}", inside.join(", "));
        if more > 0 {
            line.push_str(&format!(" (and {more} more)"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}
