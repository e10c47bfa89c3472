//! The entry points: a graph file (or its text) to a validated [`Graph`].

use std::path::Path;

use crate::diagnostic::{Diagnostic, LoadError};
use crate::from_json::Dialect;
use crate::graph::Graph;
use crate::secrets::{Secrets, masked};
use crate::spec::Spec;
use crate::tree::{Node, refuse_nul};
use crate::{from_json, from_toml, legacy, validate, walk};

/// Reads and validates a graph file. The format follows the extension: `.toml`, `.json`
/// (strict JSON), `.jsonc` (comments and trailing commas allowed), `.json5`; anything else is
/// tried as TOML, then as strict JSON.
pub fn load(path: &Path) -> Result<Graph, LoadError> {
    // Needed to check the file for secrets, and by a run of it: compiled while the file is
    // read and parsed.
    baton_redact::Redactor::warm_up_default();
    let bytes = std::fs::read(path).map_err(|e| {
        LoadError::new(
            path.to_path_buf(),
            String::new(),
            vec![
                Diagnostic::new(format!("cannot read the graph file: {e}")).help(
                    "check the path; `baton plan FILE` reads the same files as `baton run FILE`",
                ),
            ],
        )
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => load_str(path, &text),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let d = Diagnostic::at(at..at + 1, "the file is not valid UTF-8")
                .label("invalid byte")
                .help("save the file as UTF-8");
            Err(LoadError::new(path.to_path_buf(), text, vec![d]))
        }
    }
}

/// Validates the text of a graph file; `path` picks the format and names the file in errors.
pub fn load_str(path: &Path, text: &str) -> Result<Graph, LoadError> {
    let mut secrets = Secrets::default();
    let fail = |diags, secrets: &Secrets| {
        // The text shown with the errors does not show the secrets found in it.
        let shown = if secrets.masks.is_empty() {
            text.to_owned()
        } else {
            masked(text, &secrets.masks)
        };
        LoadError::new(path.to_path_buf(), shown, diags)
    };
    // A byte-order mark is three bytes; three spaces keep every offset where it was.
    let unmarked;
    let unmarked_text = match text.strip_prefix('\u{feff}') {
        Some(rest) => {
            unmarked = format!("   {rest}");
            unmarked.as_str()
        }
        None => text,
    };
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let mut diags = Vec::new();
    let split = match extension.as_deref() {
        Some("json" | "jsonc" | "json5") => None,
        _ => walk_split(unmarked_text, &mut diags, &mut secrets),
    };
    let spec = match split {
        Some(spec) => spec,
        None => {
            diags.clear();
            secrets = Secrets::default();
            let root = parse(extension.as_deref(), unmarked_text).map_err(|d| fail(d, &secrets))?;
            if extension.as_deref() == Some("toml") {
                plural_tasks(&root, &mut diags);
            }
            secrets.check(&root, unmarked_text, &mut diags);
            refuse_nul(&root, "", unmarked_text, &mut diags);
            match legacy::detect(&root) {
                Some(shape) => legacy::convert(&root, shape, &mut diags),
                None => walk::walk(&root, &mut diags),
            }
        }
    };
    // What was met while the redactor was still compiling, now that it has had the parse's
    // time to finish.
    secrets.finish(unmarked_text, &mut diags);
    validate::validate(spec, text, path, diags).map_err(|d| fail(d, &secrets))
}

/// A TOML document walked a group of tasks at a time (see [`from_toml::split`]), so that the
/// whole document is never in memory as a tree. `None`: walk it whole instead.
///
/// The groups are parsed on a second thread while this one walks those parsed before: parsing
/// was half of loading a large file, and one core sat idle. Only the parsed trees, short-lived,
/// are made there (at most [`PARSED_AHEAD`] groups ahead); the tasks, which live on, are made
/// here. Handing the tasks over instead cost a 100,000-task load 10 MB more: memory the second
/// thread's allocator kept.
fn walk_split(text: &str, diags: &mut Vec<Diagnostic>, secrets: &mut Secrets) -> Option<Spec> {
    let from_toml::Split {
        rest,
        groups,
        tasks,
    } = from_toml::split(text)?;
    secrets.check(&rest, text, diags);
    refuse_nul(&rest, "", text, diags);
    let mut spec = walk::walk(&rest, diags);
    drop(rest);
    // Growing by doubling would hold up to twice the tasks, and both copies while it moves.
    spec.tasks.reserve_exact(tasks);
    std::thread::scope(|scope| {
        let (sender, parsed) = std::sync::mpsc::sync_channel(PARSED_AHEAD);
        let parser = std::thread::Builder::new()
            .name("toml-parse".into())
            .spawn_scoped(scope, move || {
                for group in groups {
                    let group = from_toml::parse_tasks(text, group);
                    let failed = group.is_none();
                    // Sent nowhere: the walk stopped.
                    if sender.send(group).is_err() || failed {
                        break;
                    }
                }
            });
        // No thread to be had: the document is walked whole, on this one.
        let parser = parser.ok()?;
        let walked = parsed.iter().try_for_each(|group| {
            let (key_span, items) = group?;
            spec.tasks_span.get_or_insert(key_span);
            for item in &items {
                secrets.check(item, text, diags);
                refuse_nul(item, "", text, diags);
                if let Some(task) = walk::task(item, diags) {
                    spec.tasks.push(task);
                }
            }
            Some(())
        });
        drop(parsed);
        if let Err(panic) = parser.join() {
            std::panic::resume_unwind(panic);
        }
        walked
    })?;
    Some(spec)
}

/// Groups of `[[task]]` sections parsed ahead of the walk (see [`walk_split`]).
const PARSED_AHEAD: usize = 2;

/// `[[tasks]]` in a TOML file: JSON files say `tasks` (both spellings are taken there), but in
/// TOML the table is `[[task]]`, and a plural one is the typo it looks like.
fn plural_tasks(root: &Node, diags: &mut Vec<Diagnostic>) {
    let crate::tree::Kind::Table(entries) = &root.kind else {
        return;
    };
    for entry in entries.iter().filter(|e| e.key == "tasks") {
        diags.push(
            Diagnostic::at(entry.key_span.clone(), "unknown field `tasks`")
                .label("did you mean `[[task]]`?")
                .help("in TOML each task is a `[[task]]` table: write `[[task]]`, singular"),
        );
    }
}

fn parse(extension: Option<&str>, text: &str) -> Result<Node, Vec<Diagnostic>> {
    match extension {
        Some("toml") => from_toml::parse(text),
        Some("json") => from_json::parse(text, Dialect::Strict),
        Some("jsonc") => from_json::parse(text, Dialect::Jsonc),
        Some("json5") => from_json::parse(text, Dialect::Json5),
        other => from_toml::parse(text).or_else(|mut toml_errors| {
            from_json::parse(text, Dialect::Strict).map_err(|_| {
                let what = match other {
                    Some(ext) => format!("a `.{ext}` file"),
                    None => "a file without an extension".to_owned(),
                };
                toml_errors.push(
                    Diagnostic::new(format!(
                        "{what} was read as TOML (and is not valid JSON either)"
                    ))
                    .help("name graph files `*.toml` or `*.json`"),
                );
                toml_errors
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec and diagnostics of `text` walked whole, and walked split if it splits.
    fn both_ways(text: &str) -> (String, Option<String>) {
        let root = parse(Some("toml"), text).unwrap();
        let mut diags = Vec::new();
        let spec = walk::walk(&root, &mut diags);
        let whole = format!("{spec:?}\n{diags:?}");
        let mut diags = Vec::new();
        let split = walk_split(text, &mut diags, &mut Secrets::default())
            .map(|spec| format!("{spec:?}\n{diags:?}"));
        (whole, split)
    }

    #[test]
    fn split_walk_is_the_whole_walk() {
        let text = r#"# a graph
name = "x"
[defaults]
engine = "shell"

[[task]]
id = "a"
run = """
[[task]]
id = "not a task"
"""
[task.env]
B = 2

[[task]]  # b
id = "b"
needs = [
  "a",
]
timeout = 30
env.A = "1"
bogus = { x = "[" }

[run]
concurrency = 0

[[task]]
id = "c"
prompt = '''it's'''
[[task.verify]]
x = 1
"#;
        let (whole, split) = both_ways(text);
        assert_eq!(split.as_deref(), Some(whole.as_str()));
        assert!(whole.contains("concurrency"), "{whole}");
    }

    /// Many groups (each task its own, in tests), parsed on one thread and walked on another:
    /// the tasks, the diagnostics and the secrets found are those of one walk of the whole
    /// document.
    #[test]
    fn a_walk_split_over_threads_is_the_whole_walk() {
        let _ = baton_redact::Redactor::default();
        let mut text = String::from("name = \"many\"\n");
        for i in 0..11 {
            text.push_str(&format!("\n[[task]]\nid = \"t{i}\"\nrun = \"echo {i}\"\n"));
            match i % 4 {
                1 => text.push_str("bogus = 1\n"),
                2 => text.push_str("timeout = \"soon\"\n"),
                3 => text.push_str(&format!("env.TOKEN = \"ghp_{}\"\n", "a1B2c3D4e5".repeat(4))),
                _ => {}
            }
        }
        // Walked whole, the secrets are looked for before the walk: the same diagnostics, in
        // another order.
        let walked = |split: bool| {
            let (mut diags, mut secrets) = (Vec::new(), Secrets::default());
            let spec = if split {
                walk_split(&text, &mut diags, &mut secrets).unwrap()
            } else {
                let root = parse(Some("toml"), &text).unwrap();
                secrets.check(&root, &text, &mut diags);
                walk::walk(&root, &mut diags)
            };
            secrets.finish(&text, &mut diags);
            let mut diags: Vec<String> = diags.iter().map(|d| format!("{d:?}")).collect();
            diags.sort();
            (format!("{spec:?}"), diags, secrets.masks)
        };
        let whole = walked(false);
        assert!(walked(true) == whole, "the split walk differs");
        for i in 0..11 {
            assert!(whole.0.contains(&format!("\"t{i}\"")), "t{i} missing");
        }
        assert_eq!(whole.1.len(), 3 + 3 + 2, "{:?}", whole.1);
        assert_eq!(whole.2.len(), 2, "{:?}", whole.2);
    }

    #[test]
    fn documents_that_only_parse_whole() {
        for text in [
            "[task.env]\nA = \"1\"\n[[task]]\nid = \"a\"\n",
            "task = []\n[[task]]\nid = \"a\"\n",
            "[[tasks]]\nid = \"b\"\n[[task]]\nid = \"a\"\n",
            "name = \"x\"\n",
        ] {
            assert_eq!(
                walk_split(text, &mut Vec::new(), &mut Secrets::default()).map(|_| ()),
                None,
                "{text}"
            );
        }
        for text in [
            "[[task]]\nid = \"a\"\n[task]\nid = \"b\"\n",
            "[[task]]\nid = \"a\"\nid = \"b\"\n",
            "[defaults]\n[[task]]\nid = \"a\"\n[defaults]\n",
        ] {
            assert_eq!(
                walk_split(text, &mut Vec::new(), &mut Secrets::default()).map(|_| ()),
                None,
                "{text}"
            );
            assert!(parse(Some("toml"), text).is_err(), "{text}");
        }
    }
}
