//! Paths in a graph that can only be checked on disk: the graph crate refuses `..` and absolute
//! paths, but a symbolic link inside the repository can still lead out of it.

use std::path::{Path, PathBuf};

use baton_graph::Graph;

/// Every scope whose literal part (before its first glob character) leads outside `root`
/// through a symbolic link, as `task: scope -> where it leads`.
pub fn scopes_escaping(graph: &Graph, root: &Path) -> Vec<String> {
    let Ok(real_root) = root.canonicalize() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for task in graph.tasks() {
        for scope in &task.scope {
            let literal: PathBuf = Path::new(scope)
                .components()
                .take_while(|c| {
                    !c.as_os_str()
                        .to_string_lossy()
                        .contains(['*', '?', '[', '{'])
                })
                .collect();
            let Some(real) = deepest_existing(&root.join(&literal)) else {
                continue;
            };
            if !real.starts_with(&real_root) {
                problems.push(format!(
                    "task `{}`: scope `{scope}` leads outside the repository (to {})",
                    task.id,
                    real.display()
                ));
            }
        }
    }
    problems
}

/// The canonical form of the longest prefix of `path` that exists.
fn deepest_existing(path: &Path) -> Option<PathBuf> {
    path.ancestors().find_map(|p| p.canonicalize().ok())
}
