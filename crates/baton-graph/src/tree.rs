//! One small spanned value tree for every input format, so that one walker reads them all and
//! every error can point into the file.

use std::ops::Range;

use crate::diagnostic::Diagnostic;

pub(crate) type Span = Range<usize>;

/// A value and where it is in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub span: Span,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// JSON `null`: the walker treats a field set to it as absent.
    Null,
    /// A TOML date or time: no field takes one.
    Datetime,
    Array(Vec<Node>),
    /// Entries in file order.
    Table(Vec<Entry>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub key: String,
    pub key_span: Span,
    pub value: Node,
}

impl Kind {
    /// The name used in "expected …, found …" messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Kind::Str(_) => "a string",
            Kind::Int(_) => "an integer",
            Kind::Float(_) => "a float",
            Kind::Bool(_) => "a boolean",
            Kind::Null => "null",
            Kind::Datetime => "a date",
            Kind::Array(_) => "an array",
            Kind::Table(_) => "a table",
        }
    }
}

impl Node {
    pub(crate) fn table(&self) -> Option<&[Entry]> {
        match &self.kind {
            Kind::Table(entries) => Some(entries),
            _ => None,
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Entry> {
        self.table()?.iter().find(|e| e.key == key)
    }

    /// The value as JSON (a date, which JSON has none of, as `null`). Its depth is bounded by
    /// the parsers' [`MAX_DEPTH`].
    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            Kind::Str(s) => Value::String(s.clone()),
            Kind::Int(n) => Value::from(*n),
            Kind::Float(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Null | Kind::Datetime => Value::Null,
            Kind::Array(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Kind::Table(entries) => Value::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.to_json()))
                    .collect(),
            ),
        }
    }
}

/// Deeper than this is surely not a graph file; stopping keeps the converters' recursion
/// bounded whatever the parsers accept.
pub(crate) const MAX_DEPTH: usize = 64;

/// Refuses a NUL anywhere in `node`'s strings and keys. Every string of a graph file may become
/// an argument, an environment variable, a path or a prompt, and none of those can hold a NUL:
/// refused here, where the file can be pointed at, and not when a task is launched. `field` is
/// where `node` is (`env.A`; a table in an array, a task, starts afresh); `source` the file's
/// text, for the NUL's line and column.
pub(crate) fn refuse_nul(node: &Node, field: &str, source: &str, diags: &mut Vec<Diagnostic>) {
    match &node.kind {
        Kind::Str(s) if s.contains('\0') => {
            // At the NUL itself, through the escape that wrote it.
            let at = crate::spec::At::new(s.clone(), node.span.clone());
            let span = crate::validate::char_span(source, &at, s.find('\0').unwrap_or(0));
            let what = if field.is_empty() {
                "a string".to_owned()
            } else {
                format!("`{field}`")
            };
            diags.push(
                Diagnostic::at(span, format!("{what} cannot contain NUL (U+0000)"))
                    .label("holds a NUL")
                    .help(
                        "no program can be given a NUL in its arguments, environment or paths; \
                         remove it (a task that must print one can write `printf '\\0'`)",
                    ),
            );
        }
        Kind::Array(items) => {
            for item in items {
                let field = if matches!(item.kind, Kind::Table(_)) {
                    ""
                } else {
                    field
                };
                refuse_nul(item, field, source, diags);
            }
        }
        Kind::Table(entries) => {
            for e in entries {
                if e.key.contains('\0') {
                    diags.push(
                        Diagnostic::at(e.key_span.clone(), "a name cannot contain NUL (U+0000)")
                            .label("holds a NUL"),
                    );
                }
                let inner = if field.is_empty() {
                    e.key.clone()
                } else {
                    format!("{field}.{}", e.key)
                };
                refuse_nul(&e.value, &inner, source, diags);
            }
        }
        _ => {}
    }
}
