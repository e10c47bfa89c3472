//! Capping what a task hands to its dependents. Pure functions, apart from reading the
//! structured output file.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use baton_model::format_size;

use crate::utf8::{ceil_char_boundary, floor_char_boundary};

/// `text` cut to at most `limit` bytes: its head and its tail, joined by a line saying
/// `[… 1.2KiB cut …]`. The result is valid UTF-8 and never longer than `limit`; when `limit` is
/// too small even for the marker, only the head is kept. Borrows when nothing needs cutting.
pub fn truncate_utf8(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    // The marker carries the count it reports, so its length depends on the cut it describes.
    // Reserve room for a guess, and if the marker came out longer, reserve that much more.
    let mut reserve = cut_marker(text.len()).len();
    loop {
        let Some(budget) = limit.checked_sub(reserve) else {
            return Cow::Borrowed(&text[..floor_char_boundary(text, limit)]);
        };
        let head_end = floor_char_boundary(text, budget / 2);
        let tail_start = ceil_char_boundary(text, text.len() - (budget - budget / 2));
        let cut = tail_start - head_end;
        let out = format!(
            "{}{}{}",
            &text[..head_end],
            cut_marker(cut),
            &text[tail_start..]
        );
        if out.len() <= limit {
            return Cow::Owned(out);
        }
        reserve += out.len() - limit;
    }
}

fn cut_marker(cut: usize) -> String {
    baton_model::cut_marker(cut as u64)
}

/// Splits a byte budget among predecessors' outputs of the given lengths by water-filling: each
/// gets an equal share, and what a short output does not need goes to the longer ones. The
/// result has one entry per length, none above its length, and they sum to at most `limit`
/// (exactly `limit` when the outputs are longer together).
pub fn share_budget(lengths: &[usize], limit: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    // Stable: equal lengths keep their order, so the rounding is the same on every run.
    order.sort_by_key(|&index| lengths[index]);
    let mut shares = vec![0; lengths.len()];
    let mut remaining = limit;
    for (done, &index) in order.iter().enumerate() {
        let fair = remaining / (order.len() - done);
        let share = lengths[index].min(fair);
        shares[index] = share;
        remaining -= share;
    }
    shares
}

/// Reads the JSON a task may write to the file named by `BATON_OUTPUT`.
///
/// A missing or empty (or all-whitespace) file means the task wrote nothing: `Ok(None)`. A file
/// larger than `limit` bytes, or that is not one JSON value, is an error whose message names
/// the file and says what is wrong.
pub fn read_structured_output(
    path: &Path,
    limit: u64,
    redactor: Option<&baton_redact::Redactor>,
) -> Result<Option<serde_json::Value>, String> {
    read_structured_output_from(File::open(path), path, limit, redactor)
}

/// [`read_structured_output`] of a file the caller opened (relative to a directory it keeps
/// open, say), with `path` for the messages.
pub fn read_structured_output_from(
    opened: io::Result<File>,
    path: &Path,
    limit: u64,
    redactor: Option<&baton_redact::Redactor>,
) -> Result<Option<serde_json::Value>, String> {
    let file = match opened {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(format!(
                "cannot read structured output `{}`: {error}",
                path.display()
            ));
        }
    };
    // Read one byte past the limit rather than trust the file's size: the task may have left a
    // process behind that is still writing.
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| {
            format!(
                "cannot read structured output `{}`: {error}",
                path.display()
            )
        })?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "structured output `{}` is larger than the limit of {}; write a smaller JSON value \
             to $BATON_OUTPUT",
            path.display(),
            format_size(limit)
        ));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value = serde_json::from_slice(&bytes).map_err(|error| {
        format!(
            "structured output `{}` is not valid JSON ({error}); write one JSON value to \
             $BATON_OUTPUT",
            path.display()
        )
    })?;
    Ok(Some(match redactor {
        Some(redactor) => redact_json(value, redactor),
        None => value,
    }))
}

/// `value` with its secrets redacted, as they are once decoded: a JSON escape (`\/`, which
/// PHP's `json_encode` writes, or `\u0041`) hides a secret from a redactor that reads the
/// JSON as it was written. Whatever baton parses from what a task or an agent printed goes
/// through here (or is redacted string by string) before it is stored or handed on.
///
/// The value is written out again without escapes (serde_json escapes only quotes,
/// backslashes and control characters) and redacted as text, which finds a secret by its
/// context across strings (`"password": "hunter2"`); then every string, keys too, is
/// redacted on its own, which finds one whose written form still has escapes (a quote in a
/// password). A marker stays inside its string, so the text stays valid JSON. Two keys of an
/// object that redact to the same text keep the later one's value.
pub fn redact_json(
    value: serde_json::Value,
    redactor: &baton_redact::Redactor,
) -> serde_json::Value {
    let text = serde_json::to_vec(&value).unwrap_or_default();
    let value = match redactor.redact(&text) {
        std::borrow::Cow::Borrowed(_) => value,
        // A secret value configured with a quote or a brace in it could match across the
        // JSON's own syntax: then the strings alone are redacted.
        std::borrow::Cow::Owned(redacted) => serde_json::from_slice(&redacted).unwrap_or(value),
    };
    redact_strings(value, redactor)
}

fn redact_strings(
    value: serde_json::Value,
    redactor: &baton_redact::Redactor,
) -> serde_json::Value {
    use serde_json::Value;
    let redact = |text: String| match redactor.redact_str(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(redacted) => redacted,
    };
    match value {
        Value::String(text) => Value::String(redact(text)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| redact_strings(item, redactor))
                .collect(),
        ),
        Value::Object(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(key, item)| (redact(key), redact_strings(item, redactor)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_borrowed() {
        assert!(matches!(truncate_utf8("hello", 5), Cow::Borrowed("hello")));
    }

    #[test]
    fn long_text_keeps_head_tail_and_says_how_much_was_cut() {
        let text = "a".repeat(50) + &"b".repeat(50);
        let cut = truncate_utf8(&text, 40);
        assert_eq!(cut, "aaaaaaaaaa\n[… 80B cut …]\nbbbbbbbbbb");
        assert!(cut.len() <= 40);
    }

    #[test]
    fn every_limit_gives_valid_bounded_text() {
        let text = "héllo wörld € 😀 and more text ".repeat(5);
        for limit in 0..=text.len() + 2 {
            let cut = truncate_utf8(&text, limit);
            assert!(cut.len() <= limit, "limit {limit}: {cut:?}");
            if let Some(rest) = cut.split("[… ").nth(1) {
                // What is kept plus what the marker reports is the whole text.
                // The text is under 1 KiB, so the count is in bytes: `85B`.
                let count = rest.split(' ').next().unwrap();
                let reported: usize = count.trim_end_matches('B').parse().unwrap();
                let kept = cut.len() - cut_marker(reported).len();
                assert_eq!(kept + reported, text.len(), "limit {limit}");
            }
        }
    }

    #[test]
    fn a_limit_too_small_for_the_marker_keeps_the_head() {
        assert_eq!(truncate_utf8("ééééé", 3), "é");
        assert_eq!(truncate_utf8("ééééé", 0), "");
    }

    #[test]
    fn budget_is_shared_by_water_filling() {
        assert_eq!(share_budget(&[10, 1000, 20], 90), vec![10, 60, 20]);
        assert_eq!(share_budget(&[1000, 1000, 1000], 10), vec![3, 3, 4]);
        assert_eq!(share_budget(&[5, 6], 100), vec![5, 6]);
        assert_eq!(share_budget(&[], 100), Vec::<usize>::new());
        assert_eq!(share_budget(&[7, 7], 0), vec![0, 0]);
    }

    #[test]
    fn shares_respect_lengths_and_limit() {
        let cases: &[&[usize]] = &[&[1, 2, 3], &[0, 100, 5, 5, 60], &[33; 7], &[1, 1000]];
        for lengths in cases {
            let total: usize = lengths.iter().sum();
            for limit in [0, 1, 7, 50, 99, total, total + 10] {
                let shares = share_budget(lengths, limit);
                let sum: usize = shares.iter().sum();
                assert_eq!(sum, total.min(limit), "{lengths:?} within {limit}");
                for (share, length) in shares.iter().zip(*lengths) {
                    assert!(share <= length);
                    // An output that was cut got at least what any other output got, bar
                    // rounding.
                    if share < length {
                        assert!(shares.iter().all(|other| *other <= share + 1));
                    }
                }
            }
        }
    }

    #[test]
    fn structured_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.json");
        assert_eq!(read_structured_output(&path, 100, None), Ok(None));

        std::fs::write(&path, " \n").unwrap();
        assert_eq!(read_structured_output(&path, 100, None), Ok(None));

        std::fs::write(&path, r#"{"files": ["a.rs"], "ok": true}"#).unwrap();
        let value = read_structured_output(&path, 100, None).unwrap().unwrap();
        assert_eq!(value["ok"], true);

        let error = read_structured_output(&path, 10, None).unwrap_err();
        assert!(error.contains("larger than the limit of 10B"), "{error}");

        std::fs::write(&path, "{not json").unwrap();
        let redactor = baton_redact::Redactor::default();
        let error = read_structured_output(&path, 100, Some(&redactor)).unwrap_err();
        assert!(error.contains("is not valid JSON"), "{error}");
        let error = read_structured_output(&path, 100, None).unwrap_err();
        assert!(error.contains("is not valid JSON"), "{error}");
        assert!(error.contains("output.json"), "{error}");
    }

    /// Red team 2026-12-01, §3 (issue 14, item 8): JSON escapes broke every pattern, and the
    /// decoded secrets were stored and handed on in clear.
    #[test]
    fn structured_output_is_redacted_after_it_is_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.json");
        // PHP's json_encode escapes every `/`; `\u` escapes, keys and nesting too.
        let written = r#"{"hook":"https:\/\/hooks.slack.com\/services\/T11111111\/B22222222\/YYYYYYYYYYYYYYYYYYYYYYYY","pair":"AKIAIOSFODNN7EXAMPLW wJalrXUtnFEMI\/K7MDENG\/bPxRfiCYWXAMPLEKWW","db":"postgres:\/\/app:jsonpw12345@db\/x","tok":"ghp_\u0041BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789","nested":[{"p\u0061ssword":"hunter2hunter2"}],"ghp_\u0041BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789":1,"fine":"https:\/\/example.com\/a"}"#;
        std::fs::write(&path, written).unwrap();
        let redactor = baton_redact::Redactor::default();
        let value = read_structured_output(&path, 10_000, Some(&redactor))
            .unwrap()
            .unwrap();
        let stored = value.to_string();
        for secret in [
            "YYYYYYYYYYYYYYYYYYYYYYYY",
            "bPxRfiCYWXAMPLEKWW",
            "jsonpw12345",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            "hunter2hunter2",
        ] {
            assert!(!stored.contains(secret), "{secret} in {stored}");
        }
        assert_eq!(
            value["hook"],
            "https://hooks.slack.com/services/[REDACTED:slack-webhook]"
        );
        assert_eq!(value["db"], "postgres://app:[REDACTED:url-password]@db/x");
        assert_eq!(value["tok"], "[REDACTED:github-token]");
        assert_eq!(value["nested"][0]["password"], "[REDACTED:password]");
        assert_eq!(value["[REDACTED:github-token]"], 1);
        assert_eq!(value["fine"], "https://example.com/a");
    }
}
