//! Raw command-line flags, as clap parses them. `commands` resolves them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The line at the end of a command's help that names the guide's page for it (the guide is
/// `docs/guide/` in baton's repository; `mdbook build docs/guide` makes it a book).
macro_rules! guide {
    ($page:literal) => {
        concat!("Guide: docs/guide/src/", $page, ".md")
    };
}

/// Runs a graph of coding-agent and shell tasks: in parallel where dependencies and file scopes
/// allow, retried, durable.
#[derive(Debug, Parser)]
#[command(
    name = "baton",
    version,
    about,
    max_term_width = 100,
    after_help = concat!(guide!("introduction"), " (each command's help names its page); `baton man` for the man page")
)]
pub(crate) struct Cli {
    /// Where runs are recorded: `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`. Default:
    /// `.baton/baton.db` in the repository root, or in the current directory outside a
    /// repository.
    #[arg(long, global = true, env = "BATON_STORE", value_name = "URL")]
    pub store: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a graph file.
    #[command(after_help = guide!("graph-files"))]
    Run(RunArgs),
    /// Plan GOAL with an agent, show the plan with what it will cost, and run it once you say
    /// so (or edit it first).
    #[command(after_help = guide!("planning"))]
    Do(DoArgs),
    /// Validate a graph file and show its plan: levels, critical path, scope conflicts.
    #[command(after_help = guide!("graph-files"))]
    Plan(PlanArgs),
    /// Print a graph file's tasks and dependencies as Graphviz dot or Mermaid.
    #[command(after_help = guide!("graph-files"))]
    Graph(GraphArgs),
    /// List recorded runs, newest first.
    #[command(after_help = guide!("operating"))]
    Runs(RunsArgs),
    /// Show a run's tasks: state, attempts, time, why it failed or is blocked. Above 50 tasks,
    /// those that succeeded are counted, not listed (`--all` lists every task).
    #[command(after_help = guide!("operating"))]
    Status(StatusArgs),
    /// Print what an attempt of a task printed (the latest attempt unless `--attempt`).
    #[command(after_help = guide!("operating"))]
    Logs(LogsArgs),
    /// Print a run's event log.
    #[command(after_help = guide!("operating"))]
    Events(EventsArgs),
    /// Write a run as one self-contained HTML page: the outcome and why, the task graph, a
    /// timeline of every attempt, concurrency, each task's details, the spend.
    #[command(after_help = guide!("seeing"))]
    Report(ReportArgs),
    /// Serve a web dashboard of the runs recorded here: each run's graph and timeline as it
    /// goes, its tasks' logs and diffs, and approve, reject, cancel, retry and resume.
    #[command(after_help = guide!("seeing"))]
    Serve(ServeArgs),
    /// Watch a run driven by another process (another terminal, a CI job): the live view
    /// `baton run` shows, until the run ends, then its status.
    #[command(after_help = guide!("seeing"))]
    Watch(WatchArgs),
    /// Finish a run whose driver died (or that was cancelled): tasks that succeeded are not
    /// run again; attempts cut short are recorded as interrupted and run again.
    #[command(after_help = guide!("operating"))]
    Resume(ResumeArgs),
    /// Run a finished run's failed, timed-out, cancelled, blocked and skipped tasks again (or
    /// the tasks named, with what they need and what they blocked), as new attempts of the same
    /// run.
    #[command(after_help = guide!("operating"))]
    Retry(RetryArgs),
    /// Stop a running run from another terminal: the same as Ctrl-C in the terminal running it.
    #[command(after_help = guide!("operating"))]
    Cancel(CancelArgs),
    /// Remove old runs: their records and their logs. A run that is running is never removed.
    #[command(after_help = guide!("operating"))]
    Prune(PruneArgs),
    /// Show what a task changed on its branch, or (without a task) what the run's merged
    /// result changes, as a unified diff.
    #[command(after_help = guide!("worktrees"))]
    Diff(DiffArgs),
    /// Merge a run's result into the current branch: a fast-forward when possible, else a
    /// merge commit. Refuses a working tree with uncommitted changes.
    #[command(after_help = guide!("worktrees"))]
    Apply(ApplyArgs),
    /// Claim and run the attempts of runs in a PostgreSQL store (`baton run --detach`), with
    /// the same attempt unit as a local run; coordinate runs nobody coordinates. Stops on
    /// Ctrl-C or SIGTERM once what it holds has ended.
    #[command(after_help = guide!("many-machines"))]
    Worker(WorkerArgs),
    /// List the live workers of a PostgreSQL store: slots, engines, labels, what each runs,
    /// its last heartbeat.
    #[command(after_help = guide!("many-machines"))]
    Workers(WorkersArgs),
    /// Let a task waiting for approval start; or, without a task, let a run waiting at its
    /// soft budget go on (up to its hard budget), driving it here.
    #[command(after_help = guide!("operating"))]
    Approve(ApproveArgs),
    /// Fail a task waiting for approval, with the reason.
    #[command(after_help = guide!("operating"))]
    Reject(RejectArgs),
    /// Show which agent engines are installed (and their versions), which config files are
    /// read, and what is missing.
    #[command(after_help = guide!("troubleshooting"))]
    Doctor(DoctorArgs),
    /// Print a completion script for SHELL, to source or put where the shell looks:
    /// `baton completions bash > ~/.local/share/bash-completion/completions/baton`. It asks
    /// baton at each Tab: run ids and task ids come from the project's store.
    #[command(after_help = guide!("commands"))]
    Completions(CompletionsArgs),
    /// Serve baton to an agent over MCP (stdio): plan, start and follow runs of this project
    /// from inside Claude Code, Codex or Gemini CLI.
    #[command(after_help = guide!("mcp"))]
    Mcp,
    /// Print baton's man page (roff), or write one page per command into a directory:
    /// `baton man | man -l -`, `baton man --dir ~/.local/share/man/man1`.
    #[command(after_help = guide!("commands"))]
    Man(ManArgs),
    /// The `http` engine's agent: asks a model API with the prompt on stdin and prints JSON
    /// lines. baton runs it for `engine = "http"` tasks; not meant to be run by hand.
    #[command(hide = true)]
    AgentHttp(AgentHttpArgs),
    /// A worker's watchdog: ends the worker's attempts when it stops hearing from it (the
    /// worker is paused or stuck). `baton worker` starts it; not meant to be run by hand.
    #[command(hide = true)]
    WorkerWatchdog(WorkerWatchdogArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write `baton.1` and a `baton-COMMAND.1` per command here instead of printing `baton.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct WorkerWatchdogArgs {
    /// The worker's `PID:START`: its attempts carry it as `BATON_WORKER`.
    #[arg(long)]
    pub worker: String,
    /// How long without a ping before the worker's attempts are ended.
    #[arg(long)]
    pub silence_ms: u64,
}

#[derive(Debug, Args)]
pub(crate) struct AgentHttpArgs {
    #[arg(long, value_enum)]
    pub api: HttpApi,
    /// `https://api.openai.com/v1` (OpenAI-compatible) or `https://api.anthropic.com`.
    #[arg(long)]
    pub base_url: String,
    #[arg(long)]
    pub model: String,
    /// The variable holding the API key.
    #[arg(long)]
    pub key_env: String,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Most tokens of answer (Anthropic requires a limit).
    #[arg(long, default_value_t = 8192)]
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum HttpApi {
    Openai,
    Anthropic,
}

impl HttpApi {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PruneArgs {
    /// Keep the newest N runs.
    #[arg(long, value_name = "N")]
    pub keep: Option<u32>,
    /// Remove runs started longer ago than this, like `30d` or `12h`.
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<String>,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print what was removed as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Flags shared by everything that drives a run.
#[derive(Debug, Args)]
pub(crate) struct DriveArgs {
    /// Time between TERM and KILL when an attempt is stopped.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub kill_grace: String,
    /// Print only the final line.
    #[arg(short, long, conflicts_with = "json")]
    pub quiet: bool,
    /// Print the run result as JSON (schema documented in docs/guide/src/json.md).
    #[arg(long)]
    pub json: bool,
    /// Tell TARGET when the run ends or a task waits for a person: an `http(s)://` URL is
    /// POSTed a JSON body, anything else is run with `sh -c`, the body on its stdin (over
    /// `[notify]` in baton.toml).
    #[arg(long, value_name = "TARGET")]
    pub notify: Option<String>,
    /// Send the run as an OpenTelemetry trace to this OTLP/HTTP collector once it ends (its
    /// base address, like http://127.0.0.1:4318); `OTEL_EXPORTER_OTLP_ENDPOINT` does the same.
    #[arg(long, value_name = "ENDPOINT")]
    pub otlp: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// Count the attempts cut short by the crash against each task's `retries`.
    #[arg(long)]
    pub charge_retries: bool,
    /// A new hard budget in dollars for the run (a run waiting at its soft budget goes on,
    /// with no soft limit any more).
    #[arg(long, value_name = "USD")]
    pub raise_budget: Option<f64>,
    /// Take the graph file's task definitions as they are now (the run recorded the file as
    /// it was when it started): fix a command in the file, then retry. Tasks added, removed,
    /// renamed or given other `needs` are refused: `baton run` the file afresh.
    #[arg(long)]
    pub reload: bool,
    #[command(flatten)]
    pub drive: DriveArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// A task; without one, the run's merged result.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::tasks))]
    pub task: Option<String>,
    /// A best-of task's candidate K (from 1): its work, won or not.
    #[arg(long, value_name = "K", requires = "task", value_parser = clap::value_parser!(u32).range(1..))]
    pub candidate: Option<u32>,
    /// Attempt N's work (from 1): a retried task starts again from where it started, and
    /// what an earlier attempt changed is kept on `baton/RUN/TASK/attempt-N`.
    #[arg(long, value_name = "N", requires = "task", conflicts_with = "candidate", value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt: Option<u32>,
    /// The files changed and their lines added and removed, instead of the patch.
    #[arg(long)]
    pub stat: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// One commit on the current branch, its message naming the run and its tasks, instead
    /// of the run's own commits merged in.
    #[arg(long)]
    pub squash: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ApproveArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// A task waiting for approval (`approval = true`): it starts. Without one, a run waiting
    /// at its soft budget goes on, up to its hard budget, driven here.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::tasks))]
    pub task: Option<String>,
    #[command(flatten)]
    pub drive: DriveArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RejectArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// A task waiting for approval: it fails, with the reason.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::tasks))]
    pub task: String,
    /// Why, for the record.
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RetryArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// Tasks to run again. Default: every task that did not succeed.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::tasks))]
    pub tasks: Vec<String>,
    /// A new hard budget in dollars for the run, first (a run its budget stopped).
    #[arg(long, value_name = "USD")]
    pub raise_budget: Option<f64>,
    /// Take the graph file's task definitions as they are now (the run recorded the file as
    /// it was when it started): fix a command in the file, then retry. Tasks added, removed,
    /// renamed or given other `needs` are refused: `baton run` the file afresh.
    #[arg(long)]
    pub reload: bool,
    #[command(flatten)]
    pub drive: DriveArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// How long to wait for the run to stop before giving up waiting.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub wait: String,
}

#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// Most runs to list.
    #[arg(short = 'n', long, default_value_t = 20, value_name = "N")]
    pub limit: u32,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// A run id, or a unique prefix of one. Default: the latest run.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: Option<String>,
    /// Print the run result as JSON (the document `baton run --json` prints).
    #[arg(long)]
    pub json: bool,
    /// List every task, also above 50 tasks (where those that succeeded are only counted).
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// The task's id; a run of one task needs none.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::tasks))]
    pub task: Option<String>,
    /// Which attempt (1 for the first). Default: the latest.
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// Keep printing as the log grows, until the attempt ends.
    #[arg(short, long)]
    pub follow: bool,
    /// Only this phase of the attempt. Default: all of them, in the order they ran (the
    /// worktree's `setup` commands, the task, its fix rounds, its `verify` checks), each
    /// after a `── phase ──` line but the task's own output when it comes first.
    #[arg(long, value_enum, value_name = "PHASE")]
    pub phase: Option<LogPhase>,
}

/// A phase of an attempt, each with a log of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogPhase {
    /// The worktree's `setup` commands.
    Setup,
    /// The task itself.
    Task,
    /// Its `verify` checks (the last round's).
    Check,
    /// Its reviewer's rounds (a task with `acceptance`).
    Review,
    /// Its fix rounds.
    Fix,
}

impl LogPhase {
    /// Whether it names `phase`, as the run's logs are named.
    pub(crate) fn is(self, phase: baton_layout::LogPhase) -> bool {
        use baton_layout::LogPhase as Logged;
        matches!(
            (self, phase),
            (Self::Setup, Logged::Setup)
                | (Self::Task, Logged::Task)
                | (Self::Check, Logged::Check)
                | (Self::Review, Logged::Review)
                | (Self::Fix, Logged::Fix)
        )
    }
}

#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    /// A run id (or a unique prefix), or `latest`.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: String,
    /// Keep printing new events until the run ends.
    #[arg(short, long)]
    pub follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// A run id, or a unique prefix of one. Default: the latest run.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: Option<String>,
    /// Where to write the page (`-`: standard output). Default: `.baton/reports/RUN.html`.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen: an address and a port (port 0: any free one).
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "ADDR")]
    pub addr: String,
    /// Serve on an address that is not loopback (behind a proxy that adds TLS).
    #[arg(long)]
    pub allow_remote: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// A run id, or a unique prefix of one. Default: the latest run.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::complete::runs))]
    pub run: Option<String>,
    /// Its events as they are recorded, one JSON object per line (as `baton events --follow
    /// --json`), instead of the view.
    #[arg(long)]
    pub json: bool,
    /// No view: only the status once the run ends.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The graph file (TOML or JSON).
    pub file: PathBuf,
    /// Most tasks running at once (overrides `[run] concurrency`).
    #[arg(short = 'j', long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// The run's hard budget in dollars (overrides `[run] budget`'s `usd`).
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    /// Attempts after the first, for every task (overrides the file).
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// Per-attempt time limit for every task, like `30s` or `20m` (overrides the file).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    #[command(flatten)]
    pub drive: DriveArgs,
    /// Validate and print the plan without running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Submit the run for workers (`baton worker`) and print its id, instead of running it
    /// here. Needs a PostgreSQL store (`--store postgres://…`).
    #[arg(long, conflicts_with = "dry_run")]
    pub detach: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Attempts it runs at once (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    pub slots: Option<u32>,
    /// The engines it runs, comma-separated (`shell,claude`); default: every engine.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub engines: Vec<String>,
    /// Its labels, comma-separated: it runs tasks whose `runs_on` it has all of.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// How long what this worker holds stays its own without a heartbeat (renewed every third
    /// of it): past it, a claimed attempt runs again on another worker, and a run it
    /// coordinates is taken over by another worker.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub lease: String,
    /// Only run attempts: leave coordinating runs to other workers.
    #[arg(long)]
    pub no_coordinate: bool,
    /// Time between TERM and KILL when an attempt is stopped.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub kill_grace: String,
}

#[derive(Debug, Args)]
pub(crate) struct WorkersArgs {
    /// Print the workers as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DoArgs {
    /// What to get done, in words: the planner's goal.
    pub goal: String,
    /// The agent engine that plans, and runs the planned agent tasks.
    #[arg(long, default_value = "claude")]
    pub engine: String,
    /// The model, for the planner and the planned agent tasks.
    #[arg(long)]
    pub model: Option<String>,
    /// Globs of the files the work may change (repeatable); each planned task gets them as its
    /// scope unless the planner gives it a narrower one.
    #[arg(long, value_name = "GLOB")]
    pub scope: Vec<String>,
    /// Most tasks the plan may have.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_subtasks: u32,
    /// Run the plan without asking.
    #[arg(short, long)]
    pub yes: bool,
    /// Only plan: write the plan (to `-o FILE`, else standard output) for `baton run`.
    #[arg(long)]
    pub plan_only: bool,
    /// Where `--plan-only` writes the plan.
    #[arg(short, long, value_name = "FILE", requires = "plan_only")]
    pub output: Option<PathBuf>,
    /// A hard budget in dollars for the run of the plan: a plan whose estimate is over it is
    /// not run without a person's yes.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    /// An acceptance criterion for the goal (repeatable): a last task checks the plan's
    /// merged work against them, reviewed, and fixes what falls short.
    #[arg(long = "accept", value_name = "CRITERION")]
    pub accept: Vec<String>,
    /// Most tasks running at once.
    #[arg(short = 'j', long, value_name = "N")]
    pub concurrency: Option<u32>,
    #[command(flatten)]
    pub drive: DriveArgs,
}

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    pub file: PathBuf,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct GraphArgs {
    pub file: PathBuf,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: GraphFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum GraphFormat {
    Dot,
    Mermaid,
}
