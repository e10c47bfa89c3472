//! Spec → frozen [`Graph`]: ids, dependencies, cycles, actions, scopes and templates are
//! checked together, and every problem is reported, not just the first.

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_model::TaskId;

use crate::cycle::{cycle_through, cyclic_components};
use crate::diagnostic::Diagnostic;
use crate::graph::{Action, ForEach, Graph, Planning, RunSettings, Task, TaskIndex, Workspace};
use crate::spec::{Defaults, ForEachSpec, Spec, TaskMore, TaskSpec};
use crate::suggest::closest;
use crate::tree::Span;

mod paths;
mod templates;
pub(crate) use paths::check_paths;
use paths::{check_include, check_label};
use templates::check_templates;
pub(crate) use templates::{char_span, check_templates_with};

const DEFAULT_CONCURRENCY: u32 = 4;
const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
const DEFAULT_HANDOFF_LIMIT: u64 = 8 * 1024;
/// The smallest log cap: smaller ones are raised to it.
const MIN_LOG_LIMIT: u64 = 4 * 1024;
/// Looking for the closest id is a scan of all ids; past this many unknown ones, stop offering.
const MAX_SUGGESTIONS: usize = 50;

pub(crate) fn validate(
    spec: Spec,
    source: &str,
    path: &Path,
    mut diags: Vec<Diagnostic>,
) -> Result<Graph, Vec<Diagnostic>> {
    let tasks = &spec.tasks;
    // With other errors already reported, an empty list is most likely their consequence.
    if tasks.is_empty() && diags.is_empty() {
        let d = match &spec.tasks_span {
            Some(span) => Diagnostic::at(span.clone(), "the graph has no tasks"),
            None => Diagnostic::new("the graph has no tasks"),
        };
        diags.push(d.help("add a `[[task]]` table with an `id` and a `run` command or a `prompt`"));
    }
    if tasks.len() > TaskIndex::MAX as usize {
        diags.push(Diagnostic::new("the graph has too many tasks"));
        return Err(diags);
    }

    let index = check_ids(&spec, &mut diags);
    let needs = resolve_needs(&spec, &index, 0, &mut diags);
    check_cycles(tasks, &needs, &index, &mut diags);

    for entry in spec.defaults.worktree_include.iter().flatten() {
        check_include(source, entry, &mut diags);
    }
    for label in spec.defaults.runs_on.iter().flatten() {
        check_label(label, &mut diags);
    }
    let mut actions = Vec::with_capacity(tasks.len());
    for task in tasks {
        if let Some(id) = task.id.as_ref().filter(|id| id.value.contains('/')) {
            diags.push(
                Diagnostic::at(
                    id.span.clone(),
                    format!("task id `{}` contains `/`", id.value),
                )
                .label("`/` is for planned tasks")
                .help(
                    "`/` names the tasks a planner adds under it (`plan/api`); use `-`, `_` or `.`",
                ),
            );
        }
        actions.push(action(&spec, task, &mut diags));
        check_planning(task, actions.last().copied().flatten(), &mut diags);
        check_candidates(task, actions.last().copied().flatten(), &mut diags);
        check_paths(task, source, &mut diags);
        check_templates(task, source, &index, &mut diags);
    }

    let froms = for_each_sources(&spec, &index, &needs, &mut diags);
    if !diags.is_empty() {
        return Err(diags);
    }
    // The graph is built next to the spec: first free what only the checks needed.
    drop(index);
    let reserved: Vec<(TaskIndex, Span)> = spec
        .tasks
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let id = t.id.as_ref()?;
            RESERVED_BRANCHES
                .contains(&id.value.as_str())
                .then(|| (i as TaskIndex, id.span.clone()))
        })
        .collect();
    let mut spec = spec;
    for task in &mut spec.tasks {
        task.needs = Vec::new();
    }
    let graph = assemble(spec, path, needs, actions, froms);
    check_branch_names(&graph, reserved, &mut diags);
    if diags.is_empty() {
        Ok(graph)
    } else {
        Err(diags)
    }
}

/// Names of a run's own branches beside its tasks' (`baton/RUN/NAME`): the merged result's,
/// and the base a run with a `remote` publishes for workers elsewhere.
const RESERVED_BRANCHES: [&str; 2] = ["result", "base"];

/// A task working in a worktree gets the branch `baton/RUN/ID`: one named `result` would be
/// the run's merged result, and one named `base` (in a run with a `remote`) would replace the
/// base workers elsewhere start from. Found here, at the id's line, rather than when the run
/// starts. `reserved`: the tasks with those ids, and where each id is.
fn check_branch_names(
    graph: &Graph,
    reserved: Vec<(TaskIndex, Span)>,
    diags: &mut Vec<Diagnostic>,
) {
    for (task, span) in reserved {
        let task = graph.task(task);
        let clashes = task.workspace == Workspace::Worktree
            && (task.id.as_str() == "result" || graph.run_settings().remote.is_some());
        if clashes {
            let what = match task.id.as_str() {
                "result" => "the run's merged result",
                _ => "the run's base, which workers elsewhere fetch from `[run] remote`",
            };
            diags.push(
                Diagnostic::at(
                    span,
                    format!(
                        "task `{}` works in a worktree, whose branch `baton/RUN/{}` is {what}",
                        task.id, task.id
                    ),
                )
                .label("a name the run's own branches use")
                .help("rename the task"),
            );
        }
    }
}

/// Per task, the predecessor `for_each = { from = "TASK" }` takes its items from: one of its
/// `needs`. A task cannot both plan and fan out.
fn for_each_sources(
    spec: &Spec,
    index: &HashMap<&str, TaskIndex>,
    needs: &[Vec<TaskIndex>],
    diags: &mut Vec<Diagnostic>,
) -> Vec<Option<TaskIndex>> {
    let mut froms = vec![None; spec.tasks.len()];
    for (i, t) in spec.tasks.iter().enumerate() {
        let Some(for_each) = &t.more().for_each else {
            continue;
        };
        if t.more().expand.as_ref().is_some_and(|e| e.value) {
            diags.push(
                Diagnostic::at(
                    for_each.span.clone(),
                    format!("{} both plans and fans out", task_name(t)),
                )
                .label("for_each")
                .help("a planner's answer lists its tasks; remove `for_each` or `expand`"),
            );
        }
        if let ForEachSpec::From(from) = &for_each.value {
            match index.get(from.value.as_str()) {
                Some(&j) if needs[i].contains(&j) => froms[i] = Some(j),
                _ => diags.push(
                    Diagnostic::at(
                        from.span.clone(),
                        format!("`{}` is not among {}'s needs", from.value, task_name(t)),
                    )
                    .label("not a need")
                    .help(format!(
                        "add `{}` to `needs`: the items are what it wrote to $BATON_OUTPUT",
                        from.value
                    )),
                ),
            }
        }
    }
    froms
}

fn task_name(t: &TaskSpec) -> String {
    t.id.as_ref().map_or_else(
        || "this task".to_owned(),
        |id| format!("task `{}`", id.value),
    )
}

/// Where to point for a problem with a task as a whole: its id, else its table.
fn task_span(t: &TaskSpec) -> Span {
    t.id.as_ref()
        .map_or_else(|| t.span.clone(), |id| id.span.clone())
}

/// Checks ids (present, valid, unique) and returns the index of each id's first task.
pub(crate) fn check_ids<'s>(
    spec: &'s Spec,
    diags: &mut Vec<Diagnostic>,
) -> HashMap<&'s str, TaskIndex> {
    let mut index: HashMap<&str, TaskIndex> = HashMap::with_capacity(spec.tasks.len());
    for (i, task) in spec.tasks.iter().enumerate() {
        let Some(id) = &task.id else {
            diags.push(
                Diagnostic::at(task.span.clone(), "task has no `id`")
                    .label("this task")
                    .help("give every task a unique `id`, like `id = \"build\"`"),
            );
            continue;
        };
        if let Err(e) = TaskId::new(id.value.as_str()) {
            diags.push(
                Diagnostic::at(
                    id.span.clone(),
                    format!("invalid task id `{}`: {e}", id.value),
                )
                .label("invalid id")
                .help(format!(
                    "ids become file names and git branch names: {}",
                    baton_model::TASK_ID_RULE
                )),
            );
        }
        match index.entry(id.value.as_str()) {
            MapEntry::Occupied(first) => {
                let first_span = spec.tasks[*first.get() as usize]
                    .id
                    .as_ref()
                    .map_or(0..0, |f| f.span.clone());
                let mut help = "task ids must be unique; rename one of them".to_owned();
                if spec.legacy {
                    help.push_str(" (ids from legacy files are rewritten to valid task ids, so two may have become the same)");
                }
                diags.push(
                    Diagnostic::at(id.span.clone(), format!("duplicate task id `{}`", id.value))
                        .label("defined again here")
                        .related(first_span, "first defined here")
                        .help(help),
                );
            }
            MapEntry::Vacant(slot) => {
                slot.insert(i as TaskIndex);
            }
        }
    }
    index
}

/// For each task, the indices of its needs in the order written, without unknown ids,
/// self-references or repeats.
/// `index` may hold tasks before the spec's (a running graph's, for a planner's answer): the
/// spec's `i`th task is then `offset + i` in it.
pub(crate) fn resolve_needs(
    spec: &Spec,
    index: &HashMap<&str, TaskIndex>,
    offset: TaskIndex,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Vec<TaskIndex>> {
    let mut suggestions_left = MAX_SUGGESTIONS;
    let mut sorted_ids: Option<Vec<&str>> = None;
    let mut all = Vec::with_capacity(spec.tasks.len());
    // `needed_by[j] == i`: task i already needs j. Searching `resolved` instead would be
    // quadratic in a task that needs thousands of others.
    let mut needed_by = vec![TaskIndex::MAX; offset as usize + spec.tasks.len()];
    for (i, task) in spec.tasks.iter().enumerate() {
        let i = offset as usize + i;
        let mut resolved: Vec<TaskIndex> = Vec::with_capacity(task.needs.len());
        for need in &task.needs {
            match index.get(need.value.as_str()) {
                Some(&j) if j as usize == i => diags.push(
                    Diagnostic::at(
                        need.span.clone(),
                        format!("{} needs itself", task_name(task)),
                    )
                    .label("self-dependency")
                    .help("remove it from `needs`"),
                ),
                Some(&j) => {
                    // Written twice is harmless; the graph keeps one edge.
                    if needed_by[j as usize] != i as TaskIndex {
                        needed_by[j as usize] = i as TaskIndex;
                        resolved.push(j);
                    }
                }
                None => {
                    let mut d = Diagnostic::at(
                        need.span.clone(),
                        format!("unknown dependency `{}`", need.value),
                    )
                    .label("no task has this id");
                    if suggestions_left > 0 {
                        suggestions_left -= 1;
                        let ids = sorted_ids.get_or_insert_with(|| {
                            let mut ids: Vec<&str> = index.keys().copied().collect();
                            ids.sort_unstable();
                            ids
                        });
                        if let Some(close) = closest(&need.value, ids.iter().copied()) {
                            d.help = Some(format!("did you mean `{close}`?"));
                        }
                    }
                    if d.help.is_none() {
                        d.help = Some("`needs` lists ids of other tasks in this file".into());
                    }
                    diags.push(d);
                }
            }
        }
        all.push(resolved);
    }
    all
}

pub(crate) fn check_cycles(
    tasks: &[TaskSpec],
    needs: &[Vec<TaskIndex>],
    index: &HashMap<&str, TaskIndex>,
    diags: &mut Vec<Diagnostic>,
) {
    for component in cyclic_components(needs) {
        let cycle = cycle_through(needs, &component);
        let id = |i: u32| {
            tasks[i as usize]
                .id
                .as_ref()
                .map_or("?", |id| id.value.as_str())
        };
        let mut path: Vec<&str> = cycle.iter().map(|&i| id(i)).collect();
        path.push(id(cycle[0]));
        // The spans of the `needs` entries along the cycle: `cycle[k]` needs `cycle[k + 1]`.
        let edge_span = |from: u32, to: u32| {
            let t = &tasks[from as usize];
            t.needs
                .iter()
                .find(|n| index.get(n.value.as_str()) == Some(&to))
                .map_or_else(|| t.span.clone(), |n| n.span.clone())
        };
        let last = *cycle.last().expect("a cycle has a node");
        let mut d = Diagnostic::at(
            edge_span(last, cycle[0]),
            format!("dependency cycle: {}", path.join(" -> ")),
        )
        .label("this closes the cycle")
        .help("`a -> b` means a needs b; remove one of these `needs` entries to break the cycle");
        for pair in cycle.windows(2) {
            d = d.related(
                edge_span(pair[0], pair[1]),
                format!("`{}` needs `{}`", id(pair[0]), id(pair[1])),
            );
        }
        diags.push(d);
    }
}

/// What a task does, made into an [`Action`] by [`assemble`] with the task's own strings.
#[derive(Clone, Copy)]
pub(crate) enum ActionKind {
    Shell,
    Agent { engine: &'static str },
    Noop,
}

pub(crate) fn action(spec: &Spec, t: &TaskSpec, diags: &mut Vec<Diagnostic>) -> Option<ActionKind> {
    let kind = action_kind(spec, t, diags)?;
    if !matches!(kind, ActionKind::Agent { .. })
        && let Some(span) = &t.more().agent.first_span
    {
        // `[defaults]` may set agent fields for the agent tasks among others; a shell task
        // that sets one itself was probably meant to be an agent task.
        diags.push(
            Diagnostic::at(
                span.clone(),
                format!(
                    "{} is not an agent task; this field is for agents",
                    task_name(t)
                ),
            )
            .label("agent setting")
            .help("give the task a `prompt` for an agent engine, or remove the field"),
        );
    }
    Some(kind)
}

fn action_kind(spec: &Spec, t: &TaskSpec, diags: &mut Vec<Diagnostic>) -> Option<ActionKind> {
    let default_engine = spec.defaults.engine.as_ref().map(|e| e.value);
    let explicit = t.engine.as_ref().map(|e| e.value);
    let engine_span = t.engine.as_ref().map(|e| e.span.clone());
    match (&t.run, &t.prompt) {
        (Some(_), Some(prompt)) => {
            diags.push(
                Diagnostic::at(prompt.span.clone(), format!("{} has both `run` and `prompt`", task_name(t)))
                    .label("second action")
                    .help("a task runs a shell command (`run`) or prompts an agent (`prompt`), not both; split it into two tasks"),
            );
            None
        }
        (Some(run), None) => match explicit {
            None | Some("shell") => Some(ActionKind::Shell),
            Some(engine) => {
                let help = if engine == "noop" {
                    "`noop` tasks take neither `run` nor `prompt`; remove `engine` to run the command".to_owned()
                } else {
                    format!(
                        "`{engine}` is an agent: write the instructions as `prompt`, or remove `engine` to run `run` with the shell"
                    )
                };
                diags.push(
                    Diagnostic::at(
                        engine_span.unwrap_or_else(|| run.span.clone()),
                        format!("engine `{engine}` does not take `run`"),
                    )
                    .label("engine set here")
                    .help(help),
                );
                None
            }
        },
        (None, Some(prompt)) => {
            let engine = explicit.or(default_engine).unwrap_or("claude");
            if engine == "shell" || engine == "noop" {
                let span = engine_span.unwrap_or_else(|| prompt.span.clone());
                let help = if explicit.is_some() {
                    "set an agent engine (claude, codex, gemini, aider, http), or write a shell command as `run`"
                } else {
                    "[defaults] sets this engine; set `engine` on the task to an agent, or write a shell command as `run`"
                };
                diags.push(
                    Diagnostic::at(span, format!("engine `{engine}` does not take a `prompt`"))
                        .label("prompt for a non-agent engine")
                        .help(help),
                );
                return None;
            }
            Some(ActionKind::Agent { engine })
        }
        (None, None) => {
            if explicit.or(default_engine) == Some("noop") {
                return Some(ActionKind::Noop);
            }
            diags.push(
                Diagnostic::at(
                    task_span(t),
                    format!("{} has neither `run` nor `prompt`", task_name(t)),
                )
                .label("nothing to do")
                .help("add `run = \"…\"` for a shell command or `prompt = \"…\"` for an agent"),
            );
            None
        }
    }
}

fn assemble(
    mut spec: Spec,
    path: &Path,
    mut needs: Vec<Vec<TaskIndex>>,
    mut actions: Vec<Option<ActionKind>>,
    mut froms: Vec<Option<TaskIndex>>,
) -> Graph {
    // Taken from the back, with the spec's list shrunk as it empties, so that the spec's tasks
    // and the graph's are never both whole: for 100,000 tasks, that is 20 MB less.
    let mut tasks: Vec<Task> = Vec::with_capacity(spec.tasks.len());
    while let Some(t) = spec.tasks.pop() {
        let needs = needs.pop().expect("one per task");
        let action = actions.pop().flatten().expect("validated");
        let from = froms.pop().flatten();
        tasks.push(task(t, needs, action, &spec.defaults, from));
        if spec.tasks.len().is_multiple_of(4096) {
            spec.tasks.shrink_to_fit();
        }
    }
    tasks.reverse();

    // A static `for_each` list is sized by the file itself: its items count as the file's
    // tasks, and the default leaves room for planners beyond them.
    let listed: usize = tasks
        .iter()
        .map(|t| match t.for_each.as_deref() {
            Some(crate::ForEach::List(items)) => items.len(),
            _ => 0,
        })
        .sum();
    let max_tasks = spec.run.max_tasks.unwrap_or_else(|| {
        u32::try_from(tasks.len() + listed)
            .unwrap_or(u32::MAX)
            .saturating_add(crate::DEFAULT_PLANNED_TASKS)
    });
    let name = spec
        .name
        .filter(|n| !n.trim().is_empty())
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "graph".to_owned());
    let mut graph = Graph {
        name,
        source: path.to_path_buf(),
        run: RunSettings {
            concurrency: spec.run.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
            on_failure: spec.run.on_failure.unwrap_or_default(),
            base: spec.run.base,
            remote: spec.run.remote.filter(|r| !r.trim().is_empty()),
            verify: spec.run.verify,
            budget: spec.run.budget,
            max_tasks,
            max_tasks_set: spec.run.max_tasks.is_some(),
            hold_plans: false,
            planned_commands: spec.run.planned_commands.unwrap_or_default(),
            origin: None,
        },
        tasks,
        dependents: Default::default(),
        conflicts: Default::default(),
        by_id: Vec::new(),
        notes: spec.notes,
        defaults: spec.defaults.stored(),
    };
    graph.rebuild_derived();
    graph
}

/// The most candidates one attempt runs at once (`best_of`, `candidates`).
pub(crate) const MAX_CANDIDATES: u32 = 8;

/// `best_of` and `candidates`: on an agent task that is no planner, one of the two, 2 to
/// [`MAX_CANDIDATES`] of them, and no `fallback` of the task's own (candidates do not fall
/// back: each is one engine's try).
pub(crate) fn check_candidates(
    t: &TaskSpec,
    action: Option<ActionKind>,
    diags: &mut Vec<Diagnostic>,
) {
    let more = t.more();
    let (field, span, n) = match (&more.best_of, &more.candidates) {
        (None, None) => return,
        (Some(best), Some(list)) => {
            diags.push(
                Diagnostic::at(list.span.clone(), "give `best_of` or `candidates`, not both")
                    .related(best.span.clone(), "`best_of` here")
                    .help("`best_of = N` runs the task's own engine N times; `candidates` names each engine"),
            );
            return;
        }
        (Some(best), None) => ("best_of", best.span.clone(), best.value),
        (None, Some(list)) => ("candidates", list.span.clone(), list.value.len() as u32),
    };
    let problem = if matches!(action, Some(ActionKind::Shell | ActionKind::Noop)) {
        Some((
            format!(
                "{} is not an agent task: `{field}` runs an agent's prompt several times",
                task_name(t)
            ),
            "give it a `prompt` for an agent engine, or remove the field".to_owned(),
        ))
    } else if more.expand.as_ref().is_some_and(|e| e.value) {
        Some((
            format!(
                "{} is a planner: its plan is one answer, not the best of several",
                task_name(t)
            ),
            format!("remove `{field}`"),
        ))
    } else if !(2..=MAX_CANDIDATES).contains(&n) {
        Some((
            format!("`{field}` asks for {n} candidates; from 2 to {MAX_CANDIDATES} run at once"),
            "give 2 or more, at most 8".to_owned(),
        ))
    } else if more.agent.fallback.is_some() {
        Some((
            format!(
                "{} has both `{field}` and `fallback`: each candidate is one engine's try",
                task_name(t)
            ),
            "list the engines you want as `candidates`, or remove `fallback`".to_owned(),
        ))
    } else {
        None
    };
    if let Some((message, help)) = problem {
        diags.push(Diagnostic::at(span, message).label(field).help(help));
    }
}

/// `expand` only on agent tasks; `max_subtasks` and `max_depth` only with it.
pub(crate) fn check_planning(
    t: &TaskSpec,
    action: Option<ActionKind>,
    diags: &mut Vec<Diagnostic>,
) {
    let more = t.more();
    let planner = more.expand.as_ref().is_some_and(|e| e.value);
    if let Some(expand) = more.expand.as_ref().filter(|e| e.value)
        && matches!(action, Some(ActionKind::Shell | ActionKind::Noop))
    {
        diags.push(
            Diagnostic::at(
                expand.span.clone(),
                format!(
                    "{} is not an agent task; only an agent can plan",
                    task_name(t)
                ),
            )
            .label("planner")
            .help("give the task a `prompt` for an agent engine, or remove `expand`"),
        );
    }
    if let Some(reviewer) = more
        .reviewer
        .as_ref()
        .filter(|_| more.acceptance.is_empty())
    {
        diags.push(
            Diagnostic::at(
                reviewer.span.clone(),
                "`reviewer` judges `acceptance` criteria, and the task has none",
            )
            .label("no criteria")
            .help("add `acceptance = [\"…\"]`, or remove `reviewer`"),
        );
    }
    if let Some(engine) = more
        .reviewer
        .as_ref()
        .and_then(|r| r.value.engine.as_deref())
        && matches!(engine, "shell" | "noop")
    {
        diags.push(
            Diagnostic::at(
                more.reviewer.as_ref().map_or(0..0, |r| r.span.clone()),
                format!("a reviewer is an agent, not `{engine}`"),
            )
            .label("not an agent")
            .help(
                "name an agent engine (claude, codex, gemini, aider, http, or one of baton.toml)",
            ),
        );
    }
    if let Some(on_failure) = &more.on_failure {
        if on_failure.value != "replan" {
            diags.push(
                Diagnostic::at(on_failure.span.clone(), format!("a task's `on_failure` is `\"replan\"`, not `{}`", on_failure.value))
                    .label("unknown")
                    .help("what a failure does to the rest of the run is `[run] on_failure`; a planner's `on_failure = \"replan\"` asks it again"),
            );
        } else if !planner {
            diags.push(
                Diagnostic::at(
                    on_failure.span.clone(),
                    "`on_failure = \"replan\"` is for planners",
                )
                .label("not a planner")
                .help("set `expand = true`, or remove `on_failure`"),
            );
        }
    }
    if let Some(max) = more
        .max_replans
        .as_ref()
        .filter(|_| more.on_failure.is_none())
    {
        diags.push(
            Diagnostic::at(
                max.span.clone(),
                "`max_replans` needs `on_failure = \"replan\"`",
            )
            .label("no re-plans")
            .help("add `on_failure = \"replan\"`, or remove `max_replans`"),
        );
    }
    for (field, value) in [
        ("max_subtasks", &more.max_subtasks),
        ("max_depth", &more.max_depth),
    ] {
        if let Some(value) = value.as_ref().filter(|_| !planner) {
            diags.push(
                Diagnostic::at(value.span.clone(), format!("`{field}` is for planners"))
                    .label("not a planner")
                    .help("set `expand = true` to make the task a planner, or remove the field"),
            );
        }
    }
}

pub(crate) fn task(
    t: TaskSpec,
    needs: Vec<TaskIndex>,
    action: ActionKind,
    d: &Defaults,
    from: Option<TaskIndex>,
) -> Task {
    let action = match action {
        ActionKind::Shell => Action::Shell {
            run: t.run.expect("validated").value,
        },
        ActionKind::Agent { engine } => Action::Agent {
            engine: engine.to_owned(),
            prompt: t.prompt.expect("validated").value,
            settings: Box::new(
                t.more
                    .as_ref()
                    .map_or_else(Default::default, |m| m.agent.clone())
                    .or(&d.agent),
            ),
        },
        ActionKind::Noop => Action::Noop,
    };
    let more = t.more.map_or_else(TaskMore::default, |more| *more);
    let candidates = match (&action, more.best_of, more.candidates) {
        (_, _, Some(list)) => list.value,
        (
            Action::Agent {
                engine, settings, ..
            },
            Some(n),
            None,
        ) => {
            let own = crate::graph::EngineChoice {
                engine: engine.clone(),
                model: settings.model.clone(),
            };
            vec![own; n.value as usize]
        }
        _ => Vec::new(),
    };
    let workspace_asked = more.workspace.or(d.workspace).is_some();
    let workspace = more.workspace.or(d.workspace).unwrap_or(match action {
        Action::Agent { .. } => Workspace::Worktree,
        Action::Shell { .. } => Workspace::Shared,
        Action::Noop => Workspace::None,
    });
    Task {
        id: TaskId::new(t.id.expect("validated").value).expect("validated"),
        needs,
        timeout: more.timeout.or(d.timeout),
        retries: more.retries.or(d.retries).unwrap_or(0),
        backoff: more.backoff.or(d.backoff).unwrap_or(DEFAULT_BACKOFF),
        scope: more.scope.into_iter().map(|s| s.value).collect(),
        // The defaults' under the task's own: a task's value for a name wins.
        env: d
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(more.env)
            .collect(),
        cwd: more.cwd.map(|c| PathBuf::from(c.value)),
        handoff_limit: more
            .handoff_limit
            .or(d.handoff_limit)
            .unwrap_or(DEFAULT_HANDOFF_LIMIT),
        // A few KiB at least: a start and an end worth reading.
        log_limit: more
            .log_limit
            .or(d.log_limit)
            .map_or(crate::DEFAULT_LOG_LIMIT, |limit| limit.max(MIN_LOG_LIMIT)),
        verify: more.verify,
        approval: more.approval.unwrap_or(false),
        workspace,
        workspace_asked,
        // The task's names add to the defaults'.
        pass_env: d.pass_env.iter().cloned().chain(more.pass_env).collect(),
        secret_env: d
            .secret_env
            .iter()
            .cloned()
            .chain(more.secret_env)
            .collect(),
        scope_policy: more.scope_policy.or(d.scope_policy).unwrap_or_default(),
        fix_attempts: more.fix_attempts.or(d.fix_attempts).unwrap_or(0),
        setup: more
            .setup
            .or_else(|| d.setup.clone())
            .unwrap_or_default()
            .into(),
        shell: more
            .shell
            .or_else(|| d.shell.clone())
            .unwrap_or_default()
            .into(),
        worktree_include: more
            .worktree_include
            .or_else(|| d.worktree_include.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.value)
            .collect(),
        confine: more.confine.or(d.confine),
        contain: more.contain.or(d.contain),
        runs_on: more
            .runs_on
            .or_else(|| d.runs_on.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.value)
            .collect(),
        plan: more.expand.filter(|e| e.value).map(|_| {
            Box::new(Planning {
                max_subtasks: more
                    .max_subtasks
                    .map_or(crate::DEFAULT_MAX_SUBTASKS, |n| n.value),
                max_depth: more.max_depth.map_or(crate::DEFAULT_MAX_DEPTH, |n| n.value),
                replans: match &more.on_failure {
                    Some(_) => more
                        .max_replans
                        .map_or(crate::DEFAULT_MAX_REPLANS, |n| n.value),
                    None => 0,
                },
            })
        }),
        parent: None,
        planned: false,
        depth: 0,
        for_each: more.for_each.map(|f| {
            Box::new(match f.value {
                ForEachSpec::List(items) => ForEach::List(items),
                ForEachSpec::Glob(glob) => ForEach::Glob(glob),
                ForEachSpec::From(_) => ForEach::From(from.expect("resolved in validation")),
            })
        }),
        item: None,
        acceptance: more.acceptance.into(),
        reviewer: more.reviewer.map(|r| Box::new(r.value)),
        replaced: false,
        estimate: more.estimate.map(Box::new),
        candidates: candidates.into(),
        action,
    }
}
