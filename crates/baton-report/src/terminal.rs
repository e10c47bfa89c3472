//! Text from tasks, made safe to show on a terminal.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character that a terminal would act on shown instead: escape
/// sequences (OSC 52 clipboard writes, OSC 8 links, cursor movement, colours) cannot reach the
/// user's terminal through baton. Newlines and tabs stay; `ESC` becomes `^[`, other C0 controls
/// and DEL their caret form, C1 controls `\u{9b}`-style escapes.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char =
        |c: char| (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if (c as u32) < 0x20 {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        } else if c == '\u{7f}' {
            out.push_str("^?");
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// How many terminal columns `text` takes: CJK and other wide characters take two, combining
/// marks none. For lining up columns of task ids and run names, which take letters of any script.
pub fn display_width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` and the spaces that make it `width` columns wide (as it is, when it is wider).
pub fn pad(text: &str, width: usize) -> String {
    let mut out = text.to_owned();
    out.extend(std::iter::repeat_n(
        ' ',
        width.saturating_sub(display_width(text)),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_to_terminal_columns() {
        assert_eq!(display_width("日本語-タスク"), 13);
        assert_eq!(pad("日本語", 8), "日本語  ");
        assert_eq!(pad("café", 6), "café  ");
        assert_eq!(pad("build-api", 4), "build-api");
    }

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(terminal_safe("ok\n\tfine"), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_are_shown_not_played() {
        assert_eq!(
            terminal_safe("\u{1b}]52;c;SGVsbG8=\u{7}red\u{1b}[31m\r\u{7f}\u{9b}"),
            "^[]52;c;SGVsbG8=^Gred^[[31m^M^?\\u{9b}"
        );
    }
}
