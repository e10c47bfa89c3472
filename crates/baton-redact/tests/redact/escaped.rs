//! Secrets in JSON-escaped text (red-team findings 6 and 7): every secret of the corpus, put in
//! a JSON string as serializers print it — plainly, with `/` escaped (PHP's `json_encode`),
//! with every character escaped, and as JSON inside a JSON string (an agent's answer inside its
//! CLI's stream line) — is gone once decoded, and redacting never makes the JSON invalid.

use serde_json::Value;

use crate::corpus::cases;
use crate::{redactor, streamed};

/// `text` as a JSON string literal (quotes included), each character escaped as `style` says.
fn escaped(text: &str, style: Style) -> String {
    let plain = serde_json::to_string(text).unwrap();
    match style {
        Style::Plain => plain,
        Style::Slashes => plain.replace('/', "\\/"),
        Style::Every => {
            let mut out = String::from("\"");
            for unit in text.encode_utf16() {
                out.push_str(&format!("\\u{unit:04x}"));
            }
            out.push('"');
            out
        }
        // The first character of each word escaped: what hides `ghp_` from a byte matcher.
        Style::Firsts => {
            let mut out = String::from("\"");
            let mut start = true;
            for c in text.chars() {
                let mut buf = [0u16; 2];
                if start && c.is_ascii_alphanumeric() {
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                } else {
                    let one = serde_json::to_string(&c.to_string()).unwrap();
                    out.push_str(&one[1..one.len() - 1]);
                }
                start = !c.is_ascii_alphanumeric() && c != '-' && c != '_';
            }
            out.push('"');
            out
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Style {
    Plain,
    Slashes,
    Every,
    Firsts,
}

const STYLES: [Style; 4] = [Style::Plain, Style::Slashes, Style::Every, Style::Firsts];

/// The strings of a JSON value, decoded, one after another.
fn strings(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
            // JSON inside a string is decoded too.
            if let Ok(inner) = serde_json::from_str::<Value>(s) {
                strings(&inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(fields) => fields.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

fn check(line: &str, secrets: &[String], what: &str) {
    let redactor = redactor();
    let out = redactor.redact_str(line).into_owned();
    let value: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{what}: redacting made invalid JSON ({e}):\n{line}\n{out}"));
    let mut decoded = String::new();
    strings(&value, &mut decoded);
    for secret in secrets {
        // The part of the secret a marker would not leave: its middle.
        let probe = &secret[secret.len() / 4..secret.len() * 3 / 4];
        assert!(
            !decoded.contains(probe),
            "{what}: {probe:?} of {secret:?} survives:\n{line}\n{out}"
        );
    }
    // A stream cut anywhere gives the same.
    let cuts: Vec<usize> = (0..line.len()).step_by(7).collect();
    assert_eq!(
        String::from_utf8_lossy(&streamed(&redactor, line.as_bytes(), &cuts)),
        out,
        "{what}: streamed"
    );
}

#[test]
fn every_secret_goes_however_it_is_escaped() {
    for case in cases() {
        if case.secrets.iter().any(|s| s.len() < 8) {
            continue;
        }
        for style in STYLES {
            let what = format!("{} {style:?}", case.name);
            let line = format!("{{\"text\": {}}}", escaped(&case.text, style));
            check(&line, &case.secrets, &what);
        }
    }
}

#[test]
fn every_secret_goes_in_json_inside_a_json_string() {
    for case in cases() {
        if case.secrets.iter().any(|s| s.len() < 8) {
            continue;
        }
        for style in STYLES {
            let what = format!("{} {style:?} twice", case.name);
            let inner = format!("{{\"env\": {{\"X\": {}}}}}", escaped(&case.text, style));
            let line = format!(
                "{{\"type\":\"result\",\"result\":{}}}",
                serde_json::to_string(&inner).unwrap()
            );
            check(&line, &case.secrets, &what);
        }
    }
}

/// The report's own shapes, as it printed them.
#[test]
fn the_red_team_s_shapes_go() {
    let cases: &[(&str, &[&str])] = &[
        (
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"psql postgres:\/\/app:activitypw777@db\/x; echo \u0067hp_ESCACTIVITYabcdefghijklmnopqrstuvw12"}}]}}"#,
            &["activitypw777", "ESCACTIVITYabcdefghijklmnopqrstuvw12"],
        ),
        (
            r#"{"task":[{"id":"a","run":"true","env":{"DBURL":"postgres:\/\/app:planpw98765@db\/x","K":"AKIA\u0049OSFODNN7EXAMPLE"},"prompt":"use sk-ant-api03-\u0041bcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_abcdefghijklmnopqrstuvwx-AAAAAAAA"}]}"#,
            &[
                "planpw98765",
                "OSFODNN7EXAMPLE",
                "bcdefghijklmnopqrstuvwxyz0123456789",
            ],
        ),
        (
            r#"{"run":"echo tok=ghp_\u0041BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 done"}"#,
            &["BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"],
        ),
        (
            r#"{"db":"postgres:\/\/app:stdoutpw4242@db\/x","hook":"https:\/\/hooks.slack.com\/services\/T11111111\/B22222222\/YYYYYYYYYYYYYYYYYYYYYYYY"}"#,
            &["stdoutpw4242", "YYYYYYYYYYYYYYYYYYYYYYYY"],
        ),
        (
            r#"{"u":"postgres:\/\/app:shellpw321@db\/x"}"#,
            &["shellpw321"],
        ),
    ];
    for (line, secrets) in cases {
        let secrets: Vec<String> = secrets.iter().map(|s| (*s).to_owned()).collect();
        check(line, &secrets, line);
    }
}

/// Finding 6c: `ghp_\u0041…` was taken for an AWS secret key from `u0041` on, leaving
/// `ghp_\[REDACTED:…]`, an invalid escape: the plan failed to parse. A secret covers whole
/// escapes.
#[test]
fn a_secret_never_cuts_an_escape() {
    let line = r#"{"run":"echo tok=ghp_\u0041BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 done"}"#;
    let out = redactor().redact_str(line).into_owned();
    assert_eq!(out, r#"{"run":"echo tok=[REDACTED:github-token] done"}"#);
}
