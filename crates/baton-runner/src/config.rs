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
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            engines: EngineKind::ALL
                .iter()
                .map(|kind| (kind.name().to_owned(), Engine::builtin(*kind)))
                .collect(),
            prices: PriceTable::builtin(),
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
        for (name, section) in file.engines {
            let Some(engine) = self.engines.get_mut(&name) else {
                let known: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
                return Err(error(format!(
                    "[engines.{name}]: no engine of that name; configurable engines: {}",
                    known.join(", ")
                )));
            };
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
