//! `baton.toml` (in the repository root) and `config.toml` (in the user's config directory):
//! how each agent engine is run, and what models cost.
//!
//! ```toml
//! [engines.claude]
//! command = "/opt/claude/bin/claude"   # default: the engine's name, looked up in PATH
//! args = ["--fallback-model", "claude-haiku-4-5"]
//! model = "claude-sonnet-4-5"
//! pass_env = ["HTTPS_PROXY"]           # beyond the engine's own keys
//!
//! [prices."my-finetune"]               # dollars per million tokens
//! input = 1.0
//! output = 4.0
//! ```
//!
//! The project's file wins over the user's, field by field for each engine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_agent::{Engine, EngineKind, Price, PriceTable};
use serde::Deserialize;

/// What the config files say, merged.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    engines: BTreeMap<String, Engine>,
    pub prices: PriceTable,
    /// `[notify]`: whom to tell when a run ends or a task waits for a person.
    pub notify: NotifyConfig,
    /// `[mcp]`: what a graph an agent hands in over `baton mcp` may ask for.
    pub mcp: McpLimits,
}

/// `[mcp]` in `baton.toml`: what a graph an agent hands in over `baton mcp` may ask for. A
/// graph over a limit is refused, saying which; the concurrency asked is lowered to it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpLimits {
    /// Most dollars a run's hard budget may be: a graph must set one (`[run] budget`), at
    /// most this.
    pub max_budget_usd: Option<f64>,
    /// Most tasks a graph may hold, and may grow to (a planner's graph sets `[run]
    /// max_tasks` at most this).
    pub max_tasks: Option<u32>,
    /// Most tasks running at once.
    pub max_concurrency: Option<u32>,
}

/// `[notify]` in `baton.toml`: a command run, and a URL POSTed to, with a small JSON body,
/// when a run ends or a task starts waiting for a person.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Run with `sh -c`, the body on its stdin.
    pub command: Option<String>,
    /// POSTed the body as `application/json`.
    pub webhook: Option<String>,
    /// Which of `run-finished` and `task-waiting` (default: both).
    pub on: Option<Vec<NotifyOn>>,
}

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotifyOn {
    RunFinished,
    TaskWaiting,
}

impl NotifyConfig {
    pub fn wants(&self, on: NotifyOn) -> bool {
        self.on.as_ref().is_none_or(|list| list.contains(&on))
    }

    pub fn is_empty(&self) -> bool {
        self.command.is_none() && self.webhook.is_none()
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            engines: EngineKind::ALL
                .iter()
                .map(|kind| (kind.name().to_owned(), Engine::builtin(*kind)))
                .collect(),
            prices: PriceTable::builtin(),
            notify: NotifyConfig::default(),
            mcp: McpLimits::default(),
        }
    }
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    engines: BTreeMap<String, EngineSection>,
    #[serde(default)]
    prices: BTreeMap<String, Price>,
    notify: Option<NotifyConfig>,
    mcp: Option<McpLimits>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineSection {
    command: Option<String>,
    args: Option<Vec<String>>,
    model: Option<String>,
    pass_env: Option<Vec<String>>,
    api: Option<String>,
    base_url: Option<String>,
    key_env: Option<String>,
    /// Makes a new engine (or must agree with an existing one's).
    kind: Option<String>,
    /// `command` engines: how stdout is read.
    output: Option<String>,
    /// `command` engines: `"args"` when the prompt is only in `{{ prompt }}`.
    prompt: Option<String>,
}

impl AgentConfig {
    /// Reads the user's file, then the project's (`ROOT/baton.toml`) over it. Missing files
    /// are no error.
    pub fn load(root: &Path) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for path in Self::paths(root) {
            config.merge_file(&path)?;
        }
        Ok(config)
    }

    /// The files [`AgentConfig::load`] reads, in order: the user's, then the project's.
    pub fn paths(root: &Path) -> Vec<PathBuf> {
        let user = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .map(|dir| dir.join("baton/config.toml"));
        user.into_iter().chain([root.join("baton.toml")]).collect()
    }

    /// Every engine, configured or not, by name.
    pub fn engines(&self) -> impl Iterator<Item = &Engine> {
        self.engines.values()
    }

    fn merge_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(ConfigError {
                    path: path.to_owned(),
                    message: format!("cannot read it: {e}"),
                });
            }
        };
        self.merge_str(path, &text)
    }

    /// Merges a config file's text; `path` names it in errors.
    pub fn merge_str(&mut self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let error = |message: String| ConfigError {
            path: path.to_owned(),
            message,
        };
        let file: File = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|span| {
                let line = text[..span.start].matches('\n').count() + 1;
                let column = span.start - text[..span.start].rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}: ")
            });
            error(format!("{}{}", at.unwrap_or_default(), e.message()))
        })?;
        if let Some(notify) = file.notify {
            // The project's file over the user's, field by field.
            let mine = &mut self.notify;
            mine.command = notify.command.or(mine.command.take());
            mine.webhook = notify.webhook.or(mine.webhook.take());
            mine.on = notify.on.or(mine.on.take());
        }
        if let Some(mcp) = file.mcp {
            let mine = &mut self.mcp;
            mine.max_budget_usd = mcp.max_budget_usd.or(mine.max_budget_usd);
            mine.max_tasks = mcp.max_tasks.or(mine.max_tasks);
            mine.max_concurrency = mcp.max_concurrency.or(mine.max_concurrency);
        }
        for (name, section) in file.engines {
            let kind = match &section.kind {
                None => None,
                Some(kind) => Some(EngineKind::parse(kind).ok_or_else(|| {
                    let kinds: Vec<&str> = EngineKind::KINDS.iter().map(|k| k.name()).collect();
                    error(format!(
                        "[engines.{name}]: kind = \"{kind}\" is not a kind of engine; use one of: {}",
                        kinds.join(", ")
                    ))
                })?),
            };
            if !self.engines.contains_key(&name) {
                let Some(kind) = kind else {
                    let known: Vec<&str> = self.engines.keys().map(String::as_str).collect();
                    return Err(error(format!(
                        "[engines.{name}]: no engine of that name; to define one, give it a `kind` \
                         (claude, codex, gemini, aider, http, or command for any other program); \
                         engines: {}",
                        known.join(", ")
                    )));
                };
                if !valid_engine_name(&name) {
                    return Err(error(format!(
                        "[engines.{name}]: an engine's name is lowercase letters, digits and `-`"
                    )));
                }
                if ["shell", "noop"].contains(&name.as_str()) {
                    return Err(error(format!(
                        "[engines.{name}]: `{name}` is baton's own; choose another name"
                    )));
                }
                self.engines
                    .insert(name.clone(), Engine::named(&name, kind));
            }
            let engine = self.engines.get_mut(&name).expect("present or just added");
            if let Some(kind) = kind
                && kind != engine.kind
            {
                return Err(error(format!(
                    "[engines.{name}]: already a {} engine; define a new name for a {} one",
                    engine.kind, kind
                )));
            }
            let command_only = [
                ("output", section.output.is_some()),
                ("prompt", section.prompt.is_some()),
            ];
            if engine.kind != EngineKind::Command
                && let Some((field, _)) = command_only.iter().find(|(_, set)| *set)
            {
                return Err(error(format!(
                    "[engines.{name}]: `{field}` is for `kind = \"command\"` engines only"
                )));
            }
            if let Some(output) = &section.output {
                engine.output = match output.as_str() {
                    "text" => None,
                    other => match EngineKind::parse(other) {
                        Some(
                            kind @ (EngineKind::Claude | EngineKind::Codex | EngineKind::Gemini),
                        ) => Some(kind),
                        _ => {
                            return Err(error(format!(
                                "[engines.{name}]: output = \"{output}\" is not a format baton reads; use \"text\" (stdout is the answer), \"claude\", \"codex\" or \"gemini\" (their JSON streams)"
                            )));
                        }
                    },
                };
            }
            if let Some(prompt) = &section.prompt {
                engine.prompt_on_stdin = match prompt.as_str() {
                    "stdin" => Some(true),
                    "args" => Some(false),
                    other => {
                        return Err(error(format!(
                            "[engines.{name}]: prompt = \"{other}\": use \"stdin\" (the default) or \"args\" (only where `args` put {{{{ prompt }}}})"
                        )));
                    }
                };
            }
            if let Some(command) = section.command {
                engine.command = command;
            }
            if let Some(args) = section.args {
                engine.args = args;
            }
            if let Some(model) = section.model {
                engine.model = Some(model);
            }
            if let Some(pass_env) = section.pass_env {
                engine.pass_env = pass_env;
            }
            let http_only = [
                ("api", section.api.is_some()),
                ("base_url", section.base_url.is_some()),
                ("key_env", section.key_env.is_some()),
            ];
            if engine.kind != EngineKind::Http
                && let Some((field, _)) = http_only.iter().find(|(_, set)| *set)
            {
                return Err(error(format!(
                    "[engines.{name}]: `{field}` is for the http engine only"
                )));
            }
            if let Some(api) = section.api {
                if api != "openai" && api != "anthropic" {
                    return Err(error(format!(
                        "[engines.{name}]: api = \"{api}\" is not one baton speaks; use \"openai\" (chat completions, and compatible servers) or \"anthropic\""
                    )));
                }
                engine.api = Some(api);
            }
            if let Some(base_url) = section.base_url {
                engine.base_url = Some(base_url);
            }
            if let Some(key_env) = section.key_env {
                engine.key_env = Some(key_env);
            }
        }
        for engine in self.engines.values() {
            if engine.kind != EngineKind::Command {
                continue;
            }
            if engine.command.is_empty() {
                return Err(error(format!(
                    "[engines.{}]: a command engine needs `command`, the program to run",
                    engine.name
                )));
            }
            for arg in &engine.args {
                baton_agent::render_arg(arg, Path::new("PROMPT_FILE"), Some("MODEL"), "PROMPT")
                    .map_err(|e| {
                        error(format!(
                            "[engines.{}]: argument `{arg}`: {e}; arguments may use {{{{ prompt_file }}}}, {{{{ model }}}} and {{{{ prompt }}}}",
                            engine.name
                        ))
                    })?;
            }
        }
        for (model, price) in file.prices {
            let valid = |p: Option<f64>| p.is_none_or(|p| p.is_finite() && p >= 0.0);
            if !(valid(Some(price.input))
                && valid(Some(price.output))
                && valid(price.cache_read)
                && valid(price.cache_write))
            {
                return Err(error(format!(
                    "[prices.\"{model}\"]: prices are dollars per million tokens, at least 0"
                )));
            }
            self.prices.set(&model, price);
        }
        Ok(())
    }

    /// The engine tasks call `name`.
    pub fn engine(&self, name: &str) -> Option<&Engine> {
        self.engines.get(name)
    }
}

/// Lowercase letters, digits and `-`, starting with a letter: an engine's name is written in
/// graph files and shown in tables.
fn valid_engine_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_overrides_an_engine_field_by_field() {
        let mut config = AgentConfig::default();
        config
            .merge_str(
                Path::new("user.toml"),
                "[engines.claude]\nmodel = \"claude-opus-4-5\"\nargs = [\"--x\"]\n",
            )
            .unwrap();
        config
            .merge_str(
                Path::new("baton.toml"),
                "[engines.claude]\ncommand = \"/opt/claude\"\n\n[prices.\"local-\"]\ninput = 0\noutput = 0\n",
            )
            .unwrap();
        let claude = config.engine("claude").unwrap();
        assert_eq!(claude.command, "/opt/claude");
        assert_eq!(claude.model.as_deref(), Some("claude-opus-4-5"));
        assert_eq!(claude.args, ["--x"]);
        assert_eq!(config.prices.price("local-llama").unwrap().input, 0.0);
    }

    #[test]
    fn new_engines_are_defined_with_a_kind() {
        let mut config = AgentConfig::default();
        config
            .merge_str(
                Path::new("baton.toml"),
                r#"
[engines.opus]
kind = "claude"
model = "claude-opus-4-5"

[engines.local]
kind = "command"
command = "llm"
args = ["-m", "{{ model }}", "-f", "{{ prompt_file }}"]
output = "text"
"#,
            )
            .unwrap();
        let opus = config.engine("opus").unwrap();
        assert_eq!(opus.kind, EngineKind::Claude);
        assert_eq!(opus.command, "claude");
        assert_eq!(opus.model.as_deref(), Some("claude-opus-4-5"));
        let local = config.engine("local").unwrap();
        assert_eq!(local.kind, EngineKind::Command);
        assert_eq!(local.output, None);
        let error = config
            .merge_str(Path::new("b.toml"), "[engines.codex]\nkind = \"claude\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("already a codex engine"), "{error}");
    }

    #[test]
    fn mistakes_name_the_file_and_line() {
        let mut config = AgentConfig::default();
        let error = config
            .merge_str(
                Path::new("baton.toml"),
                "[engines.claude]\ncomand = \"x\"\n",
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("baton.toml: line 2, column 1: unknown field `comand`"),
            "{error}"
        );
        let error = config
            .merge_str(
                Path::new("baton.toml"),
                "[engines.cluade]\ncommand = \"x\"\n",
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("[engines.cluade]: no engine of that name"),
            "{error}"
        );
    }
}
