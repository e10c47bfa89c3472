//! Inputs that broke something once (most found by the fuzz target), kept as they were.

use crate::{redactor, streamed};

/// Redacting the output again must change nothing, and a stream must agree.
fn stable(text: &[u8]) {
    let redactor = redactor();
    let once = redactor.redact(text).into_owned();
    let twice = redactor.redact(&once);
    assert_eq!(
        String::from_utf8_lossy(&twice),
        String::from_utf8_lossy(&once),
        "redacting twice"
    );
    let cuts: Vec<usize> = (0..text.len()).step_by(5).collect();
    assert_eq!(streamed(&redactor, text, &cuts), once, "streamed");
}

/// `curl -u USER:` took a marker's `:` for the one between user and password, so the marker
/// `[REDACTED:github-token]` was redacted again.
#[test]
fn a_marker_is_not_the_colon_of_curl_user() {
    stable(b"curl -u adminIE5gH0NTY3GITHUB_TOKEN=ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9aB3dE5gH7\n");
}

/// A quoted value without its closing quote ran over a later `"password": "…"`; rejected the
/// first time (no digit), it passed the second, once the marker had put capitals in it.
#[test]
fn a_marker_does_not_make_a_value_look_random() {
    stable(br#"{"api_key": "abcd1234efgh5678", "token": '"short", "password": "p\"w d"}"#);
}

/// Two key blocks with nothing between them share the END line's closing dashes with the next
/// BEGIN line; taking the END line whole hid the second block (its body leaked), and a
/// second pass, which scans the END line as text, found it.
#[test]
fn a_block_right_after_an_end_line_is_redacted() {
    let block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----";
    let text = format!("{block}{}\n", &block[5..]);
    let out = redactor().redact_str(&text).into_owned();
    assert!(!out.contains("MIIE"), "{out}");
    stable(text.as_bytes());
    stable(include_bytes!("fuzz-pem-end-begin.bin"));
}

/// A token assigned in `curl -u`'s user name runs to the end of the match's context (the `:`
/// included), so its marker and the password's follow each other with nothing kept between
/// them: `find` gave both the same range (both ran to the end of the password), and a
/// graph file's error pointed at the wrong text.
#[test]
fn two_markers_with_nothing_kept_between_them_have_their_own_ranges() {
    let text = "curl -u TOKEN=abcd1234:hunter22 https://x";
    let out = redactor().redact_str(text).into_owned();
    assert_eq!(
        out,
        "curl -u TOKEN=[REDACTED:token][REDACTED:password] https://x"
    );
    let found = redactor().find(text.as_bytes());
    let found: Vec<(&str, &str)> = found
        .iter()
        .map(|f| (&text[f.range.clone()], f.label.as_str()))
        .collect();
    assert_eq!(found, [("abcd1234:", "token"), ("hunter22", "password")]);
    crate::find::agrees(text.as_bytes()).unwrap();
    stable(text.as_bytes());

    // As the fuzz target found it (its first 8 bytes choose chunk sizes; the rest is text).
    let input = include_bytes!("fuzz-find-adjacent-markers.bin");
    for text in [&input[..], &input[8..]] {
        crate::find::agrees(text).unwrap();
        stable(text);
    }
}
