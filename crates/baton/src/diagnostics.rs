//! Graph-file errors rendered for people: miette's report with the file, line, column, the
//! offending text underlined, and what to do.
//!
//! Every part of it comes from the graph file (an invalid id is quoted in its message, the
//! snippet is the file's text, its name is a path) and is made terminal-safe before miette
//! styles it: the report keeps its colours, and an escape sequence in the file is shown, never
//! played.

use std::borrow::Cow;
use std::fmt;
use std::io::IsTerminal;

use baton_graph::LoadError;
use baton_report::terminal_safe;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource};

/// One graph-file problem as a miette diagnostic.
#[derive(Debug)]
struct Problem {
    message: String,
    help: Option<String>,
    labels: Vec<LabeledSpan>,
    source: NamedSource<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl miette::Diagnostic for Problem {
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            None
        } else {
            Some(Box::new(self.labels.iter().cloned()))
        }
    }
}

/// Renders every problem of `err`, then a count. Colour only on a terminal without NO_COLOR.
pub(crate) fn render_load_error(err: &LoadError) -> String {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    let name = safe(&err.path.display().to_string());
    let source = SafeSource::new(&err.source_text);
    let mut out = String::new();
    for d in &err.diagnostics {
        let mut labels = Vec::new();
        if let Some(span) = &d.span {
            let (line, col) = err.line_col(span.start);
            let text = match &d.label {
                Some(label) => format!("{} ({name}:{line}:{col})", safe(label)),
                None => format!("{name}:{line}:{col}"),
            };
            labels.push(LabeledSpan::new_primary_with_span(
                Some(text),
                source.span(span),
            ));
        }
        for (span, text) in &d.related {
            labels.push(LabeledSpan::new_with_span(
                Some(safe(text)),
                source.span(span),
            ));
        }
        let problem = Problem {
            message: match &d.span {
                Some(span) => {
                    let (line, col) = err.line_col(span.start);
                    format!("{name}:{line}:{col}: {}", safe(&d.message))
                }
                None => format!("{name}: {}", safe(&d.message)),
            },
            help: d.help.as_deref().map(safe),
            labels,
            source: NamedSource::new(name.clone(), source.text.clone()),
        };
        let _ = handler.render_report(&mut out, &problem);
    }
    let n = err.diagnostics.len();
    out.push_str(&format!(
        "error: {} in {name}; nothing was run\n",
        if n == 1 {
            "1 problem".to_owned()
        } else {
            format!("{n} problems")
        }
    ));
    out
}

fn safe(text: &str) -> String {
    terminal_safe(text).into_owned()
}

/// The graph file's text made terminal-safe, and where each of its byte offsets went (a
/// control character is shown in two or more bytes), so that spans still underline what they
/// did.
struct SafeSource {
    text: String,
    /// For each byte offset of the original text (and its end), the offset in `text`.
    offsets: Vec<usize>,
}

impl SafeSource {
    fn new(original: &str) -> Self {
        if let Cow::Borrowed(text) = terminal_safe(original) {
            return Self {
                text: text.to_owned(),
                offsets: Vec::new(),
            };
        }
        let mut text = String::with_capacity(original.len() + 16);
        let mut offsets = Vec::with_capacity(original.len() + 1);
        let mut buf = [0u8; 4];
        let mut chars = original.chars().peekable();
        while let Some(c) = chars.next() {
            for _ in 0..c.len_utf8() {
                offsets.push(text.len());
            }
            if c == '\r' && chars.peek() == Some(&'\n') {
                // A line's end (CRLF), not a way back over it.
                text.push(c);
            } else {
                text.push_str(&terminal_safe(c.encode_utf8(&mut buf)));
            }
        }
        offsets.push(text.len());
        Self { text, offsets }
    }

    fn offset(&self, at: usize) -> usize {
        if self.offsets.is_empty() {
            at
        } else {
            self.offsets[at.min(self.offsets.len() - 1)]
        }
    }

    fn span(&self, span: &std::ops::Range<usize>) -> miette::SourceSpan {
        let start = self.offset(span.start);
        let end = self.offset(span.end.max(span.start));
        (start, end - start).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_safe_source_keeps_spans_on_what_they_marked() {
        let original = "id = \"a\u{1b}]52;c;x\u{7}\"\nrun = 1\n";
        let source = SafeSource::new(original);
        assert!(
            !source.text.contains(['\u{1b}', '\u{7}']),
            "{}",
            source.text
        );
        let at = original.find("run").unwrap();
        let span = source.span(&(at..at + 3));
        assert_eq!(
            &source.text[span.offset()..span.offset() + span.len()],
            "run"
        );
        let whole = source.span(&(0..original.len()));
        assert_eq!(whole.len(), source.text.len());
    }

    #[test]
    fn line_ends_stay_line_ends() {
        let source = SafeSource::new("a = 1\r\nb = \"\r\u{1b}\"\r\n");
        assert_eq!(source.text, "a = 1\r\nb = \"^M^[\"\r\n");
    }

    #[test]
    fn a_plain_source_is_as_it_was() {
        let source = SafeSource::new("name = \"x\"");
        assert_eq!(source.text, "name = \"x\"");
        assert_eq!(source.span(&(1..3)), (1, 2).into());
    }
}
