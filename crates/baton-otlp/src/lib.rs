//! Traces: a run, read back from the store once it ends, as one OpenTelemetry trace sent over
//! OTLP/HTTP (protobuf) — a span for the run, one per task that ran, one per attempt, and for
//! checks, reviews and planners their own — named and attributed after the GenAI semantic
//! conventions where they apply (`invoke_workflow`, `invoke_agent`, `plan`, `gen_ai.*`), plus
//! baton's own `baton.*`. Off unless asked (`--otlp`, or the standard `OTEL_EXPORTER_OTLP_*`
//! variables): nothing leaves the machine otherwise. Built from what the store holds, which is
//! redacted already, and every string attribute passes the run's redactor once more.
//!
//! Ids are derived from the run's id, so a run exported again (after a resume) is the same
//! trace with the same spans.

use std::time::Duration;

use baton_model::{AttemptView, EventKind, Outcome, RunState, TaskState};
use baton_view::Gathered;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use prost::Message;

/// What is wrong with where traces are asked to go.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// Why a trace was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot send the trace to {url}")]
    Send {
        url: String,
        #[source]
        source: Box<ureq::Error>,
    },
    #[error("the collector at {url} answered {status}")]
    Refused { url: String, status: u16 },
}

/// How long an export may take: a collector that does not answer must not hold baton.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where traces go, and the headers they carry (`OTEL_EXPORTER_OTLP_HEADERS`).
#[derive(Debug, Clone)]
pub struct Exporter {
    pub url: String,
    headers: Vec<(String, String)>,
}

impl Exporter {
    /// `--otlp ENDPOINT` (the collector's base address, `/v1/traces` added), else
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is), else `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (`/v1/traces` added); `None` when none is set.
    pub fn configured(flag: Option<&str>) -> Result<Option<Self>, ConfigError> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let url = match (flag, env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
            (Some(base), _) => traces_url(base),
            (None, Some(url)) => url,
            (None, None) => match env("OTEL_EXPORTER_OTLP_ENDPOINT") {
                Some(base) => traces_url(&base),
                None => return Ok(None),
            },
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError(format!(
                "--otlp {url}: an OTLP/HTTP endpoint is an http:// or https:// address, like \
                 http://127.0.0.1:4318"
            )));
        }
        let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol.filter(|p| p != "http/protobuf") {
            return Err(ConfigError(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: baton sends traces as http/protobuf; \
                 unset it or set it to http/protobuf (collectors take it on port 4318)"
            )));
        }
        let headers = env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| env("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|text| parse_headers(&text))
            .unwrap_or_default();
        Ok(Some(Self { url, headers }))
    }

    /// Sends the run's trace; how many spans it held.
    pub fn export(
        &self,
        gathered: &Gathered,
        redact: &dyn Fn(&str) -> String,
    ) -> Result<usize, ExportError> {
        let request = trace(gathered, redact);
        let spans = request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .new_agent();
        let mut post = agent
            .post(&self.url)
            .header("Content-Type", "application/x-protobuf");
        for (name, value) in &self.headers {
            post = post.header(name, value);
        }
        let response =
            post.send(&request.encode_to_vec()[..])
                .map_err(|source| ExportError::Send {
                    url: self.url.clone(),
                    source: Box::new(source),
                })?;
        let status = response.status();
        if !status.is_success() {
            return Err(ExportError::Refused {
                url: self.url.clone(),
                status: status.as_u16(),
            });
        }
        Ok(spans)
    }
}

fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// `key1=value1,key2=value2`, values percent-decoded as the specification says.
fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key.trim().to_owned(), percent_decode(value.trim())))
        })
        .filter(|(key, _)| !key.is_empty())
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A stable id of `parts`: FNV-1a, 64 bits per seed.
fn id_of(seed: u64, parts: &[&str]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for part in parts {
        for &b in part.as_bytes().iter().chain(std::iter::once(&0xff)) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash.max(1)
}

fn trace_id(run: &str) -> Vec<u8> {
    let mut id = id_of(1, &["trace", run]).to_be_bytes().to_vec();
    id.extend(id_of(2, &["trace", run]).to_be_bytes());
    id
}

fn span_id(run: &str, parts: &[&str]) -> Vec<u8> {
    let mut all = vec![run];
    all.extend_from_slice(parts);
    id_of(3, &all).to_be_bytes().to_vec()
}

fn nanos(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

fn attribute(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    attribute(key, any_value::Value::StringValue(value.into()))
}

fn int(key: &str, value: u64) -> KeyValue {
    attribute(
        key,
        any_value::Value::IntValue(i64::try_from(value).unwrap_or(i64::MAX)),
    )
}

fn float(key: &str, value: f64) -> KeyValue {
    attribute(key, any_value::Value::DoubleValue(value))
}

/// The provider an engine talks to, as the conventions name it.
fn provider(engine: &str) -> Option<&'static str> {
    Some(match engine {
        "claude" => "anthropic",
        "codex" => "openai",
        "gemini" => "gcp.gemini",
        _ => return None,
    })
}

fn error_status(message: String) -> Option<Status> {
    Some(Status {
        message,
        code: status::StatusCode::Error as i32,
    })
}

/// An attempt's outcome as `error.type`: its kind, and for an agent's failure its reason.
fn error_type(outcome: &Outcome) -> String {
    match outcome {
        Outcome::AgentFailed { reason, .. } => reason.clone(),
        Outcome::Exited { code } => format!("exit_{code}"),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v["kind"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "failed".to_owned()),
    }
}

/// The run's trace.
pub fn trace(gathered: &Gathered, redact: &dyn Fn(&str) -> String) -> ExportTraceServiceRequest {
    let result = &gathered.result;
    let run = result.run.id.as_str();
    let trace_id = trace_id(run);
    let now = baton_model::now_ms();
    let run_end = result.run.ended_at_ms.unwrap_or(now);
    let root = span_id(run, &["run"]);
    let mut spans = Vec::new();

    let mut run_attrs = vec![
        text("gen_ai.operation.name", "invoke_workflow"),
        text("baton.run.id", run),
        text("baton.run.name", redact(&result.run.name)),
        text("baton.outcome", result.run.state.as_str()),
        int("baton.tasks", u64::from(result.totals.tasks)),
        int("baton.attempts", u64::from(result.totals.attempts)),
    ];
    if let Some(spend) = &result.spend {
        run_attrs.extend([
            int("gen_ai.usage.input_tokens", spend.total.input_tokens),
            int("gen_ai.usage.output_tokens", spend.total.output_tokens),
            int(
                "gen_ai.usage.cache_read.input_tokens",
                spend.total.cache_read_tokens,
            ),
            int(
                "gen_ai.usage.cache_creation.input_tokens",
                spend.total.cache_write_tokens,
            ),
            float("baton.cost.usd", spend.total.cost_usd),
        ]);
    }
    spans.push(Span {
        trace_id: trace_id.clone(),
        span_id: root.clone(),
        name: format!("invoke_workflow {}", redact(&result.run.name)),
        kind: span::SpanKind::Internal as i32,
        start_time_unix_nano: nanos(result.run.started_at_ms),
        end_time_unix_nano: nanos(run_end),
        attributes: run_attrs,
        status: match result.run.state {
            RunState::Succeeded | RunState::SucceededWithWarnings | RunState::Running => None,
            state => error_status(format!("the run {state}")),
        },
        ..Span::default()
    });

    let graph: std::collections::HashMap<&str, &baton_report::GraphTask> =
        gathered.graph.iter().map(|t| (t.id.as_str(), t)).collect();
    for (id, task) in gathered.view.tasks() {
        let attempts = gathered.view.attempts(id);
        if attempts.is_empty() {
            continue;
        }
        let shape = graph.get(id.as_str());
        let is_planner = shape.is_some_and(|t| t.kind == "planner");
        let task_span = span_id(run, &["task", id.as_str()]);
        // A planned task's span is a child of its planner's.
        let parent = shape
            .and_then(|t| t.planner.as_ref())
            .map_or_else(|| root.clone(), |p| span_id(run, &["task", p.as_str()]));
        let start = attempts[0].started_at_ms;
        let end = task
            .ended_at_ms
            .or_else(|| attempts.iter().filter_map(|a| a.ended_at_ms).max())
            .unwrap_or(now);
        let mut attrs = vec![
            text("baton.run.id", run),
            text("baton.task.id", redact(id.as_str())),
            text("baton.outcome", task.status.as_str()),
            int("baton.attempts", u64::from(task.attempts)),
        ];
        if let Some(reason) = &task.reason {
            attrs.push(text("baton.reason", redact(reason)));
        }
        spans.push(Span {
            trace_id: trace_id.clone(),
            span_id: task_span.clone(),
            parent_span_id: parent,
            name: format!("task {}", redact(id.as_str())),
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: nanos(start),
            end_time_unix_nano: nanos(end),
            attributes: attrs,
            status: (task.status.is_failure() || task.status == TaskState::NeedsHuman)
                .then(|| format!("{}", task.status))
                .and_then(error_status),
            ..Span::default()
        });
        let tracing = Tracing {
            run,
            trace_id: &trace_id,
            now,
            redact,
        };
        for attempt in attempts {
            spans.push(attempt_span(
                &tracing,
                &task_span,
                id.as_str(),
                attempt,
                is_planner,
            ));
        }
    }
    // Checks and reviews: children of the attempt they judged.
    for event in &gathered.events {
        match &event.kind {
            EventKind::Checked {
                task: Some(task),
                attempt: Some(attempt),
                checks,
                ..
            } => {
                let parent = span_id(run, &["attempt", task.as_str(), &attempt.to_string()]);
                let mut end = event.at_ms;
                for (i, check) in checks.iter().enumerate().rev() {
                    let start = end - i64::try_from(check.duration_ms).unwrap_or(0);
                    spans.push(Span {
                        trace_id: trace_id.clone(),
                        span_id: span_id(
                            run,
                            &[
                                "check",
                                task.as_str(),
                                &attempt.to_string(),
                                &event.seq.to_string(),
                                &i.to_string(),
                            ],
                        ),
                        parent_span_id: parent.clone(),
                        name: format!("check {}", redact(task.as_str())),
                        kind: span::SpanKind::Internal as i32,
                        start_time_unix_nano: nanos(start),
                        end_time_unix_nano: nanos(end),
                        attributes: vec![
                            text("baton.task.id", redact(task.as_str())),
                            int("baton.attempt", u64::from(*attempt)),
                            text("baton.check.command", redact(&check.command)),
                            text(
                                "baton.outcome",
                                if check.passed() { "passed" } else { "failed" },
                            ),
                        ],
                        status: (!check.passed())
                            .then(|| check.outcome.to_string())
                            .and_then(error_status),
                        ..Span::default()
                    });
                    end = start;
                }
            }
            EventKind::Reviewed {
                task,
                attempt,
                review,
            } => {
                let parent = span_id(run, &["attempt", task.as_str(), &attempt.to_string()]);
                spans.push(Span {
                    trace_id: trace_id.clone(),
                    span_id: span_id(
                        run,
                        &[
                            "review",
                            task.as_str(),
                            &attempt.to_string(),
                            &event.seq.to_string(),
                        ],
                    ),
                    parent_span_id: parent,
                    // The review's own start is not recorded: the span marks its verdict.
                    name: format!("invoke_agent reviewer of {}", redact(task.as_str())),
                    kind: span::SpanKind::Internal as i32,
                    start_time_unix_nano: nanos(event.at_ms),
                    end_time_unix_nano: nanos(event.at_ms),
                    attributes: vec![
                        text("gen_ai.operation.name", "invoke_agent"),
                        text("gen_ai.agent.name", "reviewer"),
                        text("baton.task.id", redact(task.as_str())),
                        int("baton.attempt", u64::from(*attempt)),
                        text("baton.outcome", review.verdict.to_string()),
                    ],
                    ..Span::default()
                });
            }
            _ => {}
        }
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text("service.name", "baton"),
                    text("service.version", env!("CARGO_PKG_VERSION")),
                ],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "baton".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..InstrumentationScope::default()
                }),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// What every span of one trace shares.
struct Tracing<'a> {
    run: &'a str,
    trace_id: &'a [u8],
    now: i64,
    redact: &'a dyn Fn(&str) -> String,
}

fn attempt_span(
    tracing: &Tracing<'_>,
    parent: &[u8],
    task: &str,
    attempt: &AttemptView,
    is_planner: bool,
) -> Span {
    let Tracing {
        run,
        trace_id,
        now,
        redact,
    } = *tracing;
    let number = attempt.attempt.to_string();
    let mut attrs = vec![
        text("baton.run.id", run),
        text("baton.task.id", redact(task)),
        int("baton.attempt", u64::from(attempt.attempt)),
    ];
    let outcome = attempt.outcome.as_ref();
    attrs.push(text(
        "baton.outcome",
        match outcome {
            None => "running".to_owned(),
            Some(o) if o.is_success() => "succeeded".to_owned(),
            Some(o) => error_type(o),
        },
    ));
    let name = match &attempt.agent {
        Some(agent) => {
            let operation = if is_planner { "plan" } else { "invoke_agent" };
            attrs.extend([
                text("gen_ai.operation.name", operation),
                text("gen_ai.agent.name", redact(task)),
                text("baton.engine", agent.engine.clone()),
                int("gen_ai.usage.input_tokens", agent.input_tokens),
                int("gen_ai.usage.output_tokens", agent.output_tokens),
                int(
                    "gen_ai.usage.cache_read.input_tokens",
                    agent.cache_read_tokens,
                ),
                int(
                    "gen_ai.usage.cache_creation.input_tokens",
                    agent.cache_write_tokens,
                ),
            ]);
            if let Some(provider) = provider(&agent.engine) {
                attrs.push(text("gen_ai.provider.name", provider));
            }
            if let Some(model) = &agent.model {
                attrs.push(text("gen_ai.request.model", redact(model)));
            }
            if let Some(session) = &agent.session_id {
                attrs.push(text("gen_ai.conversation.id", redact(session)));
            }
            if let Some(usd) = agent.cost_usd {
                attrs.push(float("baton.cost.usd", usd));
            }
            format!("{operation} {}", redact(task))
        }
        None if is_planner => {
            attrs.push(text("gen_ai.operation.name", "plan"));
            format!("plan {}", redact(task))
        }
        None => format!("attempt {} of {}", attempt.attempt, redact(task)),
    };
    let failed = outcome.filter(|o| !o.is_success());
    if let Some(outcome) = failed {
        attrs.push(text("error.type", error_type(outcome)));
    }
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id(run, &["attempt", task, &number]),
        parent_span_id: parent.to_vec(),
        name,
        kind: if attempt.agent.is_some() {
            span::SpanKind::Client as i32
        } else {
            span::SpanKind::Internal as i32
        },
        start_time_unix_nano: nanos(attempt.started_at_ms),
        end_time_unix_nano: nanos(attempt.ended_at_ms.unwrap_or(now)),
        attributes: attrs,
        status: failed
            .map(|o| redact(&o.to_string()))
            .and_then(error_status),
        ..Span::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_gets_its_traces_path_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }

    #[test]
    fn headers_are_pairs_percent_decoded() {
        assert_eq!(
            parse_headers("api-key=a%3Db, x-team = core ,bad"),
            [
                ("api-key".to_owned(), "a=b".to_owned()),
                ("x-team".to_owned(), "core".to_owned())
            ]
        );
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(trace_id("r1"), trace_id("r1"));
        assert_ne!(trace_id("r1"), trace_id("r2"));
        assert_eq!(trace_id("r1").len(), 16);
        assert_ne!(span_id("r", &["task", "a"]), span_id("r", &["task", "b"]));
        assert_eq!(span_id("r", &["run"]).len(), 8);
    }
}
