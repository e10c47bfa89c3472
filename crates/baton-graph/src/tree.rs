//! One small spanned value tree for every input format, so that one walker reads them all and
//! every error can point into the file.

use std::ops::Range;

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
    pub fn type_name(&self) -> &'static str {
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
    pub fn table(&self) -> Option<&[Entry]> {
        match &self.kind {
            Kind::Table(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.table()?.iter().find(|e| e.key == key)
    }
}

/// Deeper than this is surely not a graph file; stopping keeps the converters' recursion
/// bounded whatever the parsers accept.
pub(crate) const MAX_DEPTH: usize = 64;
