//! Robustness and scale: mutated files never panic, twenty thousand tasks load.

use super::*;

/// Every prefix of a valid file, and many single-byte mutations, load or fail without
/// panicking, and their errors display.
#[test]
fn mutated_files_never_panic() {
    let json = r#"{"name": "x", "run": {"concurrency": 2, "budget": {"tokens": 5}},
      "task": [{"id": "a", "run": "echo {{ needs.b.output }}", "needs": ["b"], "scope": ["src/{a,b}/[x-z]*"]},
               {"id": "b", "prompt": "p", "env": {"K": "v"}, "timeout": "5m"}]}"#;
    let legacy = r#"{"id": "p", "nodes": [{"id": "n 1", "goal": "g", "deps": ["n 2"], "estimatedTokens": 5},
      {"id": "n 2", "goal": "h", "agentKind": "shell"}]}"#;
    let fillers: &[u8] = b"\0\"'[]{}=,.-/\\\n #*?!{%}";
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (name, text) in [
        ("d.toml", DESIGN),
        ("d.json", json),
        ("l.json", legacy),
        ("d", DESIGN),
    ] {
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            try_load(name, &bytes[..cut]);
        }
        for _ in 0..2000 {
            let mut mutated = bytes.to_vec();
            for _ in 0..(1 + next() % 3) {
                let at = (next() as usize) % mutated.len();
                mutated[at] = fillers[(next() as usize) % fillers.len()];
            }
            try_load(name, &mutated);
        }
    }
}

fn try_load(name: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Err(e) = load_str(Path::new(name), &text) {
        let _ = e.to_string();
        for d in &e.diagnostics {
            if let Some(span) = &d.span {
                let _ = e.line_col(span.end);
            }
        }
    }
}

mod arbitrary {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}", ext in prop::sample::select(vec!["g.toml", "g.json", "g"])) {
            super::try_load(ext, text.as_bytes());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            super::try_load("g.toml", &bytes);
            super::try_load("g.json", &bytes);
        }

        #[test]
        fn deep_nesting_never_panics(depth in 1usize..3000) {
            super::try_load("g.json", format!("{}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes());
            super::try_load("g.toml", format!("a = {}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes());
            super::try_load("g.toml", format!("a = {}", "{b=".repeat(depth)).as_bytes());
        }
    }
}

/// A wide and deep graph: chains of ten, each chain's head needing the previous chain's
/// tail, every task with its own scope and a template.
fn big_graph(n: usize) -> String {
    let mut text = String::with_capacity(n * 120);
    text.push_str("name = \"big\"\n[defaults]\nengine = \"noop\"\n");
    for i in 0..n {
        text.push_str(&format!(
            "[[task]]\nid = \"t{i}\"\nscope = [\"crates/c{i}/**\"]\n"
        ));
        if i > 0 {
            text.push_str(&format!(
                "needs = [\"t{}\"]\nrun = \"echo {{{{ needs.t{}.output }}}}\"\n",
                i - 1,
                i - 1
            ));
        }
    }
    text
}

#[test]
fn twenty_thousand_tasks_load() {
    // Timing lives in benches/; this proves a large chain loads and keeps its order.
    let text = big_graph(20_000);
    let g = ok("big.toml", &text);
    assert_eq!(g.len(), 20_000);
    assert_eq!(g.task(19_999).needs, [19_998]);
}
