//! The concurrency limit and scope exclusion, checked against when attempts really ran.

use crate::test::{Test, intervals, overlaps, peak_overlap};

#[test]
fn concurrency_limit_is_reached_and_never_exceeded() {
    let mut graph = String::new();
    for i in 0..12 {
        graph.push_str(&format!(
            "[[task]]\nid = \"t{i:02}\"\nrun = \"sleep 0.2\"\n\n"
        ));
    }
    let out = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml", "-j", "3", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json()["timeline"]["peak"], 3);
    let store = out.store();
    let attempts = store.all_attempts();
    assert_eq!(attempts.len(), 12);
    let spans = intervals(&attempts);
    assert_eq!(peak_overlap(&spans), 3, "{spans:?}");
    store.assert_consistent();
}

#[test]
fn overlapping_scopes_never_run_together() {
    // `migrate` and `models` may both write `src/db/x.rs`; `docs` and `assets` touch other
    // files and are free to run beside either.
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[run]
concurrency = 4

[[task]]
id = "migrate"
scope = ["src/**"]
run = "sleep 0.4"

[[task]]
id = "models"
scope = ["src/db/*.rs"]
run = "sleep 0.4"

[[task]]
id = "docs"
scope = ["docs/**"]
run = "sleep 0.6"

[[task]]
id = "assets"
run = "sleep 0.6"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let store = out.store();
    let span = |id: &str| intervals(&store.attempts(id))[0];
    let (migrate, models) = (span("migrate"), span("models"));
    assert!(
        !overlaps(migrate, models),
        "scoped tasks ran together: migrate {migrate:?}, models {models:?}"
    );
    for free in ["docs", "assets"] {
        let free_span = span(free);
        assert!(
            overlaps(free_span, migrate) || overlaps(free_span, models),
            "{free} {free_span:?} ran beside neither migrate {migrate:?} nor models {models:?}"
        );
    }
    assert!(out.json()["timeline"]["peak"].as_u64().unwrap() >= 3);
    let conflicts = Test::new()
        .graph(
            "g.toml",
            &std::fs::read_to_string(out.path().join("g.toml")).unwrap(),
        )
        .args(&["plan", "g.toml", "--json"])
        .run()
        .status(0)
        .json()["conflicts"]
        .to_string();
    assert!(
        conflicts.contains("migrate") && conflicts.contains("models"),
        "{conflicts}"
    );
    assert!(!conflicts.contains("docs"), "{conflicts}");
}
