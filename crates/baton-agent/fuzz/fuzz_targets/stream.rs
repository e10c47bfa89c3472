//! Any bytes as an agent's stdout, read line by line by each engine's parser: parsing never
//! panics, the report holds together, and the verdict never calls an attempt a success that
//! the agent did not report as one.
//!
//! Seeded with the streams the real CLIs printed (`crates/baton-mock-model/tests/fixtures`);
//! `stream.dict` holds the words of their JSON:
//!
//! ```sh
//! cd crates/baton-agent/fuzz
//! cargo +nightly fuzz run stream corpus/stream ../../baton-mock-model/tests/fixtures -- -dict=stream.dict
//! ```
#![no_main]

use std::sync::LazyLock;

use baton_agent::{EngineKind, LineSignal, PriceTable, StreamParser, Verdict};
use libfuzzer_sys::fuzz_target;

static PRICES: LazyLock<PriceTable> = LazyLock::new(PriceTable::builtin);

fuzz_target!(|data: &[u8]| {
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    for kind in EngineKind::ALL {
        let mut parser = StreamParser::new(kind, kind.name(), PRICES.clone());
        // The task's model, as baton assumes it before the stream names one; or none.
        if data.first().is_some_and(|b| b & 1 == 1) {
            parser.assume_model(match kind {
                EngineKind::Claude => "claude-sonnet-4-5",
                EngineKind::Gemini => "gemini-2.5-pro",
                _ => "gpt-5",
            });
        }
        let mut finished = false;
        for (i, line) in lines.iter().enumerate() {
            finished |= parser.line(line) == LineSignal::Finished;
            if i % 8 == 0 {
                check_cost(parser.snapshot().cost_usd());
            }
        }
        let report = parser.finish();
        assert!(report.malformed_lines as usize <= lines.len());
        assert!(report.first_malformed.is_some() == (report.malformed_lines > 0));
        assert_eq!(report.engine, kind.name());
        check_cost(report.cost_usd());
        if finished && kind != EngineKind::Aider {
            assert!(report.finished, "{kind}: a line said Finished");
        }
        for (exit, reaped) in [
            (Some(0), false),
            (None, true),
            (Some(1), false),
            (None, false),
        ] {
            match report.verdict(exit, reaped) {
                Verdict::Succeeded => {
                    assert!(report.finished && !report.is_error, "{kind}: {report:?}");
                    assert!(exit == Some(0) || reaped);
                }
                Verdict::Infrastructure { message, .. } | Verdict::Task { message, .. } => {
                    assert!(!message.is_empty());
                    // Bounded, whatever the agent printed (2000 bytes and an ellipsis).
                    assert!(message.len() <= 2000 + '…'.len_utf8(), "{}", message.len());
                }
            }
        }
        // What is stored of it.
        serde_json::to_string(&report).expect("a report serializes");
    }
});

fn check_cost(cost: Option<f64>) {
    if let Some(cost) = cost {
        assert!(cost.is_finite() && cost >= 0.0, "{cost}");
    }
}
