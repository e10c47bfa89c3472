//! `baton doctor`: what this machine offers baton, and what is missing, before a run finds out.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::Context;
use baton_agent::{Engine, EngineKind};
use baton_exec::{Platform, SandboxKind};
use baton_runner::AgentConfig;
use serde::Serialize;

use crate::cli::DoctorArgs;
use crate::exit::{self, Failure};
use crate::out;
use crate::project::Project;

/// `baton doctor --json` (schema 1).
#[derive(Debug, Serialize)]
struct Report {
    schema: u32,
    version: &'static str,
    project: PathBuf,
    store: String,
    store_exists: bool,
    config_files: Vec<ConfigFile>,
    engines: Vec<EngineReport>,
    /// What the kernel gives baton to hold tasks in.
    isolation: Isolation,
}

/// The write sandbox, the cgroups and the subreaper: each there, or why not and what baton
/// does instead.
#[derive(Debug, Serialize)]
struct Isolation {
    /// The process layer: `linux` (its fast paths) or `portable` (macOS, or
    /// `BATON_PLATFORM=portable`).
    #[serde(serialize_with = "platform_name")]
    platform: Platform,
    /// The write sandbox: `landlock` (Linux) or `seatbelt` (macOS), when there is one.
    #[serde(serialize_with = "sandbox_name")]
    sandbox: Option<SandboxKind>,
    /// Landlock's ABI version, when there is one.
    landlock: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    landlock_problem: Option<&'static str>,
    cgroups: bool,
    /// A task's process can be born in its cgroup (Linux 5.7+), so every task gets one.
    cgroups_for_every_task: bool,
    subreaper: bool,
}

fn platform_name<S: serde::Serializer>(platform: &Platform, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(platform.name())
}

fn sandbox_name<S: serde::Serializer>(
    sandbox: &Option<SandboxKind>,
    s: S,
) -> Result<S::Ok, S::Error> {
    sandbox.map(SandboxKind::name).serialize(s)
}

impl Isolation {
    fn here() -> Self {
        let sandbox = baton_exec::write_sandbox();
        let landlock = baton_exec::landlock_support();
        Self {
            sandbox: sandbox.ok(),
            platform: baton_exec::platform(),
            landlock: landlock.ok(),
            landlock_problem: sandbox.err().or(landlock.err()),
            cgroups: baton_exec::cgroups_available(),
            cgroups_for_every_task: baton_exec::cgroups_are_cheap(),
            subreaper: baton_exec::become_subreaper(),
        }
    }

    fn lines(&self) -> Vec<String> {
        let mark = |ok: bool| if ok { "✓" } else { "✗" };
        vec![
            if self.platform == Platform::Linux {
                "  platform   linux: attempts start with baton's own clone and are waited for through pidfds".to_owned()
            } else {
                format!(
                    "  platform   portable{}: attempts start with std's Command (posix_spawn) and are waited for through SIGCHLD; no cgroups, no Landlock",
                    if cfg!(target_os = "linux") { " (BATON_PLATFORM=portable)" } else { "" }
                )
            },
            match (self.landlock, self.landlock_problem) {
                _ if self.sandbox == Some(SandboxKind::Seatbelt) => "  seatbelt   ✓ sandbox-exec: agent tasks (and tasks with `confine`) write only in their worktree".to_owned(),
                (Some(abi), _) => format!(
                    "  landlock   ✓ ABI {abi}: agent tasks (and tasks with `confine`) write only in their worktree"
                ),
                (None, why) => format!(
                    "  landlock   ✗ {}: tasks run without the write sandbox (`confine = \"require\"` refuses; planned shell commands are refused unless `planned_commands = \"allow\"`)",
                    why.unwrap_or("not available")
                ),
            },
            match (self.cgroups, self.cgroups_for_every_task) {
                (true, true) => "  cgroup v2  ✓ writable, and a task is born in its own: every task's processes end with it".to_owned(),
                (true, false) => "  cgroup v2  ✓ writable: agent tasks get a cgroup; others their process group (a child cannot be born in one here)".to_owned(),
                (false, _) => format!(
                    "  cgroup v2  ✗ {}: tasks are held by their process group (a `setsid` daemon can outlive its task)",
                    if self.platform == Platform::Linux {
                        "not writable here"
                    } else {
                        "not used by the portable layer"
                    }
                ),
            },
            format!(
                "  subreaper  {} {}",
                mark(self.subreaper),
                if self.subreaper {
                    "orphans of a task come back to baton, which ends them with their task"
                } else {
                    "not available: an orphan of a task is reparented to init"
                }
            ),
        ]
    }
}

#[derive(Debug, Serialize)]
struct ConfigFile {
    path: PathBuf,
    present: bool,
}

#[derive(Debug, Serialize)]
struct EngineReport {
    name: String,
    kind: EngineKind,
    command: String,
    /// Found and recent enough.
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
    /// The variables its CLI reads its key or endpoint from, and whether baton's environment
    /// sets them (never their values).
    env: std::collections::BTreeMap<String, bool>,
}

impl EngineReport {
    /// Whether the engine could answer a prompt here: a CLI that is installed, a command
    /// engine, or an HTTP one with a key or a server on this machine (a local model needs
    /// no key).
    fn can_answer(&self) -> bool {
        let local = ["://localhost", "://127.", "://[::1]"]
            .iter()
            .any(|host| self.command.contains(host));
        match self.kind {
            EngineKind::Http => self.ok && (self.env.values().any(|set| *set) || local),
            _ => self.ok,
        }
    }
}

/// Where each CLI finds its credentials and endpoint. Any one of them may suffice (a CLI can
/// also be logged in through its own config), so none is required.
fn key_vars(kind: EngineKind) -> &'static [&'static str] {
    match kind {
        EngineKind::Claude => &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
        ],
        EngineKind::Codex => &["OPENAI_API_KEY", "CODEX_HOME"],
        EngineKind::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"],
        EngineKind::Aider => &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"],
        // Its own `key_env`, added by the caller; a command's are its config's business.
        EngineKind::Http | EngineKind::Command => &[],
    }
}

pub(super) fn doctor(args: DoctorArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let project = Project::discover()?;
    let store = project.store_at(store_url).map_err(Failure::BadInput)?;
    let config = AgentConfig::load(&project.root).map_err(|e| Failure::BadInput(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let engines: Vec<&Engine> = config.engines().collect();
    let probes = runtime.block_on(async {
        let mut probes = Vec::new();
        for engine in &engines {
            probes.push(baton_runner::probe_engine(engine).await);
        }
        probes
    });
    let report = Report {
        schema: 1,
        version: env!("CARGO_PKG_VERSION"),
        project: project.root.clone(),
        store_exists: store.exists(),
        store: store.to_string(),
        config_files: AgentConfig::paths(&project.root)
            .into_iter()
            .map(|path| ConfigFile {
                present: path.is_file(),
                path,
            })
            .collect(),
        engines: engines
            .iter()
            .zip(probes)
            .map(|(engine, probe)| EngineReport {
                name: engine.name.clone(),
                kind: engine.kind,
                command: if engine.kind == EngineKind::Http {
                    let (api, base_url, _) = engine.http_endpoint();
                    format!("{api} API at {base_url}")
                } else {
                    engine.command.clone()
                },
                ok: probe.is_ok(),
                version: probe.as_ref().ok().and_then(|v| v.map(|v| v.to_string())),
                // The engine's name is beside it already.
                problem: probe.err().map(|p| {
                    p.strip_prefix(&format!("engine `{}`: ", engine.name))
                        .map_or_else(|| p.clone(), str::to_owned)
                }),
                env: key_vars(engine.kind)
                    .iter()
                    .copied()
                    .chain((engine.kind == EngineKind::Http).then(|| engine.http_endpoint().2))
                    .map(|var| (var.to_owned(), std::env::var_os(var).is_some()))
                    .collect(),
            })
            .collect(),
        isolation: Isolation::here(),
    };
    if args.json {
        out::json("the report", &report)?;
        return Ok(exit::SUCCESS);
    }
    let mut text = String::new();
    let _ = writeln!(text, "baton {}", report.version);
    let _ = writeln!(text, "project  {}", report.project.display());
    let _ = writeln!(
        text,
        "store    {}{}",
        report.store,
        if report.store_exists {
            ""
        } else {
            " (not created yet)"
        }
    );
    for (i, file) in report.config_files.iter().enumerate() {
        let _ = writeln!(
            text,
            "{}{}{}",
            if i == 0 { "config   " } else { "         " },
            file.path.display(),
            if file.present { "" } else { " (none)" }
        );
    }
    let _ = writeln!(text, "isolation");
    for line in report.isolation.lines() {
        let _ = writeln!(text, "{line}");
    }
    let _ = writeln!(text, "engines");
    for engine in &report.engines {
        let status = match (&engine.problem, &engine.version) {
            (Some(problem), _) => format!("✗ {problem}"),
            (None, Some(version)) => format!("✓ {version}"),
            (None, None) if engine.kind == EngineKind::Http => "✓ built in".to_owned(),
            (None, None) => "✓ (version unknown)".to_owned(),
        };
        let set: Vec<&str> = engine
            .env
            .iter()
            .filter(|(_, set)| **set)
            .map(|(var, _)| var.as_str())
            .collect();
        let env = if set.is_empty() {
            "no key in the environment".to_owned()
        } else {
            format!("set: {}", set.join(", "))
        };
        let _ = writeln!(text, "  {:<7} {status}", engine.name);
        if engine.ok {
            let _ = writeln!(text, "          {} · {env}", engine.command);
        }
    }
    if !report.engines.iter().any(EngineReport::can_answer) {
        let _ = writeln!(
            text,
            "no agent can answer here yet: install one above, or give `http` a key. To try agent \
             tasks with no key and no network, run `examples/offline/try.sh` from baton's source: \
             a `kind = \"command\"` engine (a script) stands in for the agent (the guide's \
             Engines page)"
        );
    }
    out::text("the report", &text)?;
    Ok(exit::SUCCESS)
}
