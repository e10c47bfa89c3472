//! Paths a task names (its scope, `cwd`, `worktree_include`) and its `runs_on` labels.

use crate::diagnostic::Diagnostic;
use crate::glob::{GlobError, check_relative, parse_scope};
use crate::spec::{At, TaskSpec};

use super::char_span;

/// Scope entries, `cwd` and `worktree_include` entries: inside the repository, valid globs
/// (not `cwd`), and written with plain characters ([`crate::path_chars`]).
pub(crate) fn check_paths(t: &TaskSpec, source: &str, diags: &mut Vec<Diagnostic>) {
    let more = t.more();
    for entry in &more.scope {
        check_path(
            source,
            "scope",
            entry,
            parse_scope(&entry.value).err(),
            diags,
        );
    }
    if let Some(cwd) = &more.cwd {
        check_path(source, "cwd", cwd, check_relative(&cwd.value).err(), diags);
    }
    for entry in more.worktree_include.iter().flatten() {
        check_include(source, entry, diags);
    }
    for label in more.runs_on.iter().flatten() {
        check_label(label, diags);
    }
}

/// A `runs_on` label is one word, as `baton worker --labels a,b` writes it.
pub(super) fn check_label(label: &At<String>, diags: &mut Vec<Diagnostic>) {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if label.value.is_empty() || !label.value.chars().all(word) {
        diags.push(
            Diagnostic::at(
                label.span.clone(),
                format!(
                    "runs_on label `{}` is not a label",
                    label.value.escape_debug()
                ),
            )
            .label("not a label")
            .help("a label is a word of letters, digits, `-`, `_`, `.` or `:`, like `gpu`"),
        );
    }
}

pub(super) fn check_include(source: &str, entry: &At<String>, diags: &mut Vec<Diagnostic>) {
    let error = parse_scope(&entry.value).err();
    check_path(source, "worktree_include", entry, error, diags);
}

fn check_path(
    source: &str,
    field: &str,
    entry: &At<String>,
    error: Option<GlobError>,
    diags: &mut Vec<Diagnostic>,
) {
    let help = "paths are relative to the repository root, like `src/db/**`";
    let shown = entry.value.escape_debug();
    let Some(error) = error else { return };
    if matches!(&error, GlobError::OddChar(odd) if odd.ch == '\0') {
        // Refused already, as a NUL in any string is (`tree::refuse_nul`).
        return;
    }
    diags.push(match error {
        GlobError::Escapes(why) => Diagnostic::at(
            entry.span.clone(),
            format!("{field} `{shown}` escapes the repository: {why}"),
        )
        .label("outside the repository")
        .help(help),
        GlobError::OddChar(odd) => Diagnostic::at(
            char_span(source, entry, odd.offset),
            format!(
                "{field} `{shown}` contains {}, which {}",
                odd.describe(),
                odd.why
            ),
        )
        .label(format!("U+{:04X}", odd.ch as u32))
        .help("write the path with plain characters, with `/` between directories"),
        GlobError::Syntax(why) => Diagnostic::at(
            entry.span.clone(),
            format!("invalid {field} `{shown}`: {why}"),
        )
        .label("invalid glob")
        .help("globs use `*`, `?`, `**`, `[a-z]` and `{a,b}`"),
    });
}
