//! Confining an attempt's writes with Landlock (Linux 5.13+), through raw syscalls.
//!
//! The ruleset is built in baton's own process before the spawn, where allocating and failing
//! are ordinary; the child only calls `prctl` and `landlock_restrict_self` between fork and
//! exec, two async-signal-safe syscalls. Only write-type accesses are handled, so reading and
//! executing stay open everywhere; so does the network (Landlock's network rules are never
//! asked for). From ABI 6 the sandbox is also *scoped*: a confined process can neither signal
//! a process outside its sandbox (baton, the user's shell, another task) nor connect to an
//! abstract Unix socket made outside it. A restriction is inherited by every descendant and
//! cannot be lifted.
//!
//! Not the `landlock` crate: its ruleset is enforced by `RulesetCreated::restrict_self`, which
//! would run in the child between fork and exec, where only async-signal-safe calls belong;
//! here the child makes two syscalls on a ruleset the parent built.

#[cfg(target_os = "linux")]
use std::ffi::CString;
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::fd::{OwnedFd, RawFd};
#[cfg(target_os = "linux")]
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where an attempt may write: beneath each of `allowed` (directories, or single files), and
/// a few device files every program expects to open for writing. Everything else on the file
/// system can be read and executed but not written, created, removed, renamed or truncated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSandbox {
    allowed: Vec<PathBuf>,
}

impl WriteSandbox {
    /// Writes allowed beneath `allowed`. A path that does not exist when the attempt starts is
    /// left out: create it first if the task needs it.
    pub fn new(allowed: impl IntoIterator<Item = PathBuf>) -> Self {
        Self {
            allowed: allowed.into_iter().collect(),
        }
    }

    pub fn allowed(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// The Landlock ruleset of this sandbox, to be enforced in the child by
    /// [`restrict_self`]. Fails where Landlock is unavailable, or a path cannot be opened.
    pub(crate) fn ruleset(&self) -> io::Result<OwnedFd> {
        let abi = landlock_support().map_err(|why| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("Landlock is not available: {why}"),
            )
        })?;
        let handled = handled_writes(abi);
        let ruleset = create_ruleset(handled, scopes(abi))?;
        for path in &self.allowed {
            add_rule(&ruleset, path, handled)?;
        }
        // Shells redirect to /dev/null; programs write to their terminal and open
        // pseudo-terminals (`script`, node-pty). Existing device files only, written: no
        // file can be created or removed under /dev, and no disk device is reachable.
        for device in DEVICES {
            add_rule(&ruleset, Path::new(device), handled & FILE_WRITES)?;
        }
        Ok(ruleset)
    }
}

/// A new ruleset handling `handled`, scoped to `scoped` (0: no scope, for kernels before
/// ABI 6, which refuse an attribute that long).
#[cfg(target_os = "linux")]
fn create_ruleset(handled: u64, scoped: u64) -> io::Result<OwnedFd> {
    let attr = RulesetAttr {
        handled_access_fs: handled,
        handled_access_net: 0,
        scoped,
    };
    // Before ABI 6 the kernel knows only the first field (or two): it accepts a prefix, and
    // refuses bytes it does not know unless they are zero — a prefix is passed.
    let size = if scoped == 0 {
        std::mem::size_of::<u64>()
    } else {
        std::mem::size_of::<RulesetAttr>()
    };
    // SAFETY: `attr` is a valid `landlock_ruleset_attr` of at least `size` bytes; the kernel
    // reads only that many and treats the fields after them as zero (no network restriction;
    // `handled_access_net` is zero anyway, so no network rule is asked for).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new file descriptor (close-on-exec) that nothing
    // else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(not(target_os = "linux"))]
fn create_ruleset(_handled: u64, _scoped: u64) -> io::Result<OwnedFd> {
    Err(io::ErrorKind::Unsupported.into())
}

/// The device files a confined process may still open for writing.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Set (to anything) in baton's environment, baton behaves as on a kernel without Landlock:
/// [`landlock_abi`] is `None`. For tests of what happens there, and for a kernel whose
/// Landlock misbehaves.
pub const NO_LANDLOCK_ENV: &str = "BATON_NO_LANDLOCK";

/// The Landlock ABI version the running kernel offers, or `None` where Landlock is missing or
/// disabled (always, off Linux), or [`NO_LANDLOCK_ENV`] is set. Asked once per process.
pub fn landlock_abi() -> Option<u32> {
    landlock_support().ok()
}

/// What confines an attempt's writes here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxKind {
    /// Landlock, at this ABI version (Linux).
    Landlock(u32),
    /// Seatbelt, through `sandbox-exec` (macOS).
    Seatbelt,
}

impl SandboxKind {
    /// Its name, as a confined task sees it in `BATON_SANDBOX`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Landlock(_) => "landlock",
            Self::Seatbelt => "seatbelt",
        }
    }
}

/// The write sandbox attempts get here, or why there is none, completing "… because …":
/// Landlock on Linux's layer ([`landlock_support`]); Seatbelt on macOS, where
/// `/usr/bin/sandbox-exec` is; nothing on Linux's portable layer. [`NO_LANDLOCK_ENV`] set:
/// none, on either.
pub fn write_sandbox() -> Result<SandboxKind, &'static str> {
    #[cfg(target_os = "macos")]
    return seatbelt_support();
    #[cfg(not(target_os = "macos"))]
    landlock_support().map(SandboxKind::Landlock)
}

/// Seatbelt where `sandbox-exec` is, asked once per process.
#[cfg(target_os = "macos")]
fn seatbelt_support() -> Result<SandboxKind, &'static str> {
    static SUPPORT: std::sync::OnceLock<Result<SandboxKind, &'static str>> =
        std::sync::OnceLock::new();
    *SUPPORT.get_or_init(|| {
        if std::env::var_os(NO_LANDLOCK_ENV).is_some() {
            Err("BATON_NO_LANDLOCK is set")
        } else if Path::new(crate::seatbelt::SANDBOX_EXEC).exists() {
            Ok(SandboxKind::Seatbelt)
        } else {
            Err("/usr/bin/sandbox-exec is missing")
        }
    })
}

/// [`landlock_abi`], or why attempts cannot be confined here, completing "… because …".
pub fn landlock_support() -> Result<u32, &'static str> {
    static ABI: std::sync::OnceLock<Result<u32, &'static str>> = std::sync::OnceLock::new();
    *ABI.get_or_init(|| {
        if std::env::var_os(NO_LANDLOCK_ENV).is_some() {
            return Err("BATON_NO_LANDLOCK is set");
        }
        if cfg!(target_os = "linux") && !crate::platform::linux() {
            return Err("BATON_PLATFORM=portable is set");
        }
        kernel_abi().ok_or(
            "this kernel has no Landlock (Linux 5.13+ with `landlock` in its `lsm=` boot \
             parameter)",
        )
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> Option<u32> {
    None
}

#[cfg(target_os = "linux")]
fn kernel_abi() -> Option<u32> {
    // SAFETY: the documented version query: no attribute, size 0, the version flag.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(abi).ok().filter(|&abi| abi >= 1)
}

/// Enforces `ruleset` on the calling process and all it will start. For the child between
/// fork and exec: async-signal-safe (two syscalls and `errno`, nothing allocated).
#[cfg(target_os = "linux")]
pub(crate) fn restrict_self(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: plain syscalls on integers. `no_new_privs` is what Landlock requires of an
    // unprivileged process, and keeps a setuid program from shedding the restriction.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Never called: off Linux there is no ruleset to enforce.
#[cfg(not(target_os = "linux"))]
pub(crate) fn restrict_self(_ruleset: RawFd) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// `struct landlock_ruleset_attr` as of ABI 6; older kernels are given the prefix they know.
#[cfg(target_os = "linux")]
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// ABI 6: no connecting to an abstract Unix socket made outside the sandbox.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
/// ABI 6: no signal to a process outside the sandbox.
const SCOPE_SIGNAL: u64 = 1 << 1;

/// What the sandbox is scoped to on the kernel's `abi`.
fn scopes(abi: u32) -> u64 {
    if abi >= 6 {
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    } else {
        0
    }
}

/// `struct landlock_path_beneath_attr`, packed as in the kernel's header.
#[cfg(target_os = "linux")]
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[cfg(target_os = "linux")]
const CREATE_RULESET_VERSION: u32 = 1 << 0;
#[cfg(target_os = "linux")]
const RULE_PATH_BENEATH: libc::c_int = 1;

const WRITE_FILE: u64 = 1 << 1;
const REMOVE_DIR: u64 = 1 << 4;
const REMOVE_FILE: u64 = 1 << 5;
const MAKE_CHAR: u64 = 1 << 6;
const MAKE_DIR: u64 = 1 << 7;
const MAKE_REG: u64 = 1 << 8;
const MAKE_SOCK: u64 = 1 << 9;
const MAKE_FIFO: u64 = 1 << 10;
const MAKE_BLOCK: u64 = 1 << 11;
const MAKE_SYM: u64 = 1 << 12;
/// ABI 2: linking or renaming into another directory.
const REFER: u64 = 1 << 13;
/// ABI 3: `truncate`, `ftruncate`, `open(O_TRUNC)`.
const TRUNCATE: u64 = 1 << 14;

/// The write accesses a rule on a single file (not a directory) may hold.
const FILE_WRITES: u64 = WRITE_FILE | TRUNCATE;

/// Every write-type access the kernel's `abi` knows. Reading and executing are left
/// unhandled, hence allowed everywhere. `IOCTL_DEV` (ABI 5) is left out too: it is not a
/// write to the file system, and handling it would refuse terminal ioctls on devices opened
/// later.
fn handled_writes(abi: u32) -> u64 {
    let mut access = WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM;
    if abi >= 2 {
        access |= REFER;
    }
    if abi >= 3 {
        access |= TRUNCATE;
    }
    access
}

/// Allows `access` beneath `path` (masked to what a file may hold if it is not a directory).
/// A missing path is skipped: nothing beneath it exists to be written.
#[cfg(target_os = "linux")]
fn add_rule(ruleset: &OwnedFd, path: &Path, access: u64) -> io::Result<()> {
    let name = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
    // SAFETY: a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::NotFound {
            return Ok(());
        }
        return Err(io::Error::new(
            error.kind(),
            format!("cannot open {} for the sandbox: {error}", path.display()),
        ));
    }
    // SAFETY: `open` returned a descriptor that nothing else owns.
    let parent = unsafe { OwnedFd::from_raw_fd(fd) };
    let access = if path.is_dir() {
        access
    } else {
        access & FILE_WRITES
    };
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: both descriptors are open, and `attr` is the packed struct the rule type names.
    let added = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if added != 0 {
        let error = io::Error::last_os_error();
        return Err(io::Error::new(
            error.kind(),
            format!("cannot allow writes beneath {}: {error}", path.display()),
        ));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn add_rule(_ruleset: &OwnedFd, _path: &Path, _access: u64) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_abis_handle_more() {
        assert_eq!(handled_writes(1) & (REFER | TRUNCATE), 0);
        assert_eq!(handled_writes(2) & REFER, REFER);
        assert_eq!(handled_writes(3) & TRUNCATE, TRUNCATE);
        // Reading and executing are never handled.
        assert_eq!(handled_writes(7) & 0b1101, 0);
    }
}
