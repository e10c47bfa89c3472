//! Graph-file errors rendered for people: miette's report with the file, line, column, the
//! offending text underlined, and what to do.

use std::fmt;
use std::io::IsTerminal;

use baton_graph::LoadError;
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
pub fn render_load_error(err: &LoadError) -> String {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    let name = err.path.display().to_string();
    let mut out = String::new();
    for d in &err.diagnostics {
        let mut labels = Vec::new();
        if let Some(span) = &d.span {
            let (line, col) = err.line_col(span.start);
            let text = match &d.label {
                Some(label) => format!("{label} ({name}:{line}:{col})"),
                None => format!("{name}:{line}:{col}"),
            };
            labels.push(LabeledSpan::new_primary_with_span(Some(text), span.clone()));
        }
        for (span, text) in &d.related {
            labels.push(LabeledSpan::new_with_span(Some(text.clone()), span.clone()));
        }
        let problem = Problem {
            message: match &d.span {
                Some(span) => {
                    let (line, col) = err.line_col(span.start);
                    format!("{name}:{line}:{col}: {}", d.message)
                }
                None => format!("{name}: {}", d.message),
            },
            help: d.help.clone(),
            labels,
            source: NamedSource::new(name.clone(), err.source_text.clone()),
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
