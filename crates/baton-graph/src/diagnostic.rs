//! What loading a graph file reports when it fails: every problem at once, each with a span into
//! the file and a hint. The binary renders these with miette; `Display` is the plain form.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

/// One problem in a graph file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub message: String,
    /// Byte range in [`LoadError::source_text`]. `None` for problems with the file as a whole
    /// (it cannot be read, it has no tasks).
    pub span: Option<Range<usize>>,
    /// A short text to show under the span.
    pub label: Option<String>,
    /// What to do about it.
    pub help: Option<String>,
    /// Other places that explain the problem (the first definition of a duplicate id, …).
    pub related: Vec<(Range<usize>, String)>,
}

impl Diagnostic {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            span: None,
            label: None,
            help: None,
            related: Vec::new(),
        }
    }

    pub(crate) fn at(span: Range<usize>, message: impl Into<String>) -> Self {
        Self {
            span: Some(span),
            ..Self::new(message)
        }
    }

    pub(crate) fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub(crate) fn related(mut self, span: Range<usize>, text: impl Into<String>) -> Self {
        self.related.push((span, text.into()));
        self
    }
}

/// A graph file that could not be loaded, with every problem found in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file, as the user named it.
    pub path: PathBuf,
    /// The file's text (lossily decoded if it was not UTF-8), for rendering spans.
    pub source_text: String,
    /// Sorted by position; problems without a position come first.
    pub diagnostics: Vec<Diagnostic>,
}

impl LoadError {
    pub(crate) fn new(
        path: PathBuf,
        source_text: String,
        mut diagnostics: Vec<Diagnostic>,
    ) -> Self {
        diagnostics.sort_by(|a, b| {
            let key = |d: &Diagnostic| d.span.as_ref().map(|s| (s.start, s.end));
            key(a).cmp(&key(b)).then_with(|| a.message.cmp(&b.message))
        });
        diagnostics.dedup();
        Self {
            path,
            source_text,
            diagnostics,
        }
    }

    /// 1-based line and column (in characters) of a byte offset into the source text.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        LineIndex::new(&self.source_text).line_col(&self.source_text, offset)
    }
}

impl std::error::Error for LoadError {}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let index = LineIndex::new(&self.source_text);
        let path = self.path.display();
        let position = |offset: usize| {
            let (line, col) = index.line_col(&self.source_text, offset);
            format!("{path}:{line}:{col}")
        };
        for (n, d) in self.diagnostics.iter().enumerate() {
            if n > 0 {
                writeln!(f)?;
            }
            match &d.span {
                Some(span) => write!(f, "{}: error: {}", position(span.start), d.message)?,
                None => write!(f, "{path}: error: {}", d.message)?,
            }
            for (span, text) in &d.related {
                write!(f, "\n{}: note: {text}", position(span.start))?;
            }
            if let Some(help) = &d.help {
                write!(f, "\n  help: {help}")?;
            }
        }
        Ok(())
    }
}

/// Start offsets of the lines of a text, so that many positions cost one scan.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { starts }
    }

    fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let col = text[self.starts[line]..offset].chars().count() + 1;
        (line + 1, col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_and_clamps() {
        let err = LoadError::new("g.toml".into(), "ab\né = 1\n".into(), vec![]);
        assert_eq!(err.line_col(0), (1, 1));
        assert_eq!(err.line_col(3), (2, 1));
        assert_eq!(err.line_col(5), (2, 2));
        // Inside the two bytes of `é`: rounds down to its start.
        assert_eq!(err.line_col(4), (2, 1));
        assert_eq!(err.line_col(999), (3, 1));
    }

    #[test]
    fn sorted_with_positionless_first() {
        let err = LoadError::new(
            "g.toml".into(),
            "x\ny\n".into(),
            vec![
                Diagnostic::at(2..3, "second"),
                Diagnostic::at(0..1, "first").help("do this"),
                Diagnostic::new("whole file"),
            ],
        );
        assert_eq!(
            err.to_string(),
            "g.toml: error: whole file\ng.toml:1:1: error: first\n  help: do this\ng.toml:2:1: error: second"
        );
    }
}
