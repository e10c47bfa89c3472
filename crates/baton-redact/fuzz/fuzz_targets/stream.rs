//! Arbitrary bytes, cut at arbitrary places: redacting must not panic, a stream must give
//! what the whole text gives, and redacting again must change nothing.
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
});
