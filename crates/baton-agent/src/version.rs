//! An agent CLI's version, read from what `--version` prints, and whether baton can drive it.

use std::fmt;

/// `major.minor.patch`, the first such triple in a `--version` line
/// (`2.1.332 (Claude Code)`, `codex-cli 0.171.0`, `0.61.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    pub fn parse(text: &str) -> Option<Version> {
        text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|word| {
                let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
                let version = Version(
                    parts.next()??,
                    parts.next()??,
                    parts.next().flatten().unwrap_or(0),
                );
                Some(version)
            })
            .next()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// What baton makes of an installed version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionCheck {
    Supported,
    /// Too old: what it lacks and the oldest version baton drives.
    Unsupported {
        minimum: Version,
        why: &'static str,
    },
    /// `--version` printed nothing baton could read: try anyway.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_clis_print() {
        assert_eq!(
            Version::parse("2.1.332 (Claude Code)"),
            Some(Version(2, 1, 332))
        );
        assert_eq!(
            Version::parse("codex-cli 0.171.0"),
            Some(Version(0, 171, 0))
        );
        assert_eq!(Version::parse("0.61.0\n"), Some(Version(0, 61, 0)));
        assert_eq!(Version::parse("aider 0.86"), Some(Version(0, 86, 0)));
        assert_eq!(Version::parse("no version here"), None);
        assert!(Version(0, 99, 0) < Version(0, 171, 0));
    }
}
