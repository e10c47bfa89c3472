//! One module per subcommand; each resolves its raw flags and returns an exit code.

mod agent_http;
mod cancel;
mod diff;
mod doctor;
pub(crate) mod events;
mod goal;
mod graph;
mod load;
mod logs;
mod plan;
pub(crate) mod prune;
pub(crate) mod records;
pub(crate) mod report;
mod run;
mod runs;

mod shell;
mod status;
mod watch;
mod worker;

use crate::cli::{Cli, Command};
use crate::exit::Failure;

pub(crate) fn dispatch(cli: Cli) -> Result<i32, Failure> {
    match cli.command {
        Command::Run(args) => run::run(args, cli.store.as_deref()),
        Command::Do(args) => goal::goal(args, cli.store.as_deref()),
        Command::Plan(args) => plan::plan(args),
        Command::Graph(args) => graph::graph(args),
        Command::Runs(args) => runs::runs(args, cli.store.as_deref()),
        Command::Status(args) => status::status(args, cli.store.as_deref()),
        Command::Logs(args) => logs::logs(args, cli.store.as_deref()),
        Command::Events(args) => events::events(args, cli.store.as_deref()),
        Command::Report(args) => report::report(args, cli.store.as_deref()),
        Command::Serve(args) => crate::serve::serve(args, cli.store.as_deref()),
        Command::Watch(args) => watch::watch(args, cli.store.as_deref()),
        Command::Resume(args) => run::resume(args, cli.store.as_deref()),
        Command::Retry(args) => run::retry(args, cli.store.as_deref()),
        Command::Cancel(args) => cancel::cancel(args, cli.store.as_deref()),
        Command::Prune(args) => prune::prune(args, cli.store.as_deref()),
        Command::Doctor(args) => doctor::doctor(args, cli.store.as_deref()),
        Command::Worker(args) => worker::worker(args, cli.store.as_deref()),
        Command::Workers(args) => worker::workers(args, cli.store.as_deref()),
        Command::Approve(args) => run::approve(args, cli.store.as_deref()),
        Command::Reject(args) => run::reject(args, cli.store.as_deref()),
        Command::Diff(args) => diff::diff(args, cli.store.as_deref()),
        Command::Apply(args) => diff::apply(args, cli.store.as_deref()),
        Command::Completions(args) => shell::completions(&args),
        Command::Mcp => crate::mcp::serve(),
        Command::Man(args) => shell::man(&args),
        Command::AgentHttp(args) => agent_http::agent_http(args),
        Command::WorkerWatchdog(args) => worker::watchdog(&args),
    }
}
