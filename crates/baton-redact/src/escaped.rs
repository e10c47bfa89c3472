//! Secrets in JSON-escaped text: `postgres:\/\/app:pw@db`, `\u0067hp_…`, a key inside a JSON
//! string inside another (an agent's answer inside its CLI's stream line).
//!
//! The rules match bytes as printed, so an escape would hide a secret from them. A line that
//! holds JSON escapes is therefore also decoded — one level, then the result again, up to
//! [`LEVELS`] — and each decoded text searched as well; what is found there is mapped back to
//! the escapes it came from. The line's secrets are all of them together, and a secret always
//! covers whole escapes, at every level: redacting valid JSON gives valid JSON (a marker holds
//! neither a quote nor a backslash).

use std::ops::Range;

use crate::redactor::Finding;

/// How many levels of escaping are undone: JSON in a JSON string in a JSON stream line is two.
pub(crate) const LEVELS: usize = 3;

/// Lines longer than this are searched as printed only: decoding keeps a map of four bytes a
/// byte per level.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Whether `text` holds a JSON escape.
pub(crate) fn has_escape(text: &[u8]) -> bool {
    memchr_backslashes(text).any(|at| escape_len(text, at).is_some())
}

fn memchr_backslashes(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    text.iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\\')
        .map(|(i, _)| i)
}

/// The length of the JSON escape at `at` (a backslash), with the code point it stands for.
fn escape_len(text: &[u8], at: usize) -> Option<(usize, u32)> {
    let next = *text.get(at + 1)?;
    let simple = match next {
        b'/' => Some(u32::from(b'/')),
        b'\\' => Some(u32::from(b'\\')),
        b'"' => Some(u32::from(b'"')),
        b'b' => Some(8),
        b'f' => Some(12),
        b'n' => Some(u32::from(b'\n')),
        b'r' => Some(u32::from(b'\r')),
        b't' => Some(u32::from(b'\t')),
        _ => None,
    };
    if let Some(c) = simple {
        return Some((2, c));
    }
    if next != b'u' {
        return None;
    }
    let unit = hex4(text.get(at + 2..at + 6)?)?;
    if (0xD800..0xDC00).contains(&unit) {
        // A high surrogate stands for a character only with its low half after it.
        if text.get(at + 6) == Some(&b'\\') && text.get(at + 7) == Some(&b'u') {
            let low = hex4(text.get(at + 8..at + 12)?)?;
            if (0xDC00..0xE000).contains(&low) {
                return Some((12, 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)));
            }
        }
        return None;
    }
    if (0xDC00..0xE000).contains(&unit) {
        return None;
    }
    Some((6, unit))
}

fn hex4(digits: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16)
        .ok()
        .filter(|_| digits.iter().all(u8::is_ascii_hexdigit))
}

/// One level of decoding: the decoded bytes, where each came from (`origin[i]`: the offset in
/// the level above of the escape or byte that gave decoded byte `i`), and the escapes' spans
/// in the level above. `None` when there is no escape to undo.
struct Level {
    decoded: Vec<u8>,
    origin: Vec<u32>,
    /// Length of the text it was decoded from.
    above_len: usize,
    escapes: Vec<Range<usize>>,
}

impl Level {
    fn decode(text: &[u8]) -> Option<Level> {
        let mut decoded = Vec::with_capacity(text.len());
        let mut origin = Vec::with_capacity(text.len());
        let mut escapes = Vec::new();
        let mut i = 0;
        while i < text.len() {
            if text[i] == b'\\'
                && let Some((len, c)) = escape_len(text, i)
            {
                let mut utf8 = [0; 4];
                let c = char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
                for &b in c.encode_utf8(&mut utf8).as_bytes() {
                    decoded.push(b);
                    origin.push(i as u32);
                }
                escapes.push(i..i + len);
                i += len;
            } else {
                decoded.push(text[i]);
                origin.push(i as u32);
                i += 1;
            }
        }
        (!escapes.is_empty()).then_some(Level {
            decoded,
            origin,
            above_len: text.len(),
            escapes,
        })
    }

    /// The span in the level above that decoded bytes `range` came from: whole escapes.
    fn up(&self, range: Range<usize>) -> Range<usize> {
        let start = self.origin[range.start] as usize;
        let last = self.origin[range.end - 1];
        let end = self.origin[range.end..]
            .iter()
            .find(|&&o| o != last)
            .map_or(self.above_len, |&o| o as usize);
        start..end
    }
}

/// The secrets of one line (without its line break) that holds escapes, as `find` reports
/// them on the line as printed and on each decoded level, in the line's own bytes, merged;
/// `None` when the line holds no escape (the caller redacts it as it is).
pub(crate) fn findings(line: &[u8], find: &dyn Fn(&[u8]) -> Vec<Finding>) -> Option<Vec<Finding>> {
    if line.len() > MAX_LINE {
        return None;
    }
    let mut levels: Vec<Level> = Vec::new();
    while levels.len() < LEVELS {
        let text = levels.last().map_or(line, |l| &l.decoded[..]);
        match Level::decode(text) {
            Some(level) => levels.push(level),
            None => break,
        }
    }
    if levels.is_empty() {
        return None;
    }
    // Up from level `k` (0: the line) to the line's bytes.
    let to_line = |k: usize, mut range: Range<usize>| {
        for level in levels[..k].iter().rev() {
            range = level.up(range);
        }
        range
    };
    let mut found: Vec<Finding> = find(line);
    for k in 1..=levels.len() {
        for finding in find(&levels[k - 1].decoded) {
            if finding.range.is_empty() {
                continue;
            }
            found.push(Finding {
                range: to_line(k, finding.range),
                label: finding.label,
            });
        }
    }
    // Every level's escapes, in the line's bytes: a secret never cuts one.
    let mut escapes: Vec<Range<usize>> = Vec::new();
    for (k, level) in levels.iter().enumerate() {
        for escape in &level.escapes {
            escapes.push(to_line(k, escape.clone()));
        }
    }
    escapes.sort_by_key(|e| (e.start, std::cmp::Reverse(e.end)));
    for finding in &mut found {
        finding.range = whole_escapes(finding.range.clone(), &escapes);
    }
    Some(merge(found))
}

/// `range` grown until no escape starts or ends inside it: the escapes nest or are apart.
fn whole_escapes(mut range: Range<usize>, escapes: &[Range<usize>]) -> Range<usize> {
    loop {
        let mut grown = range.clone();
        for e in escapes {
            if e.start >= grown.end {
                break;
            }
            if e.start < grown.start && grown.start < e.end {
                grown.start = e.start;
            }
            if e.start < grown.end && grown.end < e.end && e.start >= grown.start {
                grown.end = e.end;
            }
        }
        if grown == range {
            return range;
        }
        range = grown;
    }
}

/// Findings in order, overlapping ones made one (named by the one that starts first, the
/// longest of those).
fn merge(mut found: Vec<Finding>) -> Vec<Finding> {
    found.retain(|f| !f.range.is_empty());
    found.sort_by_key(|f| (f.range.start, std::cmp::Reverse(f.range.end)));
    let mut merged: Vec<Finding> = Vec::with_capacity(found.len());
    for finding in found {
        match merged.last_mut() {
            Some(last) if finding.range.start < last.range.end => {
                last.range.end = last.range.end.max(finding.range.end);
            }
            _ => merged.push(finding),
        }
    }
    merged
}

/// `line` with each finding replaced by its marker.
pub(crate) fn apply(line: &[u8], found: &[Finding], out: &mut Vec<u8>) {
    let mut at = 0;
    for finding in found {
        out.extend_from_slice(&line[at..finding.range.start]);
        out.extend_from_slice(b"[REDACTED:");
        out.extend_from_slice(finding.label.as_bytes());
        out.push(b']');
        at = finding.range.end;
    }
    out.extend_from_slice(&line[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_with_their_origins() {
        let level = Level::decode(br#"a\/b\u00e9\ud83d\ude00\x"#).unwrap();
        assert_eq!(level.decoded, "a/bé😀\\x".as_bytes());
        // `é` is two bytes from one six-byte escape; the emoji four from a twelve-byte pair.
        assert_eq!(level.up(3..5), 4..10);
        assert_eq!(level.up(5..9), 10..22);
        assert_eq!(level.up(0..2), 0..3);
        assert!(Level::decode(b"plain \\x text").is_none());
    }

    #[test]
    fn a_range_grows_to_whole_escapes() {
        let escapes = vec![0..4, 4..6, 10..16, 11..13];
        assert_eq!(whole_escapes(2..8, &escapes), 0..8);
        assert_eq!(whole_escapes(12..20, &escapes), 10..20);
        assert_eq!(whole_escapes(6..10, &escapes), 6..10);
    }
}
