//! Any bytes as a graph file, in each format: loading never panics, and every error renders.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in ["graph.toml", "graph.json", "graph.txt"] {
        match baton_graph::load_str(Path::new(name), text) {
            Ok(graph) => {
                // A graph that loads can be planned, rendered and stored.
                let _ = baton_graph::plan(&graph).to_string();
                let _ = baton_graph::to_dot(&graph);
                let _ = baton_graph::to_mermaid(&graph);
                let stored = graph.to_stored_json();
                let back = baton_graph::Graph::from_stored_json(&stored).expect("round trip");
                assert_eq!(back.len(), graph.len());
            }
            Err(err) => {
                let _ = err.to_string();
                for d in &err.diagnostics {
                    if let Some(span) = &d.span {
                        let _ = err.line_col(span.start);
                    }
                }
            }
        }
    }
});
