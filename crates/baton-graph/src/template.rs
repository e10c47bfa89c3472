//! `run` and `prompt` are minijinja templates over the predecessors' results:
//! `{{ needs.schema.output }}`, `.status`, `.files_changed`, `.json.FIELD`, and `task`, `run`.
//!
//! Three departures from plain Jinja, each for a reason:
//! - Task ids may contain `-` and `.`, which Jinja would read as minus and attribute access, so
//!   `needs.<id>` is rewritten to `needs["<id>"]` (the longest of the task's needs that fits)
//!   before compiling.
//! - `{#` is literal text, not a comment: shell writes `${#array[@]}`.
//! - In shell commands ([`Quote::Shell`]) every `{{ … }}` value is shell-quoted, so a
//!   predecessor's output can never become shell syntax: one word in single quotes, or,
//!   inside a double-quoted string of the command (`echo "v{{ needs.ver.output }}"`), escaped
//!   for that string (`\"`, `\\`, `\$`, `` \` ``), where single quotes would stay in the text.

use std::collections::{BTreeMap, HashSet};

use minijinja::value::{Value, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Output, State, UndefinedBehavior};
use serde::{Deserialize, Serialize};

/// A parsed template. Cheap for text without `{{` or `{%`: minijinja is skipped entirely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The source after the rewrites described in the module docs.
    source: String,
    plain: bool,
    edits: Vec<Edit>,
}

/// One rewrite: `original[orig]` became `source[pre]`. Used to map error positions back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edit {
    orig: std::ops::Range<usize>,
    pre: std::ops::Range<usize>,
}

/// A template that does not compile or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateError {
    pub message: String,
    /// Byte offset in the original template text.
    pub offset: usize,
}

/// How `{{ … }}` values are inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quote {
    /// Each value becomes one shell word in single quotes (a list becomes several words).
    Shell,
    /// As is: for prompts.
    None,
}

/// What a template can refer to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateContext {
    /// The task's predecessors, by id.
    pub needs: BTreeMap<String, NeedContext>,
    pub task: TaskContext,
    pub run: RunContext,
    /// A `for_each` instance's item.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub item: serde_json::Value,
}

/// One predecessor's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NeedContext {
    /// Final message (agents) or stdout (shell), redacted and capped.
    pub output: String,
    /// Its final state, kebab-case (`succeeded`, …).
    pub status: String,
    pub files_changed: Vec<String>,
    /// What it wrote to `BATON_OUTPUT`; `null` if nothing.
    pub json: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskContext {
    pub id: String,
    pub scope: Vec<String>,
    pub verify: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    pub id: String,
    pub name: String,
}

impl Template {
    /// Parses `text`, checking that every `needs.X` names one of `needs_ids`.
    pub fn new(text: &str, needs_ids: &[&str]) -> Result<Template, TemplateError> {
        Self::parse(text, needs_ids).map_err(|mut errors| errors.swap_remove(0))
    }

    /// Like [`Template::new`] but reports every unknown reference, in order (a syntax error
    /// is reported alone).
    pub(crate) fn parse(text: &str, needs_ids: &[&str]) -> Result<Template, Vec<TemplateError>> {
        if !has_tags(text) {
            return Ok(Template {
                source: text.to_owned(),
                plain: true,
                edits: Vec::new(),
            });
        }
        let needs: HashSet<&str> = needs_ids.iter().copied().collect();
        let (source, edits, errors) = preprocess(text, &needs);
        if !errors.is_empty() {
            return Err(errors);
        }
        let template = Template {
            source,
            plain: false,
            edits,
        };
        let env = environment(Quote::None);
        if let Err(e) = env.template_from_str(&template.source) {
            return Err(vec![template.error(&e)]);
        }
        Ok(template)
    }

    /// The top-level names the template uses that no task's context has (`{{ itme }}`): in a
    /// `for_each` task's (`item`) `item` is one; loop variables and builtins are not counted.
    pub(crate) fn unknown_names(&self, item: bool) -> Vec<String> {
        if self.plain {
            return Vec::new();
        }
        let env = environment(Quote::None);
        let Ok(compiled) = env.template_from_str(&self.source) else {
            return Vec::new();
        };
        const KNOWN: &[&str] = &[
            "needs",
            "task",
            "run",
            "range",
            "dict",
            "namespace",
            "debug",
            "lipsum",
            "cycler",
            "joiner",
            "loop",
            "self",
            "super",
            "varargs",
            "kwargs",
        ];
        let mut unknown: Vec<String> = compiled
            .undeclared_variables(false)
            .into_iter()
            .filter(|name| !(KNOWN.contains(&name.as_str()) || item && name == "item"))
            .collect();
        unknown.sort();
        unknown
    }

    /// The text as written, if it has no template tags.
    pub fn as_plain(&self) -> Option<&str> {
        self.plain.then_some(self.source.as_str())
    }

    pub fn render(&self, ctx: &TemplateContext, quote: Quote) -> Result<String, TemplateError> {
        if self.plain {
            return Ok(self.source.clone());
        }
        let env = environment(quote);
        let compiled = env
            .template_from_str(&self.source)
            .map_err(|e| self.error(&e))?;
        compiled
            .render(Value::from_serialize(ctx))
            .map_err(|e| self.error(&e))
    }

    fn error(&self, e: &Error) -> TemplateError {
        let offset = e.range().map_or(0, |r| self.original_offset(r.start));
        let mut message = match e.detail() {
            Some(detail) => format!("{}: {detail}", e.kind()),
            None => e.kind().to_string(),
        };
        if e.kind() == ErrorKind::UndefinedError {
            message.push_str(" (a misspelt field? known: needs.ID.output, .status, .files_changed, .json, task.id, task.scope, task.verify, run.id, run.name)");
        }
        TemplateError { message, offset }
    }

    fn original_offset(&self, pre: usize) -> usize {
        let Some(edit) = self.edits.iter().rev().find(|e| e.pre.start <= pre) else {
            return pre;
        };
        if pre < edit.pre.end {
            edit.orig.start
        } else {
            edit.orig.end + (pre - edit.pre.end)
        }
    }
}

fn has_tags(text: &str) -> bool {
    text.contains("{{") || text.contains("{%")
}

fn environment(quote: Quote) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_debug(true);
    if quote == Quote::Shell {
        env.set_formatter(shell_formatter);
    }
    // Only shell commands escape; a prompt takes the value as it is.
    env.add_filter(DOUBLE_QUOTED, move |value: Value| -> Value {
        let text = match value.kind() {
            ValueKind::Seq => value
                .try_iter()
                .map(|items| {
                    items
                        .map(|i| plain_string(&i))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            _ => plain_string(&value),
        };
        match quote {
            Quote::Shell => Value::from_object(DoubleQuoted(double_quote_escape(&text))),
            Quote::None => Value::from(text),
        }
    });
    env
}

/// Writes every value as shell words, whatever it contains (`|safe` included).
fn shell_formatter(
    out: &mut Output<'_>,
    _state: &State<'_, '_>,
    value: &Value,
) -> Result<(), Error> {
    let write = |out: &mut Output<'_>, s: &str| {
        out.write_str(&shell_quote(s))
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write template output"))
    };
    if value.is_undefined() {
        return Err(Error::new(ErrorKind::UndefinedError, "undefined value"));
    }
    if let Some(escaped) = value.downcast_object_ref::<DoubleQuoted>() {
        return out
            .write_str(&escaped.0)
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write template output"));
    }
    if value.kind() == ValueKind::Seq {
        let mut first = true;
        for item in value.try_iter()? {
            if !first {
                out.write_str(" ").map_err(|_| {
                    Error::new(ErrorKind::WriteFailure, "cannot write template output")
                })?;
            }
            first = false;
            write(out, &plain_string(&item))?;
        }
        return Ok(());
    }
    write(out, &plain_string(value))
}

fn plain_string(value: &Value) -> String {
    if value.is_none() {
        return String::new();
    }
    match value.as_str() {
        Some(s) => s.to_owned(),
        None => value.to_string(),
    }
}

/// `'…'` with each `'` written as `'\''`: inside single quotes the shell interprets nothing.
pub(crate) fn shell_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A byte of a task id in `needs.ID`: ids take letters of any script, so any byte of a
/// non-ASCII character too (an id ends at ASCII punctuation or space: a character boundary).
fn is_id_byte(b: u8) -> bool {
    is_ident(b) || b == b'-' || b == b'.' || !b.is_ascii()
}

/// Applies the rewrites and checks the `needs` references. Returns the new source, the edits
/// made and the unknown references.
fn preprocess(text: &str, needs: &HashSet<&str>) -> (String, Vec<Edit>, Vec<TemplateError>) {
    let bytes = text.as_bytes();
    let mut replacements: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut errors = Vec::new();
    let mut shell = ShellQuotes::Outside;
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] != b'{' || !matches!(bytes[i + 1], b'{' | b'%' | b'#') {
            i += shell.after(bytes, i);
            continue;
        }
        match bytes[i + 1] {
            b'#' => {
                replacements.push((i..i + 2, "{% raw %}{#{% endraw %}".to_owned()));
                i += 2;
            }
            open @ (b'{' | b'%') => {
                let close: &[u8] = if open == b'{' { b"}}" } else { b"%}" };
                let start = i + 2;
                let end = find_close(bytes, start, close).unwrap_or(bytes.len());
                let inner = text[start..end]
                    .trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
                if open == b'%' && inner == "raw" {
                    // Everything up to `endraw` is literal text.
                    i = text[end..]
                        .find("endraw")
                        .and_then(|k| text[end + k..].find("%}").map(|m| end + k + m + 2))
                        .unwrap_or(bytes.len());
                    continue;
                }
                // A value inside a double-quoted string is escaped for it (see the module docs):
                // `{{ x }}` is read as `{{ (x) | DOUBLE_QUOTED }}`.
                let in_double = open == b'{' && shell == ShellQuotes::Double;
                if in_double {
                    let at = start + usize::from(matches!(bytes.get(start), Some(b'-' | b'+')));
                    replacements.push((at..at, "(".to_owned()));
                }
                check_expression(text, start, end, needs, &mut replacements, &mut errors);
                if in_double {
                    let at =
                        end - usize::from(end > start && matches!(bytes[end - 1], b'-' | b'+'));
                    replacements.push((at..at, format!(") | {DOUBLE_QUOTED}")));
                }
                i = (end + close.len()).min(bytes.len());
            }
            _ => i += 1,
        }
    }
    let mut source = String::with_capacity(text.len() + 16 * replacements.len());
    let mut edits = Vec::with_capacity(replacements.len());
    let mut copied = 0;
    for (range, with) in replacements {
        source.push_str(&text[copied..range.start]);
        let pre_start = source.len();
        source.push_str(&with);
        edits.push(Edit {
            orig: range.clone(),
            pre: pre_start..source.len(),
        });
        copied = range.end;
    }
    source.push_str(&text[copied..]);
    (source, edits, errors)
}

/// The filter a value inside a shell command's double-quoted string goes through.
const DOUBLE_QUOTED: &str = "__baton_double_quoted";

/// Where the shell text of a template is, as far as quoting goes: the tags themselves are
/// skipped, the text between them read as `sh` would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShellQuotes {
    Outside,
    Single,
    Double,
}

impl ShellQuotes {
    /// Reads the text byte at `i`; how many bytes it took (a backslash takes the next one).
    fn after(&mut self, bytes: &[u8], i: usize) -> usize {
        match (*self, bytes[i]) {
            (Self::Outside | Self::Double, b'\\') => return 2,
            (Self::Outside, b'\'') => *self = Self::Single,
            (Self::Outside, b'"') => *self = Self::Double,
            (Self::Single, b'\'') | (Self::Double, b'"') => *self = Self::Outside,
            _ => {}
        }
        1
    }
}

/// A value to write inside a double-quoted shell string.
#[derive(Debug)]
struct DoubleQuoted(String);

impl minijinja::value::Object for DoubleQuoted {}

/// `"…"`'s contents: `"`, `\`, `$` and `` ` `` escaped, the only characters special there.
fn double_quote_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The offset of `close` at or after `from`, outside string literals.
fn find_close(bytes: &[u8], from: usize, close: &[u8]) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            quote @ (b'"' | b'\'') => i = skip_string(bytes, i, quote),
            _ if bytes[i..].starts_with(close) => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The offset after the string literal that starts at `open`.
fn skip_string(bytes: &[u8], open: usize, quote: u8) -> usize {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Finds `needs.<id>` and `needs["<id>"]` in one `{{ … }}` or `{% … %}`.
fn check_expression(
    text: &str,
    start: usize,
    end: usize,
    needs: &HashSet<&str>,
    replacements: &mut Vec<(std::ops::Range<usize>, String)>,
    errors: &mut Vec<TemplateError>,
) {
    let bytes = text.as_bytes();
    let mut i = start;
    while i < end {
        let b = bytes[i];
        if b == b'"' || b == b'\'' {
            i = skip_string(bytes, i, b);
            continue;
        }
        let starts_word =
            is_ident(b) && (i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == b'.'));
        if !starts_word {
            i += 1;
            continue;
        }
        let word_end = (i..end).find(|&k| !is_ident(bytes[k])).unwrap_or(end);
        if &text[i..word_end] != "needs" || word_end >= end {
            i = word_end;
            continue;
        }
        match bytes[word_end] {
            b'.' => {
                let id_start = word_end + 1;
                let run_end = (id_start..end)
                    .find(|&k| !is_id_byte(bytes[k]))
                    .unwrap_or(end);
                // Candidate ends: before each `.` and at the end of the run; longest first.
                let found = (id_start..=run_end)
                    .rev()
                    .filter(|&k| k == run_end || bytes[k] == b'.')
                    .find(|&k| k > id_start && needs.contains(&text[id_start..k]));
                match found {
                    Some(k) => {
                        replacements.push((i..k, format!("needs[\"{}\"]", &text[id_start..k])))
                    }
                    None if run_end > id_start => {
                        let name_end = (id_start..run_end)
                            .find(|&k| bytes[k] == b'.')
                            .unwrap_or(run_end);
                        errors.push(unknown_need(&text[id_start..name_end], id_start, needs));
                    }
                    None => {}
                }
                i = run_end.max(word_end + 1);
            }
            b'[' => {
                let mut k = word_end + 1;
                while k < end && bytes[k].is_ascii_whitespace() {
                    k += 1;
                }
                if k < end && (bytes[k] == b'"' || bytes[k] == b'\'') {
                    let close = skip_string(bytes, k, bytes[k]);
                    let name = &text[k + 1..close.saturating_sub(1).max(k + 1)];
                    if !needs.contains(name) {
                        errors.push(unknown_need(name, k + 1, needs));
                    }
                    i = close;
                } else {
                    i = word_end + 1;
                }
            }
            _ => i = word_end,
        }
    }
}

fn unknown_need(name: &str, offset: usize, needs: &HashSet<&str>) -> TemplateError {
    let mut message = format!("`needs.{name}` refers to a task that is not in this task's `needs`");
    let mut ids: Vec<&str> = needs.iter().copied().collect();
    ids.sort_unstable();
    match crate::suggest::closest(name, ids.iter().copied()) {
        Some(close) => message.push_str(&format!("; did you mean `{close}`?")),
        None if ids.is_empty() => message.push_str("; this task needs nothing"),
        None => {}
    }
    TemplateError { message, offset }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> TemplateContext {
        let mut needs = BTreeMap::new();
        needs.insert(
            "build-api.v2".to_owned(),
            NeedContext {
                output: "it's done".into(),
                status: "succeeded".into(),
                files_changed: vec!["src/a b.rs".into(), "x".into()],
                json: serde_json::json!({"count": 3, "name": "$(whoami)"}),
            },
        );
        needs.insert(
            "build".to_owned(),
            NeedContext {
                output: "plain".into(),
                ..NeedContext::default()
            },
        );
        TemplateContext {
            needs,
            task: TaskContext {
                id: "me".into(),
                ..TaskContext::default()
            },
            run: RunContext {
                id: "r1".into(),
                name: "demo".into(),
            },
            item: serde_json::Value::Null,
        }
    }

    const NEEDS: &[&str] = &["build", "build-api.v2"];

    fn render(text: &str, quote: Quote) -> Result<String, TemplateError> {
        Template::new(text, NEEDS)?.render(&ctx(), quote)
    }

    /// The newcomer's `echo "v{{ needs.ver.output }}" >> CHANGELOG` wrote `v'1.2.3'`: inside
    /// a double-quoted string a value is escaped for that string instead.
    #[test]
    fn a_value_inside_double_quotes_is_escaped_for_them() {
        assert_eq!(
            render(
                r#"echo "v{{ needs.build.output }}" >> CHANGELOG"#,
                Quote::Shell
            )
            .unwrap(),
            r#"echo "vplain" >> CHANGELOG"#
        );
        // Only what is special inside double quotes is escaped; the apostrophe stays.
        assert_eq!(
            render(
                r#"echo "{{ needs.build-api.v2.json.name }} {{ needs.build-api.v2.output }}""#,
                Quote::Shell
            )
            .unwrap(),
            r#"echo "\$(whoami) it's done""#
        );
        // A list is its items joined by spaces, one string.
        assert_eq!(
            render(
                r#"echo "files: {{ needs.build-api.v2.files_changed }}""#,
                Quote::Shell
            )
            .unwrap(),
            r#"echo "files: src/a b.rs x""#
        );
        // Outside quotes, and inside single quotes, values stay single-quoted words.
        assert_eq!(
            render(r#"echo {{ needs.build.output }} 'a{{ needs.build.output }}' "\"" {{- needs.build.output -}}"#, Quote::Shell).unwrap(),
            r#"echo 'plain' 'a'plain'' "\""'plain'"#
        );
        // A quote escaped inside a string does not end it.
        assert_eq!(
            render(r#"echo "say \"{{ needs.build.output }}\"""#, Quote::Shell).unwrap(),
            r#"echo "say \"plain\"""#
        );
        // A prompt takes values as they are.
        assert_eq!(
            render(r#"Write "{{ needs.build-api.v2.output }}""#, Quote::None).unwrap(),
            r#"Write "it's done""#
        );
    }

    #[test]
    fn ids_with_dashes_and_dots() {
        assert_eq!(
            render(
                "{{ needs.build-api.v2.output }} / {{ needs.build.output }}",
                Quote::None
            )
            .unwrap(),
            "it's done / plain"
        );
        assert_eq!(
            render("{{ needs.build-api.v2.json.count + 1 }}", Quote::None).unwrap(),
            "4"
        );
        assert_eq!(
            render("{{ needs[\"build\"].output }}", Quote::None).unwrap(),
            "plain"
        );
        assert_eq!(
            render(
                "{% for f in needs.build-api.v2.files_changed %}[{{ f }}]{% endfor %}",
                Quote::None
            )
            .unwrap(),
            "[src/a b.rs][x]"
        );
    }

    #[test]
    fn plain_text_skips_the_engine() {
        let t = Template::new("echo ${#a[@]} {x} }}", &[]).unwrap();
        assert_eq!(t.as_plain(), Some("echo ${#a[@]} {x} }}"));
        assert_eq!(
            t.render(&ctx(), Quote::Shell).unwrap(),
            "echo ${#a[@]} {x} }}"
        );
    }

    #[test]
    fn hash_brace_is_text_not_a_comment() {
        assert_eq!(
            render("n=${#a[@]}; echo {{ run.name }}", Quote::None).unwrap(),
            "n=${#a[@]}; echo demo"
        );
    }

    #[test]
    fn trailing_newline_is_kept() {
        assert_eq!(render("{{ run.id }}\n", Quote::None).unwrap(), "r1\n");
    }

    #[test]
    fn shell_quoting_defeats_injection() {
        let mut c = ctx();
        let evil = "$(rm -rf /) `reboot` 'quoted' \"dq\"\nsecond line; exit 1";
        c.needs.get_mut("build").unwrap().output = evil.into();
        let t = Template::new("echo {{ needs.build.output }}", NEEDS).unwrap();
        let rendered = t.render(&c, Quote::Shell).unwrap();
        assert_eq!(
            rendered,
            "echo '$(rm -rf /) `reboot` '\\''quoted'\\'' \"dq\"\nsecond line; exit 1'"
        );
        // Even `|safe` and string concatenation stay inside quotes.
        let t = Template::new("echo {{ needs.build.output|safe ~ '; id' }}", NEEDS).unwrap();
        assert!(
            t.render(&c, Quote::Shell)
                .unwrap()
                .starts_with("echo '$(rm")
        );
        assert_eq!(
            render("ls {{ needs.build-api.v2.files_changed }}", Quote::Shell).unwrap(),
            "ls 'src/a b.rs' 'x'"
        );
        assert_eq!(
            render("echo {{ needs.build-api.v2.json.name }}", Quote::Shell).unwrap(),
            "echo '$(whoami)'"
        );
    }

    #[test]
    fn shell_quoting_round_trips_through_sh() {
        let Ok(status) = std::process::Command::new("sh")
            .arg("-c")
            .arg("true")
            .status()
        else {
            return;
        };
        assert!(status.success());
        let mut c = ctx();
        let evil = "a'b\"c$(echo INJECTED)`echo X`\n\\n;|&<>*?";
        c.needs.get_mut("build").unwrap().output = evil.into();
        let cmd = Template::new("printf %s {{ needs.build.output }}", NEEDS)
            .unwrap()
            .render(&c, Quote::Shell)
            .unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), evil);
    }

    #[test]
    fn unknown_needs_are_reported_with_positions() {
        let text = "{{ needs.biuld.output }} and {{ needs['nope'].status }}";
        let errors = Template::parse(text, NEEDS).unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].offset, text.find("biuld").unwrap());
        assert!(
            errors[0].message.contains("did you mean `build`?"),
            "{}",
            errors[0].message
        );
        assert_eq!(errors[1].offset, text.find("nope").unwrap());
        // Text outside tags and inside string literals is not a reference.
        assert!(Template::new("needs.x {{ 'needs.x' }}", &[]).is_ok());
    }

    #[test]
    fn syntax_errors_point_into_the_original_text() {
        let text = "{{ needs.build-api.v2.output }} then {% if %}";
        let err = Template::new(text, NEEDS).unwrap_err();
        assert!(err.offset >= text.find("{%").unwrap(), "{err:?}");
        assert!(err.message.contains("syntax error"), "{}", err.message);
    }

    #[test]
    fn strict_undefined() {
        let err = render("{{ needs.build.outptu }}", Quote::None).unwrap_err();
        assert!(err.message.contains("undefined"), "{}", err.message);
        assert!(render("{{ needs.build.json.missing }}", Quote::Shell).is_err());
        assert!(render("{{ nothing }}", Quote::None).is_err());
    }

    #[test]
    fn raw_blocks_are_left_alone() {
        assert_eq!(
            render("{% raw %}{{ needs.unknown.x }}{% endraw %}", Quote::None).unwrap(),
            "{{ needs.unknown.x }}"
        );
    }
}
