//! One round of an attempt — its first process, or a fix round — as far as it differs from the
//! task's own spec: an agent's command line and prompt (continuing a session, or starting
//! afresh with a fix after the prompt), the watcher of its stream, a shell task's fix feedback.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_agent::{AgentOptions, Engine, PromptInput, StreamParser};
use baton_exec::{AttemptSpec, LineWatcher, Program};
use baton_graph::Budget;

use crate::agent::AgentWatch;
use crate::budget::Meter;
use crate::launch_error::LaunchError;

/// An agent task's engine and prompt, worked out once: every attempt and fix round builds its
/// command line from it.
pub struct PreparedAgent {
    pub engine: Engine,
    pub prompt: PromptInput,
    pub env: Vec<(String, String)>,
    pub idle_timeout: Option<Duration>,
    /// What a later attempt that continues the agent's session needs to build its own
    /// command line.
    pub options: AgentOptions,
    pub preamble: Option<String>,
    pub prompt_file: PathBuf,
    /// Where its CLI writes its own record (aider), read once each round exits.
    pub records: Option<baton_agent::RecordFiles>,
    /// The task's prompt, rendered: a fix that cannot continue a session starts from it.
    pub prompt_text: String,
    /// What its stream is priced with, and the model it is assumed to run until it says.
    pub prices: baton_agent::PriceTable,
    pub model: Option<String>,
    /// The task's own hard budget.
    pub task_limit: Budget,
}

/// The agent that reviews a task's work: its engine, model and schema, and what it gets of
/// baton's environment (its engine's keys, not the task's variables).
pub struct Reviewer {
    pub agent: PreparedAgent,
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// An attempt ready to start: its spec, the watcher of its output (an agent's), and, for a
/// task with `verify` checks, how its checks and fix rounds are started.
pub struct Launch {
    pub spec: AttemptSpec,
    pub watcher: Option<Box<dyn LineWatcher>>,
    pub recipe: Option<Recipe>,
    /// A confined attempt's `$BATON_OUTPUT`, in a directory of its own (`None`: in `out/`).
    pub own_output: Option<PathBuf>,
    /// Files its agent's CLI keeps in its working directory for itself, never committed.
    pub keep_out: &'static [&'static str],
}

/// What a task's checks and fix rounds are started from: the attempt's spec before anything
/// particular to one round was added, and the agent's engine and prompt. A value: the attempt
/// unit owns it.
pub struct Recipe {
    pub base: AttemptSpec,
    pub agent: Option<Arc<PreparedAgent>>,
    /// A task with `acceptance` criteria: the agent that reviews its work, or why there is
    /// none.
    pub reviewer: Option<Result<Arc<Reviewer>, String>>,
    pub fix_feedback: PathBuf,
    pub watching: Watching,
}

/// What an agent's stream is watched for, in every round of one attempt: its spend against the
/// run's and the task's budgets (`meter`, `key` = `(task, attempt)`), and what it is doing, told
/// to the live views (`news`).
#[derive(Clone)]
pub struct Watching {
    pub meter: Meter,
    pub key: (u32, u32),
    pub news: Option<crate::agent::News>,
}

impl Recipe {
    /// The spec the task's checks run with: where and with what the attempt ran.
    pub fn check_spec(&self) -> &AttemptSpec {
        &self.base
    }

    /// The spec (and watcher) of a fix round told `fix`, logging to `log_path`.
    pub fn fix_round(&self, fix: &Continue, log_path: PathBuf) -> Result<RoundStart, LaunchError> {
        let mut spec = self.base.clone();
        spec.log_path = log_path;
        let watcher = shape(
            &mut spec,
            self.agent.as_deref(),
            Some(fix),
            &self.fix_feedback,
            &self.watching,
        )?;
        Ok((spec, watcher))
    }
}

/// A round ready to start: its spec and the watcher of its stream.
pub type RoundStart = (AttemptSpec, Option<Box<dyn LineWatcher>>);

impl Recipe {
    /// The spec (and watcher) of a reviewer's round: the reviewer, in a session of its own,
    /// told `prompt`, logging to `log_path`, where the task ran. `None` for a task without
    /// acceptance criteria; `Err` says why its reviewer cannot run.
    pub fn review_round(
        &self,
        prompt: &str,
        log_path: PathBuf,
    ) -> Option<Result<RoundStart, LaunchError>> {
        let reviewer = match self.reviewer.as_ref()? {
            Ok(reviewer) => reviewer,
            Err(why) => return Some(Err(LaunchError::NoReviewer(why.clone()))),
        };
        let agent = &reviewer.agent;
        let reviewer_agent = PreparedAgent {
            engine: agent.engine.clone(),
            prompt: PromptInput::None,
            env: agent.env.clone(),
            idle_timeout: agent.idle_timeout,
            options: agent.options.clone(),
            preamble: None,
            prompt_file: agent.prompt_file.clone(),
            records: None,
            prompt_text: prompt.to_owned(),
            prices: agent.prices.clone(),
            model: agent.model.clone(),
            task_limit: agent.task_limit.clone(),
        };
        let reviewer_env = reviewer.env.clone();
        let reviewer = reviewer_agent;
        let mut spec = self.base.clone();
        spec.log_path = log_path;
        // It gets its engine's keys, not the task's variables.
        spec.env = reviewer_env;
        let invocation = reviewer.engine.invocation(
            prompt,
            None,
            &reviewer.options,
            None,
            &reviewer.prompt_file,
        );
        spec.program = Program::Exec {
            program: invocation.program,
            args: invocation.args,
        };
        let reviewer = PreparedAgent {
            prompt: invocation.prompt,
            records: invocation.records,
            ..reviewer
        };
        Some(
            shape(
                &mut spec,
                Some(&reviewer),
                None,
                &self.fix_feedback,
                &self.watching,
            )
            .map(|watcher| (spec, watcher)),
        )
    }
}

/// Gives `spec` what one round of an attempt adds to the task's own: for an agent, its
/// command line and prompt (continuing a session, or starting afresh with a fix after the
/// prompt) and the watcher of its stream; for a shell task's fix round, the feedback file.
pub fn shape(
    spec: &mut AttemptSpec,
    agent: Option<&PreparedAgent>,
    resume: Option<&Continue>,
    fix_feedback: &std::path::Path,
    watching: &Watching,
) -> Result<Option<Box<dyn LineWatcher>>, LaunchError> {
    let Some(agent) = agent else {
        if let Some(Continue {
            message,
            fix: Some(round),
            ..
        }) = resume
        {
            // A shell task's fix: the same command, told what failed.
            baton_layout::write_private(fix_feedback, message.as_bytes()).map_err(|source| {
                LaunchError::File {
                    what: "fix feedback file",
                    path: fix_feedback.to_path_buf(),
                    source,
                }
            })?;
            spec.env
                .push(("BATON_FIX_FEEDBACK".into(), fix_feedback.into()));
            spec.env
                .push(("BATON_FIX_ATTEMPT".into(), round.to_string().into()));
        }
        return Ok(None);
    };
    let session = resume
        .filter(|r| r.engine.as_deref() == Some(agent.engine.name.as_str()))
        .and_then(|r| r.session.as_deref())
        .filter(|_| agent.engine.kind.can_resume());
    let told = match (resume, session) {
        // The agent's session holds the task and what it did so far: it is told what
        // happened and to go on, rather than given the task again from scratch.
        (Some(resume), Some(_)) => Some(resume.message.clone()),
        // A fix without a session: the task again, with what failed after it.
        (Some(resume), None) if resume.fix.is_some() => {
            Some(format!("{}\n\n{}", agent.prompt_text, resume.message))
        }
        _ => None,
    };
    let resumed;
    let prompt = match told {
        Some(told) => {
            let invocation = agent.engine.invocation(
                &told,
                agent.preamble.as_deref(),
                &agent.options,
                session,
                &agent.prompt_file,
            );
            spec.program = Program::Exec {
                program: invocation.program,
                args: invocation.args,
            };
            resumed = invocation.prompt;
            &resumed
        }
        None => &agent.prompt,
    };
    match prompt {
        PromptInput::Stdin(bytes) => spec.stdin = Some(bytes.clone()),
        PromptInput::File { path, contents } => path
            .parent()
            .map_or(Ok(()), baton_layout::create_private_dir)
            .and_then(|()| baton_layout::write_private(path, contents))
            .map_err(|source| LaunchError::File {
                what: "prompt file",
                path: path.clone(),
                source,
            })?,
        PromptInput::None => {}
    }
    if let Some(records) = &agent.records {
        // Each round's record is its own: aider appends to these.
        for path in records.all() {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(LaunchError::File {
                        what: "agent record file",
                        path: path.to_path_buf(),
                        source: e,
                    });
                }
                _ => {}
            }
        }
    }
    let mut parser = StreamParser::new(
        agent.engine.stream_kind(),
        &agent.engine.name,
        agent.prices.clone(),
    );
    if let Some(model) = &agent.model {
        parser.assume_model(model);
    }
    let mut watch = AgentWatch::new(
        parser,
        &watching.meter,
        watching.key,
        agent.task_limit.clone(),
    );
    watch.records = agent.records.clone();
    watch.news = watching.news.clone().map(crate::agent::Telling::new);
    Ok(Some(Box::new(watch)))
}

/// A session a new attempt continues: the earlier attempt's, cut short by the machinery.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Continue {
    /// The agent session to continue, where the engine can.
    pub session: Option<String>,
    /// The engine whose session it is: an attempt on another engine (a fallback) starts its
    /// own.
    pub engine: Option<String>,
    /// What the task is told: sent into the continued session, or (for a fix) after the
    /// task's own prompt when it starts afresh.
    pub message: String,
    /// A fix round after failed checks (1 for the first): also for engines that cannot
    /// continue a session, and for shell tasks (as `$BATON_FIX_FEEDBACK`). `None`: an attempt
    /// the machinery cut short, continued only where the session can be.
    pub fix: Option<u32>,
}
