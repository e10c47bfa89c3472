//! Exit codes, kept in one place and documented in the README.

/// The run succeeded (or the command did what was asked).
pub(crate) const SUCCESS: i32 = 0;
/// The run finished failed or blocked.
pub(crate) const RUN_FAILED: i32 = 1;
/// Bad input: a graph file with errors, bad flags, an unknown run.
pub(crate) const BAD_INPUT: i32 = 2;
/// baton itself could not work: the store could not be opened or written, a directory could
/// not be created.
pub(crate) const INTERNAL: i32 = 3;
/// The run is waiting for a person: it reached its soft budget (`baton approve RUN`).
pub(crate) const WAITING: i32 = 4;
/// The run was interrupted (Ctrl-C, SIGTERM, `baton cancel`).
pub(crate) const INTERRUPTED: i32 = 130;

/// Why a command failed, with the exit code that says so.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Already printed (e.g. graph diagnostics); exit with this code.
    Reported(i32),
    /// Standard output is a pipe whose reader went away (`baton runs | head -1`): what it
    /// wanted is written, the rest is not, and the command ends quietly, with the exit code it
    /// had come to (0 for a command that only prints; a run's own for `run`).
    Closed,
    BadInput(String),
    Internal(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(err: E) -> Self {
        Self::Internal(err.into())
    }
}
