//! TOML text to the spanned [`Node`] tree, with toml's span-keeping parser.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diagnostic::Diagnostic;
use crate::toml_split::task_groups;
use crate::tree::{Entry, Kind, MAX_DEPTH, Node, Span};

/// About how many bytes of `[[task]]` sections [`parse_tasks`] parses at once: enough to make
/// each call worth it, few enough that toml's working copies stay small.
/// Tests take every task alone, to exercise the seams.
const GROUP_BYTES: usize = if cfg!(test) { 1 } else { 16 * 1024 };

pub(crate) fn parse(text: &str) -> Result<Node, Vec<Diagnostic>> {
    parse_at(text, 0)
}

/// A document whose `[[task]]` sections are parsed apart from the rest, a group at a time, so
/// that a file of many tasks never has all of them in toml's form (see `toml_split`).
pub(crate) struct Split {
    /// The document with the groups blanked out (offsets unchanged).
    pub rest: Node,
    /// For [`parse_tasks`], in file order.
    pub groups: Vec<Range<usize>>,
    /// How many `[[task]]` headers the groups hold.
    pub tasks: usize,
}

/// `None` when the document is better parsed whole with [`parse`], which then also reports its
/// errors: the scan is unsure, there is no `[[task]]`, the rest does not parse, or the rest also
/// says `task` or `tasks` (which only the whole document can explain).
pub(crate) fn split(text: &str) -> Option<Split> {
    let (groups, tasks) = task_groups(text, GROUP_BYTES)?;
    if groups.is_empty() {
        return None;
    }
    let mut rest = text.as_bytes().to_vec();
    for group in &groups {
        rest[group.clone()].fill(b' ');
    }
    // Groups begin and end at line starts, so only whole characters were blanked.
    let rest = String::from_utf8(rest).ok()?;
    let rest = parse_at(&rest, 0).ok()?;
    if rest.get("task").is_some() || rest.get("tasks").is_some() {
        return None;
    }
    Some(Split {
        rest,
        groups,
        tasks,
    })
}

/// The task tables of one group of [`split`], with spans into the whole text, and the span of
/// the group's first `task` key. `None` if the group does not parse (the whole document will
/// say why).
pub(crate) fn parse_tasks(text: &str, group: Range<usize>) -> Option<(Span, Vec<Node>)> {
    let root = parse_at(text.get(group.clone())?, group.start).ok()?;
    let Kind::Table(mut entries) = root.kind else {
        return None;
    };
    let entry = entries.pop().filter(|e| e.key == "task")?;
    match entry.value.kind {
        Kind::Array(items) if entries.is_empty() => Some((entry.key_span, items)),
        _ => None,
    }
}

/// Parses `text`, which starts at offset `base` of the file.
fn parse_at(text: &str, base: usize) -> Result<Node, Vec<Diagnostic>> {
    let (doc, errors) = DeTable::parse_recoverable(text);
    // Recovery goes on after the first error and then mostly reports its own confusion: the first
    // error is the one worth reading.
    if let Some(first) = errors
        .iter()
        .min_by_key(|e| e.span().map_or(usize::MAX, |s| s.start))
    {
        let message = first.message().trim().replace('\n', "; ");
        let d = match first.span() {
            Some(span) => Diagnostic::at(shift(clamp(span, text.len()), base), message),
            None => Diagnostic::new(message),
        };
        return Err(vec![d.help("this is not valid TOML; see https://toml.io")]);
    }
    let mut diags = Vec::new();
    let entries = table(doc.into_inner(), 0, base, &mut diags);
    // toml is done with the text; its tables are freed entry by entry as they are converted.
    if diags.is_empty() {
        Ok(Node {
            span: base..base + text.len(),
            kind: Kind::Table(entries),
        })
    } else {
        Err(diags)
    }
}

fn clamp(span: std::ops::Range<usize>, len: usize) -> std::ops::Range<usize> {
    span.start.min(len)..span.end.min(len).max(span.start.min(len))
}

fn shift(span: Span, base: usize) -> Span {
    span.start + base..span.end + base
}

fn table(t: DeTable<'_>, depth: usize, base: usize, diags: &mut Vec<Diagnostic>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = t
        .into_iter()
        .map(|(k, v)| Entry {
            key_span: shift(k.span(), base),
            key: k.into_inner().into_owned(),
            value: value(v, depth + 1, base, diags),
        })
        .collect();
    // toml keeps keys sorted by name; the walker wants file order.
    entries.sort_by_key(|e| e.key_span.start);
    entries
}

fn value(v: Spanned<DeValue<'_>>, depth: usize, base: usize, diags: &mut Vec<Diagnostic>) -> Node {
    let span = shift(v.span(), base);
    if depth > MAX_DEPTH {
        diags.push(Diagnostic::at(span.clone(), "value is nested too deeply"));
        return Node {
            span,
            kind: Kind::Null,
        };
    }
    let kind = match v.into_inner() {
        DeValue::String(s) => Kind::Str(s.into_owned()),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Kind::Int(n),
            Err(_) => {
                diags.push(Diagnostic::at(span.clone(), "integer out of range"));
                Kind::Null
            }
        },
        DeValue::Float(f) => match parse_float(f.as_str()) {
            Some(x) => Kind::Float(x),
            None => {
                diags.push(Diagnostic::at(span.clone(), "float out of range"));
                Kind::Null
            }
        },
        DeValue::Boolean(b) => Kind::Bool(b),
        DeValue::Datetime(_) => Kind::Datetime,
        DeValue::Array(a) => Kind::Array(
            a.into_iter()
                .map(|item| value(item, depth + 1, base, diags))
                .collect(),
        ),
        DeValue::Table(t) => Kind::Table(table(t, depth, base, diags)),
    };
    Node { span, kind }
}

fn parse_float(s: &str) -> Option<f64> {
    let s = s.replace('_', "");
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_file_order_and_spans() {
        let text = "name = \"x\"\nbig = 2_000_000\n[[task]]\nid = \"a\"\n";
        let node = parse(text).unwrap();
        let keys: Vec<_> = node
            .table()
            .unwrap()
            .iter()
            .map(|e| e.key.as_str())
            .collect();
        assert_eq!(keys, ["name", "big", "task"]);
        let big = node.get("big").unwrap();
        assert_eq!(big.value.kind, Kind::Int(2_000_000));
        assert_eq!(&text[big.value.span.clone()], "2_000_000");
        let Kind::Array(tasks) = &node.get("task").unwrap().value.kind else {
            panic!("task is an array");
        };
        assert_eq!(&text[tasks[0].span.clone()], "[[task]]");
    }

    #[test]
    fn reports_only_the_first_syntax_error() {
        let errors = parse("[[task]]\nneeds = [\"b\"\nfoo = 1\n").unwrap_err();
        assert_eq!(errors.len(), 1);
    }
}
