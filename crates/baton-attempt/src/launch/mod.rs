//! Turning a task into the command line, environment and files of one attempt, and keeping
//! what its dependents will be handed.

use baton_layout::RunDirs;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::handoff_files::{HandoffFile, HandoffFiles};
use baton_agent::EngineKind;
use baton_exec::handoff::{share_budget, truncate_utf8};
use baton_exec::{AttemptSpec, Program};
use baton_graph::template::{
    NeedContext, Quote, RunContext, TaskContext, Template, TemplateContext,
};
use baton_graph::{Action, Graph};
use baton_model::{RunId, TaskState};
use baton_redact::{Redactor, RedactorConfig, secret_env_values};

use crate::RunConfig;
pub use crate::collect::collect_output;
use crate::config::AgentConfig;
use crate::launch_error::LaunchError;
use crate::out_dir::OutDir;
use crate::recipe::shape;
pub use crate::recipe::{Continue, Launch, PreparedAgent, Recipe};

mod agent;
mod environment;
mod reviewer;

/// Stdout kept in memory per attempt, at least: what is stored as the task's output.
const MIN_OUTPUT_CAPTURE: usize = 64 * 1024;
/// How much of a planner's answer is kept: a plan of thousands of tasks fits.
pub const PLAN_ANSWER_LIMIT: usize = 8 * 1024 * 1024;
/// Tail of stderr kept per attempt.
const STDERR_CAPTURE: usize = 16 * 1024;
/// A finished task's result, held for its dependents until the last of them has started.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct HeldOutput {
    pub text: String,
    pub json: Option<serde_json::Value>,
    /// What it changed in its worktree.
    pub files_changed: Vec<String>,
}

/// How each of the run's tasks ended, if it has: the scheduler's to say (a worker's, the
/// store's). What a task's templates and handoff file say of its needs (`needs.X.status`).
pub type Ended<'a> = &'a dyn Fn(u32) -> Option<TaskState>;

/// How an attempt is to run, besides its task and number: see [`Launcher::prepare`].
pub struct Preparing<'a> {
    /// Its spend on the run's meter, and where its agent's news go.
    pub watching: &'a crate::recipe::Watching,
    /// The session (or fix round) it continues.
    pub resume: Option<&'a Continue>,
    /// Its task's worktree, when it has one.
    pub workdir: Option<&'a std::path::Path>,
    /// The engine of its task's chain it runs on (0: the task's own).
    pub engine: u32,
    pub ended: Ended<'a>,
}

/// What stays the same across a task's attempts, worked out at its first launch.
struct Prepared {
    handoff: Option<HandoffFile>,
    /// How it runs: one way for a shell task; an agent task's own engine, then each of its
    /// `fallback` engines.
    choices: Vec<Choice>,
}

/// One way to run a task: a shell command, or one engine of an agent task's chain.
struct Choice {
    program: Result<Program, Arc<LaunchError>>,
    /// What the task gets of baton's own environment.
    passed: Arc<[(OsString, OsString)]>,
    /// For an agent task: its engine, and how its prompt reaches it.
    agent: Option<Arc<PreparedAgent>>,
}

impl Choice {
    fn failed(error: Arc<LaunchError>) -> Self {
        Choice {
            program: Err(error),
            passed: Arc::new([]),
            agent: None,
        }
    }
}

/// What every task gets of baton's environment: what programs need to find themselves, their
/// home, and the user's locale and terminal. Anything else must be asked for with `pass_env`
/// (or `BATON_PASS_ENV`): a task does not see, and cannot print, what it was not given.
const ALWAYS_PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "XDG_RUNTIME_DIR",
];

/// Whether variable `name` is among `patterns` (names, or prefixes ending in `*`).
fn passes(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    })
}

pub struct Launcher {
    /// The run's graph as it is now: planners' answers grow it ([`Launcher::grow`]).
    graph: Arc<Graph>,
    run_id: RunId,
    dirs: RunDirs,
    /// Where `$BATON_OUTPUT` files are looked for (`dirs.out`, watched).
    out_dir: Arc<Mutex<OutDir>>,
    root: PathBuf,
    kill_grace: Duration,
    held: Vec<Option<HeldOutput>>,
    /// Dependents of each task that have not started yet; its held output is dropped at zero.
    readers_left: Vec<u32>,
    /// Per task launched and not finished (a few hundred bytes each: not one per task of a
    /// 100,000-task graph).
    prepared: HashMap<u32, Prepared>,
    /// `$BATON_HANDOFF_FILE`s, reused from task to task.
    handoffs: HandoffFiles,
    /// Everything a task prints, and what it writes to `$BATON_OUTPUT`, passes through it.
    redactor: Redactor,
    /// baton's own environment, read once.
    environment: Vec<(OsString, OsString)>,
    /// Passed to every task: [`ALWAYS_PASSED`] and `BATON_PASS_ENV`.
    pass_env: Vec<String>,
    /// The variables of `environment` that `pass_env` lets through: all a task gets of baton's
    /// environment unless it or its engine passes more.
    base_passed: Arc<[(OsString, OsString)]>,
    /// How agent engines are run, and what models cost.
    agents: AgentConfig,
    /// The cgroups of the run's attempts, reused from attempt to attempt.
    cgroups: baton_exec::CgroupPool,
    /// `BATON_WORKER` for every attempt, when a worker runs them.
    worker: Option<String>,
}

impl Launcher {
    pub fn new(graph: Arc<Graph>, run_id: RunId, dirs: RunDirs, config: &RunConfig) -> Self {
        let n = graph.len();
        let environment: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        let pass_env: Vec<String> = ALWAYS_PASSED
            .iter()
            .map(|s| (*s).to_owned())
            .chain(names_in("BATON_PASS_ENV"))
            .collect();
        let base_passed = environment
            .iter()
            .filter(|(name, _)| name.to_str().is_some_and(|n| passes(n, &pass_env)))
            .cloned()
            .collect();
        Self {
            cgroups: baton_exec::CgroupPool::new(run_id.as_str()),
            run_id,
            root: config.root.clone(),
            kill_grace: config.kill_grace,
            held: (0..n).map(|_| None).collect(),
            readers_left: (0..n as u32)
                .map(|i| graph.dependents(i).len() as u32)
                .collect(),
            prepared: HashMap::new(),
            handoffs: HandoffFiles::new(dirs.handoff.clone()),
            redactor: redactor_for(&graph, &config.agents, &environment),
            agents: config.agents.clone(),
            environment,
            out_dir: Arc::new(Mutex::new(OutDir::open(&dirs))),
            dirs,
            pass_env,
            base_passed,
            graph,
            worker: config.worker.clone(),
        }
    }

    /// The repository root (or the directory the run is in).
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// What `task`, ended, handed on: its output and the JSON it wrote, while held.
    pub fn held(&self, task: u32) -> Option<&HeldOutput> {
        self.held[task as usize].as_ref()
    }

    /// The run's graph grew to `graph` (a planner's answer): the new tasks' outputs are held
    /// for their dependents, and the tasks they need hold theirs for them too. Returns the
    /// tasks that ended with their output let go (every dependent had started), which the new
    /// ones need: the caller reads them back from the store. `ended`: whether a task ended
    /// (the scheduler's to say).
    pub fn grow(&mut self, graph: Arc<Graph>, ended: Ended<'_>) -> Vec<u32> {
        let old = self.held.len();
        let n = graph.len();
        self.held.resize_with(n, || None);
        self.readers_left.resize(n, 0);
        let mut lost = Vec::new();
        for t in old..n {
            self.readers_left[t] = graph.dependents(t as u32).len() as u32;
            for &need in &graph.task(t as u32).needs {
                let i = need as usize;
                if i >= old {
                    continue;
                }
                self.readers_left[i] += 1;
                if self.held[i].is_none() && ended(need).is_some() && !lost.contains(&need) {
                    lost.push(need);
                }
            }
        }
        self.graph = graph;
        lost
    }

    /// `cwd` under the root, refusing one that leads outside it through a symlink (the graph
    /// already refuses `..` and absolute paths; a link can only be seen on disk, at launch).
    fn contained(
        &self,
        base: &std::path::Path,
        cwd: &std::path::Path,
    ) -> Result<PathBuf, LaunchError> {
        let joined = base.join(cwd);
        let (Ok(real), Ok(root)) = (joined.canonicalize(), base.canonicalize()) else {
            // A missing directory is reported by the spawn, with its name.
            return Ok(joined);
        };
        if real.starts_with(&root) {
            Ok(joined)
        } else {
            Err(LaunchError::CwdEscapes {
                cwd: cwd.to_path_buf(),
                to: real,
            })
        }
    }

    /// What any process baton starts for the run gets of its environment: the allow-list
    /// and `BATON_PASS_ENV`, as every task.
    pub fn base_env(&self) -> Vec<(OsString, OsString)> {
        self.base_passed.to_vec()
    }

    /// `text` with what the run's redactor finds replaced.
    /// How long a stopped process gets between TERM and KILL.
    pub fn kill_grace(&self) -> Duration {
        self.kill_grace
    }

    /// The run's redactor, for what baton runs besides tasks (the run's checks).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn redact(&self, text: &str) -> String {
        self.redactor.redact_str(text).into_owned()
    }

    pub fn dirs(&self) -> &RunDirs {
        &self.dirs
    }

    pub fn log_path(&self, task: u32, attempt: u32) -> PathBuf {
        self.dirs.log(
            &self.graph.task(task).id,
            attempt,
            baton_layout::AttemptLog::Task,
        )
    }

    /// Attempt `attempt` of `task` on `at.engine` of its chain (0: its own, then its
    /// fallbacks), ready to start, or why it cannot be started (a template that does not
    /// render, an engine this build cannot drive).
    pub fn prepare(
        &mut self,
        task: u32,
        attempt: u32,
        at: Preparing<'_>,
    ) -> Result<Launch, Arc<LaunchError>> {
        let Preparing {
            watching,
            resume,
            workdir,
            engine,
            ended,
        } = at;
        if !self.prepared.contains_key(&task) {
            let prepared = self.prepare_first(task, ended);
            self.prepared.insert(task, prepared);
        }
        let prepared = self.prepared.get(&task).expect("just prepared");
        // Past the end of its chain, the last engine goes on.
        let choice = &prepared.choices[(engine as usize).min(prepared.choices.len() - 1)];
        let program = choice.program.clone()?;
        let agent = choice.agent.clone();
        let spec_task = self.graph.task(task);
        // A file of that name is a leftover (an earlier driver's attempt of the same number,
        // which a takeover runs again): it must not pass for this attempt's output.
        OutDir::lock(&self.out_dir).clear(&self.dirs, &spec_task.id, attempt);
        let env = self.environment_of(task, attempt, &choice.passed, prepared)?;
        let output_limit = self
            .graph
            .dependents(task)
            .iter()
            .map(|&d| self.graph.task(d).handoff_limit as usize)
            .max()
            .unwrap_or(0)
            .max(MIN_OUTPUT_CAPTURE)
            // A planner's answer is its plan, which must be whole to be read.
            .max(if spec_task.plan.is_some() {
                PLAN_ANSWER_LIMIT
            } else {
                0
            });
        let mut spec = AttemptSpec {
            program,
            // A task with a worktree works there, the repository's twin.
            cwd: match (&spec_task.cwd, workdir) {
                (Some(cwd), dir) => self.contained(dir.unwrap_or(&self.root), cwd)?,
                (None, Some(dir)) => dir.to_path_buf(),
                (None, None) => self.root.clone(),
            },
            env,
            timeout: spec_task.timeout,
            kill_grace: self.kill_grace,
            log_path: self.log_path(task, attempt),
            output_limit,
            stderr_limit: STDERR_CAPTURE,
            log_limit: spec_task.log_limit,
            redactor: Some(self.redactor.clone()),
            inherit_env: false,
            stdin: None,
            idle_timeout: None,
            finish_grace: AttemptSpec::DEFAULT_FINISH_GRACE,
            sandbox: None,
            cgroup: self.cgroups_for(task),
            shell: spec_task.shell.iter().map(Into::into).collect(),
        };
        if let Some(agent) = &agent {
            for (key, value) in &agent.env {
                spec.env.push((key.into(), value.into()));
            }
            spec.idle_timeout = agent.idle_timeout;
        }
        let own_output = self.confine(
            task,
            attempt,
            workdir,
            agent.as_ref().map(|a| a.engine.kind),
            &mut spec,
        )?;
        let fix_feedback = self.dirs.fix_feedback(&spec_task.id);
        // The checks and fix rounds start from the spec as it is before this round's part.
        // A planner's answer is checked too, and sent back while it has fix rounds.
        let checked = !spec_task.verify.is_empty()
            || !spec_task.acceptance.is_empty()
            || (spec_task.plan.is_some() && spec_task.fix_attempts > 0);
        let reviewer = (!spec_task.acceptance.is_empty()).then(|| self.reviewer_for(task));
        let recipe = checked.then(|| Recipe {
            base: spec.clone(),
            agent: agent.clone(),
            reviewer,
            fix_feedback: fix_feedback.clone(),
            watching: watching.clone(),
        });
        let watcher = shape(&mut spec, agent.as_deref(), resume, &fix_feedback, watching)?;
        Ok(Launch {
            spec,
            watcher,
            recipe,
            own_output,
            keep_out: agent.as_ref().map_or(&[], |a| a.engine.kind.own_files()),
        })
    }

    /// Puts the attempt in its write sandbox, if it gets one; then its `$BATON_OUTPUT` is in a
    /// directory of its own, returned: the only place besides its work it may write to.
    fn confine(
        &self,
        task: u32,
        attempt: u32,
        worktree: Option<&std::path::Path>,
        engine: Option<baton_agent::EngineKind>,
        spec: &mut AttemptSpec,
    ) -> Result<Option<PathBuf>, LaunchError> {
        let spec_task = self.graph.task(task);
        let place = crate::confine::Place {
            task: spec_task,
            worktree,
            root: &self.root,
            engine,
            planned_commands: self.graph.run_settings().planned_commands,
        };
        let confined = crate::confine::sandbox_for(
            &place,
            &mut spec.env,
            || self.dirs.task_tmp(&spec_task.id),
            || self.dirs.own_output_dir(&spec_task.id),
        )
        .map_err(LaunchError::Confinement)?;
        let Some((sandbox, own_dir)) = confined else {
            return Ok(None);
        };
        spec.sandbox = Some(sandbox);
        let own = own_dir.join(format!("{attempt}.json"));
        // One left by an earlier driver's attempt of the same number is not this one's.
        let _ = std::fs::remove_file(&own);
        if let Some((_, value)) = spec.env.iter_mut().find(|(key, _)| key == "BATON_OUTPUT") {
            *value = own.clone().into();
        }
        Ok(Some(own))
    }

    /// The cgroups for `task`'s attempts (named after the run, so that a takeover finds what
    /// a dead driver left), or `None` for its process group only. Every task is contained
    /// where its child can be born in its cgroup, which costs next to nothing
    /// (docs/PERFORMANCE.md); where a child has to be moved into one, which would double the
    /// spawn cost of small tasks, only agents are (an agent runs for minutes and starts
    /// servers and tools of its own) and the tasks that ask.
    fn cgroups_for(&self, task: u32) -> Option<baton_exec::CgroupPool> {
        let wanted = match self.graph.task(task).contain {
            Some(contain) => contain == baton_graph::Contain::Cgroup,
            None => self.is_agent(task) || baton_exec::cgroups_are_cheap(),
        };
        wanted.then(|| self.cgroups.clone())
    }

    /// Whether `task` is given to an agent engine.
    pub fn is_agent(&self, task: u32) -> bool {
        matches!(self.graph.task(task).action, Action::Agent { .. })
    }

    /// How a shell task runs: its `run` with its templates filled in (quoted for the shell).
    fn shell_choice(
        &self,
        task: u32,
        run: &str,
        context: &TemplateContext,
        needs_ids: &[&str],
    ) -> Choice {
        self.plain_choice(
            task,
            Template::new(run, needs_ids)
                .and_then(|t| t.render(context, Quote::Shell))
                .map_err(|e| LaunchError::Template {
                    field: "run",
                    message: e.to_string(),
                })
                .and_then(|run| {
                    if run.contains('\0') {
                        Err(LaunchError::Nul {
                            what: "`run` (with its templates filled in)".to_owned(),
                        })
                    } else {
                        Ok(Program::Shell(run))
                    }
                }),
        )
    }

    /// How an agent task runs: its own engine, then the ones that stand in for it; or its
    /// candidates, which run at once, each with a prompt file of its own.
    fn agent_choices(
        &self,
        task: u32,
        (engine, prompt, settings): (&str, &str, &baton_graph::AgentSettings),
        context: &TemplateContext,
        needs_ids: &[&str],
    ) -> Vec<Choice> {
        let spec_task = self.graph.task(task);
        let prompt = Template::new(prompt, needs_ids)
            .and_then(|t| t.render(context, Quote::None))
            .map_err(|e| {
                Arc::new(LaunchError::Template {
                    field: "prompt",
                    message: e.to_string(),
                })
            });
        // Its own engine, then the ones that stand in for it; or its candidates, which
        // run at once, each with a prompt file of its own.
        let own = baton_graph::EngineChoice {
            engine: engine.to_string(),
            model: settings.model.clone(),
        };
        let own_kind = self.agents.engine(engine).map(|e| e.kind);
        let candidates = !spec_task.candidates.is_empty();
        let chain: Vec<&baton_graph::EngineChoice> = if candidates {
            spec_task.candidates.iter().collect()
        } else {
            std::iter::once(&own).chain(&settings.fallback).collect()
        };
        chain
            .into_iter()
            .enumerate()
            .map(|(k, choice)| match &prompt {
                Ok(prompt) => {
                    let slot = match candidates {
                        true => format!("candidate-{}", k + 1),
                        false => "prompt".to_owned(),
                    };
                    let own = k == 0 && !candidates;
                    self.agent_choice(task, choice, (own, own_kind), prompt, &slot)
                }
                Err(error) => Choice::failed(Arc::clone(error)),
            })
            .collect()
    }

    fn prepare_first(&mut self, task: u32, ended: Ended<'_>) -> Prepared {
        let spec_task = self.graph.task(task);
        let mut needs_ids: Vec<&str> = spec_task
            .needs
            .iter()
            .map(|&n| self.graph.task(n).id.as_str())
            .collect();
        let mut context = self.context(task, ended);
        let mut handoff = None;
        if !spec_task.needs.is_empty() {
            /// What `$BATON_HANDOFF_FILE` holds, written straight from the template context.
            #[derive(serde::Serialize)]
            struct Body<'c> {
                needs: &'c BTreeMap<String, baton_graph::template::NeedContext>,
                schema: u32,
                task: &'c str,
            }
            let body = serde_json::to_vec(&Body {
                needs: &context.needs,
                schema: 1,
                task: spec_task.id.as_str(),
            })
            .expect("the handoff body is plain data");
            match self.handoffs.write(&body) {
                Ok(file) => handoff = Some(file),
                Err(source) => {
                    return Prepared {
                        handoff: None,
                        choices: vec![Choice::failed(Arc::new(LaunchError::File {
                            what: "handoff file in",
                            path: self.dirs.handoff.clone(),
                            source,
                        }))],
                    };
                }
            }
        }
        // A planned task's templates name its siblings as its planner wrote them (`needs.x`
        // for `plan/x`): the plan was checked so, before its ids were put under the planner.
        // The handoff file keeps the full ids.
        let siblings = sibling_names(spec_task.id.as_str(), &needs_ids);
        for (local, full) in &siblings {
            if let Some(need) = context.needs.get(*full).cloned() {
                context.needs.insert((*local).to_owned(), need);
            }
        }
        needs_ids.extend(siblings.iter().map(|(local, _)| *local));
        for &need in &spec_task.needs {
            let left = &mut self.readers_left[need as usize];
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.held[need as usize] = None;
            }
        }
        let choices = match &spec_task.action {
            Action::Shell { run } => vec![self.shell_choice(task, run, &context, &needs_ids)],
            Action::Agent {
                engine,
                prompt,
                settings,
            } => self.agent_choices(task, (engine, prompt, settings), &context, &needs_ids),
            Action::Noop => vec![self.plain_choice(task, Ok(Program::Shell(String::new())))],
        };
        Prepared { handoff, choices }
    }

    /// A shell task's one way to run: its command, and the environment it passes.
    fn plain_choice(&self, task: u32, program: Result<Program, LaunchError>) -> Choice {
        let patterns = &self.graph.task(task).pass_env;
        Choice {
            program: program.map_err(Arc::new),
            passed: self.passed_for(patterns, &[]),
            agent: None,
        }
    }

    /// What a task gets of baton's environment: the run's list alone for most tasks, filtered
    /// once for all of them.
    pub(super) fn passed_for(
        &self,
        patterns: &[String],
        removed: &[&str],
    ) -> Arc<[(OsString, OsString)]> {
        if patterns.is_empty() && removed.is_empty() {
            Arc::clone(&self.base_passed)
        } else {
            self.passed(patterns, removed).into()
        }
    }

    /// What of baton's environment a process gets: the run's list and `patterns`, without
    /// `removed`.
    pub(super) fn passed(
        &self,
        patterns: &[String],
        removed: &[&str],
    ) -> Vec<(OsString, OsString)> {
        self.environment
            .iter()
            .filter(|(name, _)| {
                name.to_str().is_some_and(|n| {
                    (passes(n, &self.pass_env) || passes(n, patterns)) && !removed.contains(&n)
                })
            })
            .cloned()
            .collect()
    }

    /// The template context of `task`: its predecessors' results, each capped so that all of
    /// them together fit the task's `handoff_limit`.
    fn context(&self, task: u32, ended: Ended<'_>) -> TemplateContext {
        let spec_task = self.graph.task(task);
        let texts: Vec<&str> = spec_task
            .needs
            .iter()
            .map(|&n| {
                self.held[n as usize]
                    .as_ref()
                    .map_or("", |h| h.text.as_str())
            })
            .collect();
        let lengths: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        let shares = share_budget(&lengths, spec_task.handoff_limit as usize);
        let mut needs = BTreeMap::new();
        for ((&need, text), share) in spec_task.needs.iter().zip(&texts).zip(shares) {
            let held = self.held[need as usize].as_ref();
            needs.insert(
                self.graph.task(need).id.to_string(),
                NeedContext {
                    output: truncate_utf8(text, share).into_owned(),
                    status: ended(need).map_or("pending", TaskState::as_str).to_owned(),
                    files_changed: held.map(|h| h.files_changed.clone()).unwrap_or_default(),
                    json: held
                        .and_then(|h| h.json.clone())
                        .unwrap_or(serde_json::Value::Null),
                },
            );
        }
        TemplateContext {
            needs,
            task: TaskContext {
                id: spec_task.id.to_string(),
                scope: spec_task.scope.clone(),
                verify: spec_task.verify.clone(),
            },
            run: RunContext {
                id: self.run_id.to_string(),
                name: self.graph.name().to_owned(),
            },
            item: spec_task.item.as_deref().cloned().unwrap_or_default(),
        }
    }

    /// Where `$BATON_OUTPUT` files appear: shared with the attempt units, which read them.
    pub fn out_dir(&self) -> Arc<Mutex<OutDir>> {
        Arc::clone(&self.out_dir)
    }

    /// Keeps a task's output for its dependents, capped at the most any of them can take.
    pub fn hold_output(&mut self, task: u32, mut output: HeldOutput) {
        let cap = self
            .graph
            .dependents(task)
            .iter()
            .map(|&d| self.graph.task(d).handoff_limit as usize)
            .max();
        match cap {
            Some(cap) if self.readers_left[task as usize] > 0 => {
                if output.text.len() > cap {
                    output.text = truncate_utf8(&output.text, cap).into_owned();
                }
                self.held[task as usize] = Some(output);
            }
            _ => self.held[task as usize] = None,
        }
    }

    /// A task that ended before a takeover: its dependents that also ended no longer need its
    /// output.
    pub fn restored(&mut self, task: u32) {
        for &need in &self.graph.task(task).needs {
            let left = &mut self.readers_left[need as usize];
            *left = left.saturating_sub(1);
        }
    }

    /// `task` ended as `state`: its handoff file is free again, and a failure's dependents
    /// (which still run under `on_failure = "continue"`) are handed an empty output.
    pub fn task_finished(&mut self, task: u32, state: TaskState) {
        if let Some(Prepared {
            handoff: Some(file),
            ..
        }) = self.prepared.remove(&task)
        {
            self.handoffs.release(file);
        }
        if state != TaskState::Succeeded {
            // Under `on_failure = "continue"` dependents still run and see the failure.
            if self.held[task as usize].is_none() && self.readers_left[task as usize] > 0 {
                self.held[task as usize] = Some(HeldOutput::default());
            }
        }
    }
}

/// The arguments that give `kind`'s CLI a schema its answer must hold to: Claude Code's
/// `--json-schema` (the schema itself), Codex's `--output-schema` (a file holding its strict
/// form, written at `file`). None for the other engines (or a file that cannot be written):
/// their final message is read as it is.
pub fn schema_args(
    kind: EngineKind,
    schema: &str,
    strict: &str,
    file: &std::path::Path,
) -> Vec<String> {
    match kind {
        EngineKind::Claude => vec!["--json-schema".to_owned(), schema.to_owned()],
        EngineKind::Codex => match baton_layout::write_private(file, strict.as_bytes()) {
            Ok(()) => vec!["--output-schema".to_owned(), file.display().to_string()],
            Err(_) => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// What baton tells an agent beside its task: where it may work and that its work is checked.
/// What baton tells every agent of a task with a scope or checks, before its prompt: the same
/// bytes for every such task, so that a provider's prompt cache serves them to all siblings
/// (what is particular to the task comes after its prompt: [`particulars`]).
pub const PREAMBLE: &str = "You are one task of a larger plan run by baton. What is \
    particular to this task (the files it may change, the checks its work must pass) is said \
    after its instructions.";

/// What is particular to `task` that its agent is told after its prompt: its scope and its
/// checks.
fn particulars(task: &baton_graph::Task) -> Option<String> {
    let mut lines = Vec::new();
    if !task.scope.is_empty() {
        lines.push(format!(
            "Change only files matching: {}. Other tasks own the rest of the repository.",
            task.scope.join(", ")
        ));
    }
    if !task.verify.is_empty() {
        lines.push(format!(
            "When you are done, baton will check your work by running: {}. Make sure they pass.",
            task.verify.join("; ")
        ));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The variable names (or `PREFIX_*`) listed in baton's environment variable `var`, separated
/// by commas or spaces: `BATON_PASS_ENV`, `BATON_SECRET_ENV`.
fn names_in(var: &str) -> impl Iterator<Item = String> {
    std::env::var(var)
        .unwrap_or_default()
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect::<Vec<_>>()
        .into_iter()
}

/// What a run of `graph` redacts, as a function of text: for what baton sends out of a run
/// after it (traces), which passes the run's redactor once more.
pub fn redaction(graph: &Graph, agents: &AgentConfig) -> impl Fn(&str) -> String + use<> {
    let environment: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let redactor = redactor_for(graph, agents, &environment);
    move |text: &str| redactor.redact_str(text).into_owned()
}

/// The run's redactor: its rules, plus the values of every variable that looks like a secret
/// or is listed in a task's `secret_env` (or `BATON_SECRET_ENV`), in baton's own environment
/// (which tasks inherit) and in the tasks' `env`. One list for the whole run: a value that is
/// secret for one task is secret in every task's output.
fn redactor_for(
    graph: &Graph,
    agents: &AgentConfig,
    environment: &[(OsString, OsString)],
) -> Redactor {
    let mut listed: Vec<String> = names_in("BATON_SECRET_ENV")
        .chain(
            graph
                .tasks()
                .iter()
                .flat_map(|t| t.secret_env.iter().cloned()),
        )
        .collect();
    // An HTTP engine's key, whatever its variable is called.
    listed.extend(agents.engines().filter_map(|e| e.key_env.clone()));
    listed.sort_unstable();
    listed.dedup();
    let mut values = secret_env_values(environment.iter().cloned(), &listed);
    for task in graph.tasks() {
        let expanded = task.env.iter().filter_map(|(key, value)| {
            crate::env_ref::expand(value, |name| std::env::var(name).ok())
                .ok()
                .map(|value| (key.clone(), value))
        });
        values.extend(secret_env_values(expanded, &listed));
    }
    values.sort_unstable();
    values.dedup();
    Redactor::new(RedactorConfig {
        secret_values: values,
    })
}

/// The names a planned task's planner gave its siblings among `needs` (`x` for `plan/x`, when
/// the task is `plan/y`), each with the full id; none that is also the id of a need.
fn sibling_names<'a>(task: &str, needs: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    let Some((planner, _)) = task.rsplit_once('/') else {
        return Vec::new();
    };
    needs
        .iter()
        .filter_map(|&full| {
            let local = full.strip_prefix(planner)?.strip_prefix('/')?;
            (!local.contains('/') && !needs.contains(&local)).then_some((local, full))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::sibling_names;

    #[test]
    fn a_planned_task_names_its_siblings_as_its_planner_wrote_them() {
        let needs = ["plan/lib/x", "base", "plan/docs", "plan/lib/x/deep"];
        assert_eq!(
            sibling_names("plan/lib/y", &needs),
            [("x", "plan/lib/x")],
            "only the planner's own tasks, one level down"
        );
        assert_eq!(sibling_names("plan/docs2", &needs), [("docs", "plan/docs")]);
        // A task of the graph file's has no planner; a need's own id is never shadowed.
        assert!(sibling_names("after", &needs).is_empty());
        assert!(sibling_names("p/a", &["p/base", "base"]).is_empty());
    }
}
