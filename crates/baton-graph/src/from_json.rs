//! JSON (with comments and trailing commas) to the spanned [`Node`] tree.

use jsonc_parser::ast::{ObjectPropName, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};

use crate::diagnostic::Diagnostic;
use crate::tree::{Entry, Kind, MAX_DEPTH, Node};

pub(crate) fn parse(text: &str) -> Result<Node, Vec<Diagnostic>> {
    let result =
        parse_to_ast(text, &CollectOptions::default(), &ParseOptions::default()).map_err(|e| {
            let range = e.range();
            let start = range.start.min(text.len());
            vec![
                Diagnostic::at(
                    start..range.end.clamp(start, text.len()),
                    e.kind().to_string(),
                )
                .help("this is not valid JSON"),
            ]
        })?;
    let Some(root) = result.value else {
        return Err(vec![Diagnostic::at(0..0, "the file is empty").help(
            "a graph file holds a table with `name` and `[[task]]` entries; see DESIGN.md",
        )]);
    };
    let mut diags = Vec::new();
    let node = value(root, 0, &mut diags);
    if diags.is_empty() {
        Ok(node)
    } else {
        Err(diags)
    }
}

fn value(v: Value<'_>, depth: usize, diags: &mut Vec<Diagnostic>) -> Node {
    let range = v.range();
    let span = range.start..range.end;
    if depth > MAX_DEPTH {
        diags.push(Diagnostic::at(span.clone(), "value is nested too deeply"));
        return Node {
            span,
            kind: Kind::Null,
        };
    }
    let kind = match v {
        Value::StringLit(s) => Kind::Str(s.value.into_owned()),
        Value::NumberLit(n) => match number(n.value) {
            Some(kind) => kind,
            None => {
                diags.push(Diagnostic::at(
                    span.clone(),
                    format!("`{}` is not a number baton can read", n.value),
                ));
                Kind::Null
            }
        },
        Value::BooleanLit(b) => Kind::Bool(b.value),
        Value::NullKeyword(_) => Kind::Null,
        Value::Array(a) => Kind::Array(
            a.elements
                .into_iter()
                .map(|e| value(e, depth + 1, diags))
                .collect(),
        ),
        Value::Object(o) => Kind::Table(
            o.properties
                .into_iter()
                .map(|p| {
                    let (key, key_range) = match p.name {
                        ObjectPropName::String(s) => (s.value.into_owned(), s.range),
                        ObjectPropName::Word(w) => (w.value.to_owned(), w.range),
                    };
                    Entry {
                        key,
                        key_span: key_range.start..key_range.end,
                        value: value(p.value, depth + 1, diags),
                    }
                })
                .collect(),
        ),
    };
    Node { span, kind }
}

fn number(text: &str) -> Option<Kind> {
    let unsigned = text.trim_start_matches(['+', '-']);
    let negative = text.starts_with('-');
    if let Some(hex) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        let n = i64::from_str_radix(hex, 16).ok()?;
        return Some(Kind::Int(if negative { -n } else { n }));
    }
    if let Ok(n) = text.trim_start_matches('+').parse::<i64>() {
        return Some(Kind::Int(n));
    }
    text.trim_start_matches('+')
        .parse::<f64>()
        .ok()
        .map(Kind::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_values_and_keys() {
        let text = r#"{ "name": "x", // comment
  "task": [ { "id": "a", "retries": 2, }, ], }"#;
        let node = parse(text).unwrap();
        let name = node.get("name").unwrap();
        assert_eq!(&text[name.key_span.clone()], "\"name\"");
        assert_eq!(&text[name.value.span.clone()], "\"x\"");
        let Kind::Array(tasks) = &node.get("task").unwrap().value.kind else {
            panic!("task is an array");
        };
        assert_eq!(tasks[0].get("retries").unwrap().value.kind, Kind::Int(2));
    }

    #[test]
    fn numbers() {
        assert_eq!(number("12"), Some(Kind::Int(12)));
        assert_eq!(number("-0x10"), Some(Kind::Int(-16)));
        assert_eq!(number("1.5"), Some(Kind::Float(1.5)));
        assert_eq!(
            number("1e400").map(|k| matches!(k, Kind::Float(_))),
            Some(true)
        );
    }
}
