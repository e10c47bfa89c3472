//! Ordinary output that must come through byte for byte.

use crate::{redactor, streamed};

/// Lines a build, a test run or an agent prints, that look a little like secrets.
const LINES: &[&str] = &[
    "commit 3f2a9c1e8b7d6f5a4c3b2a1908f7e6d5c4b3a291",
    "Merge: 3f2a9c1 8b7d6f5",
    "HEAD is now at 9fceb02d0ae598e95dc970b74767f19372d61af8 Fix the parser",
    "request 123e4567-e89b-12d3-a456-426614174000 took 12 ms",
    "image sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "integrity sha512-Jq9Pfd5qUn8dBLZiNUnoqz0M2nVZ3bkB8OVmKn6vzmV8x1VhU9JXbqH7WOSvxHl7Ki/ydhHh2v3V8k6TyW4sCA==",
    "sha1sum: da39a3ee5e6b4b0d3255bfef95601890afd80709  empty.txt",
    "md5 d41d8cd98f00b204e9800998ecf8427e",
    "token count: 1834",
    "tokens: 15, max_tokens: 4096, total_tokens: 5930",
    "input_tokens=1200 output_tokens=340",
    "The auth flow redirects to the login page.",
    "password: ",
    "password:",
    "password = \"\"",
    "\"password\": \"\",",
    "Passwords must be at least 8 characters.",
    "docker login --password-stdin registry.example.com",
    "password: ${DB_PASSWORD}",
    "password=****",
    "\"password\": null",
    "password: <your password here>",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "auth: required",
    "auth: true",
    "token: identifier",
    "token: Kind::Ident",
    "docker run -u 1000:1000 image",
    "git push -u origin main",
    "ps -u root",
    "let token = next_token();",
    "if token == expected { return }",
    "fn auth(&self) -> Result<(), Error>",
    "password_hash: String,",
    "secretName: db-credentials",
    "secretKeyRef:",
    "token_type: \"Bearer\"",
    "Bearer tokens are used for authentication.",
    "Basic usage: run the tool with --help.",
    "See the Basic Instructions below.",
    "color: #ff00ff; background: #abcdef; border: 1px solid #123;",
    "version 1.0.0-beta.1+sha.5114f85",
    "rustc 1.95.0 (f2d3ce0bd 2026-03-21)",
    "   Compiling regex-automata v0.4.19",
    "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 15.79s",
    "/home/user/.ssh/id_rsa.pub",
    "src/auth/token.rs:12:5: warning: unused variable",
    "https://github.com/org/repo/pull/42",
    "ssh://git@github.com:22/org/repo.git",
    "git@github.com:org/repo.git",
    "http://localhost:8080/path?x=1&y=2",
    "https://user@example.com/path",
    "http://[::1]:8080/",
    "arn:aws:iam::123456789012:role/deploy",
    "2026-11-30T04:48:21.123Z INFO worker 7 ready at 10.0.0.12:9000",
    "mac 00:1a:2b:3c:4d:5e",
    "disk-usage-monitoring-service-configuration-2024",
    "task-runner-v2-Final-Release-Candidate-2026",
    "the risk_live_update_interval is 5",
    "eyJrZXkiOiAidmFsdWUifQ==",
    "apikey: none",
    "api_key: null",
    "secret: false",
    "credentials: {}",
    "export PATH=/usr/local/bin:/usr/bin",
    "TOKENIZERS_PARALLELISM=false",
    "test result: ok. 42 passed; 0 failed; 0 ignored",
    "-----BEGIN CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----",
    "const PEM_HEADER: &str = \"-----BEGIN PRIVATE KEY-----\";",
    "ghp_ is the prefix of a GitHub personal access token",
    "AKIA is the prefix of an AWS access key id",
    "sk-ant- keys are Anthropic's",
    "xoxb-tokens-are-bot-tokens",
    "password: [REDACTED:password]",
    "https://admin:[REDACTED:url-password]@db.example.com",
];

/// Random but deterministic: git SHAs, UUIDs, hex digests and base64 file content.
fn generated() -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let hex = |n: u64| format!("{n:016x}");
    let mut text = String::new();
    for _ in 0..200 {
        let sha = format!("{}{}{}", hex(next()), hex(next()), &hex(next())[..8]);
        text.push_str(&format!("{} {sha} refs/heads/main\n", &sha[..7]));
        let u = hex(next()) + &hex(next());
        text.push_str(&format!(
            "id={}-{}-{}-{}-{}\n",
            &u[..8],
            &u[8..12],
            &u[12..16],
            &u[16..20],
            &u[20..32]
        ));
        text.push_str(&format!(
            "sha256 {}{}{}{}\n",
            hex(next()),
            hex(next()),
            hex(next()),
            hex(next())
        ));
    }
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for _ in 0..2000 {
        let line: String = (0..76)
            .map(|_| B64[(next() % 64) as usize] as char)
            .collect();
        text.push_str(&line);
        text.push('\n');
    }
    text
}

#[test]
fn ordinary_lines_come_through_unchanged() {
    let redactor = redactor();
    let mut failures = Vec::new();
    for line in LINES {
        let out = redactor.redact_str(line);
        if out != *line {
            failures.push(format!("{line}\n  -> {out}"));
        }
    }
    assert!(failures.is_empty(), "changed:\n{}", failures.join("\n"));
}

#[test]
fn hashes_uuids_and_base64_come_through_unchanged() {
    let redactor = redactor();
    let text = generated();
    let out = redactor.redact_str(&text);
    if out != text {
        let changed: Vec<_> = out.lines().filter(|l| l.contains("[REDACTED")).collect();
        panic!("changed: {changed:?}");
    }
    let cuts: Vec<usize> = (0..text.len()).step_by(97).collect();
    assert_eq!(streamed(&redactor, text.as_bytes(), &cuts), text.as_bytes());
}
