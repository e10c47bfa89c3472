use super::load::load_graph;
use crate::cli::{GraphArgs, GraphFormat};
use crate::exit::{self, Failure};
use crate::out;

pub(super) fn graph(args: GraphArgs) -> Result<i32, Failure> {
    let graph = load_graph(&args.file)?;
    let text = match args.format {
        GraphFormat::Dot => baton_graph::to_dot(&graph),
        GraphFormat::Mermaid => baton_graph::to_mermaid(&graph),
    };
    out::text("the graph", &text)?;
    Ok(exit::SUCCESS)
}
