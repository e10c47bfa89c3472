//! Graph files to a validated, frozen [`Graph`]: parsing with spans (TOML, JSON, the legacy
//! JSON formats), validation that reports every problem at once, scope conflicts, templates,
//! plans and rendering. Pure: no processes, no clocks, no environment.

mod adjacency;
mod cycle;
mod diagnostic;
mod expand;
mod fan_out;
mod from_json;
mod from_toml;
mod glob;
mod graph;
mod legacy;
mod load;
mod path_chars;
mod plan;
mod render;
mod scope;
mod secrets;
mod spec;
mod suggest;
pub mod template;
mod toml_split;
mod tree;
mod validate;
mod walk;

pub use diagnostic::{Diagnostic, LoadError};
pub use expand::{describe_limits, plan_text, plan_value};
pub use fan_out::item_text;
pub use graph::{
    Action, AgentSettings, Budget, Confine, Contain, EngineChoice, Estimate, ForEach, Graph,
    Origin, Overrides, PlannedCommands, Planning, RetryOn, Reviewer, RunSettings, ScopePolicy,
    Task, TaskIndex, Workspace,
};
pub use load::{load, load_str};
pub use plan::{PLAN_SCHEMA_VERSION, Plan, plan};
pub use render::{to_dot, to_mermaid};
pub use scope::{conflicts, scope_covers};
pub use template::{
    NeedContext, Quote, RunContext, TaskContext, Template, TemplateContext, TemplateError,
};
pub use walk::{ENGINES, register_engines};

/// An attempt's log is capped at this by default (`log_limit`): past it, its start and its end
/// are kept and what was cut is said. Big enough for any build's output worth reading, small
/// enough that `yes` cannot fill the disk.
pub const DEFAULT_LOG_LIMIT: u64 = 100 * 1024 * 1024;

/// Most tasks one planner's answer may hold, unless it says `max_subtasks`.
pub const DEFAULT_MAX_SUBTASKS: u32 = 8;
/// How deep planning goes unless the first planner says `max_depth`: its subtasks may plan,
/// theirs may not.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// How many times a planner with `on_failure = "replan"` is asked again, unless
/// `max_replans` says otherwise.
pub const DEFAULT_MAX_REPLANS: u32 = 2;
/// How many tasks a run's planners may add in all, unless `[run] max_tasks` says otherwise.
pub const DEFAULT_PLANNED_TASKS: u32 = 64;

/// [`DEFAULT_LOG_LIMIT`], for the stored graphs of runs recorded before `log_limit` existed.
pub(crate) fn default_log_limit() -> u64 {
    DEFAULT_LOG_LIMIT
}
