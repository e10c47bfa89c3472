//! The compiled redactor and its configuration.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, LazyLock, OnceLock};

use regex_automata::hybrid;
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_syntax::hir::Hir;

use crate::engine::{Compiled, Engine, Mode, Out, build};
use crate::rules::{self, PEM_END, Tail};
use crate::stream::StreamRedactor;
use crate::validate;

/// Secret values shorter than this are not redacted verbatim: an 8-byte minimum keeps a
/// variable set to `1`, `main` or `true` from blanking those words everywhere.
pub const MIN_SECRET_LEN: usize = 8;

/// What a [`Redactor`] redacts besides its built-in rules.
#[derive(Clone, Debug, Default)]
pub struct RedactorConfig {
    /// Values redacted verbatim wherever they appear, as `[REDACTED:secret-value]`: typically
    /// the secret-looking environment variables a task gets (see
    /// [`secret_env_values`](crate::secret_env_values)). Values shorter than
    /// [`MIN_SECRET_LEN`] bytes are ignored. A stream holds back as many bytes as the longest
    /// value, so values are meant to be secrets, not files.
    pub secret_values: Vec<Vec<u8>>,
}

/// A secret [`Redactor::find`] found in a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Where it is in the text, in bytes: what `[REDACTED:label]` would replace.
    pub range: Range<usize>,
    /// What kind of secret it looks like: the label of its marker (`anthropic-api-key`,
    /// `password`, `secret-value`, …).
    pub label: String,
}

/// The compiled rule set. Cheap to clone (the compiled form is shared) and safe to use from
/// many threads at once.
#[derive(Clone)]
pub struct Redactor {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("patterns", &self.engine.patterns.len())
            .field("window", &self.engine.window)
            .finish()
    }
}

/// The built-in rules alone, compiled once per process and shared: the graph loader's secret
/// check and every run without secret values use the same one.
static BUILT_IN: OnceLock<Redactor> = OnceLock::new();

fn built_in() -> &'static Redactor {
    BUILT_IN.get_or_init(|| Redactor::compile(Vec::new()))
}

impl Default for Redactor {
    /// The built-in rules alone. The first call compiles them (about 10 ms); later calls
    /// share that.
    fn default() -> Self {
        built_in().clone()
    }
}

fn parse(pattern: &str) -> Hir {
    // The rules are constants checked by the tests, so a rule that does not parse is a bug
    // in this crate, not an input error.
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .unwrap_or_else(|e| panic!("rule {pattern:?} does not parse: {e}"))
}

fn marker(label: &str) -> Box<[u8]> {
    format!("[REDACTED:{label}]")
        .into_bytes()
        .into_boxed_slice()
}

impl Redactor {
    /// Compiles the rules and the configured secret values (about 10 ms: do it once
    /// and share the result). With no secret value to add, the process's shared
    /// [`Redactor::default`] is returned instead.
    pub fn new(config: RedactorConfig) -> Redactor {
        let mut values: Vec<Vec<u8>> = config
            .secret_values
            .into_iter()
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            .collect();
        if values.is_empty() {
            return Redactor::default();
        }
        // Longest first, so that a value that is a prefix of another does not cut it short.
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Redactor::compile(values)
    }

    /// Starts compiling [`Redactor::default`] on a thread of its own, so that a caller with
    /// other work to do first (parsing a graph file) does not wait for it later. Calling it
    /// more than once, or after the default was compiled, does nothing.
    pub fn warm_up_default() {
        static STARTED: std::sync::Once = std::sync::Once::new();
        STARTED.call_once(|| {
            // If no thread can be started, the first use compiles it instead.
            let _ = std::thread::Builder::new()
                .name("redactor".to_owned())
                .spawn(|| {
                    built_in();
                });
        });
    }

    /// [`Redactor::default`] if it is compiled already; `None` (without waiting) while it is
    /// being compiled, or before anything asked for it.
    pub fn default_if_ready() -> Option<&'static Self> {
        BUILT_IN.get()
    }

    /// The fewest bytes any built-in rule can match: a text shorter than this holds no secret
    /// [`Redactor::default`] would find, and need not wait for it to be compiled. Parses the
    /// rules on first use (under a millisecond); compiles nothing.
    pub fn shortest_built_in_match() -> usize {
        static SHORTEST: LazyLock<usize> = LazyLock::new(|| {
            rules::rules()
                .iter()
                .filter_map(|rule| parse(&rule.pattern).properties().minimum_len())
                .min()
                .unwrap_or(0)
        });
        *SHORTEST
    }

    /// `values`: at least [`MIN_SECRET_LEN`] long, longest first, no duplicates.
    fn compile(values: Vec<Vec<u8>>) -> Redactor {
        let mut hirs = Vec::new();
        let mut patterns = Vec::new();
        for value in &values {
            hirs.push(Hir::literal(value.clone()));
            patterns.push(Compiled {
                hir: None,
                regex: OnceLock::new(),
                validate: validate::always,
                tail: Tail::None,
                not_after: None,
                generic: false,
                quick: None,
                groups: vec![(0, marker("secret-value"))],
            });
        }
        for rule in rules::rules() {
            let hir = parse(&rule.pattern);
            let groups = group_labels(&hir);
            hirs.push(hir.clone());
            patterns.push(Compiled {
                hir: Some(hir),
                regex: OnceLock::new(),
                validate: rule.validate,
                tail: rule.tail,
                not_after: rule.not_after,
                generic: rule.generic,
                quick: rule.quick,
                groups,
            });
        }
        let longest = hirs
            .iter()
            .map(|h| {
                h.properties()
                    .maximum_len()
                    .expect("every pattern has a bounded length")
            })
            .max()
            .unwrap_or(0);

        let all: Vec<&Hir> = hirs.iter().collect();
        let regex = build(&all, WhichCaptures::Implicit);
        let starts = starts_dfa(&all);
        let pem_end_hir = parse(PEM_END);
        let pem_end_len = pem_end_hir
            .properties()
            .maximum_len()
            .expect("bounded END line");
        let pem_end = build(&[&pem_end_hir], WhichCaptures::Implicit);
        Redactor {
            engine: Arc::new(Engine {
                regex,
                starts,
                patterns,
                pem_end,
                pem_end_len,
                // One byte of look-ahead (`\b`, `$`) beyond the longest match.
                window: longest + 1,
            }),
        }
    }

    /// Redacts a whole text. Borrows when nothing was redacted.
    pub fn redact<'h>(&self, text: &'h [u8]) -> Cow<'h, [u8]> {
        if text.contains(&b'\\') && crate::escaped::has_escape(text) {
            // Escapes are decoded line by line: the stream's way, so both give the same.
            let mut stream = self.stream();
            let mut out = Vec::with_capacity(text.len());
            stream.push(text, &mut out);
            stream.finish(&mut out);
            return match out == text {
                true => Cow::Borrowed(text),
                false => Cow::Owned(out),
            };
        }
        let mut out = CowOut {
            text,
            passed: 0,
            owned: None,
        };
        self.engine
            .run(text, 0, true, &mut Mode::Scan, None, &mut out);
        match out.owned {
            Some(owned) => Cow::Owned(owned),
            None => {
                debug_assert_eq!(out.passed, text.len());
                Cow::Borrowed(text)
            }
        }
    }

    /// Redacts a whole text. Borrows when nothing was redacted.
    pub fn redact_str<'h>(&self, text: &'h str) -> Cow<'h, str> {
        match self.redact(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Matches start and end on ASCII bytes or on whole secret values, so valid UTF-8
            // stays valid; the lossy path is a guard, not a case.
            Cow::Owned(bytes) => Cow::Owned(
                String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    /// The secrets in a whole text, in order: what [`Redactor::redact`] would replace, and
    /// with which marker. Empty exactly when `redact` would give the text back unchanged.
    pub fn find(&self, text: &[u8]) -> Vec<Finding> {
        if !(text.contains(&b'\\') && crate::escaped::has_escape(text)) {
            return find_with(&self.engine, text);
        }
        // As `redact` goes: line by line, the lines with escapes decoded. Between those, the
        // rules as printed ran over the lines as one text, and had decided all of it when a
        // decoded line came.
        let mut stream = StreamRedactor::traced(Arc::clone(&self.engine));
        let mut sink = Vec::new();
        stream.push(text, &mut sink);
        let decoded = stream.finish_traced(&mut sink).unwrap_or_default();
        let mut found = Vec::new();
        let mut at = 0;
        for (start, len, line) in decoded {
            found.extend(shifted(find_with(&self.engine, &text[at..start]), at));
            found.extend(shifted(line, start));
            at = start + len;
        }
        found.extend(shifted(find_with(&self.engine, &text[at..]), at));
        found
    }

    /// A redactor for one stream of bytes (one task's stdout, say).
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor::new(Arc::clone(&self.engine))
    }

    /// How many bytes a stream holds back at most, beyond those of the chunk being pushed
    /// (a private key block or a long token is swallowed, not held).
    pub fn window(&self) -> usize {
        self.engine.window
    }
}

fn shifted(found: Vec<Finding>, by: usize) -> impl Iterator<Item = Finding> {
    found.into_iter().map(move |f| Finding {
        range: f.range.start + by..f.range.end + by,
        label: f.label,
    })
}

/// [`Redactor::find`] with `engine`: the secrets of a text as printed.
pub(crate) fn find_with(engine: &Engine, text: &[u8]) -> Vec<Finding> {
    let mut out = FindOut {
        text,
        found: Vec::new(),
        open: 0,
        given_back: 0,
    };
    engine.run(text, 0, true, &mut Mode::Scan, None, &mut out);
    out.close(text.len());
    out.found
}

/// The capture groups of a pattern that are secrets, in order, with their markers.
fn group_labels(hir: &Hir) -> Vec<(usize, Box<[u8]>)> {
    fn walk(hir: &Hir, out: &mut Vec<(usize, Box<[u8]>)>) {
        use regex_syntax::hir::HirKind;
        match hir.kind() {
            HirKind::Capture(c) => {
                if let Some(name) = &c.name {
                    let label = name.split("__").next().unwrap_or(name).replace('_', "-");
                    out.push((c.index as usize, marker(&label)));
                }
                walk(&c.sub, out);
            }
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                subs.iter().for_each(|s| walk(s, out));
            }
            HirKind::Repetition(r) => walk(&r.sub, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(hir, &mut out);
    out.sort_by_key(|(index, _)| *index);
    out
}

/// Passes input through by reference until the first redaction, then copies.
struct CowOut<'h> {
    text: &'h [u8],
    /// How much of `text` went through unchanged before `owned` was needed.
    passed: usize,
    owned: Option<Vec<u8>>,
}

impl CowOut<'_> {
    fn owned(&mut self) -> &mut Vec<u8> {
        let (text, passed) = (self.text, self.passed);
        self.owned.get_or_insert_with(|| text[..passed].to_vec())
    }
}

impl Out for CowOut<'_> {
    fn keep(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.owned.is_none() && std::ptr::eq(bytes.as_ptr(), self.text[self.passed..].as_ptr()) {
            self.passed += bytes.len();
        } else {
            self.owned().extend_from_slice(bytes);
        }
    }

    fn mark(&mut self, marker: &[u8], _secret: &[u8]) {
        self.owned().extend_from_slice(marker);
    }

    fn insert(&mut self, bytes: &[u8]) {
        self.owned().extend_from_slice(bytes);
    }
}

/// Records where markers would go instead of writing them. Every byte the engine keeps is a
/// slice of the text it was given (context is redacted on its own, but as a slice of the same
/// text), and so is the start of each secret it marks; a secret runs from where its marker
/// says it starts to what is kept, or marked, after it.
struct FindOut<'h> {
    text: &'h [u8],
    found: Vec<Finding>,
    /// The findings from here on do not know their end yet.
    open: usize,
    /// Bytes at the end of a swallowed secret that were given back (the line break before a
    /// private key's `END` line): not part of the secret.
    given_back: usize,
}

impl FindOut<'_> {
    /// Where `bytes`, a slice of the text, starts in it.
    fn offset(&self, bytes: &[u8]) -> usize {
        let start = (bytes.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        debug_assert!(
            start + bytes.len() <= self.text.len(),
            "the engine's slices are the text's"
        );
        start
    }

    fn close(&mut self, end: usize) {
        let end = end.saturating_sub(std::mem::take(&mut self.given_back));
        for finding in &mut self.found[self.open..] {
            finding.range.end = end.max(finding.range.start);
        }
        self.open = self.found.len();
    }
}

impl Out for FindOut<'_> {
    fn keep(&mut self, bytes: &[u8]) {
        let start = self.offset(bytes);
        self.close(start);
    }

    fn mark(&mut self, marker: &[u8], secret: &[u8]) {
        let start = self.offset(secret);
        // What was swallowed since the last kept bytes belongs to the secrets before it.
        self.close(start);
        let label = marker
            .strip_prefix(b"[REDACTED:")
            .and_then(|rest| rest.strip_suffix(b"]"))
            .unwrap_or(marker);
        self.found.push(Finding {
            range: start..start,
            label: String::from_utf8_lossy(label).into_owned(),
        });
    }

    // The line break before a private key's `END` line, swallowed with its body and given
    // back: the same bytes as the input's.
    fn insert(&mut self, bytes: &[u8]) {
        self.given_back += bytes.len();
    }
}

/// The lazy DFA of [`Engine::starts`](crate::engine::Engine). It reports every match
/// rather than the preferred one, so that it fails for good only where no pattern at all can
/// go on (before its first match it walks as the preferring one would).
fn starts_dfa(hirs: &[&Hir]) -> hybrid::dfa::DFA {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .which_captures(WhichCaptures::None)
                .nfa_size_limit(None),
        )
        .build_many_from_hir(hirs)
        .expect("the rules compile");
    hybrid::dfa::DFA::builder()
        .configure(
            hybrid::dfa::DFA::config()
                .match_kind(regex_automata::MatchKind::All)
                .cache_capacity(2 << 20),
        )
        .build_from_nfa(nfa)
        .expect("the rules compile")
}
