//! One module per subcommand; each resolves its raw flags and returns an exit code.

mod graph;
mod load;
mod plan;
mod run;

use crate::cli::{Cli, Command};
use crate::exit::Failure;

pub fn dispatch(cli: Cli) -> Result<i32, Failure> {
    match cli.command {
        Command::Run(args) => run::run(args, cli.store.as_deref()),
        Command::Plan(args) => plan::plan(args),
        Command::Graph(args) => graph::graph(args),
    }
}
