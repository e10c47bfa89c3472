//! The rule table: what a secret looks like, which part of a match is secret, how a match
//! may continue past what the pattern can see, and what rules out a false positive.
//!
//! Every pattern has a bounded length (the streaming redactor holds back that many bytes), is
//! compiled without Unicode (it runs on bytes, `\b` and `\s` are ASCII) and names its secret
//! parts with capture groups: a group's name up to a `__` suffix, with `_` turned into `-`, is
//! the label in `[REDACTED:label]`. Whatever a match holds outside its named groups is context
//! and is printed (after being redacted on its own, so that a token used as a URL's user name
//! still goes). A pattern without a named group is all context (the PEM `BEGIN` line).
//!
//! All patterns are searched at once by one regex (a lazy DFA), so text without a match costs
//! one pass; a rule's capture groups and check only run where it matched.

use crate::byteset::ByteSet;
use crate::validate;

/// How a match continues past the end of its pattern.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tail {
    /// The match ends where the pattern ends.
    None,
    /// The secret goes on while the bytes are in the set: a token longer than the pattern's
    /// bound is still redacted whole.
    Class(&'static ByteSet),
    /// An assignment's value: after an opening quote, up to the closing quote (backslash
    /// escapes skipped) or the end of the line; without a quote, while the bytes are in the
    /// set.
    Value(&'static ByteSet),
    /// The body of a private key block, up to its `END` line.
    Pem,
}

pub(crate) struct Rule {
    pub(crate) pattern: String,
    /// Receives the secret groups that took part in the match, in order; `false` rejects the
    /// match and lets a later rule (or a later position) have the text.
    pub(crate) validate: fn(&[&[u8]]) -> bool,
    pub(crate) tail: Tail,
    /// A match whose secret starts it is rejected when the byte before it is in this set:
    /// the secret would be the end of a longer run (`\b` cannot say "not after `/`").
    pub(crate) not_after: Option<&'static ByteSet>,
    /// A shape any random string may have, not a kind of token: it does not name the value
    /// of an assignment (`GITHUB_TOKEN=<40 random characters>` stays a `token`).
    pub(crate) generic: bool,
    /// A cheap first look at the text from where the combined regex says this rule matches:
    /// `false` rejects it without the capture groups (a git SHA has the shape of an AWS
    /// secret key, and is in every git log).
    pub(crate) quick: Option<fn(&[u8]) -> bool>,
}

static BASE62: ByteSet = ByteSet::new(b"A-Za-z0-9");
static BASE64_STD: ByteSet = ByteSet::new(b"A-Za-z0-9+/");
static BASE64URL: ByteSet = ByteSet::new(b"A-Za-z0-9_-");
static WORD: ByteSet = ByteSet::new(b"A-Za-z0-9_");
static DOTTED: ByteSet = ByteSet::new(b"A-Za-z0-9_.-");
static SLACK: ByteSet = ByteSet::new(b"A-Za-z0-9-");
static WEBHOOK_PATH: ByteSet = ByteSet::new(b"A-Za-z0-9_/-");
static BEARER: ByteSet = ByteSet::new(b"A-Za-z0-9._~+/=-");
static HEADER_VALUE: ByteSet = ByteSet::new(b" \t\r\n\x0b\x0c\"',;").negate();
/// What an unquoted assigned value may hold; mirrors `BARE` in the patterns below.
static BARE_VALUE: ByteSet = ByteSet::new(b" \t\r\n\x0b\x0c\"'`,;&<>(){}[]").negate();
/// What may stand inside a private key block: base64, blank space, and `\` for the escaped
/// line breaks of a key inside a JSON string.
pub(crate) static PEM_BODY: ByteSet = ByteSet::new(b"A-Za-z0-9+/= \t\r\n\\\\");

/// The `END` line of a private key block.
pub(crate) const PEM_END: &str = r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----";

/// An unquoted value: not starting with `:` or `=` (so `::` and `==` are not assignments).
/// Its bytes are those of `BARE_VALUE`.
const BARE: &str = r#"[^\s"'`,;&<>(){}\[\]:=][^\s"'`,;&<>(){}\[\]]{0,249}"#;

/// Where a token may start: at a word boundary, or right after an escaped line break or tab
/// (`\n` inside a JSON string) or a terminal colour sequence, which are then context.
const BOUNDARY: &str = r"(?:\b|\\[nrt]|\x1b\[[0-9;]{0,16}m)";

/// `{B}` in `pattern` stands for [`BOUNDARY`].
fn rule(pattern: &str, validate: fn(&[&[u8]]) -> bool, tail: Tail) -> Rule {
    Rule {
        pattern: pattern.replace("{B}", BOUNDARY),
        validate,
        tail,
        not_after: None,
        generic: false,
        quick: None,
    }
}

/// `NAME = value`, `NAME: value`, `"name": "value"`, where the name ends with one of `names`.
///
/// The name may carry any prefix (`DB_PASSWORD`, `client_secret`), but must end at the
/// separator, so `token count` and `max_tokens` are not assignments.
fn assignment(names: &str, label: &str, validate: fn(&[&[u8]]) -> bool) -> Rule {
    let pattern = format!(
        r#"(?i:{names})["']?[ \t]{{0,8}}(?::=|=>|[:=])[ \t]{{0,8}}(?:"(?P<{label}>(?:[^"\\\r\n]|\\[^\r\n]){{1,250}})|'(?P<{label}__sq>(?:[^'\\\r\n]|\\[^\r\n]){{1,250}})|(?P<{label}__bare>{BARE}))"#
    );
    Rule {
        pattern,
        validate,
        tail: Tail::Value(&BARE_VALUE),
        not_after: None,
        generic: false,
        quick: None,
    }
}

/// `len` base64 characters that are not all lower-case hex (a git SHA, a digest), spelled
/// out so that the regex itself passes over hex: rejecting each SHA of a git log after
/// matching it halved the redactor's speed on such logs.
fn not_hex(len: usize) -> String {
    let branches: Vec<String> = (0..len)
        .map(|hex| {
            format!(
                "[a-f0-9]{{{hex}}}[A-Zg-z/+][A-Za-z0-9/+]{{{}}}",
                len - 1 - hex
            )
        })
        .collect();
    format!("(?:{})", branches.join("|"))
}

/// The rules in priority order: where two match at the same position, the earlier wins.
/// Literal secret values (from the configuration) come before all of them.
pub(crate) fn rules() -> Vec<Rule> {
    use Tail::{Class, Pem};
    use validate::{
        always, authorization, aws_secret, basic_auth, has_digit, medium, mixed, not_numeric,
        strong, weak,
    };
    vec![
        // PEM and OpenSSH private keys (and PGP's): the BEGIN line and its headers are kept,
        // the body is swallowed by `Tail::Pem` however long it is.
        rule(
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:\r?\n|\\r?\\n)?(?:[A-Za-z][A-Za-z0-9-]{0,31}: [^\r\n]{0,128}\r?\n){0,4}(?:\r?\n)?",
            always,
            Pem,
        ),
        // A JWT: a header and a payload that both start as JSON objects (`{"`); the rest of
        // the payload and the signature are the tail.
        rule(
            r"(?P<jwt>eyJ[A-Za-z0-9_-]{8,1024}\.eyJ)",
            always,
            Class(&DOTTED),
        ),
        rule(
            r"(?P<anthropic_api_key>sk-ant-[A-Za-z0-9_-]{20,200})",
            always,
            Class(&BASE64URL),
        ),
        // `sk-` alone is common in kebab-case words: the key must look random.
        rule(
            r"{B}(?P<openai_api_key>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,200})",
            mixed,
            Class(&BASE64URL),
        ),
        rule(
            r"(?P<github_token>gh[pousr]_[A-Za-z0-9]{36,200})",
            always,
            Class(&BASE62),
        ),
        rule(
            r"(?P<github_token>github_pat_[A-Za-z0-9_]{22,250})",
            always,
            Class(&WORD),
        ),
        rule(
            r"(?P<gitlab_token>gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_.-]{20,200})",
            always,
            Class(&DOTTED),
        ),
        // An access key id and, right after it (a CSV line, `id secret`), its secret key.
        rule(
            r#"{B}(?P<aws_access_key_id>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})[\s,;:|="']{1,8}(?P<aws_secret_access_key>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            aws_secret,
            Tail::None,
        ),
        rule(
            r"{B}(?P<aws_access_key_id>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b",
            always,
            Tail::None,
        ),
        rule(
            r"{B}(?P<google_api_key>AIza[A-Za-z0-9_-]{35})",
            always,
            Class(&BASE64URL),
        ),
        rule(
            r"(?P<slack_token>xox[abposre]-[A-Za-z0-9-]{10,250})",
            has_digit,
            Class(&SLACK),
        ),
        rule(
            r"(?P<slack_token>xapp-[A-Za-z0-9-]{10,250})",
            has_digit,
            Class(&SLACK),
        ),
        rule(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<slack_webhook>[A-Za-z0-9_/-]{16,250})",
            always,
            Class(&WEBHOOK_PATH),
        ),
        rule(
            r"{B}(?P<stripe_key>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,250})",
            always,
            Class(&BASE62),
        ),
        rule(
            r"(?P<stripe_key>whsec_[A-Za-z0-9]{20,250})",
            always,
            Class(&BASE62),
        ),
        rule(
            r"{B}(?P<npm_token>npm_[A-Za-z0-9]{36,200})",
            always,
            Class(&BASE62),
        ),
        rule(
            r"(?P<pypi_token>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,250})",
            always,
            Class(&BASE64URL),
        ),
        rule(
            r"{B}(?P<huggingface_token>hf_[A-Za-z0-9]{34,200})",
            has_digit,
            Class(&BASE62),
        ),
        // An Authorization header: whatever its scheme, the credentials go.
        rule(
            r#"(?i){B}(?:proxy-)?authorization["']?[ \t]{0,8}[:=][ \t]{0,8}["']?(?:bearer[ \t]{1,8}(?P<bearer_token>[^\s"',;]{1,250})|basic[ \t]{1,8}(?P<basic_auth>[^\s"',;]{1,250})|(?:(?:token|bot|apikey|sso-key|digest|negotiate|ntlm)[ \t]{1,8})?(?P<authorization>[^\s"',;]{1,250}))"#,
            authorization,
            Class(&HEADER_VALUE),
        ),
        // `Bearer x` without the header name: prose says "bearer" too, so the token must
        // hold a digit.
        rule(
            r"(?i){B}bearer[ \t]{1,8}(?P<bearer_token>[A-Za-z0-9._~+/=-]{16,250})",
            has_digit,
            Class(&BEARER),
        ),
        // `Basic x` without the header name: only if `x` is base64 of `user:password`.
        rule(
            r"(?i){B}basic[ \t]{1,8}(?P<basic_auth>[A-Za-z0-9+/]{8,250}={0,2})(?:[^A-Za-z0-9+/=]|$)",
            basic_auth,
            Tail::None,
        ),
        // `scheme://user:password@host`: the user is kept (unless it is itself a token).
        rule(
            r#"://[^\s:/?#@\[\]"'<>]{0,128}:(?P<url_password>[^\s/?#@"'<>]{1,250})@"#,
            strong,
            Tail::None,
        ),
        // Command-line flags, as echoed by `set -x`: `--password x`, `--token x`, and
        // `curl -u user:password`.
        rule(
            &format!(
                r"--(?i:passw(?:or)?d|passphrase|secret|client-secret)[ \t]{{1,8}}(?P<password__flag>{BARE})"
            ),
            strong,
            Tail::Value(&BARE_VALUE),
        ),
        rule(
            &format!(
                r"--(?i:token|api-key|api-token|access-token|auth-token)[ \t]{{1,8}}(?P<token__flag>{BARE})"
            ),
            weak,
            Tail::Value(&BARE_VALUE),
        ),
        rule(
            &format!(
                r#"(?:^|[ \t])(?:-u|--user)[ \t=]{{1,8}}["']?[^\s:"'@\[\]]{{1,128}}:(?P<password__user>{BARE})"#
            ),
            not_numeric,
            Tail::Value(&BARE_VALUE),
        ),
        assignment("passwd|password|passphrase", "password", strong),
        assignment(r"secret|client[_-]?secret|secret[_-]?key", "secret", strong),
        assignment(r"private[_-]?key", "private_key", strong),
        assignment(r"api[_-]?key|access[_-]?key", "api_key", medium),
        assignment("token", "token", weak),
        assignment("auth|credentials?", "credential", weak),
        // Last, being the least specific (and the costliest to reject: a git SHA has its
        // shape). A secret access key on its own (a config file, a variable, a JSON value): 40
        // random base64 characters, standing alone (not part of a longer base64 run). Random
        // means digits and both cases; a git SHA is lower-case hex.
        Rule {
            not_after: Some(&BASE64_STD),
            generic: true,
            quick: Some(validate::aws_secret_alone),
            ..rule(
                &format!(
                    r"{{B}}(?P<aws_secret_access_key>{})(?:[^A-Za-z0-9/+=]|$)",
                    not_hex(40)
                ),
                aws_secret,
                Tail::None,
            )
        },
    ]
}

#[cfg(test)]
mod tests {
    use regex_automata::meta::Regex;

    use super::*;

    /// A tail's byte set must hold the same bytes as the class its pattern ends with, or a
    /// value would be cut differently by the pattern and by its tail.
    #[test]
    fn tails_mirror_their_patterns() {
        let pairs: [(&str, &ByteSet); 3] = [
            (r#"[^\s"'`,;&<>(){}\[\]]"#, &BARE_VALUE),
            (r#"[^\s"',;]"#, &HEADER_VALUE),
            (r"[A-Za-z0-9._~+/=-]", &BEARER),
        ];
        for (class, set) in pairs {
            let regex = Regex::builder()
                .syntax(
                    regex_automata::util::syntax::Config::new()
                        .unicode(false)
                        .utf8(false),
                )
                .build(&format!("^{class}$"))
                .unwrap();
            for byte in 0..=u8::MAX {
                assert_eq!(
                    regex.is_match(&[byte][..]),
                    set.contains(byte),
                    "{class} and byte {byte:#x}"
                );
            }
        }
        assert!(BARE.ends_with(r#"[^\s"'`,;&<>(){}\[\]]{0,249}"#));
    }

    /// The streaming redactor holds back as many bytes as the longest match: every pattern
    /// must have a bound.
    #[test]
    fn every_pattern_is_bounded() {
        for rule in rules() {
            let hir = regex_syntax::ParserBuilder::new()
                .unicode(false)
                .utf8(false)
                .build()
                .parse(&rule.pattern)
                .unwrap();
            let len = hir.properties().maximum_len();
            assert!(len.is_some_and(|n| n < 2048), "{}: {len:?}", rule.pattern);
        }
    }
}
