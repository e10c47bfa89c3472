//! How fast the stream redactor goes through output, line by line: plain log lines, and agent
//! stream lines (JSON, escapes in every line: what the escape-decoding pass reads).
//! `cargo run --release -p baton-redact --example stream_lines`; numbers in
//! docs/PERFORMANCE.md.

use std::time::Instant;

use baton_redact::Redactor;

fn main() {
    let plain: String = (0..400_000)
        .map(|i| format!("   Compiling crate-{i} v0.1.{i} (/home/user/src/crate-{i})\n"))
        .collect();
    let json: String = (0..100_000)
        .map(|i| {
            format!(
                "{{\"type\":\"assistant\",\"message\":{{\"id\":\"msg_{i}\",\"content\":[{{\"type\":\"text\",\"text\":\"Looking at src\\/lib.rs line {i}:\\n  fn main() {{ println!(\\\"hi\\\"); }}\\nNext I will run the tests.\"}}],\"usage\":{{\"input_tokens\":{i},\"output_tokens\":12}}}}}}\n"
            )
        })
        .collect();
    let redactor = Redactor::default();
    for (name, text) in [("plain lines", &plain), ("agent stream (JSON)", &json)] {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            let mut stream = redactor.stream();
            let mut out = Vec::with_capacity(text.len());
            for chunk in text.as_bytes().chunks(64 * 1024) {
                stream.push(chunk, &mut out);
            }
            stream.finish(&mut out);
            assert_eq!(out.len(), text.len(), "{name}: nothing here is a secret");
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {:.1} MB in {:.0} ms, {:.0} MB/s",
            text.len() as f64 / 1e6,
            best * 1e3,
            text.len() as f64 / 1e6 / best
        );
    }
}
