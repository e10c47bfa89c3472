//! Raw command-line flags, as clap parses them. `commands` resolves them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Runs a graph of coding-agent and shell tasks: in parallel where dependencies and file scopes
/// allow, retried, durable.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about, max_term_width = 100)]
pub struct Cli {
    /// Where runs are recorded: `sqlite:PATH`. Default: `.baton/baton.db` in the repository
    /// root, or in the current directory outside a repository.
    #[arg(long, global = true, env = "BATON_STORE", value_name = "URL")]
    pub store: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a graph file.
    Run(RunArgs),
    /// Validate a graph file and show its plan: levels, critical path, scope conflicts.
    Plan(PlanArgs),
    /// Print a graph file's tasks and dependencies as Graphviz dot or Mermaid.
    Graph(GraphArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The graph file (TOML or JSON).
    pub file: PathBuf,
    /// Most tasks running at once (overrides `[run] concurrency`).
    #[arg(short = 'j', long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// Attempts after the first, for every task (overrides the file).
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// Per-attempt time limit for every task, like `30s` or `20m` (overrides the file).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Time between TERM and KILL when an attempt is stopped.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub kill_grace: String,
    /// Print only the final line.
    #[arg(short, long, conflicts_with = "json")]
    pub quiet: bool,
    /// Print the run result as JSON (schema documented in docs/JSON.md).
    #[arg(long)]
    pub json: bool,
    /// Validate and print the plan without running anything.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    pub file: PathBuf,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    pub file: PathBuf,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: GraphFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}
