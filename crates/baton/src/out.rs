//! The one way out to the terminal: everything baton prints on standard output and standard
//! error goes through here (`println!` and `eprintln!` are refused by the crate's lints).
//!
//! - Text for people is always made [`terminal_safe`]: it carries strings from graph files
//!   (a run's `name`, task ids, scopes, paths) and from tasks (their reasons, the names of the
//!   files they made), and an escape sequence in them is shown (`^[`), never played.
//! - JSON is written as serde writes it (control characters escaped), with DEL and the C1
//!   controls escaped as well (`\u009b`), so that no escape reaches a terminal that way either.
//! - What a task printed (`baton logs`, `baton diff`) is copied as it is into a pipe or a
//!   file, and shown safe on a terminal.
//!
//! Standard output that cannot be written ends the command: a closed pipe (`baton runs | head
//! -1`) quietly, as [`Failure::Closed`]; any other error (a full disk) as an error that says
//! what could not be written (exit 3). Standard error is best effort: where it cannot be
//! written, there is nowhere left to say so.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Write};

use baton_report::terminal_safe;
use serde::Serialize;

use crate::exit::Failure;

/// Standard output, for one thing a command prints (`what` names it in an error: "the list of
/// runs").
pub(crate) struct Stdout {
    what: Cow<'static, str>,
    out: io::Stdout,
}

impl Stdout {
    pub(crate) fn new(what: impl Into<Cow<'static, str>>) -> Self {
        Self {
            what: what.into(),
            out: io::stdout(),
        }
    }

    /// Text for people, made terminal-safe.
    pub(crate) fn text(&mut self, text: &str) -> Result<(), Failure> {
        self.bytes(terminal_safe(text).as_bytes())
    }

    /// One line of text for people.
    pub(crate) fn line(&mut self, line: &str) -> Result<(), Failure> {
        let mut text = terminal_safe(line).into_owned();
        text.push('\n');
        self.bytes(text.as_bytes())
    }

    /// `value` as pretty JSON and a newline.
    pub(crate) fn json(&mut self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Failure::Internal(anyhow::Error::new(e).context(self.cannot())))?;
        self.json_text(&text)
    }

    /// `value` as JSON on one line (a JSON-lines stream).
    pub(crate) fn json_line(&mut self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string(value)
            .map_err(|e| Failure::Internal(anyhow::Error::new(e).context(self.cannot())))?;
        self.json_text(&text)
    }

    fn json_text(&mut self, text: &str) -> Result<(), Failure> {
        let mut text = json_safe(text).into_owned();
        text.push('\n');
        self.bytes(text.as_bytes())
    }

    /// Text baton styled itself (clap's help, in colour on a terminal): as it is.
    pub(crate) fn styled(&mut self, text: &str) -> Result<(), Failure> {
        self.bytes(text.as_bytes())
    }

    /// What a task printed: as it is into a pipe or a file, made safe on a terminal.
    pub(crate) fn task_output(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        if self.out.is_terminal() {
            let text = String::from_utf8_lossy(bytes);
            self.bytes(terminal_safe(&text).as_bytes())
        } else {
            self.bytes(bytes)
        }
    }

    /// Writes and flushes, so that an error is seen here and not lost at exit.
    fn bytes(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let mut out = self.out.lock();
        out.write_all(bytes)
            .and_then(|()| out.flush())
            .map_err(|e| self.failed(e))
    }

    fn cannot(&self) -> String {
        format!("cannot write {} to standard output", self.what)
    }

    fn failed(&self, err: io::Error) -> Failure {
        if err.kind() == io::ErrorKind::BrokenPipe {
            Failure::Closed
        } else {
            Failure::Internal(anyhow::Error::new(err).context(self.cannot()))
        }
    }
}

/// Prints text for people on standard output (see [`Stdout::text`]).
pub(crate) fn text(what: &'static str, text: &str) -> Result<(), Failure> {
    Stdout::new(what).text(text)
}

/// Prints one line for people on standard output.
pub(crate) fn line(what: &'static str, line: &str) -> Result<(), Failure> {
    Stdout::new(what).line(line)
}

/// Prints `value` as pretty JSON on standard output.
pub(crate) fn json(what: &'static str, value: &impl Serialize) -> Result<(), Failure> {
    Stdout::new(what).json(value)
}

/// What clap has to say, where it says it: help and the version on standard output (so that a
/// full disk is an error there too), a usage error on standard error; its exit code.
pub(crate) fn clap(err: &clap::Error) -> Result<i32, Failure> {
    let to_stdout = !err.use_stderr();
    let terminal = if to_stdout {
        io::stdout().is_terminal()
    } else {
        io::stderr().is_terminal()
    };
    let styled = err.render();
    let text = if terminal && std::env::var_os("NO_COLOR").is_none() {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    if to_stdout {
        Stdout::new("the help").styled(&text)?;
    } else {
        err_styled(&text);
    }
    Ok(err.exit_code())
}

/// A line for people on standard error, made terminal-safe; best effort.
pub(crate) fn err(line: &str) {
    let mut text = terminal_safe(line).into_owned();
    text.push('\n');
    err_styled(&text);
}

/// A question for the person at the terminal, on standard error, the answer typed after it.
pub(crate) fn ask(question: &str) {
    err_styled(&terminal_safe(question));
}

/// Text on standard error that baton styled itself from terminal-safe parts (a diagnostic's
/// colours); best effort.
pub(crate) fn err_styled(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// JSON as serde writes it, with DEL and the C1 controls (which serde leaves as they are)
/// escaped too. They can only stand inside strings, where `\u00XX` means the same.
fn json_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| ('\u{7f}'..='\u{9f}').contains(&c);
    if !text.contains(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_what_serde_leaves_and_means_the_same() {
        let value = serde_json::json!({ "name": "a\u{1b}]0;x\u{7}b\u{7f}\u{9b}\u{9d}c" });
        let text = serde_json::to_string(&value).unwrap();
        let safe = json_safe(&text);
        assert!(
            !safe.contains(|c: char| c.is_control()),
            "a control character is left in {safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn plain_json_is_borrowed() {
        assert!(matches!(json_safe(r#"{"a":"é"}"#), Cow::Borrowed(_)));
    }
}
