//! `baton mcp`: baton as an MCP server over stdio, for the agent in a Claude Code, Codex or
//! Gemini CLI session. Each tool is a thin face on a command of this very program, run as a
//! child process in the project it was started in: the same store, the same checks and
//! refusals, the same words in its errors. What a tool returns is bounded (tails, counts and
//! the next useful call, never whole logs): an agent's context is precious.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::commands::events::JsonEvent;
use crate::commands::records;
use crate::exit::{self, Failure};
use crate::project::Project;

/// Most of a log a tool returns.
const MAX_TAIL: usize = 16 * 1024;
/// Most events one `run_events` call returns.
const MAX_EVENTS: usize = 200;
/// Most tasks `run_status` lists one by one.
const MAX_TASKS: usize = 30;
/// Most characters of a task's output or reason `run_status` shows.
const MAX_TEXT: usize = 400;
/// How long `start_run` waits for the run to have an id.
const START_LIMIT: Duration = Duration::from_secs(30);

const INSTRUCTIONS: &str = "baton runs a graph of tasks (coding agents or shell commands) in \
parallel, each agent in a git worktree of its own, within a budget, recorded durably, and merges \
what succeeded into a result branch. Write the graph (TOML: [[task]] tables with id, prompt or \
run, needs), check it with plan_graph, show the plan to the user and ask before start_run. Then \
poll run_status (or run_events with after_seq) until the run ends, and tell the user what \
changed and how to apply it (`baton apply RUN`).";

pub(crate) fn serve() -> Result<i32, Failure> {
    let project = Project::discover()?;
    let exe = std::env::current_exe().map_err(|e| {
        Failure::Internal(anyhow::Error::new(e).context("cannot find baton itself"))
    })?;
    let server = Baton {
        exe,
        root: project.root.clone(),
        scratch: project.state_dir.join("mcp"),
        tool_router: Baton::tool_router(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Internal(e.into()))?;
    runtime.block_on(async move {
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Failure::Internal(anyhow::anyhow!("cannot start the MCP server: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| Failure::Internal(anyhow::anyhow!("the MCP server failed: {e}")))?;
        Ok(exit::SUCCESS)
    })
}

#[derive(Clone)]
struct Baton {
    /// This program: each tool runs one of its commands.
    exe: PathBuf,
    /// The project (repository root) it serves.
    root: PathBuf,
    /// Where graphs handed in as text are written (`.baton/mcp/`).
    scratch: PathBuf,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Toml,
    Json,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct GraphText {
    /// The graph file's text: TOML (`[[task]]` tables with `id`, `prompt` or `run`, `needs`),
    /// or JSON of the same shape.
    graph: String,
    /// `toml` (the default) or `json`.
    #[serde(default)]
    format: Format,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct StartRun {
    /// The graph as text (as for `plan_graph`); or name a file with `file`.
    #[serde(default)]
    graph: Option<String>,
    /// The run's name, for a graph given as text (`baton runs` lists it): a few words of
    /// what it does, like `add-login`. Default: `mcp`.
    #[serde(default)]
    name: Option<String>,
    /// `toml` (the default) or `json`, for `graph`.
    #[serde(default)]
    format: Format,
    /// A graph file in the repository, relative to its root.
    #[serde(default)]
    file: Option<String>,
    /// Most tasks at once (the graph's `[run] concurrency` otherwise).
    #[serde(default)]
    concurrency: Option<u32>,
    /// The run's hard budget in dollars (the graph's `[run] budget` otherwise).
    #[serde(default)]
    budget_usd: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct RunRef {
    /// A run id (or a unique prefix of one), or `latest`. Default: the latest run.
    #[serde(default)]
    run: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct EventsQuery {
    /// A run id (or a unique prefix of one), or `latest`.
    run: String,
    /// Only events after this sequence number (the `last_seq` of the previous call).
    #[serde(default)]
    after_seq: u64,
    /// Most events (default 50, at most 200).
    #[serde(default)]
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct LogQuery {
    /// A run id (or a unique prefix of one), or `latest`.
    run: String,
    /// The task (a run of one task needs none).
    #[serde(default)]
    task: Option<String>,
    /// Which attempt (1 for the first). Default: the latest.
    #[serde(default)]
    attempt: Option<u32>,
    /// How much of the log's end (default 4096 bytes, at most 16384).
    #[serde(default)]
    tail_bytes: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct DiffQuery {
    /// A run id (or a unique prefix of one), or `latest`.
    run: String,
    /// A task: its change. Without one, the run's merged result.
    #[serde(default)]
    task: Option<String>,
    /// How much of the patch (default 8192 bytes, at most 16384); the stat is always whole.
    #[serde(default)]
    patch_bytes: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct RetryQuery {
    /// A run id (or a unique prefix of one), or `latest`.
    run: String,
    /// Tasks to run again. Default: every task that did not succeed.
    #[serde(default)]
    tasks: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ApplyQuery {
    /// A run id (or a unique prefix of one), or `latest`.
    run: String,
    /// One commit on the current branch instead of the run's own commits merged in.
    #[serde(default)]
    squash: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct RunsQuery {
    /// Most runs, newest first (default 10, at most 50).
    #[serde(default)]
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Decision {
    /// A run id (or a unique prefix of one), or `latest`.
    run: String,
    /// The task that waits for approval.
    task: String,
    /// Why (for a rejection; kept in the run's record).
    #[serde(default)]
    reason: Option<String>,
}

#[tool_router(router = tool_router)]
impl Baton {
    /// Checks a graph without running it: every problem at once, in the words of `baton
    /// plan` (file, line, what to do), or that it is valid and how many tasks it has.
    #[tool(name = "validate_graph")]
    async fn validate_graph(
        &self,
        Parameters(text): Parameters<GraphText>,
    ) -> Result<Json<Value>, String> {
        let file = self.write_graph(&text.graph, text.format)?;
        Ok(Json(
            match self.baton(&["plan", path_arg(&file), "--json"]).await {
                Ok(plan) => {
                    let plan: Value = serde_json::from_str(&plan).unwrap_or(Value::Null);
                    json!({ "valid": true, "tasks": plan["tasks"], "notes": plan["notes"] })
                }
                Err(problems) => json!({ "valid": false, "problems": problems }),
            },
        ))
    }

    /// The plan of a graph, as `baton plan` shows it: its levels (what can run at once),
    /// critical path, scope conflicts and notes. Show it to the user before `start_run`.
    #[tool(name = "plan_graph")]
    async fn plan_graph(
        &self,
        Parameters(text): Parameters<GraphText>,
    ) -> Result<Json<Value>, String> {
        let file = self.write_graph(&text.graph, text.format)?;
        let plan = self.baton(&["plan", path_arg(&file), "--json"]).await?;
        Ok(Json(
            serde_json::from_str(&plan).map_err(|e| e.to_string())?,
        ))
    }

    /// Starts a run of a graph (text, or a file in the repository) that goes on after this
    /// call, and returns its id at once. Refuses what `baton run` refuses, in its words.
    #[tool(name = "start_run")]
    async fn start_run(
        &self,
        Parameters(start): Parameters<StartRun>,
    ) -> Result<Json<Value>, String> {
        let file = match (&start.graph, &start.file) {
            (Some(text), None) => {
                let name = start.name.as_deref().unwrap_or("mcp");
                self.write_graph_as(name, text, start.format)?
            }
            (None, Some(file)) => self.in_repo(file)?,
            _ => return Err("give the graph as `graph` (its text) or `file` (a path in the repository), one of them".to_owned()),
        };
        // Checked first, so that a graph baton refuses is refused here, with its problems.
        self.baton(&["plan", path_arg(&file)]).await?;
        let concurrency = self.within_limits(&file, start.concurrency, start.budget_usd)?;
        let mut args = vec!["run".to_owned(), file.display().to_string()];
        if let Some(n) = concurrency {
            args.extend(["--concurrency".to_owned(), n.to_string()]);
        }
        if let Some(usd) = start.budget_usd {
            args.extend(["--budget".to_owned(), usd.to_string()]);
        }
        let run = self.detach(&args).await?;
        Ok(Json(json!({
            "run": run,
            "concurrency": concurrency,
            "next": "call run_status (or run_events with after_seq) until the run ends",
        })))
    }

    /// How a run stands or ended: its state, counts, spend, the tasks that did not succeed
    /// (or all, for a small run) with why, and what to do next.
    #[tool(name = "run_status")]
    async fn run_status(&self, Parameters(at): Parameters<RunRef>) -> Result<Json<Value>, String> {
        let run = at.run.unwrap_or_else(|| "latest".to_owned());
        let status = self.baton(&["status", &run, "--json"]).await?;
        let result: Value = serde_json::from_str(&status).map_err(|e| e.to_string())?;
        Ok(Json(bounded_status(result)))
    }

    /// What happened in a run, as events (as `baton events --json` prints them), after a
    /// sequence number: poll with the `last_seq` of the previous call. Read a page at a time
    /// from the store, not the whole log at each poll.
    #[tool(name = "run_events")]
    async fn run_events(
        &self,
        Parameters(query): Parameters<EventsQuery>,
    ) -> Result<Json<Value>, String> {
        let limit = query.limit.unwrap_or(50).min(MAX_EVENTS as u32);
        let after = query.after_seq;
        let page = tokio::task::spawn_blocking(move || -> Result<Vec<Value>, String> {
            let store = records::open(None).map_err(words)?;
            let run = records::resolve(&*store, Some(&query.run)).map_err(words)?;
            // One more than asked: whether there is more.
            let events = store
                .events(&run.id, after, limit + 1)
                .map_err(|e| e.to_string())?;
            events
                .iter()
                .map(|e| serde_json::to_value(JsonEvent::of(e)).map_err(|e| e.to_string()))
                .collect()
        })
        .await
        .map_err(|e| e.to_string())??;
        let more = page.len() > limit as usize;
        let events: Vec<Value> = page.into_iter().take(limit as usize).collect();
        let last_seq = events
            .last()
            .and_then(|e| e["seq"].as_u64())
            .unwrap_or(after);
        Ok(Json(
            json!({ "events": events, "last_seq": last_seq, "more": more }),
        ))
    }

    /// The end of a task's log (its output and errors as it printed them, redacted).
    #[tool(name = "task_log")]
    async fn task_log(
        &self,
        Parameters(query): Parameters<LogQuery>,
    ) -> Result<Json<Value>, String> {
        let tail = query.tail_bytes.map_or(4096, |n| n as usize).min(MAX_TAIL);
        let mut args = vec!["logs".to_owned(), query.run.clone()];
        args.extend(query.task.clone());
        if let Some(n) = query.attempt {
            args.extend(["--attempt".to_owned(), n.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = self.baton(&args).await?;
        let start = log.len().saturating_sub(tail);
        let start = (start..log.len())
            .find(|&i| log.is_char_boundary(i))
            .unwrap_or(log.len());
        Ok(Json(json!({
            "bytes": log.len(),
            "truncated": start > 0,
            "tail": &log[start..],
        })))
    }

    /// The project's runs, newest first: id, graph, state, counts.
    #[tool(name = "list_runs")]
    async fn list_runs(
        &self,
        Parameters(query): Parameters<RunsQuery>,
    ) -> Result<Json<Value>, String> {
        let limit = query.limit.unwrap_or(10).clamp(1, 50).to_string();
        let runs = self.baton(&["runs", "--json", "--limit", &limit]).await?;
        Ok(Json(
            serde_json::from_str(&runs).map_err(|e| e.to_string())?,
        ))
    }

    /// What a run changed (its merged result) or one task changed: the files with lines added
    /// and removed, and the start of the patch.
    #[tool(name = "run_diff")]
    async fn run_diff(
        &self,
        Parameters(query): Parameters<DiffQuery>,
    ) -> Result<Json<Value>, String> {
        let limit = query.patch_bytes.map_or(8192, |n| n as usize).min(MAX_TAIL);
        let mut args = vec!["diff".to_owned(), query.run.clone()];
        args.extend(query.task.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stat = self.baton(&[&args[..], &["--stat"]].concat()).await?;
        let patch = self.baton(&args).await?;
        let end = (0..=limit.min(patch.len()))
            .rev()
            .find(|&i| patch.is_char_boundary(i))
            .unwrap_or(0);
        Ok(Json(json!({
            "stat": stat.trim_end(),
            "patch": &patch[..end],
            "patch_bytes": patch.len(),
            "truncated": end < patch.len(),
            "next": "baton apply RUN brings the result into the working tree (the apply tool, when the user asks)",
        })))
    }

    /// Runs a run's failed tasks again (or the ones named), as new attempts of the same run,
    /// driven by a process of its own; returns at once.
    #[tool(name = "retry")]
    async fn retry(
        &self,
        Parameters(query): Parameters<RetryQuery>,
    ) -> Result<Json<Value>, String> {
        let mut args = vec!["retry".to_owned(), query.run.clone()];
        args.extend(query.tasks.iter().cloned());
        let run = self.detach(&args).await?;
        Ok(Json(
            json!({ "run": run, "next": "call run_status until the run ends" }),
        ))
    }

    /// Goes on with a run whose driver died (or that waits), driven by a process of its own;
    /// returns at once.
    #[tool(name = "resume")]
    async fn resume(&self, Parameters(at): Parameters<RunRef>) -> Result<Json<Value>, String> {
        let run = at.run.unwrap_or_else(|| "latest".to_owned());
        let run = self.detach(&["resume".to_owned(), run]).await?;
        Ok(Json(
            json!({ "run": run, "next": "call run_status until the run ends" }),
        ))
    }

    /// Brings a finished run's result into the working tree (its commits merged into the
    /// current branch, or one commit with `squash`), with the refusals of `baton apply` (a
    /// working tree with changes is never touched). Only when the user asks.
    #[tool(name = "apply")]
    async fn apply(
        &self,
        Parameters(query): Parameters<ApplyQuery>,
    ) -> Result<Json<Value>, String> {
        let mut args = vec!["apply", query.run.as_str()];
        if query.squash {
            args.push("--squash");
        }
        let said = self.baton(&args).await?;
        Ok(Json(json!({ "said": said.trim() })))
    }

    /// Cancels a run: what runs is stopped, nothing more starts.
    #[tool(name = "cancel_run")]
    async fn cancel_run(&self, Parameters(at): Parameters<RunRef>) -> Result<Json<Value>, String> {
        let run = at.run.unwrap_or_else(|| "latest".to_owned());
        let said = self.baton(&["cancel", &run]).await?;
        Ok(Json(json!({ "said": said.trim() })))
    }

    /// Approves a task that waits for a person (`approval = true`): it starts.
    #[tool(name = "approve")]
    async fn approve(
        &self,
        Parameters(decision): Parameters<Decision>,
    ) -> Result<Json<Value>, String> {
        let said = self
            .baton(&["approve", &decision.run, &decision.task])
            .await?;
        Ok(Json(json!({ "said": said.trim() })))
    }

    /// Rejects a task that waits for a person: it fails, with the reason.
    #[tool(name = "reject")]
    async fn reject(
        &self,
        Parameters(decision): Parameters<Decision>,
    ) -> Result<Json<Value>, String> {
        let mut args = vec!["reject", decision.run.as_str(), decision.task.as_str()];
        if let Some(reason) = &decision.reason {
            args.extend(["--reason", reason.as_str()]);
        }
        let said = self.baton(&args).await?;
        Ok(Json(json!({ "said": said.trim() })))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Baton {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("baton", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

impl Baton {
    /// What `baton ARGS` printed on stdout; its error output (its words) when it failed.
    /// A command that printed a JSON document and exited non-zero (a run that failed) gives
    /// the document.
    async fn baton(&self, args: &[&str]) -> Result<String, String> {
        let out = tokio::process::Command::new(&self.exe)
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .env("NO_COLOR", "1")
            .output()
            .await
            .map_err(|e| format!("cannot run baton {}: {e}", args.join(" ")))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() && stdout.trim().is_empty() {
            // What it did, said on its standard error (`baton apply`, `baton cancel`).
            return Ok(stderr.into_owned());
        }
        if out.status.success() || serde_json::from_str::<Value>(&stdout).is_ok() {
            return Ok(stdout);
        }
        Err(match stderr.trim() {
            "" => stdout.trim().to_owned(),
            words => words.to_owned(),
        })
    }

    /// Starts `baton ARGS` as a process of its own that outlives this server (its own
    /// process group, its output to a file under `.baton/mcp/`), and returns the run's id
    /// once it has one; what it said, if it ended first.
    async fn detach(&self, args: &[String]) -> Result<String, String> {
        std::fs::create_dir_all(&self.scratch).map_err(|e| e.to_string())?;
        let log_path = self
            .scratch
            .join(format!("run-{}.log", baton_model::now_ms()));
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut command = std::process::Command::new(&self.exe);
        command
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .env("NO_COLOR", "1");
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start baton run: {e}"))?;
        let deadline = tokio::time::Instant::now() + START_LIMIT;
        let mut named: Option<String> = None;
        loop {
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            named = named.or_else(|| run_id_in(&said));
            // Named is not yet taken: a retried run still reads `failed` until its new driver
            // has recorded that it goes on, and an agent told "poll until it ends" would stop
            // at once. Returned once the run is running under this child, or the child is done.
            if let Some(run) = &named {
                let (run, pid) = (run.clone(), child.id());
                let taken = tokio::task::spawn_blocking(move || driven_by(&run, pid))
                    .await
                    .unwrap_or(false);
                if taken || matches!(child.try_wait(), Ok(Some(_))) {
                    // Reaped when it ends, so that it leaves no zombie while this server lives.
                    std::thread::spawn(move || child.wait());
                    return Ok(named.unwrap_or_default());
                }
            } else if let Ok(Some(_)) = child.try_wait() {
                return Err(said.trim().to_owned());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "baton run said no run id within {START_LIMIT:?}: {}",
                    said.trim()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Refuses a graph over what the repository's `baton.toml` lets an agent's graph ask for
    /// (`[mcp]`: its budget, its tasks); the concurrency to run it with: the one asked (or the
    /// graph's), lowered to `[mcp] max_concurrency`. `None`: the graph's own, unchanged.
    fn within_limits(
        &self,
        file: &Path,
        asked: Option<u32>,
        budget_usd: Option<f64>,
    ) -> Result<Option<u32>, String> {
        let limits = baton_runner::AgentConfig::load(&self.root)
            .map_err(|e| e.to_string())?
            .mcp;
        let graph = baton_graph::load(file).map_err(|e| e.to_string())?;
        let run = graph.run_settings();
        let mut problems = Vec::new();
        if let Some(max) = limits.max_budget_usd {
            match budget_usd.or(run.budget.usd) {
                None => problems.push(format!(
                    "the graph sets no budget; set `[run] budget = {{ usd = N }}` (or `budget_usd`) with \
                     N at most {max} (`[mcp] max_budget_usd` in baton.toml)"
                )),
                Some(usd) if usd > max => problems.push(format!(
                    "the run's budget would be ${usd}; at most ${max} is allowed here (`[mcp] \
                     max_budget_usd` in baton.toml)"
                )),
                Some(_) => {}
            }
        }
        if let Some(max) = limits.max_tasks {
            if graph.len() > max as usize {
                problems.push(format!(
                    "the graph has {} tasks; at most {max} are allowed here (`[mcp] max_tasks` in \
                     baton.toml)",
                    graph.len()
                ));
            }
            let grows = graph
                .tasks()
                .iter()
                .any(|t| t.plan.is_some() || t.for_each.is_some());
            let over_the_checkout = !run.max_tasks_set
                && graph
                    .tasks()
                    .iter()
                    .any(|t| matches!(t.for_each.as_deref(), Some(baton_graph::ForEach::Glob(_))));
            if over_the_checkout {
                // Its paths count as the file's own tasks under the default `max_tasks`
                // (`Graph::room`): however many the glob matches.
                problems.push(format!(
                    "a `for_each` glob fans out over every path it matches; set `[run] \
                     max_tasks` at most {max} (`[mcp] max_tasks` in baton.toml)"
                ));
            } else if grows && run.max_tasks > max {
                problems.push(format!(
                    "its planners and fan-outs may grow it to {} tasks; set `[run] max_tasks` \
                     at most {max} (`[mcp] max_tasks` in baton.toml)",
                    run.max_tasks
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("\n"));
        }
        Ok(match limits.max_concurrency {
            Some(max) => Some(asked.unwrap_or(run.concurrency).min(max)),
            None => asked,
        })
    }

    /// Writes a graph handed in as text under `.baton/mcp/`, for baton to read.
    fn write_graph(&self, text: &str, format: Format) -> Result<PathBuf, String> {
        self.write_graph_as("graph", text, format)
    }

    /// Writes a graph handed in as text as `.baton/mcp/STAMP/NAME.toml` (or `.json`): its
    /// file's name is the run's name.
    fn write_graph_as(&self, name: &str, text: &str, format: Format) -> Result<PathBuf, String> {
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .take(60)
            .collect();
        let extension = match format {
            Format::Toml => "toml",
            Format::Json => "json",
        };
        // Calls of one server are numbered; servers apart by their pid.
        static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.scratch.join(format!(
            "{}-{}-{n}",
            baton_model::now_ms(),
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let path = dir.join(format!("{name}.{extension}"));
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        Ok(path)
    }

    /// `file`, a path in the repository: refused outside it.
    fn in_repo(&self, file: &str) -> Result<PathBuf, String> {
        let path = self.root.join(file);
        let real = path
            .canonicalize()
            .map_err(|e| format!("cannot read {file}: {e}"))?;
        let root = self.root.canonicalize().map_err(|e| e.to_string())?;
        if !real.starts_with(&root) {
            return Err(format!(
                "{file} is outside the repository ({}): name a graph file in it",
                root.display()
            ));
        }
        Ok(real)
    }
}

/// A command's failure in its own words, for a tool's error.
fn words(failure: Failure) -> String {
    match failure {
        Failure::BadInput(words) => words,
        Failure::Internal(error) => format!("{error:#}"),
        Failure::Reported(code) => format!("failed (exit code {code})"),
        Failure::Closed => "its output was closed".to_owned(),
    }
}

/// The run id in `baton: run ID of …`, the first line `baton run` prints.
/// Whether run `run` is recorded running, driven by process `pid`.
fn driven_by(run: &str, pid: u32) -> bool {
    let Ok(store) = records::open(None) else {
        return false;
    };
    let Ok(id) = baton_model::RunId::new(run) else {
        return false;
    };
    store.run(&id).ok().flatten().is_some_and(|record| {
        record.status == baton_model::RunState::Running
            && record.driver.is_some_and(|driver| driver.pid == pid)
    })
}

fn run_id_in(said: &str) -> Option<String> {
    said.lines().find_map(|line| {
        let rest = line.strip_prefix("baton: run ")?;
        let (id, rest) = rest.split_once(' ')?;
        rest.starts_with("of ").then(|| id.to_owned())
    })
}

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

/// A run's status document cut to what an agent needs: the run, its counts and next steps,
/// and the tasks that did not succeed (all, for a small run), each with its words cut short.
fn bounded_status(mut result: Value) -> Value {
    let tasks = result["tasks"].as_array().cloned().unwrap_or_default();
    let total = tasks.len();
    let listed: Vec<Value> = tasks
        .into_iter()
        .filter(|t| total <= MAX_TASKS || t["state"] != "succeeded")
        .take(MAX_TASKS)
        .map(|t| {
            let mut short = json!({
                "id": t["id"],
                "state": t["state"],
                "attempts": t["attempts"],
                "duration_ms": t["duration_ms"],
            });
            for key in ["reason", "output"] {
                if let Some(text) = t[key].as_str().filter(|s| !s.is_empty()) {
                    short[key] = Value::from(cut(text, MAX_TEXT));
                }
            }
            short
        })
        .collect();
    let shown = listed.len();
    result["tasks"] = Value::from(listed);
    if shown < total {
        result["tasks_not_shown"] = Value::from(total - shown);
    }
    result
}

/// `text` cut to its first `max` characters, with `…` where it was cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}…")
}
