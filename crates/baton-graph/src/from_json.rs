//! JSON to the spanned [`Node`] tree: strict JSON (RFC 8259) from a `.json` file, JSON with
//! comments and trailing commas from a `.jsonc` one, JSON5's extensions too from a `.json5` one.

use jsonc_parser::ast::{ObjectPropName, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};

use crate::diagnostic::Diagnostic;
use crate::tree::{Entry, Kind, MAX_DEPTH, Node};

/// Which JSON a file holds, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `.json` (and a file without an extension that is not TOML): what every JSON parser
    /// reads, so that the file means the same to other tools. No comments, no trailing commas.
    Strict,
    /// `.jsonc`: comments (`//`, `/* */`) and trailing commas, as VS Code's settings.
    Jsonc,
    /// `.json5`: JSONC and single-quoted strings, unquoted keys, hexadecimal numbers and the
    /// other JSON5 extensions.
    Json5,
}

impl Dialect {
    fn options(self) -> ParseOptions {
        let lenient = ParseOptions::default();
        let strict = ParseOptions {
            allow_comments: false,
            allow_loose_object_property_names: false,
            allow_trailing_commas: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        };
        match self {
            Dialect::Strict => strict,
            Dialect::Jsonc => ParseOptions {
                allow_comments: true,
                allow_trailing_commas: true,
                ..strict
            },
            Dialect::Json5 => ParseOptions {
                allow_missing_commas: false,
                ..lenient
            },
        }
    }

    fn help(self) -> &'static str {
        match self {
            Dialect::Strict => {
                "this is not valid JSON: a `.json` graph file is strict JSON; name it `.jsonc` \
                 to allow comments and trailing commas"
            }
            Dialect::Jsonc => "this is not valid JSONC (JSON with comments and trailing commas)",
            Dialect::Json5 => "this is not valid JSON5",
        }
    }
}

pub(crate) fn parse(text: &str, dialect: Dialect) -> Result<Node, Vec<Diagnostic>> {
    let result =
        parse_to_ast(text, &CollectOptions::default(), &dialect.options()).map_err(|e| {
            let range = e.range();
            let start = range.start.min(text.len());
            vec![
                Diagnostic::at(
                    start..range.end.clamp(start, text.len()),
                    e.kind().to_string(),
                )
                .help(dialect.help()),
            ]
        })?;
    if dialect == Dialect::Strict {
        // What the parser above lets by that RFC 8259 does not (a raw control character in a
        // string), as a strict parser says it.
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text)
            && !e.is_eof()
            && e.line() > 0
        {
            let at = offset_of(text, e.line(), e.column());
            let message = e.to_string();
            let message = message
                .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
                .unwrap_or(&message);
            return Err(vec![
                Diagnostic::at(at..at, message.to_owned()).help(dialect.help()),
            ]);
        }
    }
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

/// The byte offset of serde_json's 1-based line and column (a column counts bytes).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>();
    let mut at = (line_start + column.saturating_sub(1)).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
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
        let node = parse(text, Dialect::Jsonc).unwrap();
        let name = node.get("name").unwrap();
        assert_eq!(&text[name.key_span.clone()], "\"name\"");
        assert_eq!(&text[name.value.span.clone()], "\"x\"");
        let Kind::Array(tasks) = &node.get("task").unwrap().value.kind else {
            panic!("task is an array");
        };
        assert_eq!(tasks[0].get("retries").unwrap().value.kind, Kind::Int(2));
    }

    #[test]
    fn a_json_file_is_strict_json() {
        for (text, says) in [
            (
                r#"{"task": [{"id": "a"},]}"#,
                "Trailing commas are not allowed",
            ),
            ("{\"name\": \"x\" // why\n}", "Comments are not allowed"),
            (r#"{name: "x"}"#, "Expected string for object property"),
            ("{\"name\": \"a\u{1b}b\"}", "control character"),
            ("{\"retries\": 0x10}", "Hexadecimal numbers are not allowed"),
        ] {
            let err = parse(text, Dialect::Strict).unwrap_err();
            assert!(err[0].message.contains(says), "{text}: {err:?}");
            assert!(
                err[0].help.as_deref().unwrap().contains("`.jsonc`"),
                "{err:?}"
            );
        }
        let raw = "{\"name\":\n \"a\u{1b}b\"}";
        let err = parse(raw, Dialect::Strict).unwrap_err();
        assert_eq!(err[0].span, Some(11..11), "{err:?}");
    }

    #[test]
    fn jsonc_takes_comments_and_trailing_commas_only() {
        assert!(parse("{\"name\": \"x\", // why\n \"task\": [],}", Dialect::Jsonc).is_ok());
        assert!(parse("{name: 'x'}", Dialect::Jsonc).is_err());
        assert!(parse("{name: 'x', n: 0x10,}", Dialect::Json5).is_ok());
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
