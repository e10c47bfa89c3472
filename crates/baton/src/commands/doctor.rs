//! `baton doctor`: what this machine offers baton, and what is missing, before a run finds out.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::Context;
use baton_agent::{Engine, EngineKind};
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

pub fn doctor(args: DoctorArgs, store_url: Option<&str>) -> Result<i32, Failure> {
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
    out::text("the report", &text)?;
    Ok(exit::SUCCESS)
}
