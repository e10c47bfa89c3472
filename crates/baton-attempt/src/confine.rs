//! Which tasks run in a write sandbox, and where it lets them write.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use baton_agent::EngineKind;
use baton_exec::WriteSandbox;
use baton_graph::{Action, Confine, Graph, PlannedCommands, Task, Workspace};

/// The write sandbox's name here, as refusals say it.
const SANDBOX: &str = if cfg!(target_os = "macos") {
    "Seatbelt"
} else {
    "Landlock"
};

/// How a task's `confine` resolves before its workspace is known. Ordered: more is stricter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Want {
    No,
    /// Confined where the kernel can.
    Soft,
    /// Confined or not run.
    Hard,
}

/// What `task` asks for, given whether it runs in a worktree. Unset, an agent task in a
/// worktree is confined: it runs what a model decided, and its worktree is all it should
/// change. A shell task runs what the graph's author wrote, so it is confined only on request.
/// A task a planner added is a model's whatever its kind: an agent gets at least what its
/// planner had, and shell commands are confined or not run, unless the graph says
/// `planned_commands = "allow"`.
fn want(task: &Task, in_worktree: bool, planned: PlannedCommands) -> Want {
    let asked = match task.confine {
        Some(Confine::None) => Want::No,
        Some(Confine::Workspace) => Want::Soft,
        Some(Confine::Require) => Want::Hard,
        None if in_worktree && matches!(task.action, Action::Agent { .. }) => Want::Soft,
        None => Want::No,
    };
    match (task.planned, &task.action, planned) {
        (false, _, _) => asked,
        (true, Action::Agent { .. }, _) | (true, _, PlannedCommands::Allow) => {
            asked.max(Want::Soft)
        }
        (true, _, PlannedCommands::Confined) => Want::Hard,
    }
}

/// Why a task a planner added cannot run here, and what the graph can say to let it.
fn planned_refusal(task: &Task, why: &str) -> String {
    format!(
        "task `{}` was planned by a model, and its shell commands run only in a worktree \
         under the write sandbox, but {why}; to run planned commands unconfined, set \
         `planned_commands = \"allow\"` under [run]",
        task.id
    )
}

/// Before a run: problems that refuse it (a task requires a sandbox this kernel cannot give),
/// or a note to print once (tasks that would be confined will not be).
pub fn check(graph: &Graph) -> Result<Option<String>, Vec<String>> {
    let Err(why) = baton_exec::write_sandbox() else {
        return Ok(None);
    };
    let planned = graph.run_settings().planned_commands;
    let wants: Vec<(&Task, Want)> = graph
        .tasks()
        .iter()
        .map(|t| (t, want(t, t.workspace == Workspace::Worktree, planned)))
        .collect();
    let problems: Vec<String> = wants
        .iter()
        .filter(|(_, want)| *want == Want::Hard)
        .map(|(t, _)| match t.planned {
            true => planned_refusal(t, &format!("{SANDBOX} is not available ({why})")),
            false => format!(
                "task `{}` has `confine = \"require\"` but {SANDBOX} is not available: {why}",
                t.id
            ),
        })
        .collect();
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(wants.iter().any(|(_, want)| *want == Want::Soft).then(|| {
        format!(
            "{SANDBOX} is not available ({why}): tasks run without the write sandbox \
             (`confine = \"require\"` refuses to run instead)"
        )
    }))
}

/// Where an attempt runs and what it is given, as far as its sandbox is concerned.
pub struct Place<'a> {
    pub task: &'a Task,
    /// The task's worktree, if it has one.
    pub worktree: Option<&'a Path>,
    /// The repository's root: a confined task without a worktree may write there.
    pub root: &'a Path,
    pub engine: Option<EngineKind>,
    /// The run's `planned_commands`.
    pub planned_commands: PlannedCommands,
}

/// The sandbox of an attempt, or `None` if it runs unconfined; the variables it adds to the
/// task's environment (`TMPDIR`, `BATON_SANDBOX`) are pushed onto `env`. `tmp` makes the
/// task's private temporary directory, `own_out` the directory of its own `$BATON_OUTPUT`
/// (returned with the sandbox: the caller points `$BATON_OUTPUT` there).
pub fn sandbox_for(
    place: &Place<'_>,
    env: &mut Vec<(OsString, OsString)>,
    tmp: impl FnOnce() -> std::io::Result<PathBuf>,
    own_out: impl FnOnce() -> std::io::Result<PathBuf>,
) -> Result<Option<(WriteSandbox, PathBuf)>, String> {
    let want = want(place.task, place.worktree.is_some(), place.planned_commands);
    if want == Want::No {
        return Ok(None);
    }
    if want == Want::Hard && place.task.planned && place.worktree.is_none() {
        // Confined to the checkout is still the checkout: a model's commands get a worktree.
        return Err(planned_refusal(
            place.task,
            "there is no worktree to run them in (the project is not a git repository with a \
             commit)",
        ));
    }
    if let Err(why) = baton_exec::write_sandbox() {
        return match want {
            // The run said so once before it started.
            Want::Soft => Ok(None),
            _ if place.task.planned => Err(planned_refusal(
                place.task,
                &format!("{SANDBOX} is not available ({why})"),
            )),
            _ => Err(format!(
                "`confine = \"require\"` but {SANDBOX} is not available ({why}): set \
                 `confine = \"workspace\"` to run unconfined"
            )),
        };
    }
    let tmp = tmp().map_err(|e| format!("cannot create the task's temporary directory: {e}"))?;
    let var = |name: &str| {
        env.iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| PathBuf::from(value))
    };
    // The task's work, and nothing else of the repository: its git directory stays
    // read-only, since baton commits the task's changes itself, outside the sandbox.
    let mut allowed = vec![place.worktree.unwrap_or(place.root).to_path_buf()];
    // `/tmp` is shared with everything else on the machine: the task gets its own instead.
    allowed.push(tmp.clone());
    // `$BATON_OUTPUT` is created there: a directory of its own, not the run's `out/`, where
    // it could write a file that passes for another task's output.
    let own_out =
        own_out().map_err(|e| format!("cannot create the task's output directory: {e}"))?;
    allowed.push(own_out.clone());
    // The agent CLI keeps its sessions and settings there; without it Claude Code cannot be
    // resumed and Codex does not start.
    if let Some(state) = place.engine.and_then(|kind| engine_state(kind, &var)) {
        // A missing directory would be left out of the sandbox, and the CLI could not make
        // it: it is made first, private, as the CLI would.
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&state);
        allowed.push(state);
    }
    env.push(("TMPDIR".into(), tmp.into()));
    let kind = baton_exec::write_sandbox().map_or("landlock", baton_exec::SandboxKind::name);
    env.push(("BATON_SANDBOX".into(), kind.into()));
    Ok(Some((WriteSandbox::new(allowed), own_out)))
}

/// Where an engine's CLI writes its own state, found by running each under the sandbox.
/// Claude Code also rewrites `~/.claude.json` by renaming a new copy over it in `$HOME`, which
/// would need all of `$HOME` writable: confined, it goes on without updating that file.
fn engine_state(kind: EngineKind, var: &dyn Fn(&str) -> Option<PathBuf>) -> Option<PathBuf> {
    let home = || var("HOME");
    match kind {
        EngineKind::Claude => var("CLAUDE_CONFIG_DIR").or_else(|| Some(home()?.join(".claude"))),
        EngineKind::Codex => var("CODEX_HOME").or_else(|| Some(home()?.join(".codex"))),
        EngineKind::Gemini => Some(home()?.join(".gemini")),
        EngineKind::Aider => Some(home()?.join(".aider")),
        // baton's own `agent-http` writes nothing; a configured command says nothing of what
        // it needs (`confine = "none"` runs it unconfined).
        EngineKind::Http | EngineKind::Command => None,
    }
}
