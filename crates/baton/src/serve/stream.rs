//! The streams a page follows: a run's event log, read from the store in-process, and a
//! task's log from `baton logs --follow`. At most [`MAX_STREAMS`] are open at once.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use baton_model::RunId;
use futures_util::stream;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::{App, PageError, Shared, command, records, run_of, task_id};

/// Most streams (`events --follow`, `logs --follow`, a process each) open at once.
pub(super) const MAX_STREAMS: usize = 16;

/// A command's standard output (`baton logs --follow`) as server-sent `chunk` events of whole
/// characters, then an `end` event; the command is killed when the page goes away.
fn follow(app: &App, args: &[&str]) -> Response {
    // A process each: a bounded number, whoever asks.
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return too_many_streams();
    };
    let child = command(app, args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    struct Following {
        child: Option<tokio::process::Child>,
        stdout: Option<tokio::process::ChildStdout>,
        pending: Vec<u8>,
        done: bool,
        /// Held while the stream is open.
        _permit: tokio::sync::OwnedSemaphorePermit,
    }
    let mut state = Following {
        stdout: None,
        child: None,
        pending: Vec::new(),
        done: false,
        _permit: permit,
    };
    if let Ok(mut child) = child {
        state.stdout = child.stdout.take();
        state.child = Some(child);
    }
    let events = stream::unfold(state, move |mut state| async move {
        if state.done {
            return None;
        }
        let mut buf = vec![0u8; 16 * 1024];
        let read = match state.stdout.as_mut() {
            Some(stdout) => stdout.read(&mut buf).await.unwrap_or(0),
            None => 0,
        };
        if read == 0 {
            state.done = true;
            if let Some(mut child) = state.child.take() {
                let _ = child.wait().await;
            }
            // Not empty: a browser drops an event without data.
            return Some((
                Ok::<_, Infallible>(Event::default().event("end").data("end")),
                state,
            ));
        }
        state.pending.extend_from_slice(&buf[..read]);
        // Whole characters only: the rest waits for the next read.
        let cut = match std::str::from_utf8(&state.pending) {
            Ok(_) => state.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => state.pending.len(),
        };
        let chunk: Vec<u8> = state.pending.drain(..cut).collect();
        let text = String::from_utf8_lossy(&chunk).into_owned();
        let data = serde_json::to_string(&text).unwrap_or_default();
        Some((Ok(Event::default().event("chunk").data(data)), state))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The run's event log as it grows, as `baton events --follow --json` prints it, read from
/// the store here: a stream costs a task of the server's, not a process.
pub(super) async fn run_events(State(app): State<Shared>, Path(id): Path<String>) -> Response {
    let run = match run_of(&app, id).await {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return too_many_streams();
    };
    struct Reading {
        app: Shared,
        run: RunId,
        after: u64,
        pending: std::collections::VecDeque<String>,
        ended: bool,
        _permit: tokio::sync::OwnedSemaphorePermit,
    }
    let reading = Reading {
        app: Arc::clone(&app),
        run: run.id,
        after: 0,
        pending: std::collections::VecDeque::new(),
        ended: false,
        _permit: permit,
    };
    let events = stream::unfold(reading, |mut reading| async move {
        loop {
            if let Some(line) = reading.pending.pop_front() {
                let event = Event::default().event("baton").data(line);
                return Some((Ok::<_, Infallible>(event), reading));
            }
            if reading.ended {
                return None;
            }
            let (app, run, after) = (Arc::clone(&reading.app), reading.run.clone(), reading.after);
            let read = tokio::task::spawn_blocking(move || {
                let events = app.store.events(&run, after, EVENTS_PAGE)?;
                let goes_on = app.store.run(&run)?.is_some_and(|r| records::goes_on(&r));
                Ok::<_, baton_store::StoreError>((events, goes_on))
            })
            .await;
            let Ok(Ok((events, goes_on))) = read else {
                // The store failed: the page is told the stream ended, as at a run's end.
                reading.ended = true;
                return Some((Ok(Event::default().event("end").data("end")), reading));
            };
            let full = events.len() as u32 == EVENTS_PAGE;
            for event in &events {
                reading.after = event.seq;
                let line = serde_json::to_string(&crate::commands::events::JsonEvent::of(event))
                    .unwrap_or_default();
                reading.pending.push_back(line);
            }
            if reading.pending.is_empty() && !full {
                if !goes_on {
                    reading.ended = true;
                    // Not empty: a browser drops an event without data.
                    return Some((Ok(Event::default().event("end").data("end")), reading));
                }
                tokio::time::sleep(EVENTS_POLL).await;
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// How often a followed run's log is read for more.
const EVENTS_POLL: Duration = Duration::from_millis(200);

/// Most events read at once.
const EVENTS_PAGE: u32 = 1000;

fn too_many_streams() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "5")],
        format!("503: {MAX_STREAMS} streams are open already; close a page and try again\n"),
    )
        .into_response()
}

#[derive(Deserialize)]
pub(super) struct LogQuery {
    name: String,
    attempt: Option<u32>,
}

pub(super) async fn task_log(
    State(app): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<LogQuery>,
) -> Response {
    let run = match run_of(&app, id).await {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let task = match task_id(&query.name) {
        Ok(task) => task,
        Err(reason) => return PageError(StatusCode::BAD_REQUEST, reason).into_response(),
    };
    let attempt = query.attempt.map(|n| n.to_string());
    let mut args = vec!["logs", "--follow"];
    if let Some(n) = &attempt {
        args.extend(["--attempt", n.as_str()]);
    }
    args.extend(["--", run.id.as_str(), task.as_str()]);
    follow(&app, &args)
}
