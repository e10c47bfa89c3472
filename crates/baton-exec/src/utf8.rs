//! Cutting bytes and strings without splitting a UTF-8 character.

/// The length of `bytes` without a trailing, incomplete UTF-8 sequence.
pub(crate) fn complete_prefix_len(bytes: &[u8]) -> usize {
    // A sequence is at most four bytes, so only the last three can start an unfinished one.
    for back in 1..=bytes.len().min(3) {
        let at = bytes.len() - back;
        let byte = bytes[at];
        if is_continuation(byte) {
            continue;
        }
        let needed = sequence_len(byte);
        return if needed > back { at } else { bytes.len() };
    }
    bytes.len()
}

/// How many leading bytes of `bytes` continue a character that started before it.
pub(crate) fn partial_start_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|&&byte| is_continuation(byte))
        .count()
}

/// The greatest char boundary of `text` at or below `index`.
pub(crate) fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The least char boundary of `text` at or above `index`.
pub(crate) fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// `bytes` as text, invalid sequences replaced with U+FFFD; no copy when already valid.
pub(crate) fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// The length of the sequence a leading byte announces; 1 for ASCII and for invalid bytes,
/// which the lossy conversion replaces one at a time anyway.
fn sequence_len(byte: u8) -> usize {
    match byte {
        0b1100_0000..=0b1101_1111 => 2,
        0b1110_0000..=0b1110_1111 => 3,
        0b1111_0000..=0b1111_0111 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_trailing_sequences_are_excluded() {
        let text = "aé€😀".as_bytes();
        assert_eq!(complete_prefix_len(text), text.len());
        // Cut inside the emoji (4 bytes) at each possible place.
        let emoji_start = text.len() - 4;
        for cut in 1..4 {
            assert_eq!(complete_prefix_len(&text[..emoji_start + cut]), emoji_start);
        }
        assert_eq!(complete_prefix_len(&text[..2]), 1, "inside é");
        assert_eq!(complete_prefix_len(b""), 0);
        assert_eq!(
            complete_prefix_len(b"\xff\xfe"),
            2,
            "invalid bytes are kept"
        );
    }

    #[test]
    fn partial_leading_sequences_are_skipped() {
        let text = "😀a".as_bytes();
        assert_eq!(partial_start_len(text), 0);
        for skip in 1..4 {
            assert_eq!(partial_start_len(&text[skip..]), 4 - skip);
        }
    }

    #[test]
    fn char_boundaries() {
        let text = "aé€";
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(floor_char_boundary(text, 99), text.len());
    }
}
