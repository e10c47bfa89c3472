use std::path::Path;

use baton_graph::Graph;

use crate::diagnostics::render_load_error;
use crate::exit::{BAD_INPUT, Failure};

/// Loads and validates a graph file; on failure prints every problem and exits with 2. The
/// engines the configuration defines are accepted beside the built-in ones.
pub fn load_graph(path: &Path) -> Result<Graph, Failure> {
    let project = crate::project::Project::discover()?;
    let config = baton_runner::AgentConfig::load(&project.root)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    baton_graph::register_engines(config.engines().map(|e| e.name.as_str()));
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
