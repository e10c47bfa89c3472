use std::path::Path;

use baton_graph::Graph;

use crate::diagnostics::render_load_error;
use crate::exit::{BAD_INPUT, Failure};
use crate::out;

/// Loads and validates a graph file; on failure prints every problem and exits with 2. The
/// engines the configuration defines are accepted beside the built-in ones. What every command
/// that reads a graph file (`run`, `plan`, `graph`) refuses alike: the file's own problems, and
/// scopes that lead outside the repository through a symbolic link.
pub(super) fn load_graph(path: &Path) -> Result<Graph, Failure> {
    let project = crate::project::Project::of_graph(path)?;
    let config = baton_runner::AgentConfig::load(&project.root)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    baton_graph::register_engines(config.engines().map(|e| e.name.as_str()));
    match baton_graph::load(path) {
        Ok(graph) => {
            for note in graph.notes() {
                out::err(&format!("note: {}: {note}", path.display()));
            }
            check_scopes(&graph, &project.root)?;
            Ok(graph)
        }
        Err(err) => {
            out::err_styled(&render_load_error(&err));
            Err(Failure::Reported(BAD_INPUT))
        }
    }
}

/// Scopes must stay inside the repository, also through symbolic links: the file cannot say
/// where a link leads, the checkout does.
fn check_scopes(graph: &Graph, root: &Path) -> Result<(), Failure> {
    let problems = baton_runner::paths::scopes_escaping(graph, root);
    refuse_if_any(
        graph,
        &problems,
        "a scope names paths inside the repository",
    )
}

/// Bad input naming the graph file, every problem and what to do, when there are problems.
pub(super) fn refuse_if_any(graph: &Graph, problems: &[String], hint: &str) -> Result<(), Failure> {
    if problems.is_empty() {
        return Ok(());
    }
    // `baton do`'s planning graph is baton's own file, not one the user wrote or can fix.
    let whose = match graph.run_settings().hold_plans {
        true => "baton do".to_owned(),
        false => graph.source().display().to_string(),
    };
    Err(Failure::BadInput(format!(
        "{whose}: {}; {hint}",
        problems.join("; ")
    )))
}
