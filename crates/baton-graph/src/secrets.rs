//! Secrets written literally into a graph file are refused.
//!
//! baton keeps a copy of the graph with the run, for as long as it keeps the run (`resume`
//! and `retry` run from it), and a redacted copy could not run. So a graph file must not hold
//! a secret at all: it belongs in baton's environment, named by the task
//! (`env = { TOKEN = "${TOKEN}" }`, read when the task starts; or `pass_env`).
//!
//! What is a secret is what the one redactor says, with its built-in rules (no literal
//! values): every string of the file, whatever its field and format (TOML, JSON, the legacy
//! shapes), is one text to it. An `env` entry is looked at as `NAME=value`, so that a
//! password given to `DB_PASSWORD` is recognised as the assignment it is. References
//! (`$DB_PASS`, `${TOKEN}`) and templates are placeholders to the redactor and pass.

use baton_redact::{Finding, Redactor};

use crate::diagnostic::Diagnostic;
use crate::tree::{Kind, Node, Span};

/// The secrets found in a graph file: one diagnostic each, and the places in the file's text
/// that hold them, to be masked in what is shown with the errors.
#[derive(Debug, Default)]
pub(crate) struct Secrets {
    pub masks: Vec<Span>,
    /// Strings met while the redactor was still being compiled (on a thread of its own, as
    /// the file is parsed): looked at by [`Secrets::finish`], rather than waited for.
    pending: Vec<Pending>,
}

#[derive(Debug)]
struct Pending {
    span: Span,
    text: String,
    prefix: usize,
    field: String,
}

impl Secrets {
    /// Looks at every string in `node` (and beneath it); `source` is the whole file's text.
    pub(crate) fn check(&mut self, node: &Node, source: &str, diags: &mut Vec<Diagnostic>) {
        self.visit(node, "", source, diags);
    }

    /// Looks at the strings set aside while the redactor was being compiled (waiting for it
    /// now, if it still is). To be called once the whole file has been checked.
    pub(crate) fn finish(&mut self, source: &str, diags: &mut Vec<Diagnostic>) {
        if self.pending.is_empty() {
            return;
        }
        let redactor = Redactor::default();
        for Pending {
            span,
            text,
            prefix,
            field,
        } in std::mem::take(&mut self.pending)
        {
            self.find(&redactor, &span, &text, prefix, &field, source, diags);
        }
    }

    fn visit(&mut self, node: &Node, field: &str, source: &str, diags: &mut Vec<Diagnostic>) {
        match &node.kind {
            Kind::Str(text) => self.string(node, text, 0, field, source, diags),
            Kind::Array(items) => {
                for item in items {
                    self.visit(item, field, source, diags);
                }
            }
            Kind::Table(entries) => {
                for entry in entries {
                    match (&entry.value.kind, entry.key.as_str()) {
                        (Kind::Table(vars), "env") => {
                            for var in vars {
                                let Kind::Str(value) = &var.value.kind else {
                                    continue;
                                };
                                let field = format!("env.{}", var.key);
                                let assignment = format!("{}={value}", var.key);
                                let prefix = var.key.len() + 1;
                                self.string(&var.value, &assignment, prefix, &field, source, diags);
                            }
                        }
                        _ => self.visit(&entry.value, &entry.key, source, diags),
                    }
                }
            }
            Kind::Int(_) | Kind::Float(_) | Kind::Bool(_) | Kind::Null | Kind::Datetime => {}
        }
    }

    /// `text` is the string of `node`, after `prefix` bytes of context (`NAME=` of an `env`
    /// entry).
    fn string(
        &mut self,
        node: &Node,
        text: &str,
        prefix: usize,
        field: &str,
        source: &str,
        diags: &mut Vec<Diagnostic>,
    ) {
        // Most strings in a graph (ids, `true`, short commands) are too short to hold a
        // secret: they are passed over without waiting for the redactor to be compiled.
        if text.len() < Redactor::shortest_built_in_match() {
            return;
        }
        // The built-in rules, compiled once per process (see `Redactor::warm_up_default`).
        match Redactor::default_if_ready() {
            Some(redactor) => self.find(redactor, &node.span, text, prefix, field, source, diags),
            None => self.pending.push(Pending {
                span: node.span.clone(),
                text: text.to_owned(),
                prefix,
                field: field.to_owned(),
            }),
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "a string and where it is, for one caller that has them apart"
    )]
    fn find(
        &mut self,
        redactor: &Redactor,
        node_span: &Span,
        text: &str,
        prefix: usize,
        field: &str,
        source: &str,
        diags: &mut Vec<Diagnostic>,
    ) {
        let mut found = redactor.find(text.as_bytes());
        // A value taken for code may hold a secret of its own (the rest of a line after
        // `printf 'password="'`): what it holds is looked at on its own.
        if prefix == 0 {
            let mut i = 0;
            while i < found.len() {
                let Finding { range, label } = found[i].clone();
                if code_not_secret(text, &range, &label) {
                    let inner = redactor.find(&text.as_bytes()[range.clone()]);
                    found.splice(
                        i..=i,
                        inner.into_iter().map(|f| Finding {
                            range: f.range.start + range.start..f.range.end + range.start,
                            label: f.label,
                        }),
                    );
                    // An inner finding starts after the outer's start and is shorter:
                    // looking at it again ends.
                    continue;
                }
                i += 1;
            }
        }
        if found.is_empty() {
            return;
        }
        let literal = source.get(node_span.clone()).unwrap_or_default();
        // Where the literal's text was last matched: each secret is searched for after the one
        // before it.
        let mut from = 0;
        for Finding { range, label } in found {
            let secret = text
                .get(range.start.max(prefix)..range.end)
                .filter(|s| !s.is_empty());
            let exact = secret.and_then(|s| {
                let at = from + literal.get(from..)?.find(s)?;
                from = at + s.len();
                Some(node_span.start + at..node_span.start + at + s.len())
            });
            // Written with escapes, the secret is not in the file as it is in the string: the
            // whole literal is pointed at (and masked).
            let span = exact.unwrap_or_else(|| node_span.clone());
            self.masks.push(span.clone());
            diags.push(
                Diagnostic::at(span, format!("`{field}` holds a literal secret ({label})"))
                    .label(label)
                    .help(
                        "baton keeps the graph with its run: put the secret in baton's \
                         environment and name it in the task's `env`, like \
                         `env = { TOKEN = \"${TOKEN}\" }` (read when the task starts, never \
                         stored), or pass it on with `pass_env = [\"TOKEN\"]`; the command \
                         then uses `$TOKEN`",
                    ),
            );
        }
    }
}

/// The labels of rules that find a secret by the name it is given (`password: …`,
/// `Authorization: …`) rather than by its shape.
const BY_NAME: &[&str] = &[
    "password",
    "secret",
    "private-key",
    "api-key",
    "token",
    "credential",
    "authorization",
];

/// Whether what the redactor took for a value named as a secret, in a command or a prompt, is
/// code or words instead: the redactor, meant for output, errs on the side of redacting, but
/// a graph refused for it cannot run at all. Values that look like secrets (a digit, a capital,
/// a symbol) are still refused; so are all values in `env`, and every secret known by its
/// shape (a `ghp_` token, a URL's password).
///
/// Taken for code: a value that starts with white space, a quote or shell syntax (the quote
/// after `grep 'password='` closes the shell word, it does not open a value; `${X:?msg}`), a
/// path (`passwd: /etc/passwd`), a call or an index (`password = input('pw: ')`,
/// `os.environ["KEY"]`), a pattern (`password=.*`); for words, one of lower-case letters, `_`,
/// `.` and `-` alone (`password: missing`, `Authorization: required`, `password=changeme`).
fn code_not_secret(text: &str, range: &std::ops::Range<usize>, label: &str) -> bool {
    if !BY_NAME.contains(&label) {
        return false;
    }
    let Some(value) = text.get(range.clone()).filter(|v| !v.is_empty()) else {
        return false;
    };
    let next = text[range.end..].chars().next();
    let first = value.chars().next().unwrap_or(' ');
    first.is_whitespace()
        || "'\"`;|&)?+-".contains(first)
        || ["/", "./", "../", "~/"]
            .iter()
            .any(|p| value.starts_with(p))
        || matches!(next, Some('(' | '['))
        || value.contains(".*")
        || value.starts_with('*')
        || value.ends_with('*')
        || value
            .trim_end_matches(['/', '.', ',', ':'])
            .bytes()
            .all(|b| b.is_ascii_lowercase() || matches!(b, b'_' | b'.' | b'-'))
}

/// `text` with every printable ASCII byte within `masks` (but quotes) turned into `*`: the
/// same length and line breaks, so that every position in it stays where it was.
pub(crate) fn masked(text: &str, masks: &[Span]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for span in masks {
        let end = span.end.min(bytes.len());
        for b in &mut bytes[span.start.min(end)..end] {
            if b.is_ascii_graphic() && !matches!(*b, b'"' | b'\'') {
                *b = b'*';
            }
        }
    }
    // Only ASCII bytes were replaced, by an ASCII byte: still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{LoadError, load_str};

    /// Key-shaped strings, made at run time so that this file holds none.
    fn anthropic() -> String {
        format!("{}{}", "sk-ant-api03-", "x7Kq".repeat(20))
    }

    fn github() -> String {
        format!("{}{}", "gh", format_args!("p_{}", "a1B2".repeat(9)))
    }

    fn err(name: &str, text: &str) -> LoadError {
        match load_str(Path::new(name), text) {
            Ok(_) => panic!("{name} should not load:\n{text}"),
            Err(e) => e,
        }
    }

    /// `(line, column, message)` of every problem.
    fn problems(e: &LoadError) -> Vec<(usize, usize, String)> {
        e.diagnostics
            .iter()
            .map(|d| {
                let (line, col) = e.line_col(d.span.as_ref().expect("a position").start);
                (line, col, d.message.clone())
            })
            .collect()
    }

    fn assert_hidden(e: &LoadError, secret: &str) {
        assert!(!e.source_text.contains(secret), "{}", e.source_text);
        assert!(!e.to_string().contains(secret), "{e}");
    }

    /// The one problem of a file refused for holding `secret`, as `line:column: message`; the
    /// secret is nowhere in what the error shows.
    fn refused(name: &str, text: &str, secret: &str) -> String {
        let e = err(name, text);
        assert_hidden(&e, secret);
        let lines: Vec<String> = problems(&e)
            .into_iter()
            .map(|(line, col, message)| format!("{line}:{col}: {message}"))
            .collect();
        match &lines[..] {
            [only] => only.clone(),
            _ => panic!("{name}: {lines:?}"),
        }
    }

    #[test]
    fn a_key_in_a_command_is_refused_at_its_position_and_hidden() {
        let key = anthropic();
        let text = format!(
            "name = \"x\"\n\n[[task]]\nid = \"a\"\nrun = \"curl -H 'x-api-key: {key}' https://api\"\n"
        );
        assert_eq!(
            refused("g.toml", &text, &key),
            "5:28: `run` holds a literal secret (anthropic-api-key)"
        );
        let e = err("g.toml", &text);
        let d = &e.diagnostics[0];
        let help = d.help.as_deref().unwrap();
        assert!(help.contains("env = { TOKEN = \"${TOKEN}\" }"), "{help}");
        assert!(help.contains("pass_env"), "{help}");
        // The secret is masked in place: every other position in the text is unchanged.
        assert_eq!(e.source_text.len(), text.len());
        assert_eq!(
            &e.source_text[d.span.clone().unwrap()],
            "*".repeat(key.len())
        );
    }

    #[test]
    fn every_string_field_is_looked_at_and_all_problems_come_together() {
        let (key, token) = (anthropic(), github());
        let text = format!(
            r#"name = "x"

[defaults]
setup = ["npm ci --token {token}"]

[run]
verify = ["echo {key}"]

[[task]]
id = "a"
prompt = "use {key} for the API"
verify = ["true", "test {token}"]
timout = "1s"

[[task]]
id = "b"
run = "psql postgres://app:s3cretpw9@db/app"
env = {{ DB_PASSWORD = "hunter2hunter2", OTHER = "{token}" }}
"#
        );
        let e = err("g.toml", &text);
        let got: Vec<(usize, String)> = problems(&e)
            .into_iter()
            .map(|(line, _, message)| (line, message))
            .collect();
        let want = [
            (4, "`setup` holds a literal secret (github-token)"),
            (7, "`verify` holds a literal secret (anthropic-api-key)"),
            (11, "`prompt` holds a literal secret (anthropic-api-key)"),
            (12, "`verify` holds a literal secret (github-token)"),
            (13, "unknown field `timout` in [[task]]"),
            (17, "`run` holds a literal secret (url-password)"),
            (18, "`env.DB_PASSWORD` holds a literal secret (password)"),
            (18, "`env.OTHER` holds a literal secret (github-token)"),
        ];
        let want: Vec<(usize, String)> = want.iter().map(|(l, m)| (*l, m.to_string())).collect();
        assert_eq!(got, want);
        for secret in [key.as_str(), &token, "s3cretpw9", "hunter2hunter2"] {
            assert_hidden(&e, secret);
        }
    }

    #[test]
    fn references_and_placeholders_pass() {
        let text = r#"
[[task]]
id = "db"
run = "mysql --password=$DB_PASS -e 'select 1'"
env = { DB_PASS = "${DB_PASSWORD}", API_TOKEN = "${API_TOKEN}", MODE = "fast" }
pass_env = ["GITHUB_TOKEN"]

[[task]]
id = "api"
needs = ["db"]
run = 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1 && echo {{ needs.db.output }}'
verify = ["curl -u deploy:${DEPLOY_PASSWORD} https://ci", "git rev-parse HEAD | grep -q 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39"]
"#;
        if let Err(e) = load_str(Path::new("g.toml"), text) {
            panic!("should load:\n{e}");
        }
    }

    #[test]
    fn json_and_legacy_files_are_checked_too() {
        let key = anthropic();
        let token = github();
        let json = format!(
            "{{\n  \"tasks\": [\n    {{ \"id\": \"a\", \"run\": \"echo {token}\" }}\n  ]\n}}\n"
        );
        assert_eq!(
            refused("g.json", &json, &token),
            "3:31: `run` holds a literal secret (github-token)"
        );

        let nodes = format!(
            r#"{{"id": "plan", "nodes": [
  {{"id": "n1", "goal": "Call the API with {key}", "deps": []}}
]}}"#
        );
        assert_eq!(
            refused("legacy.json", &nodes, &key),
            "2:43: `goal` holds a literal secret (anthropic-api-key)"
        );

        let subtasks = format!(
            r#"{{"subtasks": [
  {{"id": "s1", "title": "t", "description": "d", "acceptance": ["works with {token}"]}}
]}}"#
        );
        assert_eq!(
            refused("legacy.json", &subtasks, &token),
            "2:77: `acceptance` holds a literal secret (github-token)"
        );
    }

    #[test]
    fn a_secret_written_with_escapes_points_at_its_whole_string() {
        // `\u0073` is `s`: the file never spells the key as the string holds it.
        let key = anthropic();
        let escaped = format!("\\u0073{}", &key[1..]);
        let text = format!("[[task]]\nid = \"a\"\nrun = \"echo {escaped}\"\n");
        let e = err("g.toml", &text);
        let span = e.diagnostics[0].span.clone().unwrap();
        assert_eq!(&text[span.clone()], format!("\"echo {escaped}\""));
        assert_eq!(e.line_col(span.start), (3, 7));
        assert_hidden(&e, &key[1..]);
        assert!(e.source_text.contains("\"**** "), "{}", e.source_text);
    }
}
