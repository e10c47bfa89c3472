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

/// Red team 2026-12-01, §18 (issue 14, item 11): conventional password variables whose names
/// hold no `PASSWORD`, an AWS secret key away from its key id, and the first line of a
/// multi-line secret printed alone all went through.
#[test]
fn conventional_password_variables_lone_aws_keys_and_lines_of_secrets() {
    use baton_redact::{Redactor, RedactorConfig, secret_env_values};
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n";
    let env = [
        ("MYSQL_PWD", "my5ql-pa55"),
        ("SSHPASS", "sshpa55word"),
        ("REDISCLI_AUTH", "r3dis-auth-pw"),
        ("LDAP_BIND_PW", "bindpw-1234"),
        ("DEPLOY_KEY", key),
        ("DATABASE_URL", "postgres://app:dbpw-in-url@db/app"),
        ("PWD", "/home/someone/project"),
    ];
    let from_env = Redactor::new(RedactorConfig {
        secret_values: secret_env_values(env, &[]),
    });
    let text = "mysql -p my5ql-pa55; sshpass sshpa55word; redis r3dis-auth-pw; ldap bindpw-1234\n\
                first line b3BlbnNzaC1rZXktdjEAAAAABG5vbmU alone\n\
                extracted dbpw-in-url\n\
                cwd /home/someone/project\n";
    assert_eq!(
        from_env.redact_str(text),
        "mysql -p [REDACTED:secret-value]; sshpass [REDACTED:secret-value]; redis \
         [REDACTED:secret-value]; ldap [REDACTED:secret-value]\n\
         first line [REDACTED:secret-value] alone\n\
         extracted [REDACTED:secret-value]\n\
         cwd /home/someone/project\n"
    );

    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    for text in [
        format!("aws configure set aws_secret_access_key {secret}\n"),
        format!("{secret}\n"),
        format!(r#"{{"s": "{secret}"}}"#),
        format!("key: {secret}, region us-east-1"),
    ] {
        let out = redactor().redact_str(&text).into_owned();
        assert!(!out.contains("bPxRfiCY"), "{out}");
        assert!(out.contains("[REDACTED:"), "{out}");
        stable(text.as_bytes());
    }
    // Not the end of a longer base64 run, nor a git SHA.
    for text in [
        "ZGF0YQ+wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\n",
    ] {
        assert_eq!(redactor().redact_str(text), text);
    }
}
