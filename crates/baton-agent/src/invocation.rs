//! The command line an engine wants for one attempt.
//!
//! The prompt never passes through a shell and never sits in argv: it goes to the CLI's stdin
//! (or, for aider, a private file), so a prompt that starts with `-` is not a flag and one
//! larger than the kernel's argument limit still arrives whole.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineKind};

/// What a task (or its engine's config) asks of the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Tools the agent may use without asking (Claude: `--allowedTools`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Claude's `--permission-mode` (default `acceptEdits`: edits in its working directory
    /// go through, anything else needs `allowed_tools`); Gemini's `--approval-mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// Codex's `--sandbox` (default `workspace-write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Arguments added after baton's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// How the prompt reaches the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptInput {
    /// Written to the CLI's stdin, which is then closed.
    Stdin(Vec<u8>),
    /// Written to this file (mode 0600) before the spawn; stdin is `/dev/null`.
    File { path: PathBuf, contents: Vec<u8> },
    /// Neither: the prompt is in the arguments (a `command` engine's `{{ prompt }}`).
    None,
}

/// A ready command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub prompt: PromptInput,
    /// Set on top of the task's environment.
    pub env: Vec<(String, String)>,
    /// Where a CLI that prints no JSON writes its own record, read once it exits.
    pub records: Option<RecordFiles>,
}

/// Files aider writes its record to, beside its prompt file (baton's, private): its analytics
/// log (each message's tokens and cost) and its chat history (its answer). Not in the
/// worktree, where they would be committed as the task's work; removed before each round, so
/// each holds one round's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFiles {
    pub analytics: PathBuf,
    pub chat: PathBuf,
    /// Its input history, which it keeps whether asked or not: read by nobody.
    pub input: PathBuf,
}

impl RecordFiles {
    /// The files beside `prompt_file` (`D/prompt.txt` → `D/prompt.aider-analytics.jsonl`, …).
    pub fn beside(prompt_file: &Path) -> RecordFiles {
        RecordFiles {
            analytics: prompt_file.with_extension("aider-analytics.jsonl"),
            chat: prompt_file.with_extension("aider-chat.md"),
            input: prompt_file.with_extension("aider-input.txt"),
        }
    }

    pub fn all(&self) -> [&Path; 3] {
        [&self.analytics, &self.chat, &self.input]
    }
}

impl Invocation {
    /// The command line as one might type it, for `--dry-run` and error messages. The prompt is
    /// not in it.
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_os_str())
            .chain(self.args.iter().map(OsString::as_os_str))
            .map(|a| {
                let a = a.to_string_lossy();
                if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c))
                {
                    format!("'{}'", a.replace('\'', r"'\''"))
                } else {
                    a.into_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One argument of a `command` engine: a template over `prompt_file`, `model` and `prompt`.
/// Each value lands in its one argument as it is (no shell is involved).
pub fn render_arg(
    template: &str,
    prompt_file: &Path,
    model: Option<&str>,
    prompt: &str,
) -> Result<String, minijinja::Error> {
    if !template.contains("{{") && !template.contains("{%") {
        return Ok(template.to_owned());
    }
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.render_str(
        template,
        minijinja::context! {
            prompt_file => prompt_file.to_string_lossy(),
            model => model.unwrap_or_default(),
            prompt => prompt,
        },
    )
}

impl Engine {
    /// The command line for one attempt.
    ///
    /// `preamble` is what baton tells the agent beside the task (its scope, that its work will
    /// be verified): a system prompt where the CLI takes one, else prepended to the prompt.
    /// `resume` continues an earlier session of the same agent where the engine can.
    /// `prompt_file` is where an engine that reads its prompt from a file gets it.
    pub fn invocation(
        &self,
        prompt: &str,
        preamble: Option<&str>,
        options: &AgentOptions,
        resume: Option<&str>,
        prompt_file: &Path,
    ) -> Invocation {
        let mut args: Vec<OsString> = Vec::new();
        let mut arg = |a: &str| args.push(a.into());
        let model = options.model.as_deref().or(self.model.as_deref());
        let mut env = Vec::new();
        let mut records = None;
        let mut prompt_text = prompt.to_owned();
        let prompt = match self.kind {
            EngineKind::Claude => {
                for a in ["-p", "--output-format", "stream-json", "--verbose"] {
                    arg(a);
                }
                arg("--permission-mode");
                arg(options.permission_mode.as_deref().unwrap_or("acceptEdits"));
                if !options.allowed_tools.is_empty() {
                    arg("--allowedTools");
                    arg(&options.allowed_tools.join(","));
                }
                if let Some(model) = model {
                    arg("--model");
                    arg(model);
                }
                if let Some(turns) = options.max_turns {
                    arg("--max-turns");
                    arg(&turns.to_string());
                }
                if let Some(preamble) = preamble {
                    arg("--append-system-prompt");
                    arg(preamble);
                }
                if let Some(session) = resume {
                    // With `=`: an id can never be taken for a flag.
                    arg(&format!("--resume={session}"));
                }
                for a in self.args.iter().chain(&options.args) {
                    arg(a);
                }
                PromptInput::Stdin(prompt_text.into_bytes())
            }
            EngineKind::Codex => {
                arg("exec");
                for a in ["--json", "--skip-git-repo-check"] {
                    arg(a);
                }
                arg("--sandbox");
                arg(options.sandbox.as_deref().unwrap_or("workspace-write"));
                if let Some(model) = model {
                    arg("--model");
                    arg(model);
                }
                for a in self.args.iter().chain(&options.args) {
                    arg(a);
                }
                if let Some(session) = resume {
                    arg("resume");
                    arg(session);
                }
                if let Some(preamble) = preamble {
                    prompt_text = format!("{preamble}\n\n{prompt_text}");
                }
                // `-`: read the prompt from stdin (codex reads stdin even when given a prompt
                // argument, and would wait on it).
                arg("-");
                PromptInput::Stdin(prompt_text.into_bytes())
            }
            EngineKind::Gemini => {
                arg("--output-format");
                arg("stream-json");
                arg("--approval-mode");
                arg(options.permission_mode.as_deref().unwrap_or("auto_edit"));
                if let Some(model) = model {
                    arg("--model");
                    arg(model);
                }
                if let Some(session) = resume {
                    // With `=`: an id can never be taken for a flag (0.61 takes a session's
                    // uuid, its index, or `latest`).
                    arg(&format!("--resume={session}"));
                }
                for a in self.args.iter().chain(&options.args) {
                    arg(a);
                }
                if let Some(preamble) = preamble {
                    prompt_text = format!("{preamble}\n\n{prompt_text}");
                }
                // No `-p`: headless because stdin is not a terminal, it reads the prompt from
                // stdin (and would put an argument's prompt after it). It gives up on stdin
                // that stays empty for 500 ms, so the prompt must be written at the spawn.
                // baton made the directory it runs in; Gemini asks before working in a folder
                // it has not been told to trust, and headless nobody can answer.
                env.push(("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned()));
                PromptInput::Stdin(prompt_text.into_bytes())
            }
            EngineKind::Aider => {
                let files = RecordFiles::beside(prompt_file);
                for (flag, path) in [
                    ("--message-file", prompt_file),
                    ("--analytics-log", &files.analytics),
                    ("--chat-history-file", &files.chat),
                    ("--input-history-file", &files.input),
                ] {
                    args.push(flag.into());
                    args.push(path.into());
                }
                records = Some(files);
                // Where git has no identity, aider writes a placeholder one into the
                // repository's config (which the worktree shares with the user's) and stops
                // when it may not. It makes no commits (baton does): an identity for its
                // process alone keeps it out of the config.
                for (key, value) in [
                    ("GIT_CONFIG_COUNT", "2"),
                    ("GIT_CONFIG_KEY_0", "user.name"),
                    ("GIT_CONFIG_VALUE_0", "baton"),
                    ("GIT_CONFIG_KEY_1", "user.email"),
                    ("GIT_CONFIG_VALUE_1", "baton@localhost"),
                ] {
                    env.push((key.to_owned(), value.to_owned()));
                }
                let mut arg = |a: &str| args.push(a.into());
                for a in [
                    "--yes-always",
                    // baton owns commits: it commits each task's changes on the task's branch.
                    "--no-auto-commits",
                    "--no-dirty-commits",
                    // Nor may it add its own files to the repository's `.gitignore`: that
                    // change would be committed as the task's.
                    "--no-gitignore",
                    "--no-pretty",
                    "--no-stream",
                    "--no-check-update",
                    "--no-show-model-warnings",
                    // For this run only: `--analytics-disable` would turn the user's analytics
                    // off for good. The log above is written either way.
                    "--no-analytics",
                ] {
                    arg(a);
                }
                if let Some(model) = model {
                    arg("--model");
                    arg(model);
                }
                for a in self.args.iter().chain(&options.args) {
                    arg(a);
                }
                if let Some(preamble) = preamble {
                    prompt_text = format!("{preamble}\n\n{prompt_text}");
                }
                PromptInput::File {
                    path: prompt_file.to_owned(),
                    contents: prompt_text.into_bytes(),
                }
            }
            EngineKind::Http => {
                let (api, base_url, key_env) = self.http_endpoint();
                for a in [
                    "agent-http",
                    "--api",
                    api,
                    "--base-url",
                    base_url,
                    "--key-env",
                    key_env,
                ] {
                    arg(a);
                }
                // The caller checks that there is a model: an API has no default.
                arg("--model");
                arg(model.unwrap_or_default());
                if let Some(preamble) = preamble {
                    arg("--system");
                    arg(preamble);
                }
                for a in self.args.iter().chain(&options.args) {
                    arg(a);
                }
                PromptInput::Stdin(prompt_text.into_bytes())
            }
            EngineKind::Command => {
                if let Some(preamble) = preamble {
                    prompt_text = format!("{preamble}\n\n{prompt_text}");
                }
                let uses_file = self.args.iter().any(|a| a.contains("prompt_file"));
                for template in &self.args {
                    arg(&render_arg(template, prompt_file, model, &prompt_text)
                        .unwrap_or_else(|_| template.clone()));
                }
                for a in &options.args {
                    arg(a);
                }
                if uses_file {
                    PromptInput::File {
                        path: prompt_file.to_owned(),
                        contents: prompt_text.into_bytes(),
                    }
                } else if self.prompt_on_stdin == Some(false) {
                    PromptInput::None
                } else {
                    PromptInput::Stdin(prompt_text.into_bytes())
                }
            }
        };
        Invocation {
            program: PathBuf::from(&self.command),
            args,
            prompt,
            env,
            records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(inv: &Invocation) -> Vec<String> {
        inv.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn claude_gets_the_prompt_on_stdin_never_in_argv() {
        let engine = Engine::builtin(EngineKind::Claude);
        let options = AgentOptions {
            model: Some("claude-sonnet-4-5".into()),
            max_turns: Some(12),
            allowed_tools: vec!["Read".into(), "Bash(cargo test:*)".into()],
            ..AgentOptions::default()
        };
        let inv = engine.invocation(
            "--help me",
            Some("Only touch src/."),
            &options,
            Some("-s"),
            Path::new("/unused"),
        );
        assert_eq!(inv.program, PathBuf::from("claude"));
        assert_eq!(
            args(&inv),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Read,Bash(cargo test:*)",
                "--model",
                "claude-sonnet-4-5",
                "--max-turns",
                "12",
                "--append-system-prompt",
                "Only touch src/.",
                "--resume=-s",
            ]
        );
        assert_eq!(inv.prompt, PromptInput::Stdin(b"--help me".to_vec()));
        assert!(!inv.display().contains("help me"));
    }

    #[test]
    fn codex_reads_the_prompt_from_stdin_with_a_dash() {
        let mut engine = Engine::builtin(EngineKind::Codex);
        engine.args = vec!["-c".into(), "model_provider=mock".into()];
        let inv = engine.invocation(
            "fix it",
            Some("Scope: src/"),
            &AgentOptions::default(),
            None,
            Path::new("/unused"),
        );
        let args = args(&inv);
        assert_eq!(&args[..3], ["exec", "--json", "--skip-git-repo-check"]);
        assert!(
            args.windows(2)
                .any(|w| w == ["--sandbox", "workspace-write"])
        );
        assert!(args.windows(2).any(|w| w == ["-c", "model_provider=mock"]));
        assert_eq!(args.last().map(String::as_str), Some("-"));
        assert_eq!(
            inv.prompt,
            PromptInput::Stdin(b"Scope: src/\n\nfix it".to_vec())
        );
    }

    #[test]
    fn gemini_reads_the_prompt_from_stdin_and_may_edit() {
        let mut engine = Engine::builtin(EngineKind::Gemini);
        engine.command = "/opt/gemini".into();
        let options = AgentOptions {
            model: Some("gemini-2.5-pro".into()),
            ..AgentOptions::default()
        };
        let inv = engine.invocation(
            "-p not a flag",
            Some("Scope: docs/"),
            &options,
            Some("-1"),
            Path::new("/unused"),
        );
        assert_eq!(inv.program, PathBuf::from("/opt/gemini"));
        // What gemini 0.61 was run with end to end (crates/baton/tests/cli/agents/mod.rs).
        assert_eq!(
            args(&inv),
            [
                "--output-format",
                "stream-json",
                "--approval-mode",
                "auto_edit",
                "--model",
                "gemini-2.5-pro",
                "--resume=-1",
            ]
        );
        assert_eq!(
            inv.prompt,
            PromptInput::Stdin(b"Scope: docs/\n\n-p not a flag".to_vec())
        );
        assert_eq!(
            inv.env,
            [("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned())]
        );
        // A task may ask for another approval mode (`plan`: read only).
        let options = AgentOptions {
            permission_mode: Some("plan".into()),
            ..AgentOptions::default()
        };
        let inv = engine.invocation("p", None, &options, None, Path::new("/unused"));
        assert!(
            args(&inv)
                .windows(2)
                .any(|w| w == ["--approval-mode", "plan"])
        );
    }

    #[test]
    fn aider_reads_a_file_and_never_commits() {
        let engine = Engine::builtin(EngineKind::Aider);
        let inv = engine.invocation(
            "p",
            None,
            &AgentOptions::default(),
            None,
            Path::new("/tmp/x/prompt.txt"),
        );
        let args = args(&inv);
        assert_eq!(&args[..2], ["--message-file", "/tmp/x/prompt.txt"]);
        assert!(args.contains(&"--no-auto-commits".to_owned()));
        assert!(args.contains(&"--no-gitignore".to_owned()));
        assert!(matches!(inv.prompt, PromptInput::File { .. }));
        // Its record goes beside the prompt, out of the worktree.
        let records = inv.records.unwrap();
        assert_eq!(records, RecordFiles::beside(Path::new("/tmp/x/prompt.txt")));
        let t = RecordFiles::beside(Path::new("/t/plan+api/review.txt"));
        assert_eq!(
            t.analytics,
            Path::new("/t/plan+api/review.aider-analytics.jsonl")
        );
        assert_eq!(t.chat, Path::new("/t/plan+api/review.aider-chat.md"));
        for (flag, path) in [
            ("--analytics-log", &records.analytics),
            ("--chat-history-file", &records.chat),
            ("--input-history-file", &records.input),
        ] {
            let at = args.iter().position(|a| a == flag).unwrap();
            assert_eq!(Path::new(&args[at + 1]), path.as_path());
        }
    }
}
