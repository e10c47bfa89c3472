//! The agent engines baton knows, and what each needs from its environment.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::version::{Version, VersionCheck};

/// Which CLI an engine drives, which decides its command line and how its output is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// Claude Code: `claude -p --output-format stream-json --verbose`, prompt on stdin.
    Claude,
    /// OpenAI Codex: `codex exec --json -`, prompt on stdin.
    Codex,
    /// Gemini CLI: `gemini --output-format stream-json`, prompt on stdin.
    Gemini,
    /// Aider: `aider --message-file FILE --yes-always --no-auto-commits`.
    Aider,
    /// A model API asked directly (OpenAI-compatible chat completions or Anthropic Messages)
    /// by `baton agent-http`, baton's own child process: for tasks that only produce text.
    Http,
    /// Any other program, defined in config: its `args` are templates (`{{ prompt_file }}`,
    /// `{{ model }}`, `{{ prompt }}`), and its stdout is read as `output` says.
    Command,
}

impl EngineKind {
    /// The engines that exist without configuration, under their own names.
    pub const ALL: [EngineKind; 5] = [
        Self::Claude,
        Self::Codex,
        Self::Gemini,
        Self::Aider,
        Self::Http,
    ];

    /// What a config file may name as an engine's `kind`.
    pub const KINDS: [EngineKind; 6] = [
        Self::Claude,
        Self::Codex,
        Self::Gemini,
        Self::Aider,
        Self::Http,
        Self::Command,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Aider => "aider",
            Self::Http => "http",
            Self::Command => "command",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::KINDS.into_iter().find(|kind| kind.name() == name)
    }

    /// The program run when no config names another; empty for `http`, which is baton
    /// itself.
    pub fn default_command(self) -> &'static str {
        match self {
            Self::Http | Self::Command => "",
            other => other.name(),
        }
    }

    /// Variables of baton's environment the CLI needs (its API keys, base URLs, settings):
    /// passed on top of the allow-list every task gets. Names, or prefixes ending in `*`.
    pub fn pass_env(self) -> &'static [&'static str] {
        match self {
            Self::Claude => &[
                "ANTHROPIC_*",
                "CLAUDE_CODE_*",
                "CLAUDE_CONFIG_DIR",
                "DISABLE_*",
            ],
            Self::Codex => &["OPENAI_*", "CODEX_*"],
            Self::Gemini => &["GEMINI_*", "GOOGLE_*"],
            Self::Aider => &[
                "AIDER_*",
                "OPENAI_*",
                "ANTHROPIC_*",
                "GEMINI_*",
                "OPENROUTER_*",
                "DEEPSEEK_*",
            ],
            // Its key's variable (`key_env`) is added to these.
            Self::Http => &["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"],
            // What it needs, its config says (`pass_env`).
            Self::Command => &[],
        }
    }

    /// Variables removed even when passed: Claude Code refuses to start inside another
    /// Claude Code session it detects by `CLAUDECODE`.
    pub fn remove_env(self) -> &'static [&'static str] {
        match self {
            Self::Claude => &["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"],
            _ => &[],
        }
    }

    /// Files the CLI leaves in its working directory that are its own, not the task's work:
    /// kept out of the task's commit (git pathspecs, from the worktree's root). Aider keeps
    /// its repository map's cache there whatever it is told.
    pub fn own_files(self) -> &'static [&'static str] {
        match self {
            Self::Aider => &[
                ".aider.tags.cache.v*",
                ".aider.chat.history.md",
                ".aider.input.history",
                ".aider.llm.history",
            ],
            _ => &[],
        }
    }

    /// Whether an installed version prints what baton parses.
    pub fn check_version(self, version: Option<Version>) -> VersionCheck {
        let Some(version) = version else {
            return VersionCheck::Unknown;
        };
        let (minimum, why) = match self {
            Self::Claude => (
                Version(1, 0, 0),
                "stream-json output with a final result line (usage, cost, session)",
            ),
            Self::Codex => (
                Version(0, 40, 0),
                "`codex exec --json` with thread/turn/item events",
            ),
            Self::Gemini => (Version(0, 10, 0), "`--output-format stream-json`"),
            Self::Aider => (
                Version(0, 60, 0),
                "`--analytics-log` (each message's tokens and cost) and `--no-analytics`",
            ),
            Self::Http | Self::Command => return VersionCheck::Supported,
        };
        if version < minimum {
            VersionCheck::Unsupported { minimum, why }
        } else {
            VersionCheck::Supported
        }
    }

    /// Whether a later attempt continues the agent's session: Claude Code's `--resume=ID`,
    /// `codex exec resume ID` and Gemini CLI's `--resume=ID`, each tested end to end after an
    /// attempt the API cut short mid-work. (Gemini keeps no session when its *first* request
    /// fails — "No previous sessions found" — but baton continues a session only once the
    /// agent got somewhere: see `continued_session`.)
    pub fn can_resume(self) -> bool {
        matches!(self, Self::Claude | Self::Codex | Self::Gemini)
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An engine as configured: a kind, the program that runs it, and what every task given to it
/// gets unless the task says otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Engine {
    /// What tasks call it (`engine = "claude"`, or a config's own name).
    pub name: String,
    pub kind: EngineKind,
    /// Program name (looked up in `PATH`) or path.
    pub command: String,
    /// Arguments added after baton's own, before the prompt.
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// Extra variables of baton's environment passed to this engine's tasks.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// `http` only: `openai` (chat completions; the default) or `anthropic` (Messages).
    #[serde(default)]
    pub api: Option<String>,
    /// `http` only: the API's base URL (default: OpenAI's or Anthropic's own).
    #[serde(default)]
    pub base_url: Option<String>,
    /// `http` only: the variable holding the API key (default `OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub key_env: Option<String>,
    /// `command` only: how its stdout is read — as one of the known engines' output, or
    /// (`None`) as plain text that is the answer, its exit code saying whether it worked.
    #[serde(default)]
    pub output: Option<EngineKind>,
    /// `command` only: `Some(false)` when the prompt goes only where `args` put
    /// `{{ prompt }}`. Otherwise it goes to a file when `args` name `{{ prompt_file }}`, else
    /// to stdin.
    #[serde(default)]
    pub prompt_on_stdin: Option<bool>,
}

impl Engine {
    /// The engine of this kind with nothing configured.
    pub fn builtin(kind: EngineKind) -> Self {
        Self {
            name: kind.name().to_owned(),
            kind,
            command: kind.default_command().to_owned(),
            args: Vec::new(),
            model: None,
            pass_env: Vec::new(),
            api: None,
            base_url: None,
            key_env: None,
            output: None,
            prompt_on_stdin: None,
        }
    }

    /// A new engine of `kind` called `name`, configured from scratch.
    pub fn named(name: &str, kind: EngineKind) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::builtin(kind)
        }
    }

    /// The parser its output needs: its own kind's, or for a `command` engine the one its
    /// config names (`Command` itself: plain text).
    pub fn stream_kind(&self) -> EngineKind {
        match self.kind {
            EngineKind::Command => self.output.unwrap_or(EngineKind::Command),
            kind => kind,
        }
    }

    /// `http`: the API it speaks, its base URL and the variable of its key.
    pub fn http_endpoint(&self) -> (&str, &str, &str) {
        let api = self.api.as_deref().unwrap_or("openai");
        let (base, key) = if api == "anthropic" {
            ("https://api.anthropic.com", "ANTHROPIC_API_KEY")
        } else {
            ("https://api.openai.com/v1", "OPENAI_API_KEY")
        };
        (
            api,
            self.base_url.as_deref().unwrap_or(base),
            self.key_env.as_deref().unwrap_or(key),
        )
    }
}
