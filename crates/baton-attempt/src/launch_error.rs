//! Why an attempt could not be started, classified where it is known: what will fail the same
//! way however often it is tried (a template that does not render, an engine that is not
//! defined) fails the task at once; what may go away (a file that could not be written) is the
//! machinery's failure and retried.

use std::path::PathBuf;

use baton_model::Outcome;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// `run` or `prompt` does not render against its predecessors' results.
    #[error("cannot expand `{field}`: {message}")]
    Template {
        field: &'static str,
        message: String,
    },
    #[error("engine `{0}` is not defined: define it under [engines.{0}] in baton.toml")]
    UnknownEngine(String),
    #[error(
        "engine `{0}` needs a model: set `model` on the task or under [engines.{0}] in baton.toml"
    )]
    NoModel(String),
    /// A task's acceptance reviewer cannot run, for the reason given.
    #[error("its reviewer cannot run: {0}")]
    NoReviewer(String),
    /// A `${VAR}` in `env` names a variable baton's environment does not have.
    #[error("env `{key}` {message}")]
    EnvReference { key: String, message: String },
    /// A NUL byte cannot be passed to a program (argv, environment).
    #[error("{what} holds a NUL byte, which no program can be given")]
    Nul { what: String },
    #[error(
        "cwd `{cwd}` leads outside the repository (to {to}) through a symbolic link",
        cwd = cwd.display(),
        to = to.display()
    )]
    CwdEscapes { cwd: PathBuf, to: PathBuf },
    /// The attempt's write sandbox could not be set up.
    #[error("{0}")]
    Confinement(String),
    /// A file the attempt is handed could not be written.
    #[error("cannot write the {what} {}: {source}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl LaunchError {
    /// Whether trying again cannot help: the same graph, results and environment give the same
    /// error.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Template { .. }
            | Self::UnknownEngine(_)
            | Self::NoModel(_)
            | Self::NoReviewer(_)
            | Self::EnvReference { .. }
            | Self::Nul { .. }
            | Self::CwdEscapes { .. } => true,
            // The kernel or the file system may be in another state next time.
            Self::Confinement(_) | Self::File { .. } => false,
        }
    }

    /// The outcome of the attempt that could not start, `text` being this error as it may be
    /// recorded (redacted).
    pub fn outcome(&self, text: String) -> Outcome {
        if self.is_permanent() {
            Outcome::LaunchFailed { error: text }
        } else {
            Outcome::SpawnFailed { error: text }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_cannot_change_is_not_retried_and_what_can_is() {
        let template = LaunchError::Template {
            field: "run",
            message: "undefined value".into(),
        };
        assert!(matches!(
            template.outcome(template.to_string()),
            Outcome::LaunchFailed { .. }
        ));
        assert_eq!(template.outcome(String::new()).failure_class(), None);
        let file = LaunchError::File {
            what: "prompt file",
            path: "/nowhere".into(),
            source: std::io::ErrorKind::PermissionDenied.into(),
        };
        assert!(matches!(
            file.outcome(file.to_string()),
            Outcome::SpawnFailed { .. }
        ));
        assert!(
            file.to_string()
                .starts_with("cannot write the prompt file /nowhere: ")
        );
    }
}
