//! Agent attempts: following the agent's stream while it runs, checking the installed CLIs
//! before a run starts, and judging an attempt by what the agent said and how it ended.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_agent::{AgentReport, Engine, StreamParser, Verdict, Version, VersionCheck};
use baton_exec::{AttemptReport, LineWatcher, WatchSignal};
use baton_graph::{Action, Budget, Graph};
use baton_model::{AgentUsage, Event, EventKind, FailureClass, Outcome, TaskId};

use crate::budget::{Exceeded, Meter, Spent, budget_tokens, over};
use crate::config::AgentConfig;

/// Follows an agent's stdout (after redaction) with its engine's parser, and stops the
/// attempt when it spends past a hard budget.
pub struct AgentWatch {
    pub parser: StreamParser,
    budget: Option<WatchBudget>,
    /// The limit the attempt went past, once it has.
    pub exceeded: Option<Exceeded>,
    /// The attempt was told to stop for it.
    stopping: bool,
    /// Where the CLI writes its own record (aider), read once it exits.
    pub records: Option<baton_agent::RecordFiles>,
    /// Where what the agent is doing is told, as it changes.
    pub news: Option<Telling>,
}

/// Where a running agent's activity goes: the run's progress channel, as `agent-activity`
/// events about attempt `attempt` of `task`.
#[derive(Clone)]
pub struct News {
    pub tx: tokio::sync::mpsc::UnboundedSender<Event>,
    pub task: TaskId,
    pub attempt: u32,
}

/// A new `doing` is told at most this often: an agent may make several calls a second.
const TELL_DOING_EVERY: Duration = Duration::from_secs(1);
/// Tokens alone are told at most this often: the live view's figures, not the budget's.
const TELL_TOKENS_EVERY: Duration = Duration::from_secs(10);

/// [`News`] and what was told last, so that only changes are told, and not too often. What
/// changed within the wait is told with the next line after it.
pub struct Telling {
    news: News,
    told_at: Option<std::time::Instant>,
    doing: Option<String>,
    tokens: u64,
}

impl Telling {
    pub fn new(news: News) -> Self {
        Self {
            news,
            told_at: None,
            doing: None,
            tokens: 0,
        }
    }

    fn tell(&mut self, parser: &StreamParser) {
        let doing = parser.doing();
        let (cost, usage) = parser.spent();
        let tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
        let since = self.told_at.map(|at| at.elapsed());
        let due = if doing != self.doing {
            since.is_none_or(|s| s >= TELL_DOING_EVERY)
        } else {
            tokens != self.tokens && since.is_none_or(|s| s >= TELL_TOKENS_EVERY)
        };
        if !due {
            return;
        }
        self.told_at = Some(std::time::Instant::now());
        self.tokens = tokens;
        self.doing.clone_from(&doing);
        // A run that is over has no one to tell: the event is dropped with the channel.
        let _ = self.news.tx.send(Event {
            seq: 0,
            at_ms: crate::stamp::now_ms(),
            kind: EventKind::AgentActivity {
                task: self.news.task.clone(),
                attempt: self.news.attempt,
                doing,
                tokens,
                cost_usd: cost,
            },
        });
    }
}

struct WatchBudget {
    meter: Meter,
    key: (u32, u32),
    task_limit: Budget,
}

impl AgentWatch {
    /// `meter` is the run's, `key` this attempt's `(task, attempt)`, `task_limit` the task's
    /// own budget.
    pub fn new(parser: StreamParser, meter: &Meter, key: (u32, u32), task_limit: Budget) -> Self {
        let budget = (meter.has_limit() || !task_limit.is_unlimited()).then(|| WatchBudget {
            meter: meter.clone(),
            key,
            task_limit,
        });
        Self {
            parser,
            budget,
            exceeded: None,
            stopping: false,
            records: None,
            news: None,
        }
    }

    /// Checks the budgets, at every line: what the others spent counts against the run's too,
    /// and a line that spends nothing (a tool's result) is where work goes on after the run's
    /// budget ran out under another agent.
    fn check(&mut self) -> Option<Exceeded> {
        let budget = self.budget.as_ref()?;
        let (usd, usage) = self.parser.spent();
        let now = Spent {
            usd: usd.unwrap_or(0.0),
            tokens: budget_tokens(usage.input, usage.output, usage.cache_write),
        };
        let run = budget.meter.update(budget.key, now);
        let earlier = budget.meter.task_spent(budget.key.0);
        let task_total = Spent {
            usd: earlier.usd + now.usd,
            tokens: earlier.tokens + now.tokens,
        };
        match over(&budget.task_limit, task_total) {
            Some(what) => Some(Exceeded::Task(format!("task {what}"))),
            None => run,
        }
    }
}

impl AgentWatch {
    /// The report, once the agent has exited: its stream, and the record it wrote to its own
    /// files (read, then removed: the chat holds the prompt and answer unredacted).
    pub fn finish(mut self) -> AgentReport {
        if let Some(records) = self.records.take() {
            let read = |path: &std::path::Path| std::fs::read_to_string(path).ok();
            let (analytics, chat) = (read(&records.analytics), read(&records.chat));
            self.parser.records(analytics.as_deref(), chat.as_deref());
            for path in records.all() {
                let _ = std::fs::remove_file(path);
            }
        }
        self.parser.finish()
    }
}

impl LineWatcher for AgentWatch {
    fn line(&mut self, line: &[u8]) -> WatchSignal {
        let signal = self.parser.line(line);
        if let Some(news) = &mut self.news {
            news.tell(&self.parser);
        }
        // Every change goes to the meter, also past the limit: the run's total stays true.
        let exceeded = self.check();
        if self.exceeded.is_none() {
            self.exceeded = exceeded;
        }
        let finished = match signal {
            baton_agent::LineSignal::Continue => false,
            baton_agent::LineSignal::Finished => true,
        };
        if self.exceeded.is_some() && !self.stopping {
            // What the budget can still save is the work not done yet. An agent whose answer
            // is in (or, for Claude Code, whose last message was its answer and no tool call
            // followed it) has spent what it will spend: stopping it now throws away what was
            // paid for. It is judged as usual; the meter refuses whatever would start next.
            if !finished && !self.parser.answering() {
                self.stopping = true;
                return WatchSignal::Stop;
            }
        }
        match finished {
            false => WatchSignal::Continue,
            true => WatchSignal::Finished,
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// How long `--version` may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// An agent task's engines, in the order its attempts use them: its own (with the task's
/// model), then its `fallback`s; or its candidates.
fn chain(task: &baton_graph::Task) -> Vec<(&str, Option<&str>)> {
    if !task.candidates.is_empty() {
        return task
            .candidates
            .iter()
            .map(|c| (c.engine.as_str(), c.model.as_deref()))
            .collect();
    }
    match &task.action {
        Action::Agent {
            engine, settings, ..
        } => std::iter::once((engine.as_str(), settings.model.as_deref()))
            .chain(
                settings
                    .fallback
                    .iter()
                    .map(|c| (c.engine.as_str(), c.model.as_deref())),
            )
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether each engine the graph uses can run: what a run needs to know before it starts.
pub struct EngineCheck {
    /// Problems that refuse the run: a task none of whose engines can run, an engine with no
    /// fallback that cannot, one line each.
    pub problems: Vec<String>,
    /// Engines that cannot run, each with what its tasks fall back to: the run goes on.
    pub notes: Vec<String>,
}

/// Checks each engine the graph uses (its own and its fallbacks'): installed, recent enough,
/// defined, with a model where it needs one. An engine that cannot run refuses the run
/// unless every task that uses it has a fallback after it that can; then it is a note, and
/// its attempts fail as the machinery's and hand over.
pub async fn probe_engines(graph: &Graph, config: &AgentConfig) -> EngineCheck {
    let mut used: Vec<&str> = graph
        .tasks()
        .iter()
        .flat_map(|t| chain(t).into_iter().map(|(engine, _)| engine))
        .collect();
    used.sort_unstable();
    used.dedup();
    let mut problems = Vec::new();
    // An API has no default model: say so before anything runs, not at each attempt.
    for task in graph.tasks() {
        for (k, (name, model)) in chain(task).into_iter().enumerate() {
            if let Some(engine) = config.engine(name)
                && engine.kind == baton_agent::EngineKind::Http
                && model.is_none()
                && engine.model.is_none()
            {
                let on = if k == 0 { "the task" } else { "its fallback" };
                problems.push(format!(
                    "task `{}`: engine `{}` needs a model: set `model` on {on} or under [engines.{}] in baton.toml",
                    task.id, engine.name, engine.name
                ));
            }
        }
    }
    // One after another: a graph uses a handful of engines at most, and each answers quickly.
    let mut broken: BTreeMap<&str, String> = BTreeMap::new();
    for name in used {
        let Some(engine) = config.engine(name) else {
            broken.insert(
                name,
                format!(
                    "engine `{name}` is not defined: define it under [engines.{name}] in baton.toml"
                ),
            );
            continue;
        };
        if let Err(problem) = probe(engine).await {
            broken.insert(name, problem);
        }
    }
    // A broken engine is fatal where a task has nothing that runs after it.
    let mut fatal: Vec<&str> = Vec::new();
    let mut covered: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for task in graph.tasks() {
        let chain = chain(task);
        for (k, (name, _)) in chain.iter().enumerate() {
            if !broken.contains_key(name) {
                continue;
            }
            match chain[k + 1..].iter().find(|(n, _)| !broken.contains_key(n)) {
                Some((next, _)) => covered.entry(name).or_default().push(next),
                None => fatal.push(name),
            }
        }
    }
    let mut notes = Vec::new();
    for (name, problem) in broken {
        if fatal.contains(&name) {
            problems.push(problem);
        } else if let Some(next) = covered.get_mut(name) {
            next.sort_unstable();
            next.dedup();
            notes.push(format!(
                "{problem}; its tasks fall back to {}",
                next.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
    }
    EngineCheck { problems, notes }
}

/// `COMMAND --version`: the version, or why the engine cannot be used.
pub async fn probe(engine: &Engine) -> Result<Option<Version>, String> {
    if engine.kind == baton_agent::EngineKind::Http {
        // baton itself asks the API: there is nothing to install.
        return Ok(None);
    }
    if engine.kind == baton_agent::EngineKind::Command {
        // Any program: `--version` may mean something else to it, or nothing. Finding it is
        // all baton can check.
        return match find_program(&engine.command) {
            true => Ok(None),
            false => Err(format!(
                "engine `{}`: `{}` is not installed (not found{}); check `command` under [engines.{}]",
                engine.name,
                engine.command,
                if engine.command.contains('/') {
                    ""
                } else {
                    " in PATH"
                },
                engine.name
            )),
        };
    }
    let mut command = tokio::process::Command::new(&engine.command);
    command
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(PROBE_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "engine `{}`: `{}` is not installed (not found in PATH); {}",
                engine.name,
                engine.command,
                install_hint(engine)
            ));
        }
        Ok(Err(error)) => {
            return Err(format!(
                "engine `{}`: cannot run `{} --version`: {error}",
                engine.name, engine.command
            ));
        }
        Err(_) => {
            return Err(format!(
                "engine `{}`: `{} --version` did not answer within {}s",
                engine.name,
                engine.command,
                PROBE_TIMEOUT.as_secs()
            ));
        }
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let version = Version::parse(&text);
    if !output.status.success() {
        return Err(format!(
            "engine `{}`: `{} --version` failed ({}): {}",
            engine.name,
            engine.command,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    match engine.kind.check_version(version) {
        VersionCheck::Supported | VersionCheck::Unknown => Ok(version),
        VersionCheck::Unsupported { minimum, why } => Err(format!(
            "engine `{}`: {} {} is too old; baton needs {minimum} or later for {why}",
            engine.name,
            engine.command,
            version.map_or_else(|| "?".to_owned(), |v| v.to_string()),
        )),
    }
}

/// Whether `program` names an executable file, directly or through `PATH`.
fn find_program(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &std::path::Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}

fn install_hint(engine: &Engine) -> String {
    let package = match engine.kind {
        baton_agent::EngineKind::Claude => "npm install -g @anthropic-ai/claude-code",
        baton_agent::EngineKind::Codex => "npm install -g @openai/codex",
        baton_agent::EngineKind::Gemini => "npm install -g @google/gemini-cli",
        baton_agent::EngineKind::Aider => "python -m pip install aider-install && aider-install",
        baton_agent::EngineKind::Http => "it is built in",
        baton_agent::EngineKind::Command => "check the path",
    };
    format!(
        "install it ({package}) or set `command` under [engines.{}] in baton.toml",
        engine.name
    )
}

/// What an agent attempt amounted to: its outcome for the scheduler, its accounting, and its
/// output for the dependents.
pub struct Judged {
    pub outcome: Outcome,
    pub usage: AgentUsage,
    pub output: String,
}

/// The agent's own verdict on an attempt that ended as `ended` (with `exit_code`), as an
/// outcome.
fn verdict(
    agent: &AgentReport,
    exec: &AttemptReport,
    ended: &Outcome,
    exit_code: Option<i32>,
    reaped_after_result: bool,
) -> Outcome {
    match agent.verdict(exit_code, reaped_after_result) {
        Verdict::Succeeded => Outcome::Exited { code: 0 },
        Verdict::Infrastructure {
            message,
            retry_after,
        } => Outcome::AgentFailed {
            class: FailureClass::Infrastructure,
            reason: infrastructure_reason(agent, ended),
            message: with_stderr(message, exec),
            retry_after_ms: retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        },
        Verdict::Task { reason, message } => Outcome::AgentFailed {
            class: FailureClass::Task,
            reason,
            message,
            retry_after_ms: None,
        },
    }
}

/// Judges an agent attempt by how its process ended and what the agent said.
pub fn judge(
    exec: &AttemptReport,
    mut agent: AgentReport,
    exceeded: Option<Exceeded>,
    plain_text: bool,
) -> Judged {
    if plain_text {
        // Its stdout is its answer.
        agent.result = Some(exec.stdout.text.clone());
    }
    let usage = usage_of(&agent);
    // Stopped for the budget: over budget, unless its answer came out while it was being
    // stopped (the stop went out before the answer was known). Then it is paid for and
    // complete: judged as an agent reaped after its result.
    let answered_while_stopped = exec.stopped_by_watcher && agent.finished;
    if let (true, false, Some(exceeded)) =
        (exec.stopped_by_watcher, answered_while_stopped, exceeded)
    {
        return Judged {
            outcome: Outcome::OverBudget {
                limit: exceeded.describe().to_owned(),
                scope: Some(exceeded.scope()),
                spent_usd: usage.cost_usd,
                tokens: usage.tokens(),
            },
            usage,
            output: agent.result.unwrap_or_default(),
        };
    }
    let outcome = match &exec.outcome {
        // Time ran out while the agent was retrying its model API: the API's failure, not the
        // task's (retried, with backoff).
        Outcome::TimedOut | Outcome::IdleTimeout { .. } if agent.api_retrying.is_some() => {
            Outcome::AgentFailed {
                class: FailureClass::Infrastructure,
                reason: "api_unreachable".to_owned(),
                message: format!(
                    "the model API was not answering when the attempt {} (the agent was retrying \
                     it: {})",
                    match exec.outcome {
                        Outcome::TimedOut => "timed out",
                        _ => "went quiet",
                    },
                    agent.api_retrying.as_deref().unwrap_or_default()
                ),
                retry_after_ms: None,
            }
        }
        Outcome::Cancelled if answered_while_stopped => {
            verdict(&agent, exec, &Outcome::Cancelled, None, true)
        }
        // baton's own verdicts stand: the agent had no say in them.
        Outcome::TimedOut
        | Outcome::Cancelled
        | Outcome::IdleTimeout { .. }
        | Outcome::SpawnFailed { .. }
        | Outcome::Interrupted => exec.outcome.clone(),
        other => verdict(
            &agent,
            exec,
            other,
            other.exit_code(),
            exec.reaped_after_result,
        ),
    };
    Judged {
        outcome,
        usage,
        output: agent.result.unwrap_or_default(),
    }
}

fn infrastructure_reason(agent: &AgentReport, exit: &Outcome) -> String {
    match (agent.api_status, exit) {
        (Some(status), _) => format!("api_error_{status}"),
        (None, Outcome::Signaled { name, .. }) if !agent.finished => {
            format!("crashed_sig{}", name.to_ascii_lowercase())
        }
        _ if agent.finished => "api_error".to_owned(),
        _ => "no_result".to_owned(),
    }
}

/// An agent that died without a word may have said why on stderr.
fn with_stderr(message: String, exec: &AttemptReport) -> String {
    let tail = exec.stderr.text.trim();
    if tail.is_empty() {
        return message;
    }
    let last: Vec<&str> = tail.lines().rev().take(3).collect();
    let last: Vec<&str> = last.into_iter().rev().collect();
    format!("{message}; stderr: {}", last.join(" / "))
}

fn usage_of(agent: &AgentReport) -> AgentUsage {
    AgentUsage {
        engine: agent.engine.clone(),
        model: agent.model.clone(),
        session_id: agent.session_id.clone(),
        input_tokens: agent.usage.input,
        output_tokens: agent.usage.output,
        cache_read_tokens: agent.usage.cache_read,
        cache_write_tokens: agent.usage.cache_write,
        cost_usd: agent.cost_usd(),
        cost_estimated: agent.reported_cost_usd.is_none() && agent.estimated_cost_usd.is_some(),
        turns: agent.turns,
        tool_calls: agent.tool_calls,
        permission_denials: agent.permission_denials.clone(),
        malformed_lines: agent.malformed_lines,
    }
}
