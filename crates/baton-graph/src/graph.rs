//! The validated, frozen graph: the only form of a graph the rest of baton accepts.
//!
//! A `Graph` can only be made by [`crate::load`] / [`crate::load_str`] (which validate) or read
//! back from a run's stored copy with [`Graph::from_stored_json`] (which was validated when the
//! run began). Its fields are private so that nothing can change it afterwards.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use baton_model::{OnFailure, TaskId};
use serde::{Deserialize, Serialize};

use crate::adjacency::Adjacency;

/// Position of a task in [`Graph::tasks`]. Dense, `0..graph.len()`, in file order.
pub type TaskIndex = u32;

/// A validated task graph. Task order is file order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub(crate) name: String,
    /// The file it was loaded from, as given by the user.
    pub(crate) source: PathBuf,
    pub(crate) run: RunSettings,
    pub(crate) tasks: Vec<Task>,
    /// For each task, the tasks whose `needs` name it. Derived; rebuilt on load.
    #[serde(skip)]
    pub(crate) dependents: Adjacency,
    /// For each task, the tasks whose scopes can match a common path with its own (symmetric;
    /// pairs where one depends on the other, directly or not, are included: the dependency
    /// already keeps them apart). Derived; rebuilt on load.
    #[serde(skip)]
    pub(crate) conflicts: Adjacency,
    /// Every task's index, sorted by id: a map would hold a second copy of each id. Derived.
    #[serde(skip)]
    pub(crate) by_id: Vec<TaskIndex>,
    /// What a conversion from a legacy format mapped to what, for the user to read.
    pub(crate) notes: Vec<String>,
    /// The file's `[defaults]`, for the tasks planners add while the run goes
    /// ([`Graph::expansion`]).
    #[serde(default)]
    pub(crate) defaults: crate::spec::Defaults,
}

/// The `[run]` table, with defaults applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// Most tasks running at once. At least 1.
    pub concurrency: u32,
    pub on_failure: OnFailure,
    /// Git ref that worktrees start from.
    pub base: Option<String>,
    /// The git remote (a remote's name, a URL or a path) through which workers on other
    /// machines share the run's branches: they fetch the base and their needs' branches from
    /// it and push their own. `None`: one repository holds them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Acceptance checks on the merged result.
    pub verify: Vec<String>,
    /// Limits on what the run's agents may spend, all attempts together.
    #[serde(default)]
    pub budget: Budget,
    /// Most tasks the run may hold, those its planners add included (`[run] max_tasks`;
    /// by default the file's tasks and [`crate::DEFAULT_PLANNED_TASKS`] more).
    #[serde(default = "unlimited")]
    pub max_tasks: u32,
    /// Whether the file said `max_tasks`: if not, the paths a `for_each` glob fans out over
    /// count as the file's own tasks ([`Graph::room`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_tasks_set: bool,
    /// Planners' answers are checked and kept as their output for a person to look at
    /// (`baton do`), not added to the run. Not a field of graph files: see
    /// [`Graph::hold_plans`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_plans: bool,
    /// What a planner's shell commands get where the kernel cannot confine them
    /// (`[run] planned_commands`).
    #[serde(default, skip_serializing_if = "PlannedCommands::is_default")]
    pub planned_commands: PlannedCommands,
    /// Where a run submitted for workers (`baton run --detach`) came from: the repository and
    /// the commit its worktrees start from. Not a field of graph files: see
    /// [`Graph::submitted_from`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// The repository a run was submitted from, and its base there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The repository's git directory (its common one), absolute: workers without a `remote`
    /// must work in this very repository, or its results land where the submitter cannot
    /// see them.
    pub repository: String,
    /// The commit the run's worktrees start from, resolved where it was submitted: a worker
    /// starts from it whatever its own `HEAD` is.
    pub base: String,
}

/// `[run] planned_commands`: the shell commands a planner's answer holds (`run`, `setup`,
/// `verify` of the tasks it adds) are code a model wrote. They always run in a worktree under
/// the write sandbox; this says what happens where there is no sandbox (no Landlock) or no
/// worktree (no git repository).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlannedCommands {
    /// Refused, saying why: the default.
    #[default]
    Confined,
    /// Run anyway, unconfined, after a note: the graph's author accepts the risk.
    Allow,
}

impl PlannedCommands {
    pub const NAMES: &'static [&'static str] = &["confined", "allow"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "confined" => Some(Self::Confined),
            "allow" => Some(Self::Allow),
            _ => None,
        }
    }

    fn is_default(&self) -> bool {
        *self == Self::Confined
    }
}

fn unlimited() -> u32 {
    u32::MAX
}

/// What a planner (`expand = true`) may add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planning {
    /// Most tasks one answer may hold.
    pub max_subtasks: u32,
    /// How deep planning may go from the first planner: its subtasks are at depth 1, and a
    /// subtask at depth `max_depth` may not plan.
    pub max_depth: u32,
    /// Times it is asked again when one of its tasks fails for good (`on_failure =
    /// "replan"`, `max_replans`): 0, never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replans: u32,
}

/// A `budget` table: hard limits (`usd`, `tokens`) and, for the run's, soft ones that pause
/// the run for a person to approve or raise. `None`: no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub tokens: Option<u64>,
    pub usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_tokens: Option<u64>,
}

/// Where a task's attempt runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workspace {
    /// An isolated git worktree of its own, merged back afterwards. The default for agent tasks.
    Worktree,
    /// The repository checkout itself. The default for shell tasks.
    Shared,
    /// No repository at all: a scratch directory. The default for `noop` tasks.
    None,
}

impl Workspace {
    pub const NAMES: &'static [&'static str] = &["worktree", "shared", "none"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "worktree" => Some(Self::Worktree),
            "shared" => Some(Self::Shared),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// What a task does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Action {
    /// A shell command, run with `sh -c`. `run` is a template (see [`crate::template`]).
    Shell { run: String },
    /// A prompt for an agent engine (`claude`, `codex`, …). `prompt` is a template.
    Agent {
        engine: String,
        prompt: String,
        #[serde(default, skip_serializing_if = "AgentSettings::is_default")]
        settings: Box<AgentSettings>,
    },
    /// Does nothing and succeeds: for measuring the scheduler and for grouping tasks.
    Noop,
}

/// What an agent task asks of its agent, with `[defaults]` applied. Unset fields fall back to
/// the engine's configuration, then to the engine's own defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Arguments for the agent CLI, after baton's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Silence this long ends an attempt (a hung CLI).
    #[serde(default, with = "opt_millis", skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Duration>,
    #[serde(default)]
    pub retry_on: RetryOn,
    /// What one task may spend.
    #[serde(default, skip_serializing_if = "Budget::is_unlimited")]
    pub budget: Budget,
    /// Engines that stand in, in order, when an attempt fails for the machinery's reasons
    /// (or, with `fallback_on = "any"`, for any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<EngineChoice>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub fallback_on: RetryOn,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// An engine, and the model it is asked for (its own default where unset): a fallback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineChoice {
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl std::fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.model {
            Some(model) => write!(f, "{}/{model}", self.engine),
            None => f.write_str(&self.engine),
        }
    }
}

impl AgentSettings {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl Budget {
    pub fn is_unlimited(&self) -> bool {
        self.tokens.is_none()
            && self.usd.is_none()
            && self.soft_usd.is_none()
            && self.soft_tokens.is_none()
    }
}

/// Which failures of an agent task its `retries` cover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryOn {
    /// Only the machinery's: the model API unreachable, overloaded or rate-limited, a crashed
    /// or hung CLI. An agent that finished with an error would most likely fail the same way.
    #[default]
    Infrastructure,
    /// Every failure, the agent's own included.
    Any,
}

impl RetryOn {
    pub const NAMES: &'static [&'static str] = &["infrastructure", "any"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "infrastructure" => Some(Self::Infrastructure),
            "any" => Some(Self::Any),
            _ => None,
        }
    }
}

impl Task {
    /// What its estimate says an attempt of it costs, in dollars: what the budget reserves
    /// for it while it runs.
    pub fn expected_usd(&self) -> Option<f64> {
        self.estimate.as_deref().and_then(|e| e.usd)
    }

    /// How many candidates each of its attempts runs at once (`best_of`, `candidates`): 1
    /// for most tasks.
    pub fn candidate_count(&self) -> u32 {
        (self.candidates.len() as u32).max(1)
    }

    /// An agent task with engines to stand in for its own.
    pub fn has_fallback(&self) -> bool {
        matches!(&self.action, Action::Agent { settings, .. } if !settings.fallback.is_empty())
    }

    /// The engine place `k` of its chain runs on: 0 its own, then its fallbacks in order (past
    /// the last, the last); `shell` for a task that is not an agent's.
    pub fn engine_at(&self, k: u32) -> &str {
        match &self.action {
            Action::Agent {
                engine, settings, ..
            } => match k {
                0 => engine,
                k => settings
                    .fallback
                    .get(k as usize - 1)
                    .or(settings.fallback.last())
                    .map_or(engine.as_str(), |f| f.engine.as_str()),
            },
            _ => "shell",
        }
    }
}

/// One task, with `[defaults]` applied. A run holds one per task for its whole length (a
/// 100,000-task graph, 100,000 of them): what few tasks have is boxed, so that it costs the
/// others a pointer (`tests`: `a_task_stays_small`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    /// Indices of the tasks this one needs, in the order written, without duplicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<TaskIndex>,
    pub action: Action,
    /// Per attempt. `None`: no limit.
    #[serde(default, with = "opt_millis", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Attempts after the first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Delay before the first retry; doubles with each further one (plus jitter).
    #[serde(with = "millis")]
    pub backoff: Duration,
    /// Globs of the paths the task may change, relative to the repository root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory relative to the repository root (never escapes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Cap in bytes on the predecessors' output handed to this task.
    pub handoff_limit: u64,
    /// Cap in bytes on one attempt's log file: past it, the start and the end are kept and
    /// what was cut is said.
    #[serde(default = "crate::default_log_limit")]
    pub log_limit: u64,
    /// Acceptance checks run after the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<String>,
    /// Waits for `baton approve` before it starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
    /// Where attempts run; `[defaults]` or the task set it, else it follows from the action.
    #[serde(default = "default_workspace")]
    pub workspace: Workspace,
    /// `workspace` was set (on the task or in `[defaults]`), not followed from the action: a
    /// worktree asked for that cannot be made is an error, a default one a note.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub workspace_asked: bool,
    /// Variables of baton's environment the task also gets, beyond the few every task gets
    /// (`PATH`, `HOME`, locale, …): names, or prefixes ending in `*`.
    #[serde(default, skip_serializing_if = "none")]
    pub pass_env: Box<[String]>,
    /// Variables whose values are secrets although their names do not say so
    /// (`DATABASE_URL`): names, or prefixes ending in `*`. Their values are redacted wherever
    /// they appear, like those of variables named like secrets (`*_TOKEN`, `*_KEY`, …).
    #[serde(default, skip_serializing_if = "none")]
    pub secret_env: Box<[String]>,
    /// What a change outside `scope` means.
    #[serde(default, skip_serializing_if = "ScopePolicy::is_warn")]
    pub scope_policy: ScopePolicy,
    /// When a `verify` check fails: how many times the task is run again, told what failed,
    /// before it fails.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fix_attempts: u32,
    /// Commands run once in a new worktree before the task starts (`npm ci`, …).
    #[serde(default, skip_serializing_if = "none")]
    pub setup: Box<[String]>,
    /// What runs its shell commands (`run`, `setup`, `verify`): a program and its arguments,
    /// the script after `-c`. Empty: `/bin/sh -c`.
    #[serde(default, skip_serializing_if = "none")]
    pub shell: Box<[String]>,
    /// Labels a worker must have to run it (`baton worker --labels`); a run driven here
    /// ignores them.
    #[serde(default, skip_serializing_if = "none")]
    pub runs_on: Box<[String]>,
    /// Paths (globs) git ignores that a new worktree gets from the repository: files copied,
    /// directories linked (`.env`, `node_modules`).
    #[serde(default, skip_serializing_if = "none")]
    pub worktree_include: Box<[String]>,
    /// Where the task may write; `None`: confined to its workspace if it is an agent task in
    /// a worktree, else not confined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine: Option<Confine>,
    /// What holds the task's processes; `None`: a cgroup wherever a child can be born in one
    /// (Linux 5.7+ with cgroup v2 writable), else a cgroup for an agent task and the process
    /// group for any other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contain: Option<Contain>,
    /// `Some`: a planner, whose answer is tasks added to the graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Box<Planning>>,
    /// The planner that added it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<TaskIndex>,
    /// A planner's answer added it (or it is an instance of one that did): what it runs is a
    /// model's, and gets no more than the model had (see [`PlannedCommands`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
    /// Planners above it: 0 for a task of the file.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// `Some`: the task stands for one task per item (added when it becomes ready), and is
    /// not run itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<Box<ForEach>>,
    /// One of a `for_each` task's instances: its item, `{{ item }}` in its templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<Box<serde_json::Value>>,
    /// Criteria a reviewer agent judges the task's work against, after its checks pass.
    #[serde(default, skip_serializing_if = "none")]
    pub acceptance: Box<[String]>,
    /// Who reviews: an agent engine and model; unset, the task's own (an agent task's) or the
    /// run's default engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<Box<Reviewer>>,
    /// Its planner re-planned, and the new plan replaces it (it failed, or had not started).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaced: bool,
    /// What its planner (or the file) expects it to take and cost: `baton do`'s estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Box<Estimate>>,
    /// `best_of = N` (N times its own engine) or `candidates`: the engines each of its
    /// attempts runs at once, each in a worktree of its own, the best of whose work is its
    /// result. Empty for most tasks.
    #[serde(default, skip_serializing_if = "none")]
    pub candidates: Box<[EngineChoice]>,
}

/// `estimate = { minutes = 10, usd = 0.5 }`: what a task is expected to take and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

/// The agent that judges a task's `acceptance` criteria.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reviewer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Where a `for_each` task's items come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForEach {
    List(Vec<serde_json::Value>),
    /// Paths of the checkout matching the glob (a trailing `/`: directories only).
    Glob(String),
    /// The JSON array a predecessor wrote to `$BATON_OUTPUT` (or printed).
    From(TaskIndex),
}

/// Whether a task's processes may write only in its workspace (Landlock on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confine {
    /// Confined where the kernel can; elsewhere run as is, after a note.
    Workspace,
    /// Never confined.
    None,
    /// Confined, or not run at all.
    Require,
}

impl Confine {
    pub const NAMES: &'static [&'static str] = &["workspace", "none", "require"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "workspace" => Some(Self::Workspace),
            "none" => Some(Self::None),
            "require" => Some(Self::Require),
            _ => None,
        }
    }
}

/// What holds a task's processes together, so that all of them end with the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contain {
    /// A cgroup of its own where cgroup v2 is writable (else the process group): even a
    /// descendant that called `setsid` is killed at the end. Next to free where the child is
    /// born in it; a fork and a cgroup migration per attempt where it must be moved (see
    /// docs/PERFORMANCE.md).
    Cgroup,
    /// The process group only: the cheapest spawn.
    ProcessGroup,
}

impl Contain {
    pub const NAMES: &'static [&'static str] = &["cgroup", "process-group"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cgroup" => Some(Self::Cgroup),
            "process-group" => Some(Self::ProcessGroup),
            _ => None,
        }
    }
}

/// What a task changing files outside its declared `scope` means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScopePolicy {
    /// Reported, and the run ends `succeeded_with_warnings` at best.
    #[default]
    Warn,
    /// The task fails.
    Enforce,
}

impl ScopePolicy {
    pub const NAMES: &'static [&'static str] = &["warn", "enforce"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "warn" => Some(Self::Warn),
            "enforce" => Some(Self::Enforce),
            _ => None,
        }
    }

    pub fn is_warn(&self) -> bool {
        *self == Self::Warn
    }
}

// The stored copy of a graph leaves out what every task has by default: a 100,000-task graph
// is then a few MB in the store rather than twenty.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_workspace() -> Workspace {
    Workspace::Worktree
}

impl Graph {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn source(&self) -> &std::path::Path {
        &self.source
    }

    pub fn run_settings(&self) -> &RunSettings {
        &self.run
    }

    /// How many more tasks the run may hold: `max_tasks` less the tasks it has. Under the
    /// default `max_tasks` the paths a `for_each` glob fanned out over count as the file's own
    /// tasks, as a static list's items do (they are the checkout's, not a planner's), so they
    /// take nothing of the room planners have ([`crate::DEFAULT_PLANNED_TASKS`]). Derived
    /// from the graph, never stored: a run read back or reloaded has the same room.
    pub fn room(&self) -> usize {
        let checkout = if self.run.max_tasks_set {
            0
        } else {
            let globbed = |t: &Task| t.parent.is_some_and(|p| self.globs(p));
            self.tasks.iter().filter(|t| globbed(t)).count()
        };
        (self.run.max_tasks as usize + checkout).saturating_sub(self.len())
    }

    /// Whether `task`'s items are the checkout's paths, counted as the file's own tasks
    /// ([`Graph::room`]): a `for_each` glob under the default `max_tasks`.
    pub(crate) fn fans_out_over_the_checkout(&self, task: TaskIndex) -> bool {
        !self.run.max_tasks_set && self.globs(task)
    }

    /// Whether `task` fans out over the paths a glob matches.
    fn globs(&self, task: TaskIndex) -> bool {
        matches!(self.task(task).for_each.as_deref(), Some(ForEach::Glob(_)))
    }

    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    pub fn task(&self, index: TaskIndex) -> &Task {
        &self.tasks[index as usize]
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn index_of(&self, id: &str) -> Option<TaskIndex> {
        let k = self
            .by_id
            .binary_search_by(|&i| self.tasks[i as usize].id.as_str().cmp(id))
            .ok()?;
        Some(self.by_id[k])
    }

    pub fn dependents(&self, index: TaskIndex) -> &[TaskIndex] {
        self.dependents.get(index)
    }

    pub fn conflicts(&self, index: TaskIndex) -> &[TaskIndex] {
        self.conflicts.get(index)
    }

    /// The engine `[defaults]` names, if any.
    pub fn default_engine(&self) -> Option<&str> {
        self.defaults.engine.as_ref().map(|e| e.value)
    }

    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Planners' answers are kept for a person to look at, not added to the run: `baton do`
    /// shows the plan, then runs it as a run of its own. Kept with the run, so a takeover
    /// holds them too.
    pub fn hold_plans(&mut self) {
        self.run.hold_plans = true;
    }

    /// Records where the run is submitted from (`baton run --detach`): its worktrees start
    /// from `origin.base` (the commit its base named there, pinned), and workers know which
    /// repository is the run's.
    pub fn submitted_from(&mut self, origin: Origin) {
        self.run.base = Some(origin.base.clone());
        self.run.origin = Some(origin);
    }

    /// Command-line overrides (`-j`, `--retries`, `--timeout`), applied after loading so that
    /// they beat both `[defaults]` and per-task values.
    pub fn apply_overrides(&mut self, overrides: &Overrides) {
        if let Some(concurrency) = overrides.concurrency {
            self.run.concurrency = concurrency.max(1);
        }
        if let Some(usd) = overrides.budget_usd {
            self.run.budget.usd = Some(usd);
        }
        for task in &mut self.tasks {
            if let Some(retries) = overrides.retries {
                task.retries = retries;
            }
            if let Some(timeout) = overrides.timeout {
                task.timeout = Some(timeout);
            }
        }
    }

    /// Reads back the copy stored with a run. The copy was validated when the run began; the
    /// derived indices are rebuilt here.
    pub fn from_stored_json(json: &str) -> Result<Self, serde_json::Error> {
        let mut graph: Graph = serde_json::from_str(json)?;
        graph.rebuild_derived();
        Ok(graph)
    }

    pub fn to_stored_json(&self) -> String {
        serde_json::to_string(self).expect("a graph always serializes")
    }

    /// [`Graph::to_stored_json`], written to `out` as it is made.
    pub fn write_stored_json(&self, out: impl std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer(out, self).map_err(std::io::Error::from)
    }

    /// Recomputes `dependents`, `by_id` and `conflicts` from `tasks`.
    ///
    /// `by_id` is sorted on a thread of its own while the other two are made here: sorting a
    /// 100,000-task graph's ids (each compare two reads far apart) is most of the three.
    pub(crate) fn rebuild_derived(&mut self) {
        let tasks = &self.tasks;
        let sort = || {
            let mut by_id: Vec<TaskIndex> = (0..tasks.len() as TaskIndex).collect();
            by_id.sort_unstable_by(|&a, &b| tasks[a as usize].id.cmp(&tasks[b as usize].id));
            by_id
        };
        let (by_id, dependents, conflicts) = std::thread::scope(|scope| {
            // A small graph's are made faster than a thread is started.
            let sorting = (tasks.len() >= 4096)
                .then(|| std::thread::Builder::new().spawn_scoped(scope, sort).ok())
                .flatten();
            let dependents = Adjacency::reversed(tasks.len(), |i| &tasks[i].needs);
            let conflicts = Adjacency::from_lists(&crate::scope::conflicts(tasks));
            let by_id = match sorting {
                Some(sorting) => sorting
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                None => sort(),
            };
            (by_id, dependents, conflicts)
        });
        self.by_id = by_id;
        self.dependents = dependents;
        self.conflicts = conflicts;
    }
}

/// Values given on the command line that beat the file's.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub concurrency: Option<u32>,
    /// The run's hard budget in dollars.
    pub budget_usd: Option<f64>,
    pub retries: Option<u32>,
    pub timeout: Option<Duration>,
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// `skip_serializing_if` for a boxed slice.
fn none<T>(items: &[T]) -> bool {
    items.is_empty()
}

#[cfg(test)]
mod tests {
    use super::Task;

    /// A run keeps every task of its graph: 632 bytes a task was 63 MB of a 100,000-task run's
    /// 160 MB (docs/PERFORMANCE.md). A field most tasks leave unset belongs in a box.
    #[test]
    fn a_task_stays_small() {
        let size = std::mem::size_of::<Task>();
        assert!(size <= 448, "a Task is {size} bytes");
    }
}
