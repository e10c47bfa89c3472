//! The fields each table of a graph file takes: what an unknown field is checked against (and
//! offered a near name from).

pub(crate) const TOP_FIELDS: &[&str] = &["name", "defaults", "run", "task", "tasks", "$schema"];
/// The fields of `[defaults]` that are not agent fields.
pub(super) const DEFAULTS_OWN_FIELDS: &[&str] = &[
    "engine",
    "timeout",
    "retries",
    "backoff",
    "workspace",
    "handoff_limit",
    "log_limit",
    "env",
    "shell",
    "pass_env",
    "secret_env",
    "scope_policy",
    "fix_attempts",
    "setup",
    "worktree_include",
    "confine",
    "contain",
    "runs_on",
];
/// The fields of an agent task that a shell task does not take, and that `[defaults]` may
/// set for every agent task.
pub(super) const AGENT_FIELDS: &[&str] = &[
    "model",
    "max_turns",
    "allowed_tools",
    "permission_mode",
    "sandbox",
    "args",
    "idle_timeout",
    "retry_on",
    "fallback",
    "fallback_on",
];
/// Agent fields a task takes that `[defaults]` does not (a budget is a task's own).
pub(super) const AGENT_TASK_FIELDS: &[&str] = &["budget"];
pub(crate) const DEFAULTS_FIELDS: &[&[&str]] = &[DEFAULTS_OWN_FIELDS, AGENT_FIELDS];
pub(crate) const RUN_FIELDS: &[&str] = &[
    "concurrency",
    "on_failure",
    "base",
    "remote",
    "budget",
    "verify",
    "max_tasks",
    "planned_commands",
];
pub(crate) const BUDGET_FIELDS: &[&str] = &["tokens", "usd", "soft_usd", "soft_tokens"];
/// The fields of a task that are not agent fields.
const TASK_OWN_FIELDS: &[&str] = &[
    "id",
    "needs",
    "run",
    "prompt",
    "engine",
    "timeout",
    "retries",
    "backoff",
    "scope",
    "env",
    "shell",
    "cwd",
    "handoff_limit",
    "log_limit",
    "verify",
    "approval",
    "workspace",
    "pass_env",
    "secret_env",
    "scope_policy",
    "fix_attempts",
    "setup",
    "worktree_include",
    "confine",
    "contain",
    "runs_on",
    "expand",
    "max_subtasks",
    "max_depth",
    "for_each",
    "acceptance",
    "reviewer",
    "on_failure",
    "max_replans",
    "estimate",
    "best_of",
    "candidates",
];
pub(crate) const TASK_FIELDS: &[&[&str]] = &[TASK_OWN_FIELDS, AGENT_FIELDS, AGENT_TASK_FIELDS];
