//! Notifications (`[notify]` in `baton.toml`, `--notify`): when a run ends, or a task starts
//! waiting for a person, a command is run and a URL is POSTed a small JSON body — who, what,
//! why, and the command to act. They go out on threads of their own, so a slow receiver never
//! holds the run up; the run's end waits a little for them. A notification that fails is said
//! on stderr and fails nothing.

use std::io::Write;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baton_model::{Event, EventKind, RunId, TaskState};
use baton_report::{Reporter, RunInfo, RunResult};
use baton_runner::{NotifyConfig, NotifyOn};
use serde::Serialize;

use crate::out;

/// The longest a notification may take; the run's end waits at most this for those in flight.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What a notification says.
#[derive(Debug, Serialize)]
struct Body {
    event: NotifyOn,
    run: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<String>,
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// What to type to act on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
}

/// A reporter that also notifies, around the one that prints.
pub(crate) struct Notifying {
    inner: Box<dyn Reporter>,
    config: NotifyConfig,
    run: Option<(RunId, String)>,
    sent: Vec<JoinHandle<()>>,
}

impl Notifying {
    /// `inner` with notifications as `config` asks; `inner` alone when it asks none.
    pub(crate) fn around(inner: Box<dyn Reporter>, config: NotifyConfig) -> Box<dyn Reporter> {
        if config.is_empty() {
            return inner;
        }
        Box::new(Self {
            inner,
            config,
            run: None,
            sent: Vec::new(),
        })
    }

    fn send(&mut self, body: Body) {
        if !self.config.wants(body.event) {
            return;
        }
        let text = serde_json::to_string(&body).expect("plain data");
        if let Some(command) = self.config.command.clone() {
            let text = text.clone();
            self.sent.push(std::thread::spawn(move || {
                report(&command, run_command(&command, &text))
            }));
        }
        if let Some(url) = self.config.webhook.clone() {
            self.sent
                .push(std::thread::spawn(move || report(&url, post(&url, &text))));
        }
    }
}

impl Reporter for Notifying {
    fn wants_view(&self) -> bool {
        self.inner.wants_view()
    }

    fn run_started(&mut self, info: &RunInfo) {
        self.run = Some((info.run_id.clone(), info.name.clone()));
        self.inner.run_started(info);
    }

    fn events(&mut self, events: &[Event]) {
        self.inner.events(events);
        let Some((run, name)) = self.run.clone() else {
            return;
        };
        for event in events {
            let (task, reason, command) = match &event.kind {
                EventKind::TaskWaiting { task } => (
                    task,
                    "waits for approval".to_owned(),
                    format!("baton approve {run} {task}"),
                ),
                EventKind::TaskFinished {
                    task,
                    state: TaskState::NeedsHuman,
                    reason,
                } => (
                    task,
                    reason
                        .clone()
                        .unwrap_or_else(|| "needs a person".to_owned()),
                    format!("baton status {run}"),
                ),
                _ => continue,
            };
            self.send(Body {
                event: NotifyOn::TaskWaiting,
                run: run.to_string(),
                name: name.clone(),
                task: Some(task.to_string()),
                state: match &event.kind {
                    EventKind::TaskWaiting { .. } => "waiting".to_owned(),
                    _ => TaskState::NeedsHuman.as_str().to_owned(),
                },
                reason: Some(reason),
                command: Some(command),
            });
        }
    }

    fn run_finished(&mut self, result: &RunResult) {
        self.inner.run_finished(result);
        let reason = result
            .tasks
            .iter()
            .find(|t| t.state.is_failure())
            .map(|t| match &t.reason {
                Some(reason) => format!("{}: {reason}", t.id),
                None => format!("{}: {}", t.id, t.state.as_str()),
            });
        self.send(Body {
            event: NotifyOn::RunFinished,
            run: result.run.id.clone(),
            name: result.run.name.clone(),
            task: None,
            state: result.run.state.as_str().to_owned(),
            reason,
            command: result.next.first().cloned(),
        });
        // The process may end once the run has: what is in flight gets its time first.
        let deadline = Instant::now() + TIMEOUT + Duration::from_secs(1);
        for handle in self.sent.drain(..) {
            while !handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if handle.is_finished() {
                let _ = handle.join();
            }
        }
    }
}

fn report(target: &str, sent: Result<(), String>) {
    if let Err(why) = sent {
        out::err(&format!("baton: warning: could not notify {target}: {why}"));
    }
}

/// `sh -c COMMAND` with `body` on its stdin, ended after [`TIMEOUT`].
fn run_command(command: &str, body: &str) -> Result<(), String> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is no failure.
        let _ = stdin.write_all(body.as_bytes());
    }
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("it exited with {status}")),
            Ok(None) if started.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it did not end within {}s", TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// POSTs `body` to `url` as JSON; a status other than 2xx is a failure.
fn post(url: &str, body: &str) -> Result<(), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .build()
        .into();
    let response = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body)
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("it answered {status}"))
    }
}
