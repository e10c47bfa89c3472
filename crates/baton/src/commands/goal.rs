//! `baton do "GOAL"`: a planner for the goal runs first, its answer kept rather than run;
//! baton shows the plan as `baton plan` would, with what it should cost and take, and asks:
//! run, edit or cancel. The plan then runs as a run of its own, from the graph file it was
//! written to (`.baton/plans/RUN.toml`), which `baton run` can also run later.

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::time::Duration;

use baton_graph::Graph;
use baton_model::{TaskState, format_duration};
use baton_report::RunResult;

use super::load::load_graph;
use super::records;
use super::run::{Driven, Job, drive, execute, print_result};
use crate::cli::DoArgs;
use crate::diagnostics::render_load_error;
use crate::exit::{self, Failure};
use crate::out;
use crate::project::Project;

/// The planning run's only task.
const PLANNER: &str = "plan";
/// Earlier agent attempts on one engine and model it takes to estimate a task on that engine
/// and model from them alone.
const SIMILAR_AT_LEAST: usize = 3;

/// Earlier runs whose agent attempts the estimate is made from.
const HISTORY_RUNS: u32 = 20;

pub(super) fn goal(args: DoArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let asks = !args.yes && !args.plan_only;
    // Before anything is spent: a question nobody can answer is never asked.
    if asks && !std::io::stdin().is_terminal() {
        return Err(Failure::BadInput(
            "baton do shows the plan and asks before it runs it, and standard input is not a \
             terminal: pass --yes to run the plan without asking, or --plan-only -o plan.toml \
             to write it for `baton run`"
                .into(),
        ));
    }
    check_args(&args)?;
    let project = Project::discover()?;
    project.prepare_state_dir()?;
    let plans = project.state_dir.join("plans");
    std::fs::create_dir_all(&plans).map_err(|e| {
        Failure::Internal(anyhow::anyhow!("cannot create {}: {e}", plans.display()))
    })?;

    // The planning run: one planner, whose answer is kept for a person.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let planning = plans.join(format!("goal-{stamp}-{}.toml", std::process::id()));
    write_file(&planning, &planning_graph(&args))?;
    let mut graph = load_graph(&planning)?;
    graph.hold_plans();
    let planned = execute(Job::New(Box::new(graph)), &args.drive, store_url);
    // The planning graph is baton's scratch, whatever became of its run.
    let _ = std::fs::remove_file(&planning);
    let planned = match planned? {
        Driven::Done(result) => result,
        Driven::Nothing(code) => return Ok(code),
    };
    let Some(plan) = planned
        .tasks
        .iter()
        .find(|t| t.id == PLANNER && t.state == TaskState::Succeeded)
        .and_then(|t| t.output.as_deref())
        .and_then(baton_graph::plan_value)
    else {
        // The planner failed: its run says why.
        return print_result(&planned, &args.drive);
    };

    let file = plans.join(format!("{}.toml", planned.run.id));
    write_file(&file, &plan_file(&args, &plan, &planned.run.id))?;
    let mut graph = load_graph(&file)?;
    if args.plan_only {
        return write_plan_only(&args, &file);
    }
    loop {
        let estimate = estimate(store_url, &graph, &planned);
        show(&graph, &file, &estimate);
        // The budget must cover what the plan should cost before any of it starts.
        let over = match (args.budget, estimate.usd) {
            (Some(budget), Some(usd)) if usd > budget => Some((usd, budget)),
            _ => None,
        };
        if let Some((usd, budget)) = over {
            out::err(&format!(
                "baton: the estimate ({}) is over the budget ({}): the run would stop when it is spent",
                baton_report::format_usd(usd),
                baton_report::format_usd(budget)
            ));
            if args.yes {
                return Err(Failure::BadInput(format!(
                    "not run: the plan's estimate ({}) is over --budget {budget}; raise the budget, or edit the plan ({})",
                    baton_report::format_usd(usd),
                    file.display()
                )));
            }
        }
        if args.yes {
            break;
        }
        match ask("Run this plan? [r]un, [e]dit, [c]ancel: ")? {
            Answer::Run => break,
            Answer::Cancel => {
                out::err(&format!(
                    "baton: nothing was run; the plan is in {} (`baton run` it later)",
                    file.display()
                ));
                return Ok(exit::SUCCESS);
            }
            Answer::Edit => match edit(&file)? {
                Some(edited) => graph = edited,
                None => {
                    out::err(&format!(
                        "baton: nothing was run; the plan is in {}",
                        file.display()
                    ));
                    return Ok(exit::SUCCESS);
                }
            },
        }
    }
    let code = drive(Job::New(Box::new(graph)), &args.drive, store_url)?;
    // The planning was a run of its own: what it cost is part of what `baton do` cost.
    if let Some(spend) = planned
        .spend
        .as_ref()
        .filter(|s| s.total.attempts > 0 && !s.total.reported_nothing())
    {
        out::err(&format!(
            "baton: planning it (run {}) cost {} on {} tokens more",
            planned.run.id,
            spend.total.cost_text(),
            baton_report::format_tokens(spend.total.tokens())
        ));
    }
    Ok(code)
}

fn check_args(args: &DoArgs) -> Result<(), Failure> {
    if args.goal.trim().is_empty() {
        return Err(Failure::BadInput(
            "the goal is empty: say what to get done".into(),
        ));
    }
    if args.max_subtasks == 0 {
        return Err(Failure::BadInput(
            "--max-subtasks must be at least 1".into(),
        ));
    }
    if args.concurrency == Some(0) {
        return Err(Failure::BadInput("--concurrency must be at least 1".into()));
    }
    if args.budget.is_some_and(|usd| !usd.is_finite() || usd < 0.0) {
        return Err(Failure::BadInput(
            "--budget: a budget is an amount of dollars, at least 0".into(),
        ));
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text)
        .map_err(|e| Failure::Internal(anyhow::anyhow!("cannot write {}: {e}", path.display())))
}

/// A short name for the goal: its first line, cut at 60 characters.
fn title(goal: &str) -> String {
    let line = goal
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut title: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        title.push('…');
    }
    title
}

/// The planning run's graph file: the planner alone.
fn planning_graph(args: &DoArgs) -> String {
    let mut prompt = args.goal.trim().to_owned();
    if !args.scope.is_empty() {
        prompt.push_str(&format!(
            "\n\nThe work may change only files matching: {}. Give each task a scope within it.",
            args.scope.join(", ")
        ));
    }
    if !args.accept.is_empty() {
        prompt.push_str("\n\nThe goal is met when:\n");
        for criterion in &args.accept {
            prompt.push_str(&format!("- {criterion}\n"));
        }
        prompt.push_str(
            "A last task, added after your plan, checks the plan's merged work against them.",
        );
    }
    let mut text = format!(
        "name = {}\n\n[[task]]\n",
        toml_str(&format!("plan: {}", title(&args.goal)))
    );
    text.push_str(&format!("id = \"{PLANNER}\"\n"));
    text.push_str(&format!("engine = {}\n", toml_str(&args.engine)));
    if let Some(model) = &args.model {
        text.push_str(&format!("model = {}\n", toml_str(model)));
    }
    text.push_str("expand = true\n");
    text.push_str(&format!("max_subtasks = {}\n", args.max_subtasks));
    // An answer that will not do goes back once, with what is wrong with it.
    text.push_str("fix_attempts = 1\n");
    text.push_str(&format!("prompt = {}\n", toml_str(&prompt)));
    text
}

/// The plan as a graph file of its own: the planner's tasks under `[defaults]` that give them
/// what they would have had in the planning run (its engine and model, worktrees).
fn plan_file(args: &DoArgs, plan: &serde_json::Value, planning_run: &str) -> String {
    let mut text = String::new();
    for line in args.goal.trim().lines() {
        text.push_str(&format!("# {line}\n"));
    }
    text.push_str(&format!(
        "#\n# Planned by run {planning_run} (`baton do`). Edit it, and run it with `baton run`.\n"
    ));
    text.push_str(&format!("name = {}\n\n", toml_str(&title(&args.goal))));
    text.push_str("[defaults]\n");
    text.push_str(&format!("engine = {}\n", toml_str(&args.engine)));
    if let Some(model) = &args.model {
        text.push_str(&format!("model = {}\n", toml_str(model)));
    }
    text.push_str("workspace = \"worktree\"\n");
    if args.budget.is_some() || args.concurrency.is_some() {
        text.push_str("\n[run]\n");
        if let Some(n) = args.concurrency {
            text.push_str(&format!("concurrency = {n}\n"));
        }
        if let Some(usd) = args.budget {
            text.push_str(&format!("budget = {{ usd = {usd} }}\n"));
        }
    }
    let tasks = plan
        .get("task")
        .or_else(|| plan.get("tasks"))
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    for task in tasks {
        let Some(fields) = task.as_object() else {
            continue;
        };
        text.push_str("\n[[task]]\n");
        let mut keys: Vec<&String> = fields.keys().collect();
        // The fields people read first, first.
        const FIRST: &[&str] = &["id", "needs", "engine", "model", "scope", "prompt", "run"];
        keys.sort_by_key(|k| (FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()), *k));
        for key in keys {
            let value = &fields[key.as_str()];
            if value.is_null() {
                continue;
            }
            text.push_str(&format!("{} = {}\n", toml_key(key), toml_value(value)));
        }
        if !args.scope.is_empty() && !fields.contains_key("scope") {
            let scope: Vec<String> = args.scope.iter().map(|s| toml_str(s)).collect();
            text.push_str(&format!("scope = [{}]\n", scope.join(", ")));
        }
    }
    if !args.accept.is_empty() {
        text.push_str(&goal_check(args, &plan_ids(plan)));
    }
    text
}

/// The ids of a plan's tasks that no other task of it needs: what the goal's check waits for.
fn plan_ids(plan: &serde_json::Value) -> Vec<String> {
    let tasks = plan
        .get("task")
        .or_else(|| plan.get("tasks"))
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ids: Vec<String> = tasks
        .iter()
        .filter_map(|t| t.get("id")?.as_str().map(str::to_owned))
        .collect();
    let needed: Vec<String> = tasks
        .iter()
        .filter_map(|t| t.get("needs")?.as_array().cloned())
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    ids.into_iter().filter(|id| !needed.contains(id)).collect()
}

/// The last task of a plan with `--accept` criteria: it starts from the merged work of the
/// plan's last tasks, checks it against the goal, fixes what falls short, and is reviewed
/// against the criteria.
fn goal_check(args: &DoArgs, leaves: &[String]) -> String {
    let mut id = "goal".to_owned();
    while leaves.contains(&id) {
        id.push('-');
        id.push('2');
    }
    let needs: Vec<String> = leaves.iter().map(|l| toml_str(l)).collect();
    let criteria: Vec<String> = args.accept.iter().map(|c| toml_str(c)).collect();
    let prompt = format!(
        "The tasks before you worked towards this goal, and their changes are in your working \
         copy:\n\n{}\n\nCheck that it is met, and that each of these holds:\n{}\nFix what \
         falls short; change nothing that does not need it.",
        args.goal.trim(),
        args.accept
            .iter()
            .map(|c| format!("- {c}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    format!(
        "\n# Added by `baton do --accept`: the goal's own check.\n[[task]]\nid = {}\nneeds = [{}]\nprompt = {}\nacceptance = [{}]\nfix_attempts = 1\n",
        toml_str(&id),
        needs.join(", "),
        toml_str(&prompt),
        criteria.join(", ")
    )
}

/// A key as TOML: bare when it can be, else quoted by the `toml` crate.
fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}

/// A string as TOML, written by the `toml` crate (a multi-line string when it spans lines).
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A JSON value from the planner's answer as TOML, written by the `toml` crate. TOML has no
/// null: a null in an array or table is left out, and a null value is an empty string (a
/// field's null is skipped before it gets here).
fn toml_value(value: &serde_json::Value) -> String {
    to_toml(value)
        .unwrap_or_else(|| toml::Value::String(String::new()))
        .to_string()
}

fn to_toml(value: &serde_json::Value) -> Option<toml::Value> {
    use serde_json::Value;
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(to_toml).collect()),
        Value::Object(fields) => toml::Value::Table(
            fields
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), to_toml(v)?)))
                .collect(),
        ),
    })
}

fn write_plan_only(args: &DoArgs, file: &Path) -> Result<i32, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::Internal(anyhow::anyhow!("cannot read {}: {e}", file.display())))?;
    match &args.output {
        Some(path) => {
            write_file(path, &text)?;
            out::err(&format!(
                "baton: the plan is in {}; run it with `baton run {}`",
                path.display(),
                path.display()
            ));
        }
        None => out::text("the plan", &text)?,
    }
    Ok(exit::SUCCESS)
}

/// An agent attempt of an earlier run here, as the estimate uses it.
struct Earlier {
    engine: String,
    model: Option<String>,
    usd: Option<f64>,
    ms: u64,
}

/// What the plan should cost and take.
struct Estimate {
    usd: Option<f64>,
    time: Duration,
    basis: String,
}

/// From what agent attempts cost and took in this repository's earlier runs (the median of
/// each; of the attempts on the task's own engine and model where there are enough of them),
/// else from the planner's own attempt; the time is the plan's levels one after another, each
/// as many rounds of agents as the concurrency needs.
fn estimate(store_url: Option<&str>, graph: &Graph, planned: &RunResult) -> Estimate {
    let mut history: Vec<Earlier> = Vec::new();
    if let Ok(store) = records::open(store_url)
        && let Ok(runs) = store.runs(HISTORY_RUNS + 1)
    {
        for run in runs.iter().filter(|r| r.run.id.as_str() != planned.run.id) {
            let Ok(attempts) = store.run_attempts(&run.run.id) else {
                continue;
            };
            for attempt in attempts {
                if let (Some(agent), Some(ms)) = (attempt.agent, attempt.duration_ms) {
                    history.push(Earlier {
                        engine: agent.engine,
                        model: agent.model,
                        usd: agent.cost_usd,
                        ms,
                    });
                }
            }
        }
    }
    // The medians of `attempts`' costs and times.
    let medians = |attempts: &[&Earlier]| {
        let mut costs: Vec<f64> = attempts.iter().filter_map(|a| a.usd).collect();
        let mut times: Vec<u64> = attempts.iter().map(|a| a.ms).collect();
        (median_f64(&mut costs), median_u64(&mut times))
    };
    let all: Vec<_> = history.iter().collect();
    let (cost, ms, described) = if all.is_empty() {
        let planner = planned.tasks.iter().find(|t| t.id == PLANNER);
        (
            planner
                .and_then(|t| t.agent.as_ref())
                .map(|a| a.spend.cost_usd),
            planner.and_then(|t| t.duration_ms).unwrap_or(60_000),
            "the planner's own attempt (no earlier agent runs here)".to_owned(),
        )
    } else {
        let (cost, ms) = medians(&all);
        (
            cost,
            ms,
            format!("{} agent attempts of earlier runs here", all.len()),
        )
    };
    // What agents on one engine and model cost here, where enough of them ran to say (a task
    // that names no model runs on its engine's default, whichever that was).
    let similar = |engine: &str, model: Option<&str>| {
        let same: Vec<_> = history
            .iter()
            .filter(|a| a.engine == engine && model.is_none_or(|m| a.model.as_deref() == Some(m)))
            .collect();
        (same.len() >= SIMILAR_AT_LEAST).then(|| medians(&same))
    };
    let mut by_similar = 0;
    // Per task: what the planner expects of it, else what agents like it took here (nothing
    // for a shell task).
    let mut by_planner = 0;
    let mut usd: Option<f64> = Some(0.0);
    let mut task_ms = vec![0u64; graph.len()];
    for i in 0..graph.len() as u32 {
        let expected = graph
            .task(i)
            .estimate
            .as_deref()
            .copied()
            .unwrap_or_default();
        if expected.minutes.is_some() || expected.usd.is_some() {
            by_planner += 1;
        }
        let fallback = match &graph.task(i).action {
            baton_graph::Action::Agent {
                engine, settings, ..
            } => Some(match similar(engine, settings.model.as_deref()) {
                Some(like) => {
                    by_similar += 1;
                    like
                }
                None => (cost, ms),
            }),
            _ => None,
        };
        task_ms[i as usize] = expected
            .minutes
            .map(|m| (m * 60_000.0) as u64)
            .unwrap_or(fallback.map_or(0, |(_, ms)| ms));
        let cost = expected
            .usd
            .or(fallback.map_or(Some(0.0), |(cost, _)| cost));
        usd = match (usd, cost) {
            (Some(sum), Some(c)) => Some(sum + c),
            _ => None,
        };
    }
    let history = if by_similar > 0 {
        format!("{described}, on the task's own engine and model for {by_similar}")
    } else {
        described
    };
    // Each level after the one before: its tasks shared among the slots, the longest at least.
    let plan = baton_graph::plan(graph);
    let concurrency = graph.run_settings().concurrency.max(1) as u64;
    let total_ms: u64 = plan
        .levels
        .iter()
        .map(|level| {
            let times: Vec<u64> = level
                .iter()
                .filter_map(|id| graph.index_of(id))
                .map(|i| task_ms[i as usize])
                .collect();
            let longest = times.iter().copied().max().unwrap_or(0);
            (times.iter().sum::<u64>() / concurrency).max(longest)
        })
        .sum();
    let basis = match by_planner {
        0 => format!("from {history}"),
        n if n == graph.len() => "the planner's estimates".to_owned(),
        n => format!(
            "the planner's estimates for {n} of {} tasks, the rest from {history}",
            graph.len()
        ),
    };
    Estimate {
        usd,
        time: Duration::from_millis(total_ms),
        basis,
    }
}

fn median_u64(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn median_f64(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The plan as `baton plan` shows it, each task on a line, and the estimate.
fn show(graph: &Graph, file: &Path, estimate: &Estimate) {
    let mut text = format!("\nThe plan ({}):\n\n", file.display());
    for task in graph.tasks() {
        let what = match &task.action {
            baton_graph::Action::Agent { engine, .. } => engine.clone(),
            baton_graph::Action::Shell { .. } => "shell".to_owned(),
            baton_graph::Action::Noop => "noop".to_owned(),
        };
        let mut line = format!("  {:<16} {:<7}", task.id.as_str(), what);
        if !task.needs.is_empty() {
            let needs: Vec<&str> = task
                .needs
                .iter()
                .map(|&n| graph.task(n).id.as_str())
                .collect();
            line.push_str(&format!(" needs {}", needs.join(", ")));
        }
        if !task.scope.is_empty() {
            line.push_str(&format!(" · scope {}", task.scope.join(", ")));
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text.push('\n');
    text.push_str(&baton_graph::plan(graph).to_string());
    let cost = estimate.usd.map_or_else(
        || "cost unknown".to_owned(),
        |usd| format!("about {}", baton_report::format_usd(usd)),
    );
    text.push_str(&format!(
        "estimate: {cost}, about {} ({})\n",
        format_duration(estimate.time),
        estimate.basis
    ));
    out::err(&text);
}

enum Answer {
    Run,
    Edit,
    Cancel,
}

/// Asks on the terminal until the answer is one of the three; end of input cancels.
fn ask(question: &str) -> Result<Answer, Failure> {
    let stdin = std::io::stdin();
    loop {
        out::ask(question);
        let mut line = String::new();
        let read = stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| Failure::Internal(anyhow::anyhow!("cannot read the answer: {e}")))?;
        if read == 0 {
            out::err("");
            return Ok(Answer::Cancel);
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "r" | "run" | "y" | "yes" => return Ok(Answer::Run),
            "e" | "edit" => return Ok(Answer::Edit),
            "c" | "cancel" | "n" | "no" | "q" => return Ok(Answer::Cancel),
            _ => out::err("baton: answer r, e or c"),
        }
    }
}

/// Opens the plan in `$VISUAL` or `$EDITOR` (else `vi`) and reads it back, until it is a valid
/// graph file or the person gives up (`None`).
fn edit(file: &Path) -> Result<Option<Graph>, Failure> {
    let editor = std::env::var("VISUAL")
        .ok()
        .or_else(|| std::env::var("EDITOR").ok())
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".to_owned());
    loop {
        // Through the shell, as git does: `EDITOR="code --wait"` works.
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{editor} \"$1\""))
            .arg("sh")
            .arg(file)
            .status()
            .map_err(|e| Failure::Internal(anyhow::anyhow!("cannot start `{editor}`: {e}")))?;
        if !status.success() {
            out::err(&format!("baton: `{editor}` failed ({status})"));
        }
        match baton_graph::load(file) {
            Ok(graph) => return Ok(Some(graph)),
            Err(err) => {
                out::err_styled(&render_load_error(&err));
                match ask("The plan has errors. [e]dit again, [c]ancel: ")? {
                    Answer::Edit | Answer::Run => continue,
                    Answer::Cancel => return Ok(None),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the planner wrote reads back from the graph file as it was, whatever its strings
    /// hold: the hand-written writer this replaced wrote U+007F raw, which TOML forbids.
    #[test]
    fn a_planners_values_read_back_from_the_file_as_they_were() {
        let answer = serde_json::json!({
            "id": "a",
            "prompt": "line one\nwith ''' and \"\"\" and \\ and \u{7f} and \u{1b}[31m\n",
            "needs": ["b", null, "c"],
            "weird key": {"usd": 1.5, "n": 3, "none": null},
            "flag": true,
        });
        let mut text = String::new();
        for (key, value) in answer.as_object().unwrap() {
            text.push_str(&format!("{} = {}\n", toml_key(key), toml_value(value)));
        }
        let back: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let back = serde_json::to_value(back).unwrap();
        assert_eq!(back["prompt"], answer["prompt"], "{text}");
        assert_eq!(back["needs"], serde_json::json!(["b", "c"]));
        assert_eq!(back["weird key"], serde_json::json!({"usd": 1.5, "n": 3}));
        assert_eq!(back["flag"], true);
        assert_eq!(toml_str("plan: x"), "\"plan: x\"");
    }
}
