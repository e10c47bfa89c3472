//! TOML text to the spanned [`Node`] tree, with toml's span-keeping parser.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diagnostic::Diagnostic;
use crate::tree::{Entry, Kind, MAX_DEPTH, Node};

pub(crate) fn parse(text: &str) -> Result<Node, Vec<Diagnostic>> {
    let (doc, errors) = DeTable::parse_recoverable(text);
    // Recovery goes on after the first error and then mostly reports its own confusion: the first
    // error is the one worth reading.
    if let Some(first) = errors
        .iter()
        .min_by_key(|e| e.span().map_or(usize::MAX, |s| s.start))
    {
        let message = first.message().trim().replace('\n', "; ");
        let d = match first.span() {
            Some(span) => Diagnostic::at(clamp(span, text.len()), message),
            None => Diagnostic::new(message),
        };
        return Err(vec![d.help("this is not valid TOML; see https://toml.io")]);
    }
    let mut diags = Vec::new();
    let entries = table(doc.into_inner(), 0, &mut diags);
    if diags.is_empty() {
        Ok(Node {
            span: 0..text.len(),
            kind: Kind::Table(entries),
        })
    } else {
        Err(diags)
    }
}

fn clamp(span: std::ops::Range<usize>, len: usize) -> std::ops::Range<usize> {
    span.start.min(len)..span.end.min(len).max(span.start.min(len))
}

fn table(t: DeTable<'_>, depth: usize, diags: &mut Vec<Diagnostic>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = t
        .into_iter()
        .map(|(k, v)| Entry {
            key_span: k.span(),
            key: k.into_inner().into_owned(),
            value: value(v, depth + 1, diags),
        })
        .collect();
    // toml keeps keys sorted by name; the walker wants file order.
    entries.sort_by_key(|e| e.key_span.start);
    entries
}

fn value(v: Spanned<DeValue<'_>>, depth: usize, diags: &mut Vec<Diagnostic>) -> Node {
    let span = v.span();
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
            a.iter()
                .cloned()
                .map(|item| value(item, depth + 1, diags))
                .collect(),
        ),
        DeValue::Table(t) => Kind::Table(table(t, depth, diags)),
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
