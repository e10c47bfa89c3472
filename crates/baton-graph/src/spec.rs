//! What a graph file says, field by field, before validation: literals are parsed and their
//! problems reported, but nothing is cross-checked yet. Both the native walker and the legacy
//! converters produce this, so one validator serves all formats.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_model::OnFailure;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::graph::{AgentSettings, Budget, Confine, Contain, RetryOn, ScopePolicy, Workspace};
use crate::tree::Span;

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct At<T> {
    pub value: T,
    pub span: Span,
}

impl<T> At<T> {
    pub(crate) fn new(value: T, span: Span) -> Self {
        Self { value, span }
    }
}

/// Stored (with a run's `[defaults]`, for the tasks its planners add) as the value alone: a
/// span means something only in the file it was read from.
impl<T: Serialize> Serialize for At<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for At<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(|value| At::new(value, 0..0))
    }
}

/// An engine's name, stored as a string and read back as the `&'static str` the walker would
/// have made of it.
mod engine_name {
    use super::*;

    pub(super) fn serialize<S: Serializer>(
        engine: &Option<At<&'static str>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        engine.as_ref().map(|e| e.value).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<At<&'static str>>, D::Error> {
        let name: Option<String> = Option::deserialize(d)?;
        Ok(name.map(|name| At::new(crate::walk::engine_static(&name), 0..0)))
    }
}

#[derive(Debug, Default)]
pub(crate) struct Spec {
    pub name: Option<String>,
    pub defaults: Defaults,
    pub run: RunSpec,
    pub tasks: Vec<TaskSpec>,
    /// Where the list of tasks is, for "the graph has no tasks" (`None`: not written at all).
    pub tasks_span: Option<Span>,
    pub notes: Vec<String>,
    /// Converted from a legacy format (whose ids may have been rewritten).
    pub legacy: bool,
}

/// Kept with the graph (see [`crate::Graph`]): the tasks a planner adds get the run's defaults.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Defaults {
    /// One of [`crate::walk::ENGINES`].
    #[serde(with = "engine_name", skip_serializing_if = "Option::is_none")]
    pub engine: Option<At<&'static str>>,
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub backoff: Option<Duration>,
    pub workspace: Option<Workspace>,
    pub handoff_limit: Option<u64>,
    pub log_limit: Option<u64>,
    /// Every task's `env`, under its own (a task's value for a name wins).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    pub pass_env: Vec<String>,
    pub secret_env: Vec<String>,
    pub agent: AgentSpec,
    pub scope_policy: Option<ScopePolicy>,
    pub fix_attempts: Option<u32>,
    pub setup: Option<Vec<String>>,
    /// What runs the task's shell commands (`["bash", "-eo", "pipefail"]`).
    pub shell: Option<Vec<String>>,
    pub worktree_include: Option<Vec<At<String>>>,
    pub confine: Option<Confine>,
    pub contain: Option<Contain>,
    pub runs_on: Option<Vec<At<String>>>,
}

impl Defaults {
    /// As the graph keeps them: without the file's spans, as they read back from storage.
    pub(crate) fn stored(mut self) -> Self {
        if let Some(engine) = &mut self.engine {
            engine.span = 0..0;
        }
        for entry in self
            .worktree_include
            .iter_mut()
            .chain(self.runs_on.iter_mut())
            .flatten()
        {
            entry.span = 0..0;
        }
        self.agent.first_span = None;
        self
    }
}

/// The agent fields, as written in `[defaults]` or a task.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct AgentSpec {
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub allowed_tools: Option<Vec<String>>,
    pub permission_mode: Option<String>,
    pub sandbox: Option<String>,
    pub args: Option<Vec<String>>,
    pub idle_timeout: Option<Duration>,
    pub retry_on: Option<RetryOn>,
    pub budget: Option<Budget>,
    pub fallback: Option<Vec<crate::graph::EngineChoice>>,
    pub fallback_on: Option<RetryOn>,
    /// Where the first of them was written in a task: agent fields on a shell task are a
    /// mistake worth naming.
    #[serde(skip)]
    pub first_span: Option<Span>,
}

impl AgentSpec {
    /// `self` over `defaults`, field by field.
    pub(crate) fn or(self, defaults: &AgentSpec) -> AgentSettings {
        let d = defaults.clone();
        AgentSettings {
            model: self.model.or(d.model),
            max_turns: self.max_turns.or(d.max_turns),
            allowed_tools: self.allowed_tools.or(d.allowed_tools).unwrap_or_default(),
            permission_mode: self.permission_mode.or(d.permission_mode),
            sandbox: self.sandbox.or(d.sandbox),
            args: self.args.or(d.args).unwrap_or_default(),
            idle_timeout: self.idle_timeout.or(d.idle_timeout),
            retry_on: self.retry_on.or(d.retry_on).unwrap_or_default(),
            budget: self.budget.unwrap_or_default(),
            fallback: self.fallback.or(d.fallback).unwrap_or_default(),
            fallback_on: self.fallback_on.or(d.fallback_on).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct RunSpec {
    pub concurrency: Option<u32>,
    pub on_failure: Option<OnFailure>,
    pub base: Option<String>,
    pub remote: Option<String>,
    pub budget: Budget,
    pub verify: Vec<String>,
    pub max_tasks: Option<u32>,
    pub planned_commands: Option<crate::graph::PlannedCommands>,
}

#[derive(Debug, Default)]
pub(crate) struct TaskSpec {
    /// The task's table (for TOML, its `[[task]]` header).
    pub span: Span,
    pub id: Option<At<String>>,
    pub needs: Vec<At<String>>,
    pub run: Option<At<String>>,
    pub prompt: Option<At<String>>,
    /// One of [`crate::walk::ENGINES`]: a name, not a copy, for each of many tasks.
    pub engine: Option<At<&'static str>>,
    /// The fields most tasks leave out, boxed so that a graph of many tasks does not pay for
    /// them: `None` when none is given.
    pub more: Option<Box<TaskMore>>,
}

#[derive(Debug, Default)]
pub(crate) struct TaskMore {
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub backoff: Option<Duration>,
    pub scope: Vec<At<String>>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<At<String>>,
    pub handoff_limit: Option<u64>,
    pub log_limit: Option<u64>,
    pub verify: Vec<String>,
    pub approval: Option<bool>,
    pub workspace: Option<Workspace>,
    pub pass_env: Vec<String>,
    pub secret_env: Vec<String>,
    pub agent: AgentSpec,
    pub scope_policy: Option<ScopePolicy>,
    pub fix_attempts: Option<u32>,
    pub setup: Option<Vec<String>>,
    /// What runs the task's shell commands (`["bash", "-eo", "pipefail"]`).
    pub shell: Option<Vec<String>>,
    pub worktree_include: Option<Vec<At<String>>>,
    pub confine: Option<Confine>,
    pub contain: Option<Contain>,
    pub runs_on: Option<Vec<At<String>>>,
    /// `expand = true`: a planner. The span is the field's, for errors about it.
    pub expand: Option<At<bool>>,
    pub max_subtasks: Option<At<u32>>,
    pub max_depth: Option<At<u32>>,
    pub for_each: Option<At<ForEachSpec>>,
    /// `acceptance`: criteria a reviewer agent judges the task's work against.
    pub acceptance: Vec<String>,
    /// A planner's `on_failure` (only `"replan"`) and `max_replans`.
    pub on_failure: Option<At<String>>,
    pub max_replans: Option<At<u32>>,
    /// `reviewer = { engine, model }`, where it was written.
    pub reviewer: Option<At<crate::graph::Reviewer>>,
    pub estimate: Option<crate::graph::Estimate>,
    /// `best_of = N`, where it was written.
    pub best_of: Option<At<u32>>,
    /// `candidates = [{ engine, model }, …]`, where it was written.
    pub candidates: Option<At<Vec<crate::graph::EngineChoice>>>,
}

/// `for_each`, as written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ForEachSpec {
    List(Vec<serde_json::Value>),
    Glob(String),
    From(At<String>),
}

static NOTHING_MORE: TaskMore = TaskMore {
    timeout: None,
    retries: None,
    backoff: None,
    scope: Vec::new(),
    env: BTreeMap::new(),
    cwd: None,
    handoff_limit: None,
    log_limit: None,
    verify: Vec::new(),
    approval: None,
    workspace: None,
    pass_env: Vec::new(),
    secret_env: Vec::new(),
    agent: AgentSpec {
        model: None,
        max_turns: None,
        allowed_tools: None,
        permission_mode: None,
        sandbox: None,
        args: None,
        idle_timeout: None,
        retry_on: None,
        budget: None,
        fallback: None,
        fallback_on: None,
        first_span: None,
    },
    scope_policy: None,
    fix_attempts: None,
    setup: None,
    shell: None,
    worktree_include: None,
    confine: None,
    contain: None,
    runs_on: None,
    expand: None,
    max_subtasks: None,
    max_depth: None,
    for_each: None,
    acceptance: Vec::new(),
    reviewer: None,
    on_failure: None,
    max_replans: None,
    estimate: None,
    best_of: None,
    candidates: None,
};

impl TaskSpec {
    pub(crate) fn more(&self) -> &TaskMore {
        self.more.as_deref().unwrap_or(&NOTHING_MORE)
    }

    pub(crate) fn more_mut(&mut self) -> &mut TaskMore {
        self.more.get_or_insert_with(Box::default)
    }
}
