//! Scope globs: parsing, and an exact test of whether two globs can match a common path.
//!
//! Syntax: paths relative to the repository root, `/`-separated, with `*` (any characters within
//! one segment), `?` (one character), `[abc]`, `[a-z]`, `[!a]` (one character of a class), `**`
//! as a whole segment (any number of segments, including none) and `{a,b}` (alternatives). A
//! pattern without any of these means that path and everything under it: `src/db` is
//! `src/db` ∪ `src/db/**`.

use std::collections::HashSet;
use std::fmt;

use crate::path_chars::{OddChar, odd_char};

/// More alternatives than this from `{…}` in one scope entry is almost surely a mistake, and it
/// would make conflict checks slow.
const MAX_ALTERNATIVES: usize = 64;

/// One glob after brace expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of whole segments.
    AnyPath,
    Atoms(Vec<Atom>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Atom {
    Lit(char),
    /// `?`
    Any,
    /// `*`
    Star,
    Class(Class),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Class {
    negated: bool,
    /// Inclusive ranges, sorted and merged.
    ranges: Vec<(u32, u32)>,
}

/// Why a scope entry is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GlobError {
    /// Leaves the repository (`..`, absolute).
    Escapes(&'static str),
    /// A character that makes the path look like something it is not (control, bidi,
    /// invisible, backslash, a look-alike of `.` or `/`).
    OddChar(OddChar),
    Syntax(String),
}

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobError::Escapes(why) => f.write_str(why),
            GlobError::Syntax(why) => f.write_str(why),
            GlobError::OddChar(odd) => write!(f, "it contains {}", odd.describe()),
        }
    }
}

/// Checks that a repository-relative path (scope entry or `cwd`) stays inside the repository.
pub(crate) fn check_relative(text: &str) -> Result<(), GlobError> {
    if text.is_empty() {
        return Err(GlobError::Syntax("the path is empty".into()));
    }
    if let Some(odd) = odd_char(text) {
        return Err(GlobError::OddChar(odd));
    }
    if text.starts_with('/') || text.starts_with('~') {
        return Err(GlobError::Escapes(
            "it is absolute; write it relative to the repository root",
        ));
    }
    if text.len() >= 2 && text.as_bytes()[1] == b':' && text.as_bytes()[0].is_ascii_alphabetic() {
        return Err(GlobError::Escapes(
            "it starts with a drive letter; write it relative to the repository root",
        ));
    }
    if text.split('/').any(|s| s == "..") {
        return Err(GlobError::Escapes("it contains `..`"));
    }
    Ok(())
}

/// Parses one scope entry into the patterns it stands for (one per `{…}` alternative).
pub(crate) fn parse_scope(text: &str) -> Result<Vec<Pattern>, GlobError> {
    check_relative(text)?;
    let mut patterns = Vec::new();
    for alternative in expand_braces(text)? {
        check_relative(&alternative)?;
        patterns.push(parse_one(&alternative)?);
    }
    Ok(patterns)
}

fn parse_one(text: &str) -> Result<Pattern, GlobError> {
    let mut segments = Vec::new();
    let mut has_glob = false;
    for part in text.split('/') {
        // `a//b`, `./a` and a trailing `/` mean what they would in a shell.
        if part.is_empty() || part == "." {
            continue;
        }
        if part == "**" {
            has_glob = true;
            segments.push(Segment::AnyPath);
            continue;
        }
        let atoms = parse_atoms(part)?;
        has_glob |= atoms.iter().any(|a| !matches!(a, Atom::Lit(_)));
        segments.push(Segment::Atoms(atoms));
    }
    if !has_glob {
        segments.push(Segment::AnyPath);
    }
    Ok(Pattern { segments })
}

fn parse_atoms(part: &str) -> Result<Vec<Atom>, GlobError> {
    let chars: Vec<char> = part.chars().collect();
    let mut atoms = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            // `**` inside a segment (`a**b`) is the same as `*`.
            '*' => {
                if atoms.last() != Some(&Atom::Star) {
                    atoms.push(Atom::Star);
                }
            }
            '?' => atoms.push(Atom::Any),
            '[' => {
                let (class, next) = parse_class(&chars, i)?;
                atoms.push(Atom::Class(class));
                i = next;
                continue;
            }
            ']' => return Err(GlobError::Syntax("`]` without `[`".into())),
            c => atoms.push(Atom::Lit(c)),
        }
        i += 1;
    }
    Ok(atoms)
}

/// Parses `[...]` starting at `chars[open]`; returns the class and the index after `]`.
fn parse_class(chars: &[char], open: usize) -> Result<(Class, usize), GlobError> {
    let mut i = open + 1;
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(GlobError::Syntax("`[` without `]`".into()));
        };
        if c == ']' && !first {
            i += 1;
            break;
        }
        first = false;
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&e| e != ']') {
            let end = chars[i + 2];
            if end < c {
                return Err(GlobError::Syntax(format!(
                    "`[{c}-{end}]` is an empty range"
                )));
            }
            ranges.push((c as u32, end as u32));
            i += 3;
        } else {
            ranges.push((c as u32, c as u32));
            i += 1;
        }
    }
    Ok((
        Class {
            negated,
            ranges: merge(ranges),
        },
        i,
    ))
}

fn merge(mut ranges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

/// Expands `{a,b}` (nested too) into the alternatives, in order.
fn expand_braces(text: &str) -> Result<Vec<String>, GlobError> {
    let Some((open, close)) = first_group(text)? else {
        return Ok(vec![text.to_owned()]);
    };
    let (head, inner, tail) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
    let mut out = Vec::new();
    for choice in split_top_level(inner) {
        for rest in expand_braces(&format!("{head}{choice}{tail}"))? {
            out.push(rest);
            if out.len() > MAX_ALTERNATIVES {
                return Err(GlobError::Syntax(format!(
                    "more than {MAX_ALTERNATIVES} alternatives from `{{…}}`"
                )));
            }
        }
    }
    Ok(out)
}

/// Byte positions of the first top-level `{` and its `}`; `[...]` is skipped.
fn first_group(text: &str) -> Result<Option<(usize, usize)>, GlobError> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut open = None;
    let mut in_class = false;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'{' if !in_class => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            b'}' if !in_class => {
                if depth == 0 {
                    return Err(GlobError::Syntax("`}` without `{`".into()));
                }
                depth -= 1;
                if depth == 0 {
                    return Ok(open.map(|o| (o, i)));
                }
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(GlobError::Syntax("`{` without `}`".into()));
    }
    Ok(None)
}

fn split_top_level(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, b) in inner.bytes().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

impl Pattern {
    /// A pattern that matches every path: what an unreadable scope entry in a stored graph is
    /// taken to mean, because assuming less could let two tasks write the same file at once.
    pub(crate) fn everything() -> Self {
        Self {
            segments: vec![Segment::AnyPath],
        }
    }

    /// The leading segments without glob characters; every path the pattern matches starts
    /// with them.
    pub(crate) fn literal_prefix(&self) -> impl Iterator<Item = String> + '_ {
        self.segments.iter().map_while(|s| match s {
            Segment::Atoms(atoms) => atoms
                .iter()
                .map(|a| match a {
                    Atom::Lit(c) => Some(*c),
                    _ => None,
                })
                .collect::<Option<String>>(),
            Segment::AnyPath => None,
        })
    }
}

/// Whether some path matches both patterns.
///
/// A search over pairs of positions (one in each pattern), first over segments, then, for two
/// ordinary segments, over the characters within them: `**` and `*` may match nothing (move
/// past it) or take one unit that the other side's current element can also match (stay).
pub(crate) fn intersects(a: &Pattern, b: &Pattern) -> bool {
    let (sa, sb) = (&a.segments, &b.segments);
    let mut seen = HashSet::new();
    let mut stack = vec![(0usize, 0usize)];
    let mut segment_cache = std::collections::HashMap::new();
    while let Some((i, j)) = stack.pop() {
        if !seen.insert((i, j)) {
            continue;
        }
        match (sa.get(i), sb.get(j)) {
            (None, None) => return true,
            (Some(Segment::AnyPath), other) => {
                stack.push((i + 1, j));
                if other.is_some() {
                    stack.push((i, j + 1));
                }
            }
            (other, Some(Segment::AnyPath)) => {
                stack.push((i, j + 1));
                if other.is_some() {
                    stack.push((i + 1, j));
                }
            }
            (Some(Segment::Atoms(x)), Some(Segment::Atoms(y))) => {
                let compatible = *segment_cache
                    .entry((i, j))
                    .or_insert_with(|| atoms_intersect(x, y));
                if compatible {
                    stack.push((i + 1, j + 1));
                }
            }
            (None, Some(_)) | (Some(_), None) => {}
        }
    }
    false
}

fn atoms_intersect(x: &[Atom], y: &[Atom]) -> bool {
    let width = y.len() + 1;
    let mut seen = vec![false; (x.len() + 1) * width];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        let slot = &mut seen[i * width + j];
        if *slot {
            continue;
        }
        *slot = true;
        match (x.get(i), y.get(j)) {
            (None, None) => return true,
            (Some(Atom::Star), other) => {
                stack.push((i + 1, j));
                if other.is_some() {
                    stack.push((i, j + 1));
                }
            }
            (other, Some(Atom::Star)) => {
                stack.push((i, j + 1));
                if other.is_some() {
                    stack.push((i + 1, j));
                }
            }
            (Some(p), Some(q)) => {
                if chars_overlap(p, q) {
                    stack.push((i + 1, j + 1));
                }
            }
            (None, Some(_)) | (Some(_), None) => {}
        }
    }
    false
}

/// Whether two single-character atoms can match the same character.
fn chars_overlap(p: &Atom, q: &Atom) -> bool {
    match (p, q) {
        (Atom::Lit(a), Atom::Lit(b)) => a == b,
        (Atom::Lit(c), Atom::Class(k)) | (Atom::Class(k), Atom::Lit(c)) => k.contains(*c as u32),
        (Atom::Any, Atom::Class(k)) | (Atom::Class(k), Atom::Any) => {
            k.negated || !k.ranges.is_empty()
        }
        (Atom::Any, _) | (_, Atom::Any) => true,
        (Atom::Class(a), Atom::Class(b)) => classes_overlap(a, b),
        (Atom::Star, _) | (_, Atom::Star) => true,
    }
}

impl Class {
    fn contains(&self, c: u32) -> bool {
        let inside = self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        inside != self.negated
    }
}

fn classes_overlap(a: &Class, b: &Class) -> bool {
    match (a.negated, b.negated) {
        // Two complements of finite sets always share something.
        (true, true) => true,
        (false, false) => a
            .ranges
            .iter()
            .any(|&(alo, ahi)| b.ranges.iter().any(|&(blo, bhi)| alo <= bhi && blo <= ahi)),
        (false, true) => not_covered(&a.ranges, &b.ranges),
        (true, false) => not_covered(&b.ranges, &a.ranges),
    }
}

/// Whether some character in `wanted` lies outside `excluded` (both sorted and merged).
fn not_covered(wanted: &[(u32, u32)], excluded: &[(u32, u32)]) -> bool {
    wanted.iter().any(|&(lo, hi)| {
        let mut next = lo;
        for &(elo, ehi) in excluded {
            if elo <= next && next <= ehi {
                next = ehi.saturating_add(1);
            }
        }
        next <= hi
    })
}

/// Whether a concrete path matches: the straightforward definition. [`intersects`] is checked
/// against it, and it decides whether a changed file is inside a task's scope.
pub(crate) fn matches(p: &Pattern, path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    fn go(segs: &[Segment], parts: &[&str]) -> bool {
        match segs.split_first() {
            None => parts.is_empty(),
            Some((Segment::AnyPath, rest)) => (0..=parts.len()).any(|k| go(rest, &parts[k..])),
            Some((Segment::Atoms(atoms), rest)) => match parts.split_first() {
                Some((part, more)) => {
                    let chars: Vec<char> = part.chars().collect();
                    segment_matches(atoms, &chars) && go(rest, more)
                }
                None => false,
            },
        }
    }
    fn segment_matches(atoms: &[Atom], chars: &[char]) -> bool {
        match atoms.split_first() {
            None => chars.is_empty(),
            Some((Atom::Star, rest)) => {
                (0..=chars.len()).any(|k| segment_matches(rest, &chars[k..]))
            }
            Some((atom, rest)) => match chars.split_first() {
                Some((&c, more)) => {
                    let ok = match atom {
                        Atom::Lit(l) => *l == c,
                        Atom::Any => true,
                        Atom::Class(k) => k.contains(c as u32),
                        Atom::Star => true,
                    };
                    ok && segment_matches(rest, more)
                }
                None => false,
            },
        }
    }
    go(&p.segments, &parts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn overlap(a: &str, b: &str) -> bool {
        let pa = parse_scope(a).unwrap();
        let pb = parse_scope(b).unwrap();
        pa.iter().any(|x| pb.iter().any(|y| intersects(x, y)))
    }

    #[test]
    fn overlaps() {
        let yes = [
            ("src/**", "src/db/x.rs"),
            ("**/*.md", "README.md"),
            ("{a,b}/x", "b/*"),
            ("src/db", "src/db/schema.rs"),
            ("src/db", "src/*/schema.rs"),
            ("src", "src"),
            ("src/*.rs", "src/main.rs"),
            ("src/[a-m]*.rs", "src/[!a-f]*"),
            ("src/?.rs", "src/a.*"),
            ("a/**/b", "a/b"),
            ("a/**/b/**", "**/b/c"),
            ("*", "README.md"),
            ("src/**/*.rs", "src/**/mod.*"),
            ("x/[^a]", "x/[ab]"),
        ];
        for (a, b) in yes {
            assert!(overlap(a, b), "{a} and {b} should overlap");
            assert!(overlap(b, a), "{b} and {a} should overlap");
        }
        let no = [
            ("src/*.rs", "src/a/b.rs"),
            ("docs/**", "src/**"),
            ("src/db", "src/dbx"),
            ("src/db", "src/db.rs"),
            ("src/*.rs", "src/*.md"),
            ("src/[a-c].rs", "src/[d-f].rs"),
            ("x/[!a]", "x/a"),
            ("{a,b}/x", "c/*"),
            ("a/*/c", "a/b/*.rs"),
            ("*.md", "docs/x.md"),
        ];
        for (a, b) in no {
            assert!(!overlap(a, b), "{a} and {b} should not overlap");
            assert!(!overlap(b, a), "{b} and {a} should not overlap");
        }
    }

    #[test]
    fn refuses_escapes_and_bad_syntax() {
        for bad in ["../x", "a/../../b", "/etc", "C:/x", "~/x", "{..,a}/x"] {
            assert!(
                matches!(parse_scope(bad), Err(GlobError::Escapes(_))),
                "{bad:?}"
            );
        }
        for bad in [
            "",
            "a[",
            "a]",
            "{a",
            "a}",
            "[z-a]",
            "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}",
        ] {
            assert!(
                matches!(parse_scope(bad), Err(GlobError::Syntax(_))),
                "{bad:?}"
            );
        }
        for odd in ["a\\b", "a\0b", "a\nb", "{a,b\u{202E}}"] {
            assert!(
                matches!(parse_scope(odd), Err(GlobError::OddChar(_))),
                "{odd:?}"
            );
        }
        assert!(parse_scope("./src//db/").is_ok());
    }

    #[test]
    fn literal_prefix_stops_at_the_first_glob() {
        let p = &parse_scope("src/db/*.rs").unwrap()[0];
        assert_eq!(p.literal_prefix().collect::<Vec<_>>(), ["src", "db"]);
        let p = &parse_scope("src/db").unwrap()[0];
        assert_eq!(p.literal_prefix().collect::<Vec<_>>(), ["src", "db"]);
        let p = &parse_scope("**/x").unwrap()[0];
        assert_eq!(p.literal_prefix().count(), 0);
    }

    /// Small alphabets so that random patterns often do overlap.
    fn glob() -> impl Strategy<Value = String> {
        let segment = prop::collection::vec(
            prop_oneof![
                Just("a"),
                Just("b"),
                Just("*"),
                Just("?"),
                Just("[ab]"),
                Just("[!a]"),
                Just("{a,b}"),
            ],
            1..4,
        )
        .prop_map(|parts| parts.concat());
        prop::collection::vec(prop_oneof![3 => segment, 1 => Just("**".to_owned())], 1..4)
            .prop_map(|segs| segs.join("/"))
    }

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec("[abc]{1,3}", 1..5).prop_map(|segs| segs.join("/"))
    }

    proptest! {
        #[test]
        fn symmetric(a in glob(), b in glob()) {
            prop_assert_eq!(overlap(&a, &b), overlap(&b, &a));
        }

        #[test]
        fn a_common_match_means_overlap(a in glob(), b in glob(), p in path()) {
            let pa = parse_scope(&a).unwrap();
            let pb = parse_scope(&b).unwrap();
            let both = pa.iter().any(|x| matches(x, &p)) && pb.iter().any(|y| matches(y, &p));
            if both {
                prop_assert!(overlap(&a, &b), "{} and {} both match {}", a, b, p);
            }
        }

        #[test]
        fn a_glob_overlaps_itself(a in glob()) {
            prop_assert!(overlap(&a, &a));
        }
    }
}
