//! Running `git`, hardened: a worktree an agent touched may hold hooks, filter drivers or an
//! fsmonitor it planted, and the user's global config may set any of them too. Every command
//! runs with no system or global config, hooks pointed at an empty place, no fsmonitor, no
//! pager, no prompts, and a fixed identity for baton's own commits.
//!
//! The environment is scrubbed of every `GIT_*` variable (but the `GIT_TRACE*` ones, which only
//! add diagnostics) before baton's own are set: a variable such as `GIT_CONFIG_PARAMETERS`,
//! `GIT_DIR` or `GIT_OBJECT_DIRECTORY` inherited from the caller (baton started from a git hook,
//! say) would otherwise inject config or point git at another repository.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A git command that failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
    #[error("`git {args}` failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Other(String),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Git;

impl Git {
    pub(crate) fn new() -> Self {
        Self
    }

    /// `git ARGS` in `dir`, hardened.
    pub(crate) fn command(&self, dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("git");
        for (name, _) in std::env::vars_os() {
            if is_scrubbed(&name) {
                command.env_remove(name);
            }
        }
        command
            .current_dir(dir)
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.pager=cat",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "tag.gpgsign=false",
                // A repository's config may turn these on; each would make baton's merges or
                // checkouts do more than baton asked: replay recorded resolutions, recurse into
                // submodules (and fetch them), start a detached `gc` racing parallel worktrees.
                "-c",
                "rerere.enabled=false",
                "-c",
                "submodule.recurse=false",
                "-c",
                "gc.auto=0",
                "-c",
                "maintenance.auto=false",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            // Replace refs (`git replace`) would let a planted ref swap the content baton
            // reads and merges.
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            // Never wait for an editor: every message baton needs is given on the command line.
            .env("GIT_EDITOR", ":")
            .env("GIT_MERGE_AUTOEDIT", "no")
            .env("GIT_PAGER", "cat")
            .env("GIT_AUTHOR_NAME", "baton")
            .env("GIT_AUTHOR_EMAIL", "baton@localhost")
            .env("GIT_COMMITTER_NAME", "baton")
            .env("GIT_COMMITTER_EMAIL", "baton@localhost")
            .stdin(Stdio::null());
        command
    }

    /// Runs `git ARGS` in `dir` and returns its stdout; a non-zero exit is an error with
    /// its stderr.
    pub(crate) fn output(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        let output = self.run(dir, args)?;
        if !output.status.success() {
            return Err(failed(args, &output));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs `git ARGS` in `dir` and returns what happened, whatever the exit status: for the
    /// commands whose exit status is an answer (`diff --quiet`, `rev-parse --verify --quiet`,
    /// a `merge` that conflicts).
    pub(crate) fn run(&self, dir: &Path, args: &[&str]) -> Result<Output, GitError> {
        self.command(dir, args).output().map_err(GitError::Spawn)
    }

    /// Like [`Git::output`], with `input` on stdin: commit messages go there rather than on
    /// the command line, which limits one argument to 128 KiB on Linux.
    pub(crate) fn output_with_input(
        &self,
        dir: &Path,
        args: &[&str],
        input: &str,
    ) -> Result<String, GitError> {
        let mut child = self
            .command(dir, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(GitError::Spawn)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = input.to_owned();
        // Written from a thread so that git filling its stdout pipe first cannot deadlock us.
        let writer = std::thread::spawn(move || {
            // git may exit without reading everything (an error); its stderr says why.
            let _ = stdin.write_all(input.as_bytes());
        });
        let output = child.wait_with_output().map_err(GitError::Spawn)?;
        let _ = writer.join();
        if !output.status.success() {
            return Err(failed(args, &output));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The error for a command that exited with `output`'s non-zero status.
pub(crate) fn failed(args: &[&str], output: &Output) -> GitError {
    GitError::Failed {
        args: args.join(" "),
        status: output.status.to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    }
}

fn is_scrubbed(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b"GIT_") && !name.starts_with(b"GIT_TRACE")
}
