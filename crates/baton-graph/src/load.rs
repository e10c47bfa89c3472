//! The entry points: a graph file (or its text) to a validated [`Graph`].

use std::path::Path;

use crate::diagnostic::{Diagnostic, LoadError};
use crate::graph::Graph;
use crate::tree::Node;
use crate::{from_json, from_toml, legacy, validate, walk};

/// Reads and validates a graph file. The format follows the extension: `.toml`, `.json`
/// (comments and trailing commas allowed); anything else is tried as TOML, then JSON.
pub fn load(path: &Path) -> Result<Graph, LoadError> {
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
    let fail = |diags| LoadError::new(path.to_path_buf(), text.to_owned(), diags);
    let root = parse(path, text).map_err(fail)?;
    let mut diags = Vec::new();
    let spec = match legacy::detect(&root) {
        Some(shape) => legacy::convert(&root, shape, &mut diags),
        None => walk::walk(&root, &mut diags),
    };
    validate::validate(spec, text, path, diags).map_err(fail)
}

fn parse(path: &Path, text: &str) -> Result<Node, Vec<Diagnostic>> {
    // A byte-order mark is three bytes; three spaces keep every offset where it was.
    let unmarked;
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => {
            unmarked = format!("   {rest}");
            unmarked.as_str()
        }
        None => text,
    };
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match extension.as_deref() {
        Some("toml") => from_toml::parse(text),
        Some("json" | "jsonc" | "json5") => from_json::parse(text),
        other => from_toml::parse(text).or_else(|mut toml_errors| {
            from_json::parse(text).map_err(|_| {
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
