//! Redaction throughput on log-like text without secrets, and with some.
//!
//! `cargo run --release -p baton-redact --example throughput [MB]`

use std::time::Instant;

use baton_redact::{Redactor, RedactorConfig};

fn log_text(mb: usize, secret_every: Option<usize>) -> Vec<u8> {
    let lines: &[&str] = &[
        "2026-11-30T04:48:21.123Z INFO baton_runner::dispatcher: task build-frontend started (attempt 1, pid 48213)\n",
        "   Compiling serde_json v1.0.145\n",
        "test scheduler::tests::retries_escalate ... ok\n",
        "warning: unused variable: `token_count` --> src/auth/session.rs:118:9\n",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 Author: Dev <dev@example.com>\n",
        "GET /api/v1/runs/123e4567-e89b-12d3-a456-426614174000?limit=50 200 12ms\n",
        "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Let me read the file.\"}]},\"usage\":{\"input_tokens\":1200}}\n",
        "npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.\n",
    ];
    let secret = "export GITHUB_TOKEN=ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9aB3dE5gH7\n";
    let mut text = Vec::with_capacity(mb << 20);
    let mut i = 0;
    while text.len() < mb << 20 {
        if secret_every.is_some_and(|n| i % n == 0) {
            text.extend_from_slice(secret.as_bytes());
        }
        text.extend_from_slice(lines[i % lines.len()].as_bytes());
        i += 1;
    }
    text
}

fn measure(name: &str, redactor: &Redactor, text: &[u8], chunk: usize) {
    let start = Instant::now();
    let mut stream = redactor.stream();
    let mut out = Vec::with_capacity(chunk * 2);
    let mut total = 0;
    for piece in text.chunks(chunk) {
        stream.push(piece, &mut out);
        total += out.len();
        out.clear();
    }
    stream.finish(&mut out);
    total += out.len();
    let secs = start.elapsed().as_secs_f64();
    let mb = text.len() as f64 / (1 << 20) as f64;
    println!(
        "{name:<44} {:>8.0} MB/s  ({mb:.0} MB in {secs:.2} s, {total} bytes out)",
        mb / secs
    );
}

fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let start = Instant::now();
    let redactor = Redactor::new(RedactorConfig {
        secret_values: (0..20)
            .map(|i| format!("env-secret-value-{i:04}-xyz").into_bytes())
            .collect(),
    });
    println!("compile: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);

    let plain = log_text(mb, None);
    let some = log_text(mb, Some(100));
    for chunk in [64 << 10, 4 << 10, 512] {
        measure(
            &format!("no secrets, {chunk}-byte chunks"),
            &redactor,
            &plain,
            chunk,
        );
    }
    measure(
        "a secret every 100 lines, 64 KiB chunks",
        &redactor,
        &some,
        64 << 10,
    );
    let start = Instant::now();
    let out = redactor.redact(&plain);
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:<44} {:>8.0} MB/s  (borrowed: {})",
        "no secrets, redact() whole",
        mb as f64 / secs,
        matches!(out, std::borrow::Cow::Borrowed(_))
    );
}
