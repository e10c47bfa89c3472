//! The redactor's tests: a corpus of secrets that must go, a corpus of ordinary text that must
//! stay, and streams cut at random places.

mod corpus;
mod escaped;
mod false_positives;
mod find;
mod regressions;
mod stream;

use std::sync::LazyLock;

use baton_redact::{Redactor, RedactorConfig};

/// The literal secret value the corpus configures, as an environment variable's would be.
pub const ENV_SECRET: &str = "s3cr3t-v@lue-from-env";

/// One redactor for all tests (it is `Clone` and shared, as baton uses it).
pub fn redactor() -> Redactor {
    static REDACTOR: LazyLock<Redactor> = LazyLock::new(|| {
        Redactor::new(RedactorConfig {
            secret_values: vec![ENV_SECRET.as_bytes().to_vec(), b"short".to_vec()],
        })
    });
    REDACTOR.clone()
}

/// Redacts `text` through a stream cut at `cuts` (offsets, any order, may repeat).
pub fn streamed(redactor: &Redactor, text: &[u8], cuts: &[usize]) -> Vec<u8> {
    streamed_pausing(redactor, text, cuts, false)
}

/// [`streamed`], and with a pause (a `release`) at each cut if `pause`.
pub fn streamed_pausing(redactor: &Redactor, text: &[u8], cuts: &[usize], pause: bool) -> Vec<u8> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
    cuts.sort_unstable();
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    let mut at = 0;
    for cut in cuts {
        stream.push(&text[at..cut], &mut out);
        if pause {
            stream.release(&mut out);
        }
        at = cut;
    }
    stream.push(&text[at..], &mut out);
    stream.finish(&mut out);
    out
}

#[test]
fn window_is_small() {
    let window = redactor().window();
    assert!(window < 2048, "{window}");
}
