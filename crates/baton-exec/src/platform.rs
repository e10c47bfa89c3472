//! Which process layer this process uses: Linux's fast paths, or the portable POSIX one that
//! macOS runs.
//!
//! The layer does five things, and each has two ways:
//!
//! | | Linux | portable (macOS, or `BATON_PLATFORM=portable`) |
//! |---|---|---|
//! | start a child in its own process group | baton's own `clone3`, born in its cgroup ([`crate::clone_exec`]) | std's `Command` (`posix_spawn` or fork and exec), `setpgid` |
//! | wait for it | a pidfd | `SIGCHLD` and `waitpid` |
//! | stop its whole tree | the group, then its cgroup | the group (`killpg`), then what carries the attempt's marks |
//! | find what a dead driver left | `/proc` | `/proc` on Linux; `sysctl(KERN_PROCARGS2)` on macOS |
//! | confine an agent's writes | Landlock | none on Linux; Seatbelt on macOS (not yet) |
//!
//! Linux can be told to use the portable layer (`BATON_PLATFORM=portable`), and the test
//! command runs the process tests a second time that way: the code a Mac runs is exercised on
//! every commit, not only type-checked.

use std::io::Write;
use std::sync::OnceLock;

/// The environment variable that forces a layer, read once per process: `portable` (on Linux:
/// no clone, pidfd, cgroup, Landlock or subreaper), `linux` or unset (the fast paths where the
/// kernel has them). Elsewhere than Linux the layer is always the portable one.
pub const PLATFORM_ENV: &str = "BATON_PLATFORM";

/// A process layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Linux,
    Portable,
}

impl Platform {
    /// The layer's name, as `baton doctor` and [`PLATFORM_ENV`] say it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Linux => "linux",
            Self::Portable => "portable",
        }
    }

    /// Whether Linux's fast paths are used.
    pub fn is_linux(self) -> bool {
        self == Self::Linux
    }
}

/// The layer this process uses.
pub fn platform() -> Platform {
    static PLATFORM: OnceLock<Platform> = OnceLock::new();
    *PLATFORM.get_or_init(|| {
        if !cfg!(target_os = "linux") {
            return Platform::Portable;
        }
        let value = std::env::var_os(PLATFORM_ENV);
        chosen(value.as_deref().and_then(|v| v.to_str())).unwrap_or_else(|| {
            // Best effort: a warning lost to a closed stderr must not stop the run.
            let _ = writeln!(
                std::io::stderr(),
                "baton: warning: {PLATFORM_ENV}={} is neither `linux` nor `portable`: using `linux`",
                value.unwrap_or_default().to_string_lossy()
            );
            Platform::Linux
        })
    })
}

/// What a value of [`PLATFORM_ENV`] asks for on Linux; `None` if it is neither name.
fn chosen(value: Option<&str>) -> Option<Platform> {
    match value {
        None | Some("" | "linux") => Some(Platform::Linux),
        Some("portable") => Some(Platform::Portable),
        Some(_) => None,
    }
}

/// Whether this process uses Linux's fast paths: always false where the target is not Linux,
/// so that the compiler drops them there.
pub(crate) fn linux() -> bool {
    cfg!(target_os = "linux") && platform().is_linux()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_names_a_layer_or_is_refused() {
        assert_eq!(chosen(None), Some(Platform::Linux));
        assert_eq!(chosen(Some("linux")), Some(Platform::Linux));
        assert_eq!(chosen(Some("portable")), Some(Platform::Portable));
        assert_eq!(chosen(Some("macos")), None);
        assert_eq!(Platform::Portable.name(), "portable");
    }
}
