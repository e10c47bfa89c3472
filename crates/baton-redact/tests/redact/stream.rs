//! Streams cut anywhere give what the whole text gives, and nothing panics.

use proptest::prelude::*;

use crate::corpus::cases;
use crate::{redactor, streamed, streamed_pausing};

/// The corpus texts joined with ordinary text between them, as one long output.
pub(crate) fn corpus_text() -> Vec<u8> {
    let mut text = Vec::new();
    for case in cases() {
        text.extend_from_slice(b"some output \xe2\x9c\x93 then ");
        text.extend_from_slice(case.text.as_bytes());
        text.extend_from_slice(b"\n\xff\xfe invalid UTF-8, token count: 3\n");
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_gives_the_whole_text_result(cuts in prop::collection::vec(any::<usize>(), 0..200)) {
        let redactor = redactor();
        let text = corpus_text();
        let whole = redactor.redact(&text).into_owned();
        let out = streamed(&redactor, &text, &cuts);
        prop_assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&whole));
    }

    /// Pauses (a release at each cut) change nothing in the corpus, whose secrets do not
    /// span lines.
    #[test]
    fn pauses_anywhere_give_the_whole_text_result(cuts in prop::collection::vec(any::<usize>(), 0..200)) {
        let redactor = redactor();
        let text = corpus_text();
        let whole = redactor.redact(&text).into_owned();
        let out = streamed_pausing(&redactor, &text, &cuts, true);
        prop_assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&whole));
    }

    #[test]
    fn arbitrary_bytes_stream_like_the_whole(
        text in prop::collection::vec(any::<u8>(), 0..2000),
        cuts in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        let redactor = redactor();
        let whole = redactor.redact(&text).into_owned();
        prop_assert_eq!(streamed(&redactor, &text, &cuts), whole);
    }

    /// Pieces that start and end secrets, glued at random: the regions where rules overlap.
    #[test]
    fn secret_fragments_stream_like_the_whole(
        pieces in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..60),
        cuts in prop::collection::vec(any::<usize>(), 0..30),
    ) {
        let redactor = redactor();
        let text = pieces.concat().into_bytes();
        let whole = redactor.redact(&text).into_owned();
        let out = streamed(&redactor, &text, &cuts);
        prop_assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&whole));
    }
}

pub(crate) const FRAGMENTS: &[&str] = &[
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----",
    "MIIEpAIBAAKCAQEA",
    "\n",
    "\\n",
    "\"",
    "'",
    "\\",
    " ",
    "password",
    "token",
    ": ",
    "=",
    "ghp_",
    "sk-ant-",
    "sk-",
    "AKIA",
    "eyJ",
    ".",
    "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9",
    "0123456789abcdef",
    "Authorization: ",
    "Bearer ",
    "Basic ",
    "dXNlcjpodW50ZXIy",
    "://user:",
    "@host",
    "\x1b[31m",
    "s3cr3t-v@lue-from-env",
    "s3cr3t-v",
    "\u{e9}",
];

#[test]
fn a_stream_holds_back_a_bounded_tail() {
    let redactor = redactor();
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    let line = b"an ordinary line of log output, nothing to see\n";
    for _ in 0..10_000 {
        stream.push(line, &mut out);
        assert!(stream.held() <= redactor.window() + line.len());
    }
    // A private key block longer than the window is swallowed, not held.
    stream.push(b"-----BEGIN PRIVATE KEY-----\n", &mut out);
    for _ in 0..10_000 {
        stream.push(
            b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n",
            &mut out,
        );
        assert!(stream.held() <= redactor.window() + 64);
    }
    stream.push(b"-----END PRIVATE KEY-----\ndone\n", &mut out);
    stream.finish(&mut out);
    let out = String::from_utf8(out).unwrap();
    assert!(out.ends_with(
        "-----BEGIN PRIVATE KEY-----\n[REDACTED:private-key]\n-----END PRIVATE KEY-----\ndone\n"
    ));
    assert!(!out.contains("MIIE"));
}

#[test]
fn a_finished_line_goes_through_at_once() {
    let redactor = redactor();
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    for line in [
        "   Compiling baton-redact v0.1.0\n",
        "test result: ok. 14 passed; 0 failed\n",
        "Terminé en 3 s ✓\n",
    ] {
        stream.push(line.as_bytes(), &mut out);
        assert_eq!(String::from_utf8_lossy(&out), line);
        assert_eq!(stream.held(), 0);
        out.clear();
    }
    // A line not ended yet waits for its end (it may hold an escape to decode), or for a
    // pause; then what cannot be a secret's start goes, and the start of a token waits for
    // the rest.
    stream.push(b"token ghp_aB3dE5gH7j", &mut out);
    assert_eq!(out, b"");
    stream.release(&mut out);
    assert_eq!(out, b"token ");
    stream.push(b"K9mN1pQ3sT5vW7yZ9aB3dE5gH7 done\n", &mut out);
    stream.finish(&mut out);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "token [REDACTED:github-token] done\n"
    );
}

#[test]
fn a_utf8_character_is_not_cut_between_pushes() {
    let redactor = redactor();
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    let text = "héllo wörld ✓ 🎉\n".as_bytes();
    for byte in text {
        let before = out.len();
        stream.push(&[*byte], &mut out);
        assert!(std::str::from_utf8(&out[before..]).is_ok(), "{out:?}");
    }
    stream.finish(&mut out);
    assert_eq!(out, text);
}

/// A line that holds a secret is decided once it ends: the stream passes it on at once, redacted,
/// instead of holding it (and every line after it) until a window's worth of bytes follows.
#[test]
fn a_finished_line_with_a_secret_goes_through_at_once() {
    let redactor = redactor();
    let github = format!("ghp_{}", "aB3dE5gH7jK9mN1pQ3sT".repeat(2));
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAabc\nMIIEpAIBAAKCAQEAabc\n-----END RSA PRIVATE KEY-----\n";
    for text in [
        "DB_PASSWORD=hunter2 from env\n".to_owned(),
        format!("ghp: {github}\n"),
        "Authorization: Bearer abcdef0123456789abcdef\n".to_owned(),
        "hook: https://hooks.slack.com/services/T11111111/B22222222/YYYYYYYYYYYYYYYYYYYYYYYY\n"
            .to_owned(),
        "psql postgres://app:jsonpw12345@db/x\n".to_owned(),
        pem.to_owned(),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"DB_PASSWORD=hunter2 from env"}]}}"#.to_owned() + "\n",
        format!("token {github}\r\n"),
    ] {
        let text = text + "next-line\n";
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        stream.push(text.as_bytes(), &mut out);
        assert_eq!(stream.held(), 0, "{text}");
        assert_eq!(
            String::from_utf8_lossy(&out),
            redactor.redact_str(&text),
            "{text}"
        );
        // And byte by byte: the first line is out once its end is in (but a private key's
        // `BEGIN` line, whose block goes on).
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        let first = text.find('\n').unwrap();
        for (i, b) in text.bytes().enumerate() {
            stream.push(&[b], &mut out);
            if i == first && !text.starts_with("-----BEGIN") {
                let line = redactor.redact_str(&text[..=first]);
                assert_eq!(String::from_utf8_lossy(&out), line, "{text:?}");
            }
        }
        assert_eq!(stream.held(), 0, "{text}");
        assert_eq!(String::from_utf8_lossy(&out), redactor.redact_str(&text));
    }
}

/// What a quiet stream still holds at a line break is decided on `release`; the start of a
/// line that may be a secret's start stays held, and a secret that goes on after a release is
/// still redacted whole.
#[test]
fn a_release_decides_held_lines_and_keeps_a_secret_s_start() {
    let redactor = redactor();
    let check = |pieces: &[&str], want: &str, held_after_first: usize| {
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            stream.push(piece.as_bytes(), &mut out);
            stream.release(&mut out);
            if i == 0 {
                assert_eq!(stream.held(), held_after_first, "{pieces:?}");
            }
        }
        stream.finish(&mut out);
        assert_eq!(String::from_utf8_lossy(&out), want, "{pieces:?}");
    };
    // An AWS key id at a line's end waits for a secret key on the next line; quiet, it goes.
    check(
        &["id AKIAIOSFODNN7EXAMPLE\n", "next\n"],
        "id [REDACTED:aws-access-key-id]\nnext\n",
        0,
    );
    // The start of a token stays held across a pause, and is redacted once it is complete.
    check(
        &["token ghp_aB3dE5gH7j", "K9mN1pQ3sT5vW7yZ9aB3dE5gH7 done\n"],
        "token [REDACTED:github-token] done\n",
        14,
    );
    // A value cut by a pause: the stream stays inside it.
    check(
        &["DB_PASSWORD=hun", "ter2\n"],
        "DB_PASSWORD=[REDACTED:password]\n",
        "PASSWORD=hun".len(),
    );
    // A key block's body is still to come after its BEGIN line.
    check(
        &[
            "-----BEGIN PRIVATE KEY-----\n",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw\n-----END PRIVATE KEY-----\n",
        ],
        "-----BEGIN PRIVATE KEY-----\n[REDACTED:private-key]\n-----END PRIVATE KEY-----\n",
        "-----BEGIN PRIVATE KEY-----\n".len(),
    );
}
