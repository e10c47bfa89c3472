//! The parsers against what the real CLIs printed: the streams recorded by
//! `baton-mock-model`'s tests (claude 2.1.332, codex 0.171.0, gemini 0.61.0 against the mock
//! model; `BATON_MOCK_UPDATE_FIXTURES=1 cargo test -p baton-mock-model` records them again).

use std::time::Duration;

use crate::{AgentReport, EngineKind, LineSignal, PriceTable, StreamParser, Usage, Verdict};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            "../../../baton-mock-model/tests/fixtures/",
            $name,
            ".jsonl"
        ))
    };
}

/// Every fixture, with the engine that printed it.
pub(crate) const FIXTURES: &[(&str, EngineKind, &str)] = &[
    (
        "claude-success",
        EngineKind::Claude,
        fixture!("claude-success"),
    ),
    (
        "claude-overloaded",
        EngineKind::Claude,
        fixture!("claude-overloaded"),
    ),
    (
        "codex-success",
        EngineKind::Codex,
        fixture!("codex-success"),
    ),
    ("codex-error", EngineKind::Codex, fixture!("codex-error")),
    (
        "codex-rate-limited",
        EngineKind::Codex,
        fixture!("codex-rate-limited"),
    ),
    (
        "codex-idle-timeout",
        EngineKind::Codex,
        fixture!("codex-idle-timeout"),
    ),
    (
        "gemini-success",
        EngineKind::Gemini,
        fixture!("gemini-success"),
    ),
    ("gemini-error", EngineKind::Gemini, fixture!("gemini-error")),
];

/// The report of a whole stream, the task having asked for `model`; and what each line
/// signalled.
fn parse(kind: EngineKind, text: &str, model: Option<&str>) -> (AgentReport, Vec<LineSignal>) {
    parse_priced(kind, text, model, PriceTable::builtin())
}

fn parse_priced(
    kind: EngineKind,
    text: &str,
    model: Option<&str>,
    prices: PriceTable,
) -> (AgentReport, Vec<LineSignal>) {
    let mut parser = StreamParser::new(kind, kind.name(), prices);
    if let Some(model) = model {
        parser.assume_model(model);
    }
    let signals = text.lines().map(|l| parser.line(l.as_bytes())).collect();
    (parser.finish(), signals)
}

fn fixture(name: &str) -> (EngineKind, &'static str) {
    let (_, kind, text) = FIXTURES
        .iter()
        .find(|(n, _, _)| *n == name)
        .expect("a fixture");
    (*kind, text)
}

/// Only the last line is the end, and every line is one the engine prints.
fn assert_well_formed(name: &str, report: &AgentReport, signals: &[LineSignal]) {
    assert_eq!(signals.last(), Some(&LineSignal::Finished), "{name}");
    assert!(
        signals[..signals.len() - 1]
            .iter()
            .all(|s| *s == LineSignal::Continue),
        "{name}: {signals:?}"
    );
    assert!(report.finished, "{name}");
    assert_eq!(
        report.malformed_lines, 0,
        "{name}: {:?}",
        report.first_malformed
    );
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read: 0,
        cache_write: 0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn every_fixture_is_read_whole_and_judged() {
    for (name, kind, text) in FIXTURES {
        let (report, signals) = parse(*kind, text, None);
        assert_well_formed(name, &report, &signals);
        assert!(report.session_id.is_some(), "{name}");
        let succeeded = name.ends_with("-success");
        assert_eq!(!report.is_error, succeeded, "{name}: {report:?}");
        // Every failure recorded is the model API's: retried, never blamed on the task.
        let verdict = report.verdict(Some(if succeeded { 0 } else { 1 }), false);
        if succeeded {
            assert_eq!(verdict, Verdict::Succeeded, "{name}");
        } else {
            assert!(
                matches!(verdict, Verdict::Infrastructure { .. }),
                "{name}: {verdict:?}"
            );
        }
    }
}

#[test]
fn claude_success() {
    let (kind, text) = fixture("claude-success");
    let (report, signals) = parse(kind, text, None);
    assert_well_formed("claude-success", &report, &signals);
    assert_eq!(report.result.as_deref(), Some("Done: wrote hello.txt."));
    assert!(!report.is_error);
    assert_eq!(report.subtype.as_deref(), Some("success"));
    assert_eq!(
        report.session_id.as_deref(),
        Some("34af2d2f-2fe7-4a47-8bd9-36df282ef799")
    );
    assert_eq!(report.model.as_deref(), Some("claude-opus-5-5"));
    // The result's totals, not the live per-message sums (1 output token each).
    assert_eq!(report.usage, usage(20, 10));
    assert_eq!(report.reported_cost_usd, Some(0.000_280_000_000_000_000_03));
    assert_eq!(report.estimated_cost_usd, None);
    assert_eq!(report.turns, Some(2));
    assert_eq!(report.tool_calls, 1);
    assert!(report.errors.is_empty() && report.permission_denials.is_empty());
    assert_eq!(report.api_status, None);
    assert_eq!(report.verdict(Some(0), false), Verdict::Succeeded);
    // Reaped by baton after its result line (the CLI lingered): still a success.
    assert_eq!(report.verdict(None, true), Verdict::Succeeded);
    // A clean result from a process that then failed is not trusted.
    assert!(matches!(
        report.verdict(Some(1), false),
        Verdict::Task { .. }
    ));
}

#[test]
fn claude_overloaded() {
    let (kind, text) = fixture("claude-overloaded");
    let (report, signals) = parse(kind, text, Some("claude-sonnet-4-5"));
    assert_well_formed("claude-overloaded", &report, &signals);
    // `subtype` says success; `is_error` and the API status say otherwise.
    assert_eq!(report.subtype.as_deref(), Some("success"));
    assert!(report.is_error);
    assert_eq!(report.api_status, Some(529));
    assert!(
        report
            .result
            .as_deref()
            .unwrap()
            .starts_with("API Error: Repeated 529 Overloaded errors."),
        "{:?}",
        report.result
    );
    assert_eq!(
        report.session_id.as_deref(),
        Some("e629e554-79b0-40a6-a002-b67722db5934")
    );
    assert_eq!(report.model.as_deref(), Some("claude-opus-5-5"));
    assert!(report.usage.is_zero());
    assert_eq!(report.cost_usd(), Some(0.0));
    match report.verdict(Some(1), false) {
        Verdict::Infrastructure {
            message,
            retry_after,
        } => {
            assert!(message.contains("Repeated 529 Overloaded"), "{message}");
            assert_eq!(retry_after, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn codex_success() {
    let (kind, text) = fixture("codex-success");
    // Codex never names its model: the task's is assumed, and priced.
    let (report, signals) = parse(kind, text, Some("gpt-5"));
    assert_well_formed("codex-success", &report, &signals);
    assert_eq!(report.result.as_deref(), Some("Wrote hello.txt."));
    assert_eq!(
        report.session_id.as_deref(),
        Some("01a22b0f-2185-7881-a4b0-20ba23026af0")
    );
    assert_eq!(report.model.as_deref(), Some("gpt-5"));
    assert_eq!(report.usage, usage(20, 10));
    assert_eq!(report.reported_cost_usd, None);
    // $1.25 per million in, $10 per million out.
    assert!(close(report.cost_usd().unwrap(), 0.000_125), "{report:?}");
    assert_eq!(report.turns, Some(1));
    assert_eq!(report.tool_calls, 1);
    // The unknown-model-metadata `error` item is a warning.
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.verdict(Some(0), false), Verdict::Succeeded);

    // Without a model there is nothing to price it by.
    let (report, _) = parse(kind, text, None);
    assert_eq!(report.model, None);
    assert_eq!(report.cost_usd(), None);
}

#[test]
fn codex_failures_are_the_api_s() {
    for (name, said) in [
        (
            "codex-error",
            "We’re currently experiencing high demand, which may cause temporary errors.",
        ),
        (
            "codex-rate-limited",
            "exceeded retry limit, last status: 429 Too Many Requests",
        ),
        (
            "codex-idle-timeout",
            "stream disconnected before completion: idle timeout waiting for SSE",
        ),
    ] {
        let (kind, text) = fixture(name);
        let (report, signals) = parse(kind, text, Some("gpt-5"));
        assert_well_formed(name, &report, &signals);
        assert!(report.is_error, "{name}");
        assert_eq!(report.subtype.as_deref(), Some("turn_failed"), "{name}");
        assert_eq!(
            report.errors.last().map(String::as_str),
            Some(said),
            "{name}"
        );
        assert_eq!(report.result, None, "{name}");
        assert!(report.usage.is_zero(), "{name}");
        assert_eq!(report.cost_usd(), None, "{name}");
        assert_eq!(report.turns, Some(1), "{name}");
        match report.verdict(Some(1), false) {
            Verdict::Infrastructure { message, .. } => {
                assert!(message.starts_with(said), "{name}: {message}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn gemini_success() {
    let (kind, text) = fixture("gemini-success");
    let (report, signals) = parse(kind, text, None);
    assert_well_formed("gemini-success", &report, &signals);
    // The deltas, put together.
    assert_eq!(report.result.as_deref(), Some("Wrote hello.txt."));
    assert_eq!(report.subtype.as_deref(), Some("success"));
    assert_eq!(
        report.session_id.as_deref(),
        Some("3dad2e12-9ce1-4852-9b38-790f6a3a98e6")
    );
    // `init` said `auto`; the stats say which model answered (the router's classifier ran on
    // flash-lite, 2 tokens).
    assert_eq!(report.model.as_deref(), Some("gemini-3.8-flash"));
    assert_eq!(report.usage, usage(21, 11));
    assert_eq!(report.tool_calls, 1);
    assert!(report.errors.is_empty());
    // Models this table does not know are not priced.
    assert_eq!(report.cost_usd(), None);
    assert_eq!(report.verdict(Some(0), false), Verdict::Succeeded);

    // Each model's tokens at its own price; one missing from the table at the main one's.
    let mut prices = PriceTable::builtin();
    prices.set(
        "gemini-3.8-flash",
        crate::Price {
            input: 1.0,
            output: 2.0,
            cache_read: None,
            cache_write: None,
        },
    );
    let (report, _) = parse_priced(kind, text, None, prices.clone());
    assert!(
        close(report.estimated_cost_usd.unwrap(), (21.0 + 22.0) / 1e6),
        "{report:?}"
    );
    prices.set(
        "gemini-3.5-flash-lite",
        crate::Price {
            input: 100.0,
            output: 100.0,
            cache_read: None,
            cache_write: None,
        },
    );
    let (report, _) = parse_priced(kind, text, None, prices);
    assert!(
        close(
            report.estimated_cost_usd.unwrap(),
            (20.0 + 20.0 + 200.0) / 1e6
        ),
        "{report:?}"
    );

    // A model the task asked for does not survive `init`'s `auto` being overruled by the
    // stats either: what answered is what is recorded.
    let (report, _) = parse(kind, text, Some("gemini-2.5-pro"));
    assert_eq!(report.model.as_deref(), Some("gemini-3.8-flash"));
}

#[test]
fn gemini_keeps_the_asked_model_until_stats_name_one() {
    let (kind, text) = fixture("gemini-success");
    let mut parser = StreamParser::new(kind, "gemini", PriceTable::builtin());
    parser.assume_model("gemini-2.5-pro");
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[..lines.len() - 1] {
        parser.line(line.as_bytes());
    }
    // `init` said `auto`, which is no model.
    assert_eq!(parser.snapshot().model.as_deref(), Some("gemini-2.5-pro"));
}

#[test]
fn gemini_error() {
    let (kind, text) = fixture("gemini-error");
    let (report, signals) = parse(kind, text, None);
    assert_well_formed("gemini-error", &report, &signals);
    assert!(report.is_error);
    assert_eq!(report.subtype.as_deref(), Some("error"));
    assert_eq!(report.result, None);
    assert_eq!(
        report.session_id.as_deref(),
        Some("afbc6d62-7c8b-4f6c-a2c4-15e8665c80be")
    );
    // The 500 is only in the text: `[API Error: {"error":{"code":500,…}}]`.
    assert_eq!(report.api_status, Some(500));
    assert_eq!(report.errors.len(), 1);
    assert!(report.errors[0].contains("scripted HTTP 500"));
    // Only the router's classifier answered.
    assert_eq!(report.usage, usage(1, 1));
    assert_eq!(report.model.as_deref(), Some("gemini-3.5-flash-lite"));
    // Its exit code varies (244 here): the result line decides.
    match report.verdict(Some(244), false) {
        Verdict::Infrastructure {
            message,
            retry_after,
        } => {
            assert!(message.contains("scripted HTTP 500"), "{message}");
            assert_eq!(retry_after, None::<Duration>);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn gemini_api_statuses_are_read_from_its_texts() {
    for (message, status) in [
        (
            r#"[API Error: {\"error\":{\"code\":500,\"message\":\"x\",\"status\":\"INTERNAL\"}}]"#,
            Some(500),
        ),
        (
            r#"[API Error: {\"error\":{\"code\": 429,\"message\":\"x\"}}]"#,
            Some(429),
        ),
        (
            r#"[API Error: mock model: scripted HTTP 429]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method"#,
            Some(429),
        ),
        (
            "[API Error: The model is overloaded. (Status: UNAVAILABLE)]",
            Some(503),
        ),
        (
            "[API Error: bad request (Status: INVALID_ARGUMENT)]",
            Some(400),
        ),
        ("Reached max session turns for this session.", None),
        // Not an API error: a status name in the agent's own words means nothing.
        ("the file was NOT_FOUND (Status: NOT_FOUND)", None),
    ] {
        let line = serde_json::json!({
            "type": "result",
            "status": "error",
            "error": {"type": "unknown", "message": serde_json::from_str::<String>(&format!("\"{message}\"")).unwrap()},
        })
        .to_string();
        let (report, _) = parse(EngineKind::Gemini, &line, None);
        assert_eq!(report.api_status, status, "{message}");
        let verdict = report.verdict(Some(1), false);
        let infrastructure = matches!(status, Some(429 | 500..)) || message.contains("overloaded");
        assert_eq!(
            matches!(verdict, Verdict::Infrastructure { .. }),
            infrastructure,
            "{message}: {verdict:?}"
        );
    }
}

#[test]
fn gemini_warnings_are_not_errors() {
    let text = [
        r#"{"type":"init","session_id":"s","model":"gemini-2.5-pro"}"#,
        r#"{"type":"error","severity":"warning","message":"Agent execution blocked: x"}"#,
        r#"{"type":"error","severity":"error","message":"[API Error: quota (Status: RESOURCE_EXHAUSTED)]"}"#,
    ]
    .join("\n");
    let (report, signals) = parse(EngineKind::Gemini, &text, None);
    assert!(signals.iter().all(|s| *s == LineSignal::Continue));
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.api_status, Some(429));
    assert!(!report.finished);
    assert!(matches!(
        report.verdict(None, false),
        Verdict::Infrastructure { .. }
    ));
}

#[test]
fn cut_streams_keep_what_was_learned() {
    // Every fixture cut before its last line: no result, so never a success, and what the
    // agent had said so far is kept.
    for (name, kind, text) in FIXTURES {
        let lines: Vec<&str> = text.lines().collect();
        let cut = lines[..lines.len() - 1].join("\n");
        let (report, signals) = parse(*kind, &cut, None);
        assert!(signals.iter().all(|s| *s == LineSignal::Continue), "{name}");
        assert!(!report.finished, "{name}");
        assert!(report.session_id.is_some(), "{name}");
        assert_ne!(report.verdict(Some(0), false), Verdict::Succeeded, "{name}");
        assert_ne!(report.verdict(None, true), Verdict::Succeeded, "{name}");
    }
    let (kind, text) = fixture("gemini-success");
    let lines: Vec<&str> = text.lines().collect();
    let (report, _) = parse(kind, &lines[..lines.len() - 1].join("\n"), None);
    assert_eq!(report.result.as_deref(), Some("Wrote hello.txt."));
    assert_eq!(report.tool_calls, 1);
    let (kind, text) = fixture("claude-success");
    let lines: Vec<&str> = text.lines().collect();
    let (report, _) = parse(kind, &lines[..lines.len() - 1].join("\n"), None);
    assert_eq!(report.result.as_deref(), Some("Done: wrote hello.txt."));
    // Live sums: each message's own usage, once.
    assert_eq!(report.usage, usage(20, 2));
}
