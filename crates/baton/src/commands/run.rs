use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use baton_graph::{Graph, Overrides};
use baton_model::{RunId, RunState, TaskId, parse_duration};
use baton_report::{LiveReporter, NullReporter, PlainReporter, Reporter, summary};
use baton_runner::{AgentConfig, BudgetChange, RunConfig, RunError, StopRequest, Takeover};
use baton_store::{Store, StoreError};
use tokio::sync::mpsc;

use super::load::{load_graph, refuse_if_any};
use super::records;
use crate::cli::{ApproveArgs, DriveArgs, RejectArgs, ResumeArgs, RetryArgs, RunArgs};
use crate::exit::{self, Failure};
use crate::out;
use crate::project::Project;

/// What to drive.
pub(super) enum Job {
    New(Box<Graph>),
    Takeover(RunId, Takeover),
}

pub(super) fn run(args: RunArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let timeout = args
        .timeout
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| Failure::BadInput(format!("--timeout: {e}")))?;
    if args.concurrency == Some(0) {
        return Err(Failure::BadInput("--concurrency must be at least 1".into()));
    }
    if let Some(usd) = args.budget
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(Failure::BadInput(format!(
            "--budget {usd}: a budget is a number of dollars above 0, like 2.50"
        )));
    }
    kill_grace(&args.drive)?;

    let mut graph = load_graph(&args.file)?;
    graph.apply_overrides(&Overrides {
        concurrency: args.concurrency,
        budget_usd: args.budget,
        retries: args.retries,
        timeout,
    });

    if args.dry_run {
        return super::plan::print_plan(&graph, args.drive.json);
    }
    check_env(&graph)?;
    if args.detach {
        return detach(&graph, &args.drive, store_url);
    }
    drive(Job::New(Box::new(graph)), &args.drive, store_url)
}

/// `baton run --detach`: the run is recorded queued for a worker, its id printed (with what
/// to type to follow it on stderr).
fn detach(graph: &Graph, args: &DriveArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let project = Project::of_graph(graph.source())?;
    check_confinement(graph)?;
    check_worktrees(graph, &project.root)?;
    refuse_if_any(
        graph,
        &baton_runner::check_on_workers(graph),
        "remove their `runs_on`, or run the graph on one machine (without --detach)",
    )?;
    let store = records::postgres_for(&project, store_url, "`baton run --detach`")?;
    // The repository and the commit it starts from go with it: a worker elsewhere starts
    // from that commit, and one in another repository refuses the run (unless it has a
    // `remote`) instead of running it on its own HEAD.
    let mut graph = graph.clone();
    if let Some(origin) = baton_runner::origin_of(&graph, &project.root) {
        graph.submitted_from(origin);
    }
    let run = baton_runner::submit(&graph, &*store).map_err(|e| Failure::Internal(e.into()))?;
    let mut out = out::Stdout::new(format!("the id of the submitted run {run}"));
    if args.json {
        out.json(&serde_json::json!({ "run": run.as_str(), "state": "queued" }))?;
    } else {
        out.line(run.as_str())?;
    }
    out::err(&format!(
        "baton: submitted run {run}: a `baton worker` on this store starts it; \
         `baton watch {run}` follows it, `baton workers` lists the workers"
    ));
    Ok(exit::SUCCESS)
}

/// `--raise-budget USD`, checked.
fn raised_budget(usd: Option<f64>) -> Result<Option<BudgetChange>, Failure> {
    match usd {
        Some(usd) if usd.is_finite() && usd >= 0.0 => Ok(Some(BudgetChange::RaiseUsd(usd))),
        Some(usd) => Err(Failure::BadInput(format!(
            "--raise-budget {usd}: a budget is an amount of dollars, at least 0"
        ))),
        None => Ok(None),
    }
}

pub(super) fn resume(args: ResumeArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let store = records::open(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let budget = raised_budget(args.raise_budget)?;
    let reload = reload(&*store, &run, args.reload, "resume")?;
    let how = Takeover::Resume {
        charge_retries: args.charge_retries,
        budget,
        reload,
        by_worker: None,
    };
    drive(Job::Takeover(run.id, how), &args.drive, store_url)
}

pub(super) fn approve(args: ApproveArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    if let Some(task) = &args.task {
        return decide(&args.run, task, true, None, store_url);
    }
    let run = records::resolve(&*records::open(store_url)?, Some(&args.run))?;
    if records::effective_state(&run) != RunState::Waiting {
        return Err(Failure::BadInput(format!(
            "run {} is {}, not waiting for approval",
            run.id,
            records::effective_state(&run)
        )));
    }
    let how = Takeover::Resume {
        charge_retries: false,
        budget: Some(BudgetChange::Approve),
        reload: None,
        by_worker: None,
    };
    drive(Job::Takeover(run.id, how), &args.drive, store_url)
}

pub(super) fn retry(args: RetryArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let store = records::open(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let tasks = args
        .tasks
        .iter()
        .map(|t| TaskId::new(t.clone()).map_err(|e| Failure::BadInput(format!("`{t}`: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let budget = raised_budget(args.raise_budget)?;
    let reload = reload(&*store, &run, args.reload, "retry")?;
    drop(store);
    drive(
        Job::Takeover(
            run.id,
            Takeover::Retry {
                tasks,
                budget,
                reload,
            },
        ),
        &args.drive,
        store_url,
    )
}

/// What `baton retry` and `resume` make of the run's graph file: changed since the run
/// recorded it, it is said in one line, and with `--reload` (`asked`) it defines the tasks
/// from here on; a file that cannot stand for the run's graph is refused, saying why.
fn reload(
    store: &dyn Store,
    run: &baton_store::RunRecord,
    asked: bool,
    verb: &str,
) -> Result<Option<baton_runner::Reload>, Failure> {
    let Some(path) = graph_file_of(run) else {
        if asked {
            return Err(Failure::BadInput(format!(
                "--reload: run {}'s graph file `{}` is not there any more",
                run.id, run.graph_path
            )));
        }
        return Ok(None);
    };
    let path = path.as_path();
    let file = if asked {
        load_graph(path)?
    } else {
        // Only to tell: a file that does not load now is not this command's business.
        match baton_graph::load(path) {
            Ok(graph) => graph,
            Err(_) => {
                out::err(&format!(
                    "baton: {} changed since run {} started and does not load now; this {verb} \
                     runs the tasks as the run recorded them",
                    run.graph_path, run.id
                ));
                return Ok(None);
            }
        }
    };
    let changes = baton_runner::compare_with_file(store, &run.id, &file)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    if !changes.any() {
        return Ok(None);
    }
    let named = if changes.changed.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = changes.changed.iter().map(|t| format!("`{t}`")).collect();
        format!(" (tasks {})", names.join(", "))
    };
    if !asked {
        out::err(&format!(
            "baton: {} changed since run {} started{named}; this {verb} runs the tasks as the \
             run recorded them: `baton {verb} {} --reload` takes the changes",
            run.graph_path, run.id, run.id
        ));
        return Ok(None);
    }
    if !changes.refused.is_empty() {
        return Err(Failure::BadInput(format!(
            "--reload: {} no longer has run {}'s tasks: {}; `baton run {}` runs it afresh",
            run.graph_path,
            run.id,
            changes.refused.join("; "),
            run.graph_path
        )));
    }
    out::err(&format!(
        "baton: {verb} of run {} takes {} as it is now{named}",
        run.id, run.graph_path
    ));
    Ok(Some(baton_runner::Reload {
        graph: Box::new(file),
        changed: changes.changed,
    }))
}

fn kill_grace(args: &DriveArgs) -> Result<Duration, Failure> {
    parse_duration(&args.kill_grace).map_err(|e| Failure::BadInput(format!("--kill-grace: {e}")))
}

/// Drives a run to its end in this process, prints the result and maps it to an exit code.
pub(super) fn drive(job: Job, args: &DriveArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    match execute(job, args, store_url)? {
        Driven::Done(mut result) => {
            suggest_reload(&mut result, store_url);
            print_result(&result, args)
        }
        Driven::Nothing(code) => Ok(code),
    }
}

/// A run whose next step is `baton retry RUN` while its graph file has changed since it
/// recorded it: the retry that takes the fix is `--reload`'s (else "fix the file, retry"
/// would run the old command for ever).
fn suggest_reload(result: &mut baton_report::RunResult, store_url: Option<&str>) {
    let plain = format!("baton retry {}", result.run.id);
    let Some(at) = result.next.iter().position(|n| *n == plain) else {
        return;
    };
    let Ok(store) = records::open(store_url) else {
        return;
    };
    let Ok(id) = RunId::new(&result.run.id) else {
        return;
    };
    let Ok(Some(run)) = store.run(&id) else {
        return;
    };
    let changed = graph_file_of(&run)
        .and_then(|path| baton_graph::load(&path).ok())
        .and_then(|file| baton_runner::compare_with_file(&*store, &run.id, &file).ok())
        .is_some_and(|changes| changes.any() && changes.refused.is_empty());
    if changed {
        result.next[at] = format!("{plain} --reload");
    }
}

/// Where a run's graph file is now: as it was named, from here or from the project's root.
fn graph_file_of(run: &baton_store::RunRecord) -> Option<std::path::PathBuf> {
    let named = std::path::Path::new(&run.graph_path);
    if named.is_file() {
        return Some(named.to_path_buf());
    }
    let rooted = Project::discover().ok()?.root.join(named);
    rooted.is_file().then_some(rooted)
}

/// A job driven to its end, or one there was nothing to drive for.
pub(super) enum Driven {
    Done(Box<baton_report::RunResult>),
    Nothing(i32),
}

/// The exit code of a run that ended as `result` did.
pub(super) fn exit_code(result: &baton_report::RunResult) -> i32 {
    match result.run.state {
        RunState::Succeeded | RunState::SucceededWithWarnings => exit::SUCCESS,
        RunState::Cancelled | RunState::Interrupted => exit::INTERRUPTED,
        RunState::Waiting => exit::WAITING,
        _ => exit::RUN_FAILED,
    }
}

/// Prints the result of a run as `args` ask (the summary, one line, or JSON) and returns the
/// run's exit code.
pub(super) fn print_result(
    result: &baton_report::RunResult,
    args: &DriveArgs,
) -> Result<i32, Failure> {
    let code = exit_code(result);
    let mut out = out::Stdout::new(format!(
        "the result of run {} (it is recorded: `baton status {}` shows it)",
        result.run.id, result.run.id
    ));
    let printed = if args.json {
        out.json(result)
    } else if args.quiet {
        out.line(&summary::verdict(result))
    } else {
        out.text(&summary::render_to_fit(result, summary::stdout_width()))
    };
    match printed {
        // The run happened whether or not its reader stayed to the end: its exit code says how
        // it ended.
        Ok(()) | Err(Failure::Closed) => Ok(code),
        Err(err) => Err(err),
    }
}

/// Drives a run to its end in this process.
pub(super) fn execute(
    job: Job,
    args: &DriveArgs,
    store_url: Option<&str>,
) -> Result<Driven, Failure> {
    let kill_grace = kill_grace(args)?;
    let exporter = baton_otlp::Exporter::configured(args.otlp.as_deref())
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    // A new run belongs to its graph file's project; a run taken over to the one it is in.
    let project = match &job {
        Job::New(graph) => Project::of_graph(graph.source())?,
        Job::Takeover(..) => Project::discover()?,
    };
    let store_at = project.store_at(store_url).map_err(Failure::BadInput)?;
    let agents = AgentConfig::load(&project.root).map_err(|e| Failure::BadInput(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Before anything is created: a refused run leaves no trace.
    if let Job::New(graph) = &job {
        check_engines(graph, &agents, &runtime)?;
        check_confinement(graph)?;
        check_worktrees(graph, &project.root)?;
    }
    project.prepare_state_dir()?;
    let store = records::open_for_writing(&store_at)?;
    let store = store.as_ref();
    if let Job::Takeover(run, _) = &job {
        check_stored(store, run, &agents, &runtime)?;
    }
    let (stop_tx, stop_rx) = mpsc::unbounded_channel();
    let mut notify = agents.notify.clone();
    match args.notify.as_deref() {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            notify.webhook = Some(url.to_owned());
        }
        Some(command) => notify.command = Some(command.to_owned()),
        None => {}
    }
    let mut reporter = crate::notify::Notifying::around(reporter(args), notify);
    let agents_for_trace = exporter.as_ref().map(|_| agents.clone());
    let config = RunConfig {
        root: project.root.clone(),
        state_dir: project.state_dir.clone(),
        kill_grace,
        seed: fastrand_seed(),
        agents,
        worker: None,
    };
    let outcome = runtime.block_on(async {
        forward_signals(stop_tx)?;
        let result = match job {
            Job::New(graph) => {
                baton_runner::run(*graph, store, reporter.as_mut(), config, stop_rx).await
            }
            Job::Takeover(run, how) => {
                baton_runner::resume(&run, how, store, reporter.as_mut(), config, stop_rx).await
            }
        };
        anyhow::Ok(result)
    })?;
    let result = match outcome {
        Ok(result) => result,
        // Asked to do nothing, it does nothing: not an error, and nothing is recorded.
        Err(RunError::Takeover(err @ baton_runner::TakeoverError::NothingToRetry(_))) => {
            out::line("the answer", &err.to_string())?;
            return Ok(Driven::Nothing(exit::SUCCESS));
        }
        Err(RunError::Takeover(err)) => return Err(Failure::BadInput(err.to_string())),
        Err(RunError::Workspace(err)) => return Err(Failure::BadInput(err)),
        Err(RunError::Store(StoreError::RunHeld { run, pid, host, .. })) => {
            return Err(Failure::BadInput(format!(
                "run {run} is being driven by process {pid} on {host}; \
                 wait for it to finish, or stop it with `baton cancel {run}`"
            )));
        }
        Err(err) => return Err(Failure::Internal(err.into())),
    };

    if let (Some(exporter), Some(agents)) = (&exporter, &agents_for_trace) {
        export_trace(exporter, store, &project, &result, agents);
    }

    // Default retention, after the run so that it never delays one: keeps `.baton/` bounded.
    if let Err(err) = super::prune::apply(
        store,
        &project.state_dir,
        &super::prune::Policy::default_retention(),
        false,
    ) {
        out::err(&format!(
            "baton: warning: could not prune old runs: {}",
            describe(&err)
        ));
    }

    Ok(Driven::Done(Box::new(result)))
}

fn reporter(args: &DriveArgs) -> Box<dyn Reporter> {
    let tty = std::io::stderr().is_terminal();
    if args.quiet || (args.json && !tty) {
        Box::new(NullReporter)
    } else if tty {
        Box::new(LiveReporter::new())
    } else {
        Box::new(PlainReporter::new(std::io::stderr()))
    }
}

/// Sends the run's trace; a collector that cannot take it is a warning, never the run's failure.
fn export_trace(
    exporter: &baton_otlp::Exporter,
    store: &dyn Store,
    project: &Project,
    result: &baton_report::RunResult,
    agents: &AgentConfig,
) {
    let sent = (|| -> anyhow::Result<usize> {
        let run = RunId::new(result.run.id.clone())?;
        let record = store
            .run(&run)?
            .with_context(|| format!("run {run} is not recorded"))?;
        let gathered = baton_view::Gathered::of(
            store,
            &project.state_dir,
            &record,
            records::effective_state(&record),
        )
        .context("cannot read the run back")?;
        let graph = gathered
            .recorded
            .as_ref()
            .context("the run's graph cannot be read back")?;
        let redact = baton_runner::redaction(graph, agents);
        Ok(exporter.export(&gathered, &redact)?)
    })();
    match sent {
        Ok(spans) => out::err(&format!(
            "baton: sent the run's trace ({spans} spans) to {}",
            exporter.url
        )),
        Err(err) => out::err(&format!(
            "baton: warning: could not export the run's trace: {err:#}"
        )),
    }
}

/// `${VAR}` in tasks' `env` must be settable before anything runs.
fn check_env(graph: &Graph) -> Result<(), Failure> {
    let problems = baton_runner::env_ref::check_graph(graph, |name| std::env::var(name).ok());
    refuse_if_any(
        graph,
        &problems,
        "set them, or write `$${` for a literal `${`",
    )
}

/// Every agent engine the graph uses must be installed and recent enough: a missing CLI is
/// named before anything runs, not found task by task.
fn check_engines(
    graph: &Graph,
    agents: &AgentConfig,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), Failure> {
    let problems = match runtime.block_on(baton_runner::check_engines(graph, agents)) {
        Ok(notes) => {
            for note in notes {
                out::err(&format!("baton: note: {note}"));
            }
            return Ok(());
        }
        Err(problems) => problems,
    };
    refuse_if_any(graph, &problems, "see `baton doctor`")
}

/// A task that requires a write sandbox refuses the run where the kernel cannot give one;
/// where tasks would merely be confined, the run goes on and says so here, once, on stderr
/// (never on stdout, which `--json` keeps for the result).
fn check_confinement(graph: &Graph) -> Result<(), Failure> {
    if let Some(note) = baton_runner::containment_note(graph) {
        out::err(&format!("baton: note: {note}"));
    }
    match baton_runner::check_confinement(graph) {
        Ok(None) => Ok(()),
        Ok(Some(note)) => {
            out::err(&format!("baton: note: {note}"));
            Ok(())
        }
        Err(problems) => refuse_if_any(
            graph,
            &problems,
            "set `confine = \"workspace\"` to run them unconfined",
        ),
    }
}

/// A worktree a task asked for that cannot be made (no repository, no commit) refuses the
/// run; agent tasks that would have one by default go on without, saying so on stderr.
fn check_worktrees(graph: &Graph, root: &std::path::Path) -> Result<(), Failure> {
    match baton_runner::check_worktrees(graph, root) {
        Ok(None) => Ok(()),
        Ok(Some(note)) => {
            out::err(&format!("baton: note: {note}"));
            Ok(())
        }
        Err(problems) => refuse_if_any(graph, &problems, "nothing was run"),
    }
}

/// What a takeover re-checks of the stored graph: the environment and engines may have
/// changed since the run began.
fn check_stored(
    store: &dyn Store,
    run: &RunId,
    agents: &AgentConfig,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), Failure> {
    match baton_view::recorded_graph(store, run) {
        Ok(graph) => {
            check_env(&graph)?;
            check_engines(&graph, agents, runtime)?;
            check_confinement(&graph)
        }
        // The takeover itself reports an unreadable graph.
        Err(_) => Ok(()),
    }
}

/// Ctrl-C, SIGTERM and SIGHUP stop the run: the first gracefully, any further one at once.
pub(super) fn forward_signals(tx: mpsc::UnboundedSender<StopRequest>) -> anyhow::Result<()> {
    forward_signals_saying(
        tx,
        Some("baton: stopping: terminating running tasks (again to kill them at once)"),
    )
}

/// [`forward_signals`], saying `first` (if given) at the first signal.
pub(super) fn forward_signals_saying(
    tx: mpsc::UnboundedSender<StopRequest>,
    first: Option<&'static str>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    tokio::spawn(async move {
        let mut received = 0;
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            received += 1;
            let request = if received == 1 {
                if let Some(first) = first {
                    out::err(first);
                }
                StopRequest::Cancel
            } else {
                StopRequest::Kill
            };
            if tx.send(request).is_err() {
                break;
            }
        }
    });
    Ok(())
}

pub(super) fn fastrand_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos() as u64;
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

fn describe(failure: &Failure) -> String {
    match failure {
        Failure::Reported(code) => format!("exit {code}"),
        Failure::Closed => "standard output was closed".to_owned(),
        Failure::BadInput(message) => message.clone(),
        Failure::Internal(err) => format!("{err:#}"),
    }
}

pub(super) fn reject(args: RejectArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    decide(
        &args.run,
        &args.task,
        false,
        args.reason.as_deref(),
        store_url,
    )
}

/// Records a person's decision about a task waiting for approval; the process driving the run
/// picks it up.
fn decide(
    run: &str,
    task: &str,
    approved: bool,
    reason: Option<&str>,
    store_url: Option<&str>,
) -> Result<i32, Failure> {
    // Writing: the store opened for writing (its IMMEDIATE transactions wait for the
    // driver's, briefly), not the readers' read-only one.
    let (project, _) = records::open_with_project(store_url)?;
    let at = project.store_at(store_url).map_err(Failure::BadInput)?;
    let store = records::open_for_writing(&at)?;
    let run = records::resolve(store.as_ref(), Some(run))?;
    let task_id = TaskId::new(task.to_owned())
        .map_err(|e| Failure::BadInput(format!("`{task}` is not a task id: {e}")))?;
    let Some(record) = store
        .tasks(&run.id)?
        .into_iter()
        .find(|t| t.task == task_id)
    else {
        return Err(Failure::BadInput(format!(
            "run {} has no task `{task}`; `baton status {}` lists its tasks",
            run.id, run.id
        )));
    };
    let asks = baton_view::recorded_graph(store.as_ref(), &run.id)
        .ok()
        .and_then(|graph| graph.index_of(task).map(|i| graph.task(i).approval))
        .unwrap_or(false);
    // A task whose reviewer left its work to a person waits for the same decision.
    let reviewed = record.status == baton_model::TaskState::NeedsHuman
        && store
            .attempts(&run.id, &task_id)?
            .last()
            .is_some_and(|a| matches!(&a.outcome, Some(baton_model::Outcome::Reviewed { verdict }) if verdict.asks_a_person()));
    if !asks && !reviewed {
        return Err(Failure::BadInput(format!(
            "task `{task}` of run {} does not wait for approval (it has no `approval = true`, \
             and no reviewer left its work to a person)",
            run.id
        )));
    }
    if record.status.is_terminal() && !reviewed {
        return Err(Failure::BadInput(format!(
            "task `{task}` of run {} has already ended ({})",
            run.id, record.status
        )));
    }
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    match store.decide(&run.id, &task_id, approved, reason, at_ms)? {
        Ok(()) => {}
        Err(earlier) => {
            return Err(Failure::BadInput(format!(
                "task `{task}` of run {} was already {}",
                run.id,
                if earlier.approved {
                    "approved"
                } else {
                    "rejected"
                }
            )));
        }
    }
    let verb = if approved { "approved" } else { "rejected" };
    let line = match records::effective_state(&run) {
        RunState::Running => format!("baton: {verb} `{task}`; the run driving it goes on"),
        _ => format!(
            "baton: {verb} `{task}`; the run is not being driven: `baton resume {}` goes on",
            run.id
        ),
    };
    out::line("the decision", &line)?;
    Ok(exit::SUCCESS)
}
