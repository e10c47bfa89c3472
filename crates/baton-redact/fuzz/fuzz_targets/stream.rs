//! Arbitrary bytes, cut at arbitrary places: redacting must not panic, a stream must give
//! what the whole text gives, redacting again must change nothing, and `find` says what
//! `redact` replaces (each finding's marker put in place of its range gives the same text).
//!
//! `cd crates/baton-redact/fuzz && cargo +nightly fuzz run stream`

#![no_main]

use std::sync::LazyLock;

use baton_redact::{Redactor, RedactorConfig};
use libfuzzer_sys::fuzz_target;

static REDACTOR: LazyLock<Redactor> = LazyLock::new(|| {
    Redactor::new(RedactorConfig {
        secret_values: vec![b"s3cr3t-v@lue-from-env".to_vec()],
    })
});

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the chunk sizes, the rest is the text.
    let (sizes, text) = data.split_at(data.len().min(8));
    let whole = REDACTOR.redact(text);

    let mut stream = REDACTOR.stream();
    let mut out = Vec::new();
    let mut rest = text;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let size = sizes.next().map_or(rest.len(), |&s| usize::from(s));
        let (chunk, tail) = rest.split_at(size.clamp(1, rest.len()));
        stream.push(chunk, &mut out);
        rest = tail;
    }
    stream.finish(&mut out);
    assert_eq!(out, &whole[..], "stream and whole differ");

    assert_eq!(REDACTOR.redact(&whole), whole, "redacting twice changed the text");

    let found = REDACTOR.find(text);
    let mut rebuilt = Vec::with_capacity(whole.len());
    let mut at = 0;
    for f in &found {
        assert!(
            at <= f.range.start && f.range.start <= f.range.end && f.range.end <= text.len(),
            "findings out of order or out of the text: {found:?}"
        );
        rebuilt.extend_from_slice(&text[at..f.range.start]);
        rebuilt.extend_from_slice(format!("[REDACTED:{}]", f.label).as_bytes());
        at = f.range.end;
    }
    rebuilt.extend_from_slice(&text[at..]);
    assert_eq!(rebuilt, &whole[..], "find and redact differ: {found:?}");
});
