//! `Redactor::find` says what `redact` replaces: putting each finding's marker in place of its
//! range gives exactly what `redact` gives, whatever the text.

use baton_redact::Finding;
use proptest::prelude::*;

use crate::corpus::cases;
use crate::redactor;
use crate::stream::{FRAGMENTS, corpus_text};

/// `text` with each finding's range replaced by its marker.
fn rebuild(text: &[u8], findings: &[Finding]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    for f in findings {
        assert!(
            at <= f.range.start && f.range.start <= f.range.end && f.range.end <= text.len(),
            "ranges out of order: {findings:?}"
        );
        out.extend_from_slice(&text[at..f.range.start]);
        out.extend_from_slice(format!("[REDACTED:{}]", f.label).as_bytes());
        at = f.range.end;
    }
    out.extend_from_slice(&text[at..]);
    out
}

pub(crate) fn agrees(text: &[u8]) -> Result<(), TestCaseError> {
    let redactor = redactor();
    let found = redactor.find(text);
    let whole = redactor.redact(text).into_owned();
    let rebuilt = rebuild(text, &found);
    prop_assert_eq!(
        String::from_utf8_lossy(&rebuilt),
        String::from_utf8_lossy(&whole),
        "{:?}",
        found
    );
    Ok(())
}

#[test]
fn every_corpus_secret_is_found_with_its_label_and_exact_range() {
    let redactor = redactor();
    for case in cases() {
        let found = redactor.find(case.text.as_bytes());
        assert!(!found.is_empty(), "{}: nothing found", case.name);
        assert!(
            found.iter().any(|f| f.label == case.label),
            "{}: {found:?}",
            case.name
        );
        for secret in &case.secrets {
            let start = case.text.find(secret.as_str()).unwrap();
            let covered = found
                .iter()
                .any(|f| f.range.start <= start && start + secret.len() <= f.range.end);
            assert!(
                covered,
                "{}: {secret:?} not covered by {found:?}",
                case.name
            );
        }
        agrees(case.text.as_bytes()).unwrap();
    }
    agrees(&corpus_text()).unwrap();
}

#[test]
fn ranges_point_at_the_secret_not_its_context() {
    let redactor = redactor();
    let text = "export DB_PASSWORD=hunter22 && mysql --password=$DB_PASS";
    let found = redactor.find(text.as_bytes());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(&text[found[0].range.clone()], "hunter22");
    assert_eq!(found[0].label, "password");

    let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAaB3dE5gH7jK9mN1pQ3sT5vW7yZ9\nAB3dE5==\n-----END RSA PRIVATE KEY-----\n";
    let found = redactor.find(key.as_bytes());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].label, "private-key");
    assert_eq!(
        &key[found[0].range.clone()],
        "MIIEpAIBAAKCAQEAaB3dE5gH7jK9mN1pQ3sT5vW7yZ9\nAB3dE5=="
    );
}

#[test]
fn placeholders_and_ordinary_text_find_nothing() {
    let redactor = redactor();
    for text in [
        "mysql --password=$DB_PASS",
        "mysql --password ${DB_PASS}",
        r#"curl -H "Authorization: Bearer $TOKEN" https://api.example.com"#,
        "git log --format=%H | head -1",
        "token count: 3, a9f3c2e1d4b5a6978812c3d4e5f6a7b8c9d0e1f2",
        "already [REDACTED:password] here",
    ] {
        assert_eq!(redactor.find(text.as_bytes()), [], "{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn findings_rebuild_the_redacted_text(
        pieces in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..60),
    ) {
        agrees(pieces.concat().as_bytes())?;
    }

    #[test]
    fn findings_rebuild_arbitrary_bytes(text in prop::collection::vec(any::<u8>(), 0..2000)) {
        agrees(&text)?;
    }
}

/// The graph loader passes over strings shorter than `shortest_built_in_match` without looking:
/// no secret of the corpus, alone or in any context, is found in fewer bytes.
#[test]
fn no_built_in_finding_is_shorter_than_the_shortest_match() {
    let shortest = baton_redact::Redactor::shortest_built_in_match();
    assert!(shortest >= 4, "{shortest}");
    let built_in = baton_redact::Redactor::default();
    for case in cases() {
        for text in [case.text.clone(), format!("x {} y", case.text)] {
            for finding in built_in.find(text.as_bytes()) {
                assert!(
                    finding.range.len() >= shortest,
                    "{} found in {} bytes, fewer than {shortest}: {text:?}",
                    finding.label,
                    finding.range.len()
                );
            }
        }
    }
}
