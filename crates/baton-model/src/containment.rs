use serde::{Deserialize, Serialize};

/// What held an attempt's processes together, so that baton could end all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Containment {
    /// A cgroup v2 of its own, joined before exec and killed whole at the end: nothing the
    /// attempt started can outlive it, not even a descendant that called `setsid`.
    Cgroup,
    /// Its process group only (no writable cgroup v2): a descendant that calls `setsid`
    /// leaves the group and can outlive the attempt.
    ProcessGroup,
}

impl Containment {
    /// The name used in the store, the events and the JSON result.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cgroup => "cgroup",
            Self::ProcessGroup => "process_group",
        }
    }

    /// The inverse of [`Containment::as_str`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "cgroup" => Some(Self::Cgroup),
            "process_group" => Some(Self::ProcessGroup),
            _ => None,
        }
    }
}

impl std::fmt::Display for Containment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
