//! Realistic (fake, well-formed) secrets of each kind, printed in many ways: each must go.

use crate::{ENV_SECRET, redactor, streamed};

const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const BASE62: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const DIGITS: &[u8] = b"0123456789";

/// Deterministic random text: the corpus holds no real key, and no key-shaped literal that
/// a secret scanner would flag in this repository.
fn random(alphabet: &[u8], len: usize, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            alphabet[(state % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

/// A text holding secrets, the secret parts, and the marker the secret alone becomes.
pub(crate) struct Case {
    pub name: &'static str,
    pub text: String,
    pub secrets: Vec<String>,
    pub label: &'static str,
}

fn token(name: &'static str, label: &'static str, secret: String) -> Case {
    Case {
        name,
        text: secret.clone(),
        secrets: vec![secret],
        label,
    }
}

fn pem(kind: &str, lines: usize, seed: u64) -> (String, Vec<String>) {
    let body: Vec<String> = (0..lines)
        .map(|i| random(BASE64, 64, seed + i as u64))
        .collect();
    let text = format!(
        "-----BEGIN {kind}PRIVATE KEY-----\n{}\n{}=\n-----END {kind}PRIVATE KEY-----\n",
        body.join("\n"),
        random(BASE64, 23, seed + 999)
    );
    (text, body)
}

pub(crate) fn cases() -> Vec<Case> {
    let aws_id = format!("AKIA{}", random(UPPER_DIGITS, 16, 7));
    let aws_secret = format!("{}Xy9", random(BASE64, 37, 8));
    let jwt = format!(
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{}.{}",
        random(BASE64URL, 180, 9),
        random(BASE64URL, 342, 10)
    );
    let (rsa, rsa_body) = pem("RSA ", 25, 100);
    let (openssh, openssh_body) = pem("OPENSSH ", 50, 200);
    // Longer than any window: 200 lines, 13 KB.
    let (long, long_body) = pem("", 200, 300);
    let escaped_body = random(BASE64, 64, 400);
    let password = format!("{}!{}", random(BASE62, 10, 11), random(DIGITS, 3, 12));
    let webhook_path = format!(
        "T{}/B{}/{}",
        random(UPPER_DIGITS, 8, 13),
        random(UPPER_DIGITS, 10, 14),
        random(BASE62, 24, 15)
    );
    let basic = "dXNlcjpodW50ZXIy".to_owned(); // user:hunter2
    let bearer = random(BASE62, 40, 16);
    let github = format!("ghp_{}", random(BASE62, 36, 39));

    vec![
        token(
            "anthropic",
            "anthropic-api-key",
            format!("sk-ant-api03-{}AA", random(BASE64URL, 93, 1)),
        ),
        token(
            "openai-legacy",
            "openai-api-key",
            format!(
                "sk-{}T3BlbkFJ{}",
                random(BASE62, 20, 2),
                random(BASE62, 20, 3)
            ),
        ),
        token(
            "openai-project",
            "openai-api-key",
            format!("sk-proj-{}", random(BASE64URL, 156, 4)),
        ),
        token(
            "github-classic",
            "github-token",
            format!("ghp_{}", random(BASE62, 36, 5)),
        ),
        token(
            "github-oauth",
            "github-token",
            format!("gho_{}", random(BASE62, 36, 6)),
        ),
        token(
            "github-user",
            "github-token",
            format!("ghu_{}", random(BASE62, 36, 17)),
        ),
        token(
            "github-app",
            "github-token",
            format!("ghs_{}", random(BASE62, 36, 18)),
        ),
        token(
            "github-refresh",
            "github-token",
            format!("ghr_{}", random(BASE62, 36, 19)),
        ),
        token(
            "github-fine-grained",
            "github-token",
            format!(
                "github_pat_{}_{}",
                random(BASE62, 22, 20),
                random(BASE62, 59, 21)
            ),
        ),
        token(
            "gitlab",
            "gitlab-token",
            format!("glpat-{}", random(BASE64URL, 20, 22)),
        ),
        token("aws-id", "aws-access-key-id", aws_id.clone()),
        token(
            "aws-session-id",
            "aws-access-key-id",
            format!("ASIA{}", random(UPPER_DIGITS, 16, 23)),
        ),
        // Not next to its key id (`aws configure set aws_secret_access_key …`, a JSON value).
        token(
            "aws-secret-alone",
            "aws-secret-access-key",
            aws_secret.clone(),
        ),
        Case {
            name: "aws-csv",
            text: format!("{aws_id},{aws_secret}"),
            secrets: vec![aws_id.clone(), aws_secret.clone()],
            label: "aws-access-key-id",
        },
        Case {
            name: "aws-credentials-file",
            text: format!(
                "[default]\naws_access_key_id = {aws_id}\naws_secret_access_key = {aws_secret}\n"
            ),
            secrets: vec![aws_id.clone(), aws_secret.clone()],
            label: "aws-access-key-id",
        },
        Case {
            name: "aws-sts-json",
            text: format!(
                r#"{{"Credentials": {{"AccessKeyId": "{aws_id}", "SecretAccessKey": "{aws_secret}", "SessionToken": "{}"}}}}"#,
                random(BASE64, 600, 24)
            ),
            secrets: vec![aws_id.clone(), aws_secret.clone()],
            label: "aws-access-key-id",
        },
        token(
            "google",
            "google-api-key",
            format!("AIza{}", random(BASE64URL, 35, 25)),
        ),
        token(
            "slack-bot",
            "slack-token",
            format!(
                "xoxb-{}-{}-{}",
                random(DIGITS, 12, 26),
                random(DIGITS, 13, 27),
                random(BASE62, 24, 28)
            ),
        ),
        token(
            "slack-user",
            "slack-token",
            format!(
                "xoxp-{}-{}-{}-{}",
                random(DIGITS, 12, 29),
                random(DIGITS, 12, 30),
                random(DIGITS, 13, 31),
                random(BASE62, 32, 32)
            ),
        ),
        token(
            "slack-app",
            "slack-token",
            format!("xoxa-2-{}", random(BASE62, 40, 33)),
        ),
        Case {
            name: "slack-webhook",
            text: format!("https://hooks.slack.com/services/{webhook_path}"),
            secrets: vec![webhook_path],
            label: "slack-webhook",
        },
        token(
            "stripe-live",
            "stripe-key",
            format!("sk_live_{}", random(BASE62, 99, 34)),
        ),
        token(
            "stripe-restricted",
            "stripe-key",
            format!("rk_live_{}", random(BASE62, 99, 35)),
        ),
        token(
            "stripe-test",
            "stripe-key",
            format!("sk_test_{}", random(BASE62, 24, 36)),
        ),
        token(
            "npm",
            "npm-token",
            format!("npm_{}", random(BASE62, 36, 37)),
        ),
        token(
            "huggingface",
            "huggingface-token",
            format!("hf_{}", random(BASE62, 30, 38) + "a1B2"),
        ),
        token("jwt", "jwt", jwt.clone()),
        Case {
            name: "pem-rsa",
            text: rsa,
            secrets: rsa_body,
            label: "private-key",
        },
        Case {
            name: "pem-openssh",
            text: openssh,
            secrets: openssh_body,
            label: "private-key",
        },
        Case {
            name: "pem-long",
            text: long,
            secrets: long_body,
            label: "private-key",
        },
        Case {
            name: "pem-in-json",
            text: format!(
                r#"{{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n{escaped_body}\n-----END PRIVATE KEY-----\n", "client_email": "x@example.iam"}}"#
            ),
            secrets: vec![escaped_body],
            label: "private-key",
        },
        Case {
            name: "authorization-bearer",
            text: format!("Authorization: Bearer {bearer}"),
            secrets: vec![bearer.clone()],
            label: "bearer-token",
        },
        Case {
            name: "curl-bearer-jwt",
            text: format!("curl -H 'authorization: bearer {jwt}' https://api.example.com"),
            secrets: vec![jwt.clone()],
            label: "bearer-token",
        },
        Case {
            name: "bearer-alone",
            text: format!("sending Bearer {bearer}"),
            secrets: vec![bearer.clone()],
            label: "bearer-token",
        },
        Case {
            name: "authorization-basic",
            text: format!("Authorization: Basic {basic}"),
            secrets: vec![basic.clone()],
            label: "basic-auth",
        },
        Case {
            name: "basic-alone",
            text: format!("header Basic {basic}"),
            secrets: vec![basic.clone()],
            label: "basic-auth",
        },
        Case {
            name: "url-password",
            text: format!("postgres://admin:{password}@db.example.com:5432/app"),
            secrets: vec![password.clone()],
            label: "url-password",
        },
        Case {
            name: "url-token-as-user",
            text: format!("https://{github}:x-oauth-basic@github.com/o/r.git"),
            secrets: vec![github.clone()],
            label: "github-token",
        },
        Case {
            name: "env-password",
            text: format!("DB_PASSWORD={password}"),
            secrets: vec![password.clone()],
            label: "password",
        },
        Case {
            name: "yaml-password",
            text: format!("database:\n  password: {password}\n  user: app\n"),
            secrets: vec![password.clone()],
            label: "password",
        },
        Case {
            name: "json-password",
            text: format!(
                r#"{{"user": "app", "password": "{password} with spaces \" and a quote"}}"#
            ),
            secrets: vec![
                password.clone(),
                "with spaces".to_owned(),
                "and a quote".to_owned(),
            ],
            label: "password",
        },
        Case {
            name: "password-flag",
            text: format!("+ mysql --user app --password {password} db"),
            secrets: vec![password.clone()],
            label: "password",
        },
        Case {
            name: "curl-user",
            text: format!("curl -u deploy:{password} https://example.com"),
            secrets: vec![password.clone()],
            label: "password",
        },
        Case {
            name: "github-token-env",
            text: format!("GITHUB_TOKEN={bearer}"),
            secrets: vec![bearer.clone()],
            label: "token",
        },
        Case {
            name: "api-key-toml",
            text: format!("api_key = \"{}\"", random(BASE62, 32, 40)),
            secrets: vec![random(BASE62, 32, 40)],
            label: "api-key",
        },
        Case {
            name: "client-secret",
            text: format!("client_secret: '{}'", random(BASE64URL, 40, 41)),
            secrets: vec![random(BASE64URL, 40, 41)],
            label: "secret",
        },
        Case {
            name: "header-api-key",
            text: format!("x-api-key: {}", random(BASE62, 32, 42)),
            secrets: vec![random(BASE62, 32, 42)],
            label: "api-key",
        },
        Case {
            name: "long-token-value",
            text: format!("ACCESS_TOKEN={}", random(BASE62, 2000, 43)),
            secrets: vec![random(BASE62, 2000, 43)],
            label: "token",
        },
        Case {
            name: "long-quoted-value",
            text: format!(
                r#"{{"refresh_token": "{}\"{}"}}"#,
                random(BASE62, 1500, 44),
                random(BASE62, 800, 45)
            ),
            secrets: vec![random(BASE62, 1500, 44), random(BASE62, 800, 45)],
            label: "token",
        },
        Case {
            name: "env-value",
            text: ENV_SECRET.to_owned(),
            secrets: vec![ENV_SECRET.to_owned()],
            label: "secret-value",
        },
    ]
}

/// The ways a task prints a secret.
const CONTEXTS: &[&str] = &[
    "{}",
    "  {}\n",
    "export SOMETHING={}\n",
    "{\"value\": \"{}\"}",
    "{\"text\": \"here it is:\\n{}\\n\"}",
    "https://example.com/callback?x={}&y=2",
    "error: could not log in with {}. Try again.",
    "'{}'",
    "\x1b[31m{}\x1b[0m",
    "line one\nline two {}\nline three\n",
    "key\t{}\tend",
];

/// No window of 10 bytes of a secret may survive (long secrets are cut into lines or values;
/// a survivor of 10 bytes is a leak).
fn assert_gone(case: &Case, context: &str, out: &[u8]) {
    let out_text = String::from_utf8_lossy(out);
    for secret in &case.secrets {
        let bytes = secret.as_bytes();
        let width = bytes.len().min(10);
        for window in bytes.windows(width) {
            assert!(
                !out.windows(width).any(|w| w == window),
                "{}: {:?} of {:?} survives in context {:?}:\n{}",
                case.name,
                String::from_utf8_lossy(window),
                secret,
                context,
                out_text
            );
        }
    }
    assert!(out_text.contains("[REDACTED:"), "{}: {out_text}", case.name);
}

#[test]
fn every_secret_alone_becomes_its_marker() {
    let redactor = redactor();
    for case in cases() {
        let out = redactor.redact_str(&case.text);
        assert!(
            out.contains(&format!("[REDACTED:{}]", case.label)),
            "{}: {out}",
            case.name
        );
        if case.secrets.len() == 1 && case.text == case.secrets[0] {
            assert_eq!(out, format!("[REDACTED:{}]", case.label), "{}", case.name);
        }
    }
}

#[test]
fn every_secret_goes_in_every_context() {
    let redactor = redactor();
    for case in cases() {
        for context in CONTEXTS {
            let text = context.replacen("{}", &case.text, 1);
            let out = redactor.redact(text.as_bytes());
            assert_gone(&case, context, &out);
            // Cut every few bytes, and at prime strides, through the secret.
            for stride in [1, 3, 7, 64, 1000] {
                let cuts: Vec<usize> = (0..text.len()).step_by(stride).collect();
                let streamed = streamed(&redactor, text.as_bytes(), &cuts);
                assert_eq!(
                    String::from_utf8_lossy(&streamed),
                    String::from_utf8_lossy(&out),
                    "{} in {context:?}, stride {stride}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn redacting_twice_changes_nothing() {
    let redactor = redactor();
    for case in cases() {
        for context in CONTEXTS {
            let text = context.replacen("{}", &case.text, 1);
            let once = redactor.redact(text.as_bytes()).into_owned();
            let twice = redactor.redact(&once);
            assert_eq!(
                String::from_utf8_lossy(&twice),
                String::from_utf8_lossy(&once),
                "{} in {context:?}",
                case.name
            );
        }
    }
}

#[test]
fn context_is_kept() {
    let redactor = redactor();
    let check = |text: &str, want: &str| {
        assert_eq!(redactor.redact_str(text), want, "{text}");
    };
    check(
        "postgres://admin:pa55word@db.example.com/app",
        "postgres://admin:[REDACTED:url-password]@db.example.com/app",
    );
    check("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED:password]");
    check(
        "export GITHUB_TOKEN=ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9aB3dE5gH7",
        "export GITHUB_TOKEN=[REDACTED:github-token]",
    );
    check(
        r#"{"password": "hunter2", "user": "bob"}"#,
        r#"{"password": "[REDACTED:password]", "user": "bob"}"#,
    );
    check(
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc+/=\n-----END RSA PRIVATE KEY-----\nafter",
        "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED:private-key]\n-----END RSA PRIVATE KEY-----\nafter",
    );
    check(
        "Authorization: Bearer abc.def-123",
        "Authorization: Bearer [REDACTED:bearer-token]",
    );
    check(
        "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "https://hooks.slack.com/services/[REDACTED:slack-webhook]",
    );
}

#[test]
fn a_key_block_without_its_end_is_still_redacted() {
    let redactor = redactor();
    let body = random(BASE64, 64, 500);
    let text = format!("-----BEGIN PRIVATE KEY-----\n{body}\n{body}\n");
    let out = redactor.redact_str(&text);
    assert_eq!(out, "-----BEGIN PRIVATE KEY-----\n[REDACTED:private-key]");
}
