//! A planner's answer made into tasks of the running graph.
//!
//! A planner (`expand = true`) answers with a graph fragment: a JSON object in the JSON graph
//! file's shape holding tasks only (`{"task": [ … ]}`; the run's `[run]` and `[defaults]` stay
//! the run's). [`Graph::expansion`] validates it as a graph file is validated, every problem
//! at once, and more: the planner's limits, ids under the planner's (`plan/api`), `needs` that
//! name siblings (as written) or tasks the graph holds already, but never a task that waits for
//! the planner (that would be a cycle once the planner's dependents wait for its subtasks).
//! [`Graph::extended`] then makes the grown graph: a new value, the old one untouched.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::diagnostic::{Diagnostic, LoadError};
use crate::from_json::{self, Dialect};
use crate::graph::{Graph, Planning, Task, TaskIndex};
use crate::tree::{Kind, Node};
use crate::validate;
use crate::walk;

/// The fields an answer may hold at its top.
const FRAGMENT_FIELDS: &[&str] = &["task", "tasks", "$schema"];
/// Task fields a plan may not set: what of baton's environment a task gets, where it may write
/// and what holds its processes are the run's to decide (its `[defaults]`), not a model's.
const RUN_DECIDES: &[&str] = &[
    "pass_env",
    "secret_env",
    "confine",
    "contain",
    "workspace",
    "for_each",
];

impl Graph {
    /// Validates `text`, the answer of planner `planner`, as tasks to add to this graph. The
    /// tasks come back with the run's defaults applied, ids under the planner's, and `needs` as
    /// indices into the grown graph (this graph's tasks, then the new ones in order). The
    /// error names the answer as `plan of PLANNER` and says everything wrong with it.
    pub fn expansion(&self, planner: TaskIndex, text: &str) -> Result<Vec<Task>, LoadError> {
        self.replacement(planner, text, &[])
    }

    /// A re-plan's [`expansion`](Graph::expansion): `dropped`, the planner's tasks that failed
    /// or had not started, are replaced. A new task written with the id of one it replaces is
    /// named after it (`api` again becomes `plan/api-2`); one of its tasks that stays (it
    /// succeeded, or runs) is named by its id as written (`db` for `plan/db`); a dropped one
    /// cannot be needed.
    pub fn replacement(
        &self,
        planner: TaskIndex,
        text: &str,
        dropped: &[TaskIndex],
    ) -> Result<Vec<Task>, LoadError> {
        let origin = self.task(planner);
        let label = PathBuf::from(format!("plan of {}", origin.id));
        let fail = |diags: Vec<Diagnostic>| LoadError::new(label.clone(), text.to_owned(), diags);
        let Some(planning) = origin.plan.as_deref().copied() else {
            return Err(fail(vec![Diagnostic::new(format!(
                "task `{}` is not a planner",
                origin.id
            ))]));
        };
        let root = from_json::parse(text, Dialect::Jsonc).map_err(fail)?;
        let mut diags = Vec::new();
        check_top(&root, &mut diags);
        let mut spec = walk::walk(&root, &mut diags);
        spec.defaults = self.defaults.clone();
        // The planned tasks work in worktrees unless the run says otherwise: a shell task
        // among them sees its needs' work, and nothing a model planned touches the checkout.
        if spec.defaults.workspace.is_none() {
            spec.defaults.workspace = Some(crate::Workspace::Worktree);
        }
        // Without an engine of the run's, the subtasks use their planner's.
        if spec.defaults.engine.is_none()
            && let crate::Action::Agent { engine, .. } = &origin.action
        {
            spec.defaults.engine = Some(crate::spec::At::new(walk::engine_static(engine), 0..0));
        }

        let n = self.len() as TaskIndex;
        let k = spec.tasks.len();
        if k == 0 && diags.is_empty() {
            diags.push(
                Diagnostic::new("the plan has no tasks")
                    .help("answer with `{\"task\": [ … ]}`, one object per task"),
            );
        }
        let at_tasks = |d: Diagnostic| match &spec.tasks_span {
            Some(span) => Diagnostic {
                span: Some(span.clone()),
                ..d
            },
            None => d,
        };
        if k > planning.max_subtasks as usize {
            diags.push(at_tasks(
                Diagnostic::new(format!(
                    "the plan has {k} tasks; `{}` may add at most {}",
                    origin.id, planning.max_subtasks
                ))
                .help("merge related work into fewer tasks (a task may change many files)"),
            ));
        }
        let room = self.room();
        if k > room {
            diags.push(at_tasks(
                Diagnostic::new(format!(
                    "the run would hold {} tasks; it may hold at most {} (`[run] max_tasks`)",
                    self.len() + k,
                    self.len() + room
                ))
                .help(format!("plan at most {room} tasks")),
            ));
        }

        // Ids: one segment each, written under the planner's; needs naming a sibling as
        // written are made to name it so too.
        // A new task written as one it replaces is renamed: `api-2`, `api-3`, ….
        let mut renamed: HashMap<String, String> = HashMap::new();
        for t in &spec.tasks {
            let Some(id) = &t.id else { continue };
            let taken = |local: &str| self.index_of(&format!("{}/{local}", origin.id));
            if taken(&id.value).is_some_and(|j| dropped.contains(&j)) {
                let mut n = 2;
                while taken(&format!("{}-{n}", id.value)).is_some() {
                    n += 1;
                }
                renamed.insert(id.value.clone(), format!("{}-{n}", id.value));
            }
        }
        let locals: HashMap<String, ()> = spec
            .tasks
            .iter()
            .filter_map(|t| t.id.as_ref().map(|id| (id.value.clone(), ())))
            .collect();
        let mut downstream = self.downstream(planner);
        // Its own tasks wait for it only to start after it: a new one may need one that stays.
        for j in self.planned_by(planner) {
            downstream[j as usize] = false;
        }
        let depth = origin.depth + 1;
        for t in &mut spec.tasks {
            if let Some(id) = &mut t.id {
                if id.value.contains('/') {
                    diags.push(
                        Diagnostic::at(
                            id.span.clone(),
                            format!("task id `{}` contains `/`", id.value),
                        )
                        .label("one name")
                        .help(format!(
                            "write the id without `/`: it becomes `{}/ID`",
                            origin.id
                        )),
                    );
                }
                let local = renamed.get(&id.value).unwrap_or(&id.value).clone();
                id.value = format!("{}/{local}", origin.id);
            }
            for need in &mut t.needs {
                let sibling = format!("{}/{}", origin.id, need.value);
                if locals.contains_key(&need.value) {
                    let local = renamed.get(&need.value).unwrap_or(&need.value).clone();
                    need.value = format!("{}/{local}", origin.id);
                } else if let Some(j) = self.index_of(&sibling) {
                    if dropped.contains(&j) {
                        diags.push(
                            Diagnostic::at(
                                need.span.clone(),
                                format!(
                                    "`{}` is being replaced: it failed or had not started",
                                    need.value
                                ),
                            )
                            .label("replaced")
                            .help("plan what it was to do among the new tasks, and need that one"),
                        );
                    }
                    need.value = sibling;
                } else if let Some(j) = self.index_of(&need.value)
                    && downstream[j as usize]
                {
                    diags.push(
                        Diagnostic::at(
                            need.span.clone(),
                            format!("`{}` waits for `{}`, whose plan this is", need.value, origin.id),
                        )
                        .label("would be a cycle")
                        .help(format!(
                            "a planned task may need its siblings and tasks that do not wait for `{}`",
                            origin.id
                        )),
                    );
                }
            }
            if let Some(expand) = t.more().expand.as_ref().filter(|e| e.value)
                && depth >= planning.max_depth
            {
                diags.push(
                    Diagnostic::at(
                        expand.span.clone(),
                        format!(
                            "planning may go {} level{} deep; this task would plan at level {}",
                            planning.max_depth,
                            if planning.max_depth == 1 { "" } else { "s" },
                            depth + 1
                        ),
                    )
                    .label("too deep")
                    .help("do the work in this task instead of planning it"),
                );
            }
        }

        // The combined index: this graph's ids, then the new ones. A new id that is taken is
        // a duplicate like any other.
        let mut index: HashMap<&str, TaskIndex> = HashMap::with_capacity(self.len() + k);
        for (i, task) in self.tasks.iter().enumerate() {
            index.insert(task.id.as_str(), i as TaskIndex);
        }
        for t in &spec.tasks {
            if let Some(id) = &t.id
                && let Some(&i) = index.get(id.value.as_str())
                && i < n
            {
                diags.push(
                    Diagnostic::at(
                        id.span.clone(),
                        format!("task `{}` exists already", id.value),
                    )
                    .label("taken")
                    .help("give the task another id"),
                );
            }
        }
        let own = validate::check_ids(&spec, &mut diags);
        for (id, &i) in &own {
            index.entry(id).or_insert(n + i);
        }
        let needs = validate::resolve_needs(&spec, &index, n, &mut diags);
        // Cycles can only be among the new tasks: the old ones need none of them.
        let local_needs: Vec<Vec<TaskIndex>> = needs
            .iter()
            .map(|list| list.iter().filter(|&&j| j >= n).map(|&j| j - n).collect())
            .collect();
        validate::check_cycles(&spec.tasks, &local_needs, &own, &mut diags);
        let mut actions = Vec::with_capacity(k);
        for t in &spec.tasks {
            let action = validate::action(&spec, t, &mut diags);
            actions.push(action);
            validate::check_planning(t, action, &mut diags);
            validate::check_candidates(t, action, &mut diags);
            validate::check_paths(t, text, &mut diags);
            // A template names a need as the task wrote it: a sibling's id, or a full one.
            let names: Vec<String> = t
                .needs
                .iter()
                .flat_map(|need| {
                    let full = need.value.clone();
                    let local = full
                        .strip_prefix(&format!("{}/", origin.id))
                        .map(str::to_owned);
                    std::iter::once(full).chain(local)
                })
                .collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            validate::check_templates_with(t, text, &index, &names, &mut diags);
        }
        if !diags.is_empty() {
            return Err(fail(diags));
        }

        let mut tasks = Vec::with_capacity(k);
        for ((t, mut needs), action) in spec.tasks.into_iter().zip(needs).zip(actions) {
            // A subtask that needs no sibling starts after its planner: so it is handed the
            // plan, and its start is recorded after the plan is.
            if !needs.iter().any(|&j| j >= n) && !needs.contains(&planner) {
                needs.insert(0, planner);
            }
            let mut task =
                validate::task(t, needs, action.expect("validated"), &spec.defaults, None);
            // baton's default, not the run's ask: without a repository it falls back.
            task.workspace_asked &= self.defaults.workspace.is_some();
            task.parent = Some(planner);
            task.depth = depth;
            // A model's code: never in the checkout itself, whatever the run's defaults say,
            // and confined (see `PlannedCommands`).
            task.planned = true;
            if task.workspace == crate::Workspace::Shared {
                task.workspace = crate::Workspace::Worktree;
            }
            if let Some(plan) = &mut task.plan {
                // The first planner's limit holds all the way down.
                plan.max_depth = plan.max_depth.min(planning.max_depth);
            }
            tasks.push(task);
        }
        Ok(tasks)
    }

    /// This graph with `tasks` (an [`expansion`](Graph::expansion) of `planner`) added, and
    /// everything that waited for the planner waiting for them too.
    pub fn extended(&self, planner: TaskIndex, tasks: Vec<Task>) -> Graph {
        let mut grown = self.clone();
        let first = grown.tasks.len() as TaskIndex;
        let added: Vec<TaskIndex> = (first..first + tasks.len() as TaskIndex).collect();
        for &d in self.dependents(planner) {
            grown.tasks[d as usize].needs.extend(&added);
        }
        grown.tasks.extend(tasks);
        grown.rebuild_derived();
        grown
    }

    /// This graph after a re-plan: `tasks` (a [`replacement`](Graph::replacement) by `planner`)
    /// added, and what waited for the planner (its own tasks aside) no longer waiting for
    /// `dropped`, the tasks they replace, but for them.
    pub fn replanned(&self, planner: TaskIndex, tasks: Vec<Task>, dropped: &[TaskIndex]) -> Graph {
        let mut grown = self.clone();
        let first = grown.tasks.len() as TaskIndex;
        let added: Vec<TaskIndex> = (first..first + tasks.len() as TaskIndex).collect();
        let own = self.planned_by(planner);
        for &d in dropped {
            grown.tasks[d as usize].replaced = true;
        }
        for &d in self.dependents(planner) {
            if own.contains(&d) {
                continue;
            }
            let needs = &mut grown.tasks[d as usize].needs;
            needs.retain(|n| !dropped.contains(n));
            needs.extend(&added);
        }
        grown.tasks.extend(tasks);
        grown.rebuild_derived();
        grown
    }

    /// The tasks added by `planner`, and by the planners among them, in graph order.
    pub fn planned_by(&self, planner: TaskIndex) -> Vec<TaskIndex> {
        let mut under = vec![false; self.len()];
        let mut out = Vec::new();
        for (i, task) in self.tasks.iter().enumerate() {
            if let Some(parent) = task.parent
                && (parent == planner || under[parent as usize])
            {
                under[i] = true;
                out.push(i as TaskIndex);
            }
        }
        out
    }

    /// Per task, whether it waits for `task`, directly or not.
    fn downstream(&self, task: TaskIndex) -> Vec<bool> {
        let mut seen = vec![false; self.len()];
        let mut stack = vec![task];
        while let Some(t) = stack.pop() {
            for &d in self.dependents(t) {
                if !seen[d as usize] {
                    seen[d as usize] = true;
                    stack.push(d);
                }
            }
        }
        seen
    }
}

/// An answer is an object of tasks; `[run]`, `[defaults]` and a name are the run's.
fn check_top(root: &Node, diags: &mut Vec<Diagnostic>) {
    let Kind::Table(entries) = &root.kind else {
        diags.push(
            Diagnostic::at(
                root.span.clone(),
                format!("the plan is {}, not an object", root.kind.type_name()),
            )
            .help("answer with `{\"task\": [ … ]}`, one object per task"),
        );
        return;
    };
    for e in entries {
        if matches!(e.key.as_str(), "task" | "tasks")
            && let Kind::Array(items) = &e.value.kind
        {
            for item in items {
                let Kind::Table(fields) = &item.kind else {
                    continue;
                };
                for field in fields.iter().filter(|f| f.key == "env") {
                    check_literal_env(&field.value, diags);
                }
                for field in fields
                    .iter()
                    .filter(|f| RUN_DECIDES.contains(&f.key.as_str()))
                {
                    diags.push(
                        Diagnostic::at(field.key_span.clone(), format!("a plan cannot set `{}`", field.key))
                            .label("the run's to decide")
                            .help("what a task gets of baton's environment, where it writes and what holds it are set by the run's [defaults]; remove the field"),
                    );
                }
            }
        }
        if FRAGMENT_FIELDS.contains(&e.key.as_str()) {
            continue;
        }
        let known = walk::TOP_FIELDS.contains(&e.key.as_str());
        diags.push(
            Diagnostic::at(
                e.key_span.clone(),
                if known {
                    format!("a plan holds tasks only, not `{}`", e.key)
                } else {
                    format!("unknown field `{}`", e.key)
                },
            )
            .label(if known { "the run's" } else { "unknown" })
            .help("the run's `[run]` and `[defaults]` stay the run's: answer with `{\"task\": [ … ]}`"),
        );
    }
}

/// A plan's `env` values are literals: `${VAR}` in a graph file reads baton's own environment
/// when the task starts, which would hand a model whatever baton was given (red-team finding
/// 2: `{"A": "${AWS_SECRET_ACCESS_KEY}"}`).
fn check_literal_env(env: &Node, diags: &mut Vec<Diagnostic>) {
    let Kind::Table(vars) = &env.kind else {
        return;
    };
    for var in vars {
        if let Kind::Str(value) = &var.value.kind
            && value.contains("${")
        {
            diags.push(
                Diagnostic::at(
                    var.value.span.clone(),
                    format!("a plan's `env` takes literal values, not `{value}`"),
                )
                .label("reads baton's environment")
                .help("write the value itself; what a task gets of baton's environment is the run's to give (`pass_env`, `secret_env` in its [defaults])"),
            );
        }
    }
}

/// The plan in an agent's final message: the whole message when it is a JSON object, else
/// its one fenced code block that holds one (` ```json ` or plain).
pub fn plan_text(answer: &str) -> Result<&str, String> {
    let trimmed = answer.trim();
    if trimmed.starts_with('{') {
        return Ok(trimmed);
    }
    let mut blocks = Vec::new();
    let mut rest = answer;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let body = &after[line_end + 1..];
        let Some(close) = body.find("```") else { break };
        let block = body[..close].trim();
        if block.starts_with('{') {
            blocks.push(block);
        }
        rest = &body[close + 3..];
    }
    match blocks.as_slice() {
        [one] => Ok(one),
        [] => Err(
            "the answer holds no plan: answer with a JSON object `{\"task\": [ … ]}`, alone or in one ```json block"
                .to_owned(),
        ),
        many => Err(format!(
            "the answer holds {} JSON blocks: give the plan as one",
            many.len()
        )),
    }
}

/// The plan in a planner's output (as [`plan_text`] took it, JSON with comments and trailing
/// commas allowed) as a JSON value, for writing it as a graph file of its own (`baton do`).
pub fn plan_value(plan: &str) -> Option<serde_json::Value> {
    from_json::parse(plan, Dialect::Jsonc)
        .ok()
        .map(|root| root.to_json())
}

/// The limits a planner works within, for its preamble.
pub fn describe_limits(graph: &Graph, planner: TaskIndex) -> Option<String> {
    let task = graph.task(planner);
    let Planning {
        max_subtasks,
        max_depth,
        ..
    } = task.plan.as_deref().copied()?;
    let room = graph.room();
    let deeper = task.depth + 1 < max_depth;
    Some(format!(
        "at most {} tasks{}; {}",
        max_subtasks.min(room.try_into().unwrap_or(u32::MAX)),
        if room < max_subtasks as usize {
            " (the run's limit)"
        } else {
            ""
        },
        if deeper {
            "a task may itself plan (`\"expand\": true`) if its work is too big for one agent"
        } else {
            "none of them may plan in turn (no `expand`)"
        }
    ))
}
