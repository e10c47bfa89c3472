//! The engine names a graph file may use: the built-in ones, those a configuration defines, and
//! (kept apart) those read back from stored graphs.

/// Engines a task may name. `noop` is internal (benchmarks, grouping).
pub const ENGINES: &[&str] = &[
    "shell", "noop", "claude", "codex", "gemini", "aider", "http",
];

/// Engine names a configuration file defines (`[engines.NAME]` with a `kind`), accepted in
/// graph files beside [`ENGINES`]. Process-wide because a configuration is: the command line
/// reads it once, before any graph. Names are leaked so that tasks can hold `&'static str`
/// like the built-in ones (a handful of short strings, once per process).
static CONFIGURED_ENGINES: std::sync::RwLock<Vec<&'static str>> =
    std::sync::RwLock::new(Vec::new());

/// Accepts `names` as engines in the graph files loaded from now on.
pub fn register_engines<S: AsRef<str>>(names: impl IntoIterator<Item = S>) {
    let mut known = CONFIGURED_ENGINES
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for name in names {
        let name = name.as_ref();
        if !ENGINES.contains(&name) && !known.contains(&name) {
            known.push(Box::leak(name.to_owned().into_boxed_str()));
        }
    }
}

/// Engine names read back from stored graphs that no configuration here defines: interned
/// apart from [`CONFIGURED_ENGINES`], so that a long-lived process (`serve`, `mcp`, a worker)
/// that read a run's graph does not thereby accept the name in graph files it loads later.
static READ_BACK_ENGINES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// `name` as the `&'static str` a walked engine is: a built-in or configured engine's, else
/// leaked once (a stored graph read back names only engines its run knew).
pub(crate) fn engine_static(name: &str) -> &'static str {
    if let Some(&engine) = all_engines().iter().find(|&&engine| engine == name) {
        return engine;
    }
    let mut read_back = READ_BACK_ENGINES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&engine) = read_back.iter().find(|&&engine| engine == name) {
        return engine;
    }
    let engine: &'static str = Box::leak(name.to_owned().into_boxed_str());
    read_back.push(engine);
    engine
}

/// The built-in engines and the configured ones.
pub(crate) fn all_engines() -> Vec<&'static str> {
    let configured = CONFIGURED_ENGINES
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    ENGINES
        .iter()
        .copied()
        .chain(configured.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// A name read back from a stored graph (a run of another configuration) is not thereby
    /// an engine graph files may name in the same process: before, `serve` or a worker that
    /// had read such a run accepted it in every graph it loaded after.
    #[test]
    fn an_engine_read_back_is_not_accepted_in_graph_files() {
        let name = "read-back-only-engine";
        assert_eq!(super::engine_static(name), name);
        assert!(std::ptr::eq(
            super::engine_static(name),
            super::engine_static(name)
        ));
        let text = format!("[[task]]\nid = \"a\"\nprompt = \"hi\"\nengine = \"{name}\"\n");
        let err = crate::load::load_str(Path::new("g.toml"), &text).unwrap_err();
        assert!(format!("{err:?}").contains("unknown engine"), "{err:?}");
    }
}
