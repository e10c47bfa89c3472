//! Finds the `[[task]]` sections of a TOML document without parsing it, so that a file of many
//! tasks can be parsed a group of tasks at a time.
//!
//! toml's parser keeps every token, every event and the whole table of a document at once:
//! about forty times the size of the file, most of the memory of loading 100,000 tasks. A run of
//! `[[task]]` sections (with the `[task.…]` tables that belong to each) is a document of its own
//! that parses to the same tables, at the same offsets once shifted, so it can be parsed alone.
//!
//! The scan knows strings, comments and brackets, nothing more. It gives up (`None`) on anything
//! it is unsure of; the caller then parses the whole document as before.

use std::ops::Range;

/// A top-level table header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// `[[task]]`: a new task.
    Task,
    /// `[task.env]`, `[[task.x]]`, `[task]`: belongs to the task above it, if any.
    UnderTask,
    /// Any other table.
    Other,
}

/// Ranges of `text`, in file order, each beginning at the line of a `[[task]]` header and
/// holding only `[[task]]` sections and tables under `task`; a range grows until it holds at
/// least `target` bytes. Empty when there is no `[[task]]` header. Also the number of
/// `[[task]]` headers. `None`: the scan is unsure where the headers are.
pub(crate) fn task_groups(text: &str, target: usize) -> Option<(Vec<Range<usize>>, usize)> {
    let mut groups = Vec::new();
    let mut current: Option<usize> = None;
    let headers = headers(text)?;
    let tasks = headers.iter().filter(|(_, h)| *h == Header::Task).count();
    for (line, header) in headers {
        match (header, current) {
            (Header::Task, None) => current = Some(line),
            (Header::Task, Some(start)) if line - start >= target => {
                groups.push(start..line);
                current = Some(line);
            }
            (Header::Task | Header::UnderTask, _) => {}
            (Header::Other, Some(start)) => {
                groups.push(start..line);
                current = None;
            }
            (Header::Other, None) => {}
        }
    }
    if let Some(start) = current {
        groups.push(start..text.len());
    }
    Some((groups, tasks))
}

/// The top-level table headers: where each one's line begins, and what it is.
fn headers(text: &str) -> Option<Vec<(usize, Header)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    // Open `[` and `{` of values (arrays and inline tables may span lines).
    let mut depth = 0usize;
    let mut line = 0;
    let mut at_line_start = true;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line = i + 1;
                at_line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => i = skip_string(b, i)?,
            b'[' if depth == 0 && at_line_start => {
                let (header, end) = header(b, i)?;
                out.push((line, header));
                i = end;
            }
            b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                i += 1;
            }
            _ => i += 1,
        }
        at_line_start = false;
    }
    (depth == 0).then_some(out)
}

/// The header starting at `b[at] == b'['`, and the offset just after it.
fn header(b: &[u8], at: usize) -> Option<(Header, usize)> {
    let double = b.get(at + 1) == Some(&b'[');
    let mut i = at + if double { 2 } else { 1 };
    let skip_blanks = |i: &mut usize| {
        while matches!(b.get(*i), Some(b' ' | b'\t')) {
            *i += 1;
        }
    };
    skip_blanks(&mut i);
    let key_start = i;
    while b
        .get(i)
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
    {
        i += 1;
    }
    // A quoted first key could still be `task`; not worth knowing.
    if i == key_start {
        return None;
    }
    let is_task = &b[key_start..i] == b"task";
    skip_blanks(&mut i);
    let dotted = b.get(i) == Some(&b'.');
    // The rest of the header: more keys, possibly quoted, up to the closing bracket.
    loop {
        match *b.get(i)? {
            b'"' | b'\'' => i = skip_string(b, i)?,
            b']' => break,
            b'\n' | b'[' => return None,
            _ => i += 1,
        }
    }
    if double {
        if b.get(i + 1) != Some(&b']') {
            return None;
        }
        i += 1;
    }
    let kind = match (is_task, double && !dotted) {
        (true, true) => Header::Task,
        (true, false) => Header::UnderTask,
        (false, _) => Header::Other,
    };
    Some((kind, i + 1))
}

/// The offset just after the string starting at `b[at]` (a `"` or a `'`).
fn skip_string(b: &[u8], at: usize) -> Option<usize> {
    let quote = b[at];
    let escapes = quote == b'"';
    let multiline = b.get(at..at + 3) == Some(&[quote; 3][..]);
    let mut i = at + if multiline { 3 } else { 1 };
    loop {
        match *b.get(i)? {
            b'\\' if escapes => i += 2,
            b'\n' if !multiline => return None,
            c if c == quote && !multiline => return Some(i + 1),
            c if c == quote && b.get(i..i + 3) == Some(&[quote; 3][..]) => {
                // Up to two quotes of the content may come right before the closing three.
                let run = b[i..].iter().take_while(|&&c| c == quote).count();
                return Some(i + run);
            }
            _ => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(text: &str, target: usize) -> Option<Vec<&str>> {
        Some(
            task_groups(text, target)?
                .0
                .into_iter()
                .map(|r| &text[r])
                .collect(),
        )
    }

    #[test]
    fn groups_task_sections_with_their_tables() {
        let text = "name = \"x\"\n[run]\nconcurrency = 2\n\n[[task]]\nid = \"a\"\n[task.env]\nA = \"1\"\n  [[ task ]] # b\nid = \"b\"\n[defaults]\nretries = 1\n[[task]]\nid = \"c\"";
        assert_eq!(
            groups(text, 0).unwrap(),
            [
                "[[task]]\nid = \"a\"\n[task.env]\nA = \"1\"\n",
                "  [[ task ]] # b\nid = \"b\"\n",
                "[[task]]\nid = \"c\"",
            ]
        );
        assert_eq!(
            groups(text, 1 << 20).unwrap(),
            [
                "[[task]]\nid = \"a\"\n[task.env]\nA = \"1\"\n  [[ task ]] # b\nid = \"b\"\n",
                "[[task]]\nid = \"c\"",
            ]
        );
    }

    #[test]
    fn headers_inside_values_are_not_headers() {
        let text = "[[task]]\nid = \"a\"\nrun = \"\"\"\n[[task]]\n\"\"\"\nneeds = [\n[\"x\"],\n]\nprompt = '''\n[x]'''''\n# [[task]]\nx = { y = \"[\" }\n[[task]]\nid = \"b\"\n";
        let g = groups(text, 0).unwrap();
        assert_eq!(g.len(), 2);
        assert!(g[1].starts_with("[[task]]\nid = \"b\""));
    }

    #[test]
    fn unsure_scans_give_up() {
        assert_eq!(groups("[[task]]\nrun = \"open\n", 0), None);
        assert_eq!(groups("[[\"task\"]]\n", 0), None);
        assert_eq!(groups("[[task]]\nneeds = [\n", 0), None);
        assert_eq!(groups("x = ]\n[[task]]\n", 0), None);
        assert_eq!(groups("name = \"x\"\n", 0).unwrap(), Vec::<&str>::new());
    }
}
