//! Characters a path in a graph file may not contain (scope entries, `cwd`, `worktree_include`):
//! ones that make a path look like something it is not, or that tools read differently. Letters
//! of any script are fine (`café/日本`); these are not.

/// A refused character: where it is in the text (bytes), which it is, and why it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OddChar {
    pub offset: usize,
    pub ch: char,
    /// The Unicode name, like `RIGHT-TO-LEFT OVERRIDE`.
    pub name: &'static str,
    /// Why it is refused, completing "… which …".
    pub why: &'static str,
}

impl OddChar {
    /// `U+202E RIGHT-TO-LEFT OVERRIDE`.
    pub(crate) fn describe(&self) -> String {
        format!("U+{:04X} {}", self.ch as u32, self.name)
    }
}

/// The first refused character in `text`, if any.
pub(crate) fn odd_char(text: &str) -> Option<OddChar> {
    text.char_indices().find_map(|(offset, ch)| {
        let (name, why) = classify(ch)?;
        Some(OddChar {
            offset,
            ch,
            name,
            why,
        })
    })
}

const CONTROL: &str = "is a control character";
const BIDI: &str = "changes the order in which the text is shown";
const INVISIBLE: &str = "is invisible";
const LIKE_DOT: &str = "looks like `.` but is not one";
const LIKE_SLASH: &str = "looks like `/` but is not one";
const LIKE_BACKSLASH: &str = "looks like `\\` but is not one";

fn classify(ch: char) -> Option<(&'static str, &'static str)> {
    Some(match ch {
        '\0' => ("NULL", CONTROL),
        '\t' => ("CHARACTER TABULATION", CONTROL),
        '\n' => ("LINE FEED", CONTROL),
        '\r' => ("CARRIAGE RETURN", CONTROL),
        '\u{1B}' => ("ESCAPE", CONTROL),
        '\u{7F}' => ("DELETE", CONTROL),
        '\u{01}'..='\u{1F}' | '\u{80}'..='\u{9F}' => ("<control>", CONTROL),
        '\\' => (
            "REVERSE SOLIDUS",
            "separates directories on Windows only; git and globs read it otherwise",
        ),
        '\u{061C}' => ("ARABIC LETTER MARK", BIDI),
        '\u{200E}' => ("LEFT-TO-RIGHT MARK", BIDI),
        '\u{200F}' => ("RIGHT-TO-LEFT MARK", BIDI),
        '\u{202A}' => ("LEFT-TO-RIGHT EMBEDDING", BIDI),
        '\u{202B}' => ("RIGHT-TO-LEFT EMBEDDING", BIDI),
        '\u{202C}' => ("POP DIRECTIONAL FORMATTING", BIDI),
        '\u{202D}' => ("LEFT-TO-RIGHT OVERRIDE", BIDI),
        '\u{202E}' => ("RIGHT-TO-LEFT OVERRIDE", BIDI),
        '\u{2066}' => ("LEFT-TO-RIGHT ISOLATE", BIDI),
        '\u{2067}' => ("RIGHT-TO-LEFT ISOLATE", BIDI),
        '\u{2068}' => ("FIRST STRONG ISOLATE", BIDI),
        '\u{2069}' => ("POP DIRECTIONAL ISOLATE", BIDI),
        '\u{200B}' => ("ZERO WIDTH SPACE", INVISIBLE),
        '\u{200C}' => ("ZERO WIDTH NON-JOINER", INVISIBLE),
        '\u{200D}' => ("ZERO WIDTH JOINER", INVISIBLE),
        '\u{2060}' => ("WORD JOINER", INVISIBLE),
        '\u{FEFF}' => ("ZERO WIDTH NO-BREAK SPACE", INVISIBLE),
        '\u{2028}' => ("LINE SEPARATOR", "breaks the line"),
        '\u{2029}' => ("PARAGRAPH SEPARATOR", "breaks the line"),
        '\u{2024}' => ("ONE DOT LEADER", LIKE_DOT),
        '\u{2025}' => ("TWO DOT LEADER", "looks like `..` but is not"),
        '\u{FE52}' => ("SMALL FULL STOP", LIKE_DOT),
        '\u{FF0E}' => ("FULLWIDTH FULL STOP", LIKE_DOT),
        '\u{2044}' => ("FRACTION SLASH", LIKE_SLASH),
        '\u{2215}' => ("DIVISION SLASH", LIKE_SLASH),
        '\u{29F8}' => ("BIG SOLIDUS", LIKE_SLASH),
        '\u{FF0F}' => ("FULLWIDTH SOLIDUS", LIKE_SLASH),
        '\u{2216}' => ("SET MINUS", LIKE_BACKSLASH),
        '\u{29F9}' => ("BIG REVERSE SOLIDUS", LIKE_BACKSLASH),
        '\u{FE68}' => ("SMALL REVERSE SOLIDUS", LIKE_BACKSLASH),
        '\u{FF3C}' => ("FULLWIDTH REVERSE SOLIDUS", LIKE_BACKSLASH),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_misleads_and_keeps_letters() {
        for (text, offset, code) in [
            ("a\0b", 1, 0x0),
            ("a\tb", 1, 0x9),
            ("a\nb", 1, 0xA),
            ("a\u{1B}[31mb", 1, 0x1B),
            ("a\u{85}b", 1, 0x85),
            ("src\\main.rs", 3, 0x5C),
            ("src/\u{202E}sr.exe", 4, 0x202E),
            ("é/\u{2066}x", 3, 0x2066),
            ("a\u{200B}b", 1, 0x200B),
            ("\u{FEFF}a", 0, 0xFEFF),
            ("\u{2024}\u{2024}/x", 0, 0x2024),
            ("\u{FF0E}\u{FF0E}/x", 0, 0xFF0E),
            ("a\u{2215}b", 1, 0x2215),
            ("a\u{FF0F}b", 1, 0xFF0F),
            ("a\u{2044}b", 1, 0x2044),
            ("a\u{29F8}b", 1, 0x29F8),
        ] {
            let odd = odd_char(text).unwrap_or_else(|| panic!("{text:?} should be refused"));
            assert_eq!((odd.offset, odd.ch as u32), (offset, code), "{text:?}");
        }
        for fine in [
            "src/café/**",
            "docs/日本語/*.md",
            "données/Ünïcödé",
            "a-b_c.d/[x-z]{1,2}",
        ] {
            assert_eq!(odd_char(fine), None, "{fine:?}");
        }
        let odd = odd_char("x\u{202E}").unwrap();
        assert_eq!(odd.describe(), "U+202E RIGHT-TO-LEFT OVERRIDE");
        assert_eq!(odd_char("\0").unwrap().describe(), "U+0000 NULL");
    }
}
