//! The templates in a task's fields: what they may name, and where in the file a problem is.

use std::collections::HashMap;

use crate::diagnostic::Diagnostic;
use crate::graph::TaskIndex;
use crate::spec::{At, TaskSpec};
use crate::template::Template;
use crate::tree::Span;

pub(super) fn check_templates(
    t: &TaskSpec,
    source: &str,
    index: &HashMap<&str, TaskIndex>,
    diags: &mut Vec<Diagnostic>,
) {
    let needs: Vec<&str> = t.needs.iter().map(|n| n.value.as_str()).collect();
    check_templates_with(t, source, index, &needs, diags);
}

/// [`check_templates`] with the names a template may give the task's needs.
pub(crate) fn check_templates_with(
    t: &TaskSpec,
    source: &str,
    index: &HashMap<&str, TaskIndex>,
    needs: &[&str],
    diags: &mut Vec<Diagnostic>,
) {
    let fans_out = t.more().for_each.is_some();
    for (field, text) in [("run", &t.run), ("prompt", &t.prompt)] {
        let Some(text) = text else { continue };
        let errors = match Template::parse(&text.value, needs) {
            // Names no task has are known now, not when its first attempt renders it.
            Ok(template) => {
                for name in template.unknown_names(fans_out) {
                    let offset = find_name(&text.value, &name);
                    diags.push(
                        Diagnostic::at(
                            span_in_string(source, text, offset),
                            format!("in `{field}`: `{name}` is not a name templates know"),
                        )
                        .label("unknown")
                        .help(if fans_out {
                            "templates know `item`, `needs.ID.output` (also `.status`, `.files_changed`, `.json`), `task.id`, `task.scope`, `task.verify`, `run.id`, `run.name`"
                        } else if name == "item" {
                            "`item` is a `for_each` task's: this task has no `for_each`"
                        } else {
                            "templates know `needs.ID.output` (also `.status`, `.files_changed`, `.json`), `task.id`, `task.scope`, `task.verify`, `run.id`, `run.name`"
                        }),
                    );
                }
                continue;
            }
            Err(errors) => errors,
        };
        for e in errors {
            let mut message = e.message;
            let help = match referenced_task(&text.value, e.offset, index) {
                Some(id) => {
                    // A near-miss among the needs would mislead: the task named exists.
                    if let Some(cut) = message.find("; did you mean") {
                        message.truncate(cut);
                    }
                    format!(
                    "`{id}` is a task in this file; add it to this task's `needs`: only the tasks in `needs` are handed over"
                    )
                }
                None => "templates refer to predecessors as `{{ needs.ID.output }}` (also `.status`, `.files_changed`, `.json`); ID must be in `needs`".to_owned(),
            };
            diags.push(
                Diagnostic::at(
                    span_in_string(source, text, e.offset),
                    format!("in `{field}`: {message}"),
                )
                .label("here")
                .help(help),
            );
        }
    }
}

/// Where `name` is first used in a tag of `text` (0 if it cannot be found).
fn find_name(text: &str, name: &str) -> usize {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(name).map(|k| from + k) {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + name.len()).copied();
        let word = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !word(before) && !word(after) && text[..at].contains("{{") {
            return at;
        }
        from = at + name.len();
    }
    0
}

/// If the template error at `offset` is a `needs.ID` / `needs["ID"]` reference to a task of
/// this graph, that task's id (the longest that fits, since ids may contain dots).
fn referenced_task<'i>(
    text: &str,
    offset: usize,
    index: &HashMap<&'i str, TaskIndex>,
) -> Option<&'i str> {
    let before = text.get(..offset)?;
    if !(before.ends_with("needs.") || before.ends_with("needs[\"") || before.ends_with("needs['"))
    {
        return None;
    }
    let rest = text.get(offset..)?;
    let len = rest.bytes().take_while(|&b| is_id_byte(b)).count();
    (1..=len)
        .rev()
        .filter(|&k| k == len || rest.as_bytes()[k] == b'.')
        .find_map(|k| index.get_key_value(&rest[..k]).map(|(id, _)| *id))
}

/// A byte that can be part of a task id: ASCII letters, digits, `_`, `-`, `.`, or any byte of
/// a non-ASCII character (ids take letters of any script; an id ends at ASCII punctuation or
/// space, so it is cut at a character boundary).
fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') || !b.is_ascii()
}

/// The file span of byte `offset` of a string value. Exact when the value appears verbatim in
/// the file (no escapes); otherwise the whole string.
fn span_in_string(source: &str, text: &At<String>, offset: usize) -> Span {
    let raw = source.get(text.span.clone()).unwrap_or("");
    match raw.find(text.value.as_str()) {
        Some(k) if !text.value.is_empty() && offset <= text.value.len() => {
            let start = text.span.start + k + offset;
            let len = text.value.as_bytes()[offset..]
                .iter()
                .take_while(|&&b| is_id_byte(b))
                .count()
                .max(1);
            start..(start + len).min(text.span.end)
        }
        _ => text.span.clone(),
    }
}

/// The file span of the character at byte `offset` of a string value, through escapes
/// (`"\u202E"` is six bytes in the file, one character in the value); the whole string when
/// the file's text cannot be followed.
pub(crate) fn char_span(source: &str, text: &At<String>, offset: usize) -> Span {
    let whole = text.span.clone();
    let Some(raw) = source.get(whole.clone()) else {
        return whole;
    };
    let (mut i, escapes) = if raw.starts_with("\"\"\"") {
        (3, true)
    } else if raw.starts_with("'''") {
        (3, false)
    } else if raw.starts_with('"') {
        (1, true)
    } else if raw.starts_with('\'') {
        (1, false)
    } else {
        return whole;
    };
    // A newline right after an opening `"""` or `'''` is not part of the value.
    if i == 3 {
        i += [("\r\n", 2), ("\n", 1)]
            .iter()
            .find(|(nl, _)| raw[i..].starts_with(nl))
            .map_or(0, |(_, n)| *n);
    }
    let mut v = 0;
    while v <= offset {
        let rest = &raw[i..];
        let step = if escapes && rest.starts_with('\\') {
            unescape(rest)
        } else {
            rest.chars().next().map(|c| (c.len_utf8(), Some(c)))
        };
        let Some((len, produced)) = step else {
            return whole;
        };
        if let Some(c) = produced {
            if !text.value[v..].starts_with(c) {
                return whole;
            }
            if v == offset {
                return whole.start + i..whole.start + i + len;
            }
            v += c.len_utf8();
        }
        i += len;
    }
    whole
}

/// The length of the escape at the start of `rest` (TOML or JSON) and the character it stands
/// for (`None` for a TOML line-ending backslash, which stands for nothing).
fn unescape(rest: &str) -> Option<(usize, Option<char>)> {
    let hex = |from: usize, len: usize| -> Option<u32> {
        u32::from_str_radix(rest.get(from..from + len)?, 16).ok()
    };
    let simple = |c: char| Some((2, Some(c)));
    match rest[1..].chars().next()? {
        'u' => {
            let high = hex(2, 4)?;
            if (0xD800..0xDC00).contains(&high) && rest[6..].starts_with("\\u") {
                let low = hex(8, 4)?;
                let c =
                    char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low.checked_sub(0xDC00)?))?;
                return Some((12, Some(c)));
            }
            Some((6, Some(char::from_u32(high)?)))
        }
        'U' => Some((10, Some(char::from_u32(hex(2, 8)?)?))),
        'x' => Some((4, Some(char::from_u32(hex(2, 2)?)?))),
        'b' => simple('\u{8}'),
        't' => simple('\t'),
        'n' => simple('\n'),
        'f' => simple('\u{c}'),
        'r' => simple('\r'),
        'e' => simple('\u{1b}'),
        c @ ('"' | '\\' | '/') => simple(c),
        ' ' | '\t' | '\r' | '\n' => {
            let skipped = rest[1..]
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(rest.len() - 1);
            Some((1 + skipped, None))
        }
        _ => None,
    }
}
