//! What a graph file says, field by field, before validation: literals are parsed and their
//! problems reported, but nothing is cross-checked yet. Both the native walker and the legacy
//! converters produce this, so one validator serves all formats.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_model::OnFailure;

use crate::graph::{Budget, Workspace};
use crate::tree::Span;

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct At<T> {
    pub value: T,
    pub span: Span,
}

impl<T> At<T> {
    pub fn new(value: T, span: Span) -> Self {
        Self { value, span }
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

#[derive(Debug, Default)]
pub(crate) struct Defaults {
    /// One of [`crate::walk::ENGINES`].
    pub engine: Option<At<&'static str>>,
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub backoff: Option<Duration>,
    pub workspace: Option<Workspace>,
    pub handoff_limit: Option<u64>,
    pub pass_env: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct RunSpec {
    pub concurrency: Option<u32>,
    pub on_failure: Option<OnFailure>,
    pub base: Option<String>,
    pub budget: Budget,
    pub verify: Vec<String>,
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
    pub verify: Vec<String>,
    pub approval: Option<bool>,
    pub workspace: Option<Workspace>,
    pub pass_env: Vec<String>,
}

static NOTHING_MORE: TaskMore = TaskMore {
    timeout: None,
    retries: None,
    backoff: None,
    scope: Vec::new(),
    env: BTreeMap::new(),
    cwd: None,
    handoff_limit: None,
    verify: Vec::new(),
    approval: None,
    workspace: None,
    pass_env: Vec::new(),
};

impl TaskSpec {
    pub fn more(&self) -> &TaskMore {
        self.more.as_deref().unwrap_or(&NOTHING_MORE)
    }

    pub fn more_mut(&mut self) -> &mut TaskMore {
        self.more.get_or_insert_with(Box::default)
    }
}
