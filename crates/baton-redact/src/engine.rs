//! The one redaction loop, shared by whole texts and streams.
//!
//! [`Engine::run`] redacts `hay[pos..]` and returns how far it got. When it is told that more
//! bytes may follow (`finished == false`), it only decides what the bytes seen so far decide
//! for any continuation: a match is taken only if it starts at least `window` bytes before the
//! end (every pattern is shorter than that, look-ahead included), and text is passed through
//! only up to `window` bytes before the end. The rest waits for the next call. This is why a
//! stream gives the same bytes as the whole text, however it is cut.
//!
//! What a match cannot see (a token longer than its pattern's bound, the body of a private key
//! block) is swallowed byte by byte in a [`Mode`] that survives between calls.

use std::ops::Range;
use std::sync::OnceLock;

use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::{Anchored, Input, PatternID, hybrid, meta};
use regex_syntax::hir::Hir;

use crate::byteset::ByteSet;
use crate::rules::{PEM_BODY, Tail};

/// Where the loop stands between calls.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mode {
    /// Looking for the next match.
    Scan,
    /// Inside a secret that goes on while its bytes are in the set.
    Class(&'static ByteSet),
    /// Inside a quoted secret value.
    Quoted { quote: u8, escaped: bool },
    /// Inside a private key block. `marked` once the marker is out; `last` holds the last
    /// swallowed bytes, so that the line break before the `END` line can be given back.
    Pem { marked: bool, last: [u8; 4] },
}

/// Where redacted bytes go.
pub(crate) trait Out {
    /// Bytes of the input, passed through.
    fn keep(&mut self, bytes: &[u8]);
    /// A marker (`[REDACTED:label]`) in place of a secret. `secret` is a slice of the input
    /// that starts where the secret starts (as much of it as is known: a secret swallowed by
    /// its tail goes on past it). Two markers can follow each other with no input kept
    /// between them (a token that runs to the end of a match's context, then the match's own
    /// secret), so where the second starts is only known from it.
    fn mark(&mut self, marker: &[u8], secret: &[u8]);
    /// Input bytes written back after they were swallowed with a secret (the line break
    /// before a private key's `END` line).
    fn insert(&mut self, bytes: &[u8]);
}

impl Out for Vec<u8> {
    fn keep(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    fn mark(&mut self, marker: &[u8], _secret: &[u8]) {
        self.extend_from_slice(marker);
    }
    fn insert(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// One pattern, on its own.
pub(crate) struct Compiled {
    /// The pattern alone, to find its capture groups once the combined regex has found where
    /// it matches (capture groups in a regex of all patterns are slow); compiled the first
    /// time it is needed. `None` for a literal secret value, which is all secret.
    pub(crate) hir: Option<Hir>,
    pub(crate) regex: OnceLock<meta::Regex>,
    pub(crate) validate: fn(&[&[u8]]) -> bool,
    pub(crate) tail: Tail,
    /// See `rules::Rule::not_after`.
    pub(crate) not_after: Option<&'static ByteSet>,
    /// See `rules::Rule::generic`.
    pub(crate) generic: bool,
    /// See `rules::Rule::quick`.
    pub(crate) quick: Option<fn(&[u8]) -> bool>,
    /// Capture group index and marker (`[REDACTED:label]`) of each secret group; for a
    /// literal value, the marker of the whole.
    pub(crate) groups: Vec<(usize, Box<[u8]>)>,
}

/// A match and its secret parts, each with its index in `Compiled::groups`.
struct Found {
    pattern: usize,
    whole: Range<usize>,
    secrets: Vec<(Range<usize>, usize)>,
}

pub(crate) struct Engine {
    /// All patterns, literal secret values first, then the rules in priority order: it finds
    /// where a match starts and which pattern it is, without capture groups.
    pub(crate) regex: meta::Regex,
    pub(crate) patterns: Vec<Compiled>,
    /// All patterns again, as a lazy DFA walked by hand from a given position: it tells
    /// where a match could still start in the bytes a stream holds back.
    pub(crate) starts: hybrid::dfa::DFA,
    pub(crate) pem_end: meta::Regex,
    pub(crate) pem_end_len: usize,
    /// More than the longest any pattern can match, look-ahead included.
    pub(crate) window: usize,
}

const PEM_MARKER: &[u8] = b"[REDACTED:private-key]";

/// The bytes of a private key block's `END` line (see `rules::PEM_END`).
static END_LINE: ByteSet = ByteSet::new(b"A-Z0-9 -");

impl Engine {
    pub(crate) fn run(
        &self,
        hay: &[u8],
        mut pos: usize,
        finished: bool,
        mode: &mut Mode,
        mut starts: Option<&mut hybrid::dfa::Cache>,
        out: &mut dyn Out,
    ) -> usize {
        loop {
            match mode {
                Mode::Scan => {
                    let limit = if finished {
                        hay.len()
                    } else {
                        hay.len().saturating_sub(self.window)
                    };
                    let found = (pos < limit)
                        .then(|| self.regex.search(&Input::new(hay).span(pos..hay.len())))
                        .flatten();
                    let found = match found.filter(|m| m.start() < limit) {
                        Some(found) => found,
                        None if finished => {
                            out.keep(&hay[pos..]);
                            return hay.len();
                        }
                        None => {
                            // No match starts a window before the end: pass that through,
                            // and what follows it up to where a match could still start.
                            let from = pos.max(limit);
                            let Some(cache) = starts.as_deref_mut() else {
                                let end = char_boundary(hay, pos, from);
                                out.keep(&hay[pos..end]);
                                return end;
                            };
                            let held = self.held_from(hay, from, cache);
                            // A match there is taken once every pattern has failed for good
                            // (at an earlier position, they all have): no continuation can
                            // change it. A finished line that holds a secret goes through at
                            // once, rather than wait for a window's worth of bytes after it.
                            let settled = (held < hay.len())
                                .then(|| match found {
                                    Some(m) if m.start() == held => Some(m),
                                    _ => self.regex.search(
                                        &Input::new(hay)
                                            .span(held..hay.len())
                                            .anchored(Anchored::Yes),
                                    ),
                                })
                                .flatten()
                                .filter(|_| self.settled(hay, held, cache));
                            match settled {
                                Some(m) => m,
                                None => {
                                    let end = found.map_or(held, |m| held.min(m.start()));
                                    let end = char_boundary(hay, pos, end);
                                    out.keep(&hay[pos..end]);
                                    return end;
                                }
                            }
                        }
                    };
                    let start = found.start();
                    match self.accept(hay, start, found.pattern().as_usize()) {
                        Some(found) => {
                            out.keep(&hay[pos..start]);
                            pos = self.emit(hay, &found, mode, out);
                        }
                        None => {
                            out.keep(&hay[pos..=start]);
                            pos = start + 1;
                        }
                    }
                }
                Mode::Class(set) => match hay[pos..].iter().position(|&b| !set.contains(b)) {
                    Some(n) => {
                        pos += n;
                        *mode = Mode::Scan;
                    }
                    None => return hay.len(),
                },
                Mode::Quoted { quote, escaped } => {
                    let mut end = None;
                    for (i, &b) in hay[pos..].iter().enumerate() {
                        if b == b'\n' || b == b'\r' || (!*escaped && b == *quote) {
                            end = Some(pos + i);
                            break;
                        }
                        *escaped = !*escaped && b == b'\\';
                    }
                    match end {
                        Some(end) => {
                            pos = end;
                            *mode = Mode::Scan;
                        }
                        None => return hay.len(),
                    }
                }
                Mode::Pem { marked, last } => {
                    let stop = hay[pos..]
                        .iter()
                        .position(|&b| !PEM_BODY.contains(b))
                        .map_or(hay.len(), |n| pos + n);
                    if stop > pos {
                        if !*marked {
                            out.mark(PEM_MARKER, &hay[pos..stop]);
                            *marked = true;
                        }
                        for &b in &hay[stop.saturating_sub(4).max(pos)..stop] {
                            last.rotate_left(1);
                            last[3] = b;
                        }
                        pos = stop;
                    }
                    if pos == hay.len() {
                        return pos;
                    }
                    if hay[pos] == b'-' {
                        // An `END` line is made of `END_LINE` bytes only: once another byte
                        // follows, what is there decides it.
                        if !finished
                            && pos + self.pem_end_len > hay.len()
                            && hay[pos..].iter().all(|&b| END_LINE.contains(b))
                        {
                            return pos;
                        }
                        let input = Input::new(hay).span(pos..hay.len()).anchored(Anchored::Yes);
                        // The END line itself is scanned as any text (its closing dashes
                        // may open the next block), as it is when the output is redacted
                        // again; only the line break before it, swallowed with the body, is
                        // given back.
                        if *marked && self.pem_end.search(&input).is_some() {
                            out.insert(line_break(last));
                        }
                    }
                    *mode = Mode::Scan;
                }
            }
        }
    }

    /// The first position from `from` on where a match could start, given the bytes so far:
    /// every pattern run anchored at an earlier position has failed for good. Releasing the
    /// bytes before it lets a stream pass a finished line through at once rather than hold
    /// back a window's worth.
    fn held_from(&self, hay: &[u8], from: usize, cache: &mut hybrid::dfa::Cache) -> usize {
        // Adversarial text (`eyJeyJeyJ…`) keeps many positions alive for long; past this many
        // steps, the rest is simply held.
        let mut budget = 4 * self.window;
        'positions: for p in from..hay.len() {
            let input = Input::new(hay).span(p..hay.len()).anchored(Anchored::Yes);
            let Ok(mut state) = self.starts.start_state_forward(cache, &input) else {
                return p;
            };
            for &byte in &hay[p..] {
                if state.is_match() || budget == 0 {
                    return p;
                }
                budget -= 1;
                match self.starts.next_state(cache, state, byte) {
                    Ok(next) if next.is_dead() => continue 'positions,
                    Ok(next) => state = next,
                    Err(_) => return p,
                }
            }
            return p;
        }
        hay.len()
    }

    /// Whether no continuation of `hay` can change what any pattern matches at `start`: the
    /// patterns, all of them at once (the DFA finds every match, not the preferred one), have
    /// failed for good before the end of `hay`.
    fn settled(&self, hay: &[u8], start: usize, cache: &mut hybrid::dfa::Cache) -> bool {
        let input = Input::new(hay)
            .span(start..hay.len())
            .anchored(Anchored::Yes);
        let Ok(mut state) = self.starts.start_state_forward(cache, &input) else {
            return false;
        };
        for &byte in &hay[start..] {
            match self.starts.next_state(cache, state, byte) {
                Ok(next) if next.is_dead() => return true,
                Ok(next) => state = next,
                Err(_) => return false,
            }
        }
        // A match is seen a byte late: the state after the byte that ended it (a line's
        // newline) is a match state, and settled if no byte at all leads on from it.
        state.is_match()
            && (0..=u8::MAX).all(|byte| {
                self.starts
                    .next_state(cache, state, byte)
                    .is_ok_and(|next| next.is_dead())
            })
    }

    /// The first pattern, from `first` (the highest-priority one that matches at `start`)
    /// on, that matches at `start` and passes its check.
    fn accept(&self, hay: &[u8], start: usize, first: usize) -> Option<Found> {
        (first..self.patterns.len())
            .filter(|&pattern| {
                self.patterns[pattern]
                    .quick
                    .is_none_or(|quick| quick(&hay[start..]))
            })
            .filter_map(|pattern| self.find_at(hay, start, pattern))
            .find(|found| self.valid(hay, found))
    }

    /// `pattern`'s match at `start`, with its capture groups.
    fn find_at(&self, hay: &[u8], start: usize, pattern: usize) -> Option<Found> {
        let compiled = &self.patterns[pattern];
        let input = Input::new(hay)
            .span(start..hay.len())
            .anchored(Anchored::Yes);
        let Some(hir) = &compiled.hir else {
            let input = input.anchored(Anchored::Pattern(PatternID::new_unchecked(pattern)));
            let whole = self.regex.search(&input)?.range();
            return Some(Found {
                pattern,
                secrets: vec![(whole.clone(), 0)],
                whole,
            });
        };
        let regex = compiled
            .regex
            .get_or_init(|| build(&[hir], WhichCaptures::All));
        let mut caps = regex.create_captures();
        regex.search_captures(&input, &mut caps);
        let whole = caps.get_match()?.range();
        let secrets = compiled
            .groups
            .iter()
            .enumerate()
            .filter_map(|(i, (index, _))| Some((caps.get_group(*index)?.range(), i)))
            .collect();
        Some(Found {
            pattern,
            whole,
            secrets,
        })
    }

    fn valid(&self, hay: &[u8], found: &Found) -> bool {
        let pattern = &self.patterns[found.pattern];
        if let (Some(set), Some((first, _))) = (pattern.not_after, found.secrets.first())
            && first.start == found.whole.start
            && first.start > 0
            && set.contains(hay[first.start - 1])
        {
            return false;
        }
        let groups: Vec<&[u8]> = found.secrets.iter().map(|(r, _)| &hay[r.clone()]).collect();
        (pattern.validate)(&groups)
    }

    /// Writes a match (context, markers) and returns where scanning resumes: after the last
    /// secret group (what follows it was only look-ahead), or after the match if it has none.
    fn emit(&self, hay: &[u8], found: &Found, mode: &mut Mode, out: &mut dyn Out) -> usize {
        let pattern = &self.patterns[found.pattern];
        let Some((last, _)) = found.secrets.last() else {
            out.keep(&hay[found.whole.clone()]);
            *mode = match pattern.tail {
                Tail::Pem => Mode::Pem {
                    marked: false,
                    last: [0; 4],
                },
                _ => Mode::Scan,
            };
            return found.whole.end;
        };
        *mode = match pattern.tail {
            Tail::None | Tail::Pem => Mode::Scan,
            Tail::Class(set) => Mode::Class(set),
            Tail::Value(set) => match last.start.checked_sub(1).map(|i| hay[i]) {
                Some(quote @ (b'"' | b'\'')) => Mode::Quoted {
                    quote,
                    escaped: false,
                },
                _ => Mode::Class(set),
            },
        };
        let mut at = found.whole.start;
        for (range, group) in &found.secrets {
            self.context(&hay[at..range.start], out);
            let marker = &pattern.groups[*group].1;
            let marker = match pattern.tail {
                Tail::Value(_) => self.refine(&hay[range.clone()], marker),
                _ => marker,
            };
            out.mark(marker, &hay[range.clone()]);
            at = range.end;
        }
        last.end
    }

    /// The marker of an assigned value: that of the token it is, if it is one
    /// (`GITHUB_TOKEN=ghp_…` is a `github-token`), else the assignment's. Only the value's
    /// own bytes are looked at, so a stream decides this as the whole text does.
    fn refine<'a>(&'a self, value: &[u8], marker: &'a [u8]) -> &'a [u8] {
        let input = Input::new(value).anchored(Anchored::Yes);
        let Some(m) = self.regex.search(&input) else {
            return marker;
        };
        let pattern = m.pattern().as_usize();
        if matches!(self.patterns[pattern].tail, Tail::Value(_)) || self.patterns[pattern].generic {
            return marker;
        }
        match self.find_at(value, 0, pattern) {
            Some(found) if self.valid(value, &found) => {
                found.secrets.first().map_or(marker, |(_, group)| {
                    &self.patterns[pattern].groups[*group].1
                })
            }
            _ => marker,
        }
    }

    /// Context inside a match is printed, but redacted on its own first: a URL's user name
    /// may itself be a token. It is shorter than the match, so this ends.
    fn context(&self, text: &[u8], out: &mut dyn Out) {
        if !text.is_empty() {
            self.run(text, 0, true, &mut Mode::Scan, None, out);
        }
    }
}

/// Compiles patterns given as syntax trees (which know their longest match).
pub(crate) fn build(hirs: &[&Hir], captures: WhichCaptures) -> meta::Regex {
    let config = meta::Config::new()
        .which_captures(captures)
        // The rules are fixed and tested; literal values only add their own length.
        .nfa_size_limit(None)
        .hybrid_cache_capacity(8 << 20);
    meta::Builder::new()
        .configure(config)
        .build_many_from_hir(hirs)
        // The rules are constants checked by the tests, and literals always compile.
        .expect("the rules compile")
}

/// The line break that ended the swallowed body of a key block, if any.
fn line_break(last: &[u8; 4]) -> &[u8] {
    for end in [&b"\\r\\n"[..], b"\\n", b"\r\n", b"\n"] {
        if last.ends_with(end) {
            return end;
        }
    }
    &[]
}

/// `end`, or the start of the UTF-8 character that `end` would cut; never before `pos`.
fn char_boundary(hay: &[u8], pos: usize, end: usize) -> usize {
    let mut i = end;
    while i > pos && end - i < 4 {
        i -= 1;
        let len = match hay[i] {
            0x80..=0xbf => continue,
            0xf0.. => 4,
            0xe0.. => 3,
            0xc0.. => 2,
            _ => 1,
        };
        return if i + len > end { i } else { end };
    }
    end
}
