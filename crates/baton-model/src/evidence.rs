//! What a task changed in its worktree, as recorded with the attempt.

use serde::{Deserialize, Serialize};

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Modified,
    Deleted,
    Renamed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    /// For a rename, where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub kind: ChangeKind,
    /// Lines added and removed; `None` for a binary file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
}

/// Everything a task changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub files: Vec<FileChange>,
    pub lines_added: u64,
    pub lines_removed: u64,
}

impl Evidence {
    /// Paths changed (a rename's new path).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|f| f.path.as_str())
    }
}

/// One acceptance check (`verify` command) and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub command: String,
    pub outcome: crate::Outcome,
    pub duration_ms: u64,
    /// The end of what it printed (stdout and stderr), redacted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
}

impl CheckResult {
    pub fn passed(&self) -> bool {
        self.outcome.is_success()
    }
}
