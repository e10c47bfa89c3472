//! `baton graph FILE --format dot|mermaid`: deterministic pictures of a graph, edges from
//! each task to the tasks that need it.

use std::fmt::Write;

use crate::graph::{Action, Graph};

fn engine(action: &Action) -> &str {
    match action {
        Action::Shell { .. } => "shell",
        Action::Agent { engine, .. } => engine,
        Action::Noop => "noop",
    }
}

/// Graphviz DOT.
pub fn to_dot(graph: &Graph) -> String {
    let quote = |s: &str| {
        format!(
            "\"{}\"",
            s.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n")
        )
    };
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(graph.name()));
    out.push_str("  rankdir=LR;\n  node [shape=box];\n");
    for task in graph.tasks() {
        let id = task.id.as_str();
        let label = format!("{id}\n{}", engine(&task.action));
        let _ = writeln!(out, "  {} [label={}];", quote(id), quote(&label));
    }
    for task in graph.tasks() {
        for &need in &task.needs {
            let _ = writeln!(
                out,
                "  {} -> {};",
                quote(graph.task(need).id.as_str()),
                quote(task.id.as_str())
            );
        }
    }
    out.push_str("}\n");
    out
}

/// A Mermaid flowchart. Nodes are named `t0`, `t1`, … (Mermaid reads `-` and `.` in names as
/// syntax); the labels carry the ids.
pub fn to_mermaid(graph: &Graph) -> String {
    let escape = |s: &str| {
        s.replace('&', "#amp;")
            .replace('"', "#quot;")
            .replace('<', "#lt;")
            .replace('>', "#gt;")
    };
    let mut out = String::from("flowchart LR\n");
    for (i, task) in graph.tasks().iter().enumerate() {
        let _ = writeln!(
            out,
            "  t{i}[\"{} ({})\"]",
            escape(task.id.as_str()),
            escape(engine(&task.action))
        );
    }
    for (i, task) in graph.tasks().iter().enumerate() {
        for &need in &task.needs {
            let _ = writeln!(out, "  t{need} --> t{i}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::load_str;

    const GRAPH: &str = r#"
name = "say \"hi\""
[[task]]
id = "build-api.v2"
prompt = "build"
[[task]]
id = "test"
needs = ["build-api.v2"]
run = "cargo test"
[[task]]
id = "group"
engine = "noop"
needs = ["test"]
"#;

    #[test]
    fn dot() {
        let graph = load_str(Path::new("g.toml"), GRAPH).unwrap();
        insta::assert_snapshot!(to_dot(&graph), @r#"
        digraph "say \"hi\"" {
          rankdir=LR;
          node [shape=box];
          "build-api.v2" [label="build-api.v2\nclaude"];
          "test" [label="test\nshell"];
          "group" [label="group\nnoop"];
          "build-api.v2" -> "test";
          "test" -> "group";
        }
        "#);
    }

    #[test]
    fn mermaid() {
        let graph = load_str(Path::new("g.toml"), GRAPH).unwrap();
        insta::assert_snapshot!(to_mermaid(&graph), @r#"
        flowchart LR
          t0["build-api.v2 (claude)"]
          t1["test (shell)"]
          t2["group (noop)"]
          t0 --> t1
          t1 --> t2
        "#);
    }
}
