use baton_graph::Graph;

use super::load::load_graph;
use crate::cli::PlanArgs;
use crate::exit::{self, Failure};
use crate::out;

pub(super) fn plan(args: PlanArgs) -> Result<i32, Failure> {
    let graph = load_graph(&args.file)?;
    print_plan(&graph, args.json)
}

/// Prints the plan of a validated graph (also what `run --dry-run` shows).
pub(super) fn print_plan(graph: &Graph, json: bool) -> Result<i32, Failure> {
    let plan = baton_graph::plan(graph);
    if json {
        out::json("the plan", &plan)?;
    } else {
        out::text("the plan", &plan.to_string())?;
    }
    Ok(exit::SUCCESS)
}
