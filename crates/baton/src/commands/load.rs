use std::path::Path;

use baton_graph::Graph;

use crate::diagnostics::render_load_error;
use crate::exit::{BAD_INPUT, Failure};

/// Loads and validates a graph file; on failure prints every problem and exits with 2.
pub fn load_graph(path: &Path) -> Result<Graph, Failure> {
    match baton_graph::load(path) {
        Ok(graph) => {
            for note in graph.notes() {
                eprintln!("note: {}: {note}", path.display());
            }
            Ok(graph)
        }
        Err(err) => {
            eprint!("{}", render_load_error(&err));
            Err(Failure::Reported(BAD_INPUT))
        }
    }
}
