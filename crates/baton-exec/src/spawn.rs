//! Starting an attempt's child without std's `Command`, for every attempt whose program is a
//! path (all shell tasks, and agents whose CLI was found): most of them, and all the short
//! ones, whose cost is mostly this. The child is born in its cgroup and restricts itself to
//! its write sandbox on the way to its exec ([`crate::clone_exec`]).
//!
//! std's `Command` gets there too, but on the way it copies baton's whole environment into a
//! map, applies the attempt's changes, and builds a C string for every variable and argument,
//! one allocation each, before glibc's `posix_spawn` (whose own costs
//! [`crate::clone_exec`] describes). Here argv and envp are laid out in one buffer each, and the only syscalls are
//! the pipes, the clone and closing the child's ends (docs/PERFORMANCE.md has the numbers).

use std::ffi::OsStr;
#[cfg(target_os = "linux")]
use std::ffi::{CStr, c_char};
use std::io;
use std::io::Write;
use std::os::fd::OwnedFd;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
#[cfg(target_os = "linux")]
use std::path::Path;
#[cfg(target_os = "linux")]
use std::ptr;
use std::sync::OnceLock;

use nix::fcntl::OFlag;

#[cfg(target_os = "linux")]
use crate::clone_exec::Command;
#[cfg(target_os = "linux")]
pub(crate) use crate::clone_exec::Launch;
use crate::spec::AttemptSpec;
#[cfg(target_os = "linux")]
use crate::spec::Program;

/// The environment variable that chooses how attempts are started, read once per process:
/// `std` starts every attempt with std's `Command` (a way out where baton's own clone
/// misbehaves, on some platform or libc); `clone`, or unset, uses the clone wherever an
/// attempt needs nothing done between fork and exec. Any other value is named in a warning on
/// stderr, once, and the default is used.
pub const SPAWN_ENV: &str = "BATON_SPAWN";

/// What a child started elsewhere than by baton's own clone reports of its launch: nothing,
/// so no value of this type exists.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub(crate) enum Launch {}

#[cfg(not(target_os = "linux"))]
impl Launch {
    pub(crate) fn program(&self) -> &std::ffi::CStr {
        match *self {}
    }

    pub(crate) fn cwd(&self) -> &std::ffi::CStr {
        match *self {}
    }

    pub(crate) fn error(&self) -> Option<io::Error> {
        match *self {}
    }
}

/// Whether this process starts every attempt with std's `Command`: [`SPAWN_ENV`] is `std`, or
/// the process layer is the portable one ([`crate::platform`]).
pub fn spawns_with_std() -> bool {
    if !crate::platform::linux() {
        return true;
    }
    static WITH_STD: OnceLock<bool> = OnceLock::new();
    *WITH_STD.get_or_init(|| {
        let value = std::env::var_os(SPAWN_ENV);
        with_std(value.as_deref()).unwrap_or_else(|| {
            // Best effort: a warning lost to a closed stderr must not stop the run.
            let _ = writeln!(
                std::io::stderr(),
                "baton: warning: {SPAWN_ENV}={} is neither `std` nor `clone`: using `clone`",
                value.unwrap_or_default().to_string_lossy()
            );
            false
        })
    })
}

/// What a value of [`SPAWN_ENV`] asks for: std's `Command` or not; `None` if it is neither
/// `std` nor `clone`.
fn with_std(value: Option<&OsStr>) -> Option<bool> {
    match value.map(OsStrExt::as_bytes) {
        Some(b"std") => Some(true),
        None | Some(b"clone") => Some(false),
        Some(_) => None,
    }
}

/// What the child gets as stdin.
#[cfg(target_os = "linux")]
pub(crate) enum Stdin<'a> {
    /// This descriptor (`/dev/null`), duplicated onto 0.
    From(&'a OwnedFd),
    /// A new pipe; its writing end is returned.
    Piped,
}

/// A child started by [`spawn`]: its pid, and baton's ends of its pipes (close-on-exec, and
/// non-blocking, as the runtime wants them).
#[derive(Debug)]
pub(crate) struct Spawned {
    pub(crate) pid: u32,
    /// A pidfd for the child, when the kernel gave one with it.
    pub(crate) pidfd: Option<OwnedFd>,
    /// What the child reads until its exec, and what failed there, if anything.
    pub(crate) launch: Option<Launch>,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
}

/// NUL-terminated strings laid end to end in one buffer, for a C `char *const []`.
#[cfg(target_os = "linux")]
#[derive(Debug, Default)]
pub(crate) struct CStrings {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

#[cfg(target_os = "linux")]
impl CStrings {
    fn with_capacity(strings: usize, bytes: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(strings),
        }
    }

    /// Appends the concatenation of `parts` as one string. A NUL byte in it cannot be passed
    /// to a program: refused, as std refuses it.
    fn push(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        if parts.iter().any(|part| part.contains(&0)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "nul byte found in an argument or environment variable",
            ));
        }
        self.starts.push(self.bytes.len());
        for part in parts {
            self.bytes.extend_from_slice(part);
        }
        self.bytes.push(0);
        Ok(())
    }

    /// The NULL-terminated array of pointers into `self`, valid while `self` is neither
    /// changed nor dropped.
    pub(crate) fn pointers(&self) -> Vec<*const c_char> {
        let base = self.bytes.as_ptr();
        self.starts
            .iter()
            // SAFETY: every start is an offset into `bytes`.
            .map(|&start| unsafe { base.add(start) }.cast::<c_char>())
            .chain(std::iter::once(ptr::null()))
            .collect()
    }

    pub(crate) fn first(&self) -> Option<&CStr> {
        let start = *self.starts.first()?;
        CStr::from_bytes_until_nul(&self.bytes[start..]).ok()
    }
}

/// The program path, argv and envp of `spec`, if it can be spawned here: a shell script, or a
/// program named by a path. A bare program name is looked up in the `PATH` the child gets,
/// which std's `Command` does (by exec'ing in the child); `None` leaves it to std.
#[cfg(target_os = "linux")]
pub(crate) fn command_line(spec: &AttemptSpec) -> Option<io::Result<(CStrings, CStrings)>> {
    let argv = |args: &[&[u8]]| -> io::Result<CStrings> {
        let bytes = args.iter().map(|a| a.len() + 1).sum();
        let mut argv = CStrings::with_capacity(args.len(), bytes);
        for arg in args {
            argv.push(&[arg])?;
        }
        Ok(argv)
    };
    let argv = match &spec.program {
        Program::Shell(script) => {
            match crate::direct::direct(script, child_path(spec).as_deref(), &spec.cwd) {
                Some((program, args)) => {
                    let all: Vec<&[u8]> = std::iter::once(program.as_os_str().as_bytes())
                        .chain(args.iter().map(|a| a.as_bytes()))
                        .collect();
                    argv(&all)
                }
                // An absolute path: no PATH search, and the same shell whatever PATH the task sets.
                None if spec.shell.is_empty() => argv(&[b"/bin/sh", b"-c", script.as_bytes()]),
                // The task's own shell, looked up as the command that it is.
                None => {
                    let program = spec.shell[0].as_bytes();
                    if !program.contains(&b'/') {
                        return None;
                    }
                    let all: Vec<&[u8]> = spec
                        .shell
                        .iter()
                        .map(|a| a.as_bytes())
                        .chain([&b"-c"[..], script.as_bytes()])
                        .collect();
                    argv(&all)
                }
            }
        }
        Program::Exec { program, args } => {
            let program = program.as_os_str().as_bytes();
            if !program.contains(&b'/') {
                return None;
            }
            let all: Vec<&[u8]> = std::iter::once(program)
                .chain(args.iter().map(|a| a.as_bytes()))
                .collect();
            argv(&all)
        }
    };
    Some(argv.and_then(|argv| Ok((argv, environment(spec)?))))
}

/// The `PATH` the child gets: the last one `spec.env` sets, else baton's own if it inherits
/// baton's environment.
pub(crate) fn child_path(spec: &AttemptSpec) -> Option<std::ffi::OsString> {
    spec.env
        .iter()
        .rev()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| spec.inherit_env.then(|| std::env::var_os("PATH")).flatten())
}

/// The child's environment: `spec.env` on baton's own (when `inherit_env`), later entries
/// winning, as with std's `Command::envs`.
#[cfg(target_os = "linux")]
fn environment(spec: &AttemptSpec) -> io::Result<CStrings> {
    let mut vars: Vec<(&[u8], &[u8])> = Vec::new();
    let inherited;
    if spec.inherit_env {
        inherited = std::env::vars_os().collect::<Vec<_>>();
        vars.extend(inherited.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())));
    }
    vars.extend(spec.env.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())));
    // The last value of each name wins; the others are left out.
    let mut keep = vec![true; vars.len()];
    if vars.len() > 1 {
        let mut seen: std::collections::HashMap<&[u8], usize> =
            std::collections::HashMap::with_capacity(vars.len());
        for (i, (name, _)) in vars.iter().enumerate() {
            if let Some(earlier) = seen.insert(name, i) {
                keep[earlier] = false;
            }
        }
    }
    let bytes = vars.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut envp = CStrings::with_capacity(vars.len(), bytes);
    for ((name, value), keep) in vars.iter().zip(keep) {
        // A name with `=` in it cannot be set: std skips it too.
        if keep && !name.is_empty() && !name.contains(&b'=') {
            envp.push(&[name, b"=", value])?;
        }
    }
    Ok(envp)
}

/// Where a child starts, besides its working directory: born in a cgroup, restricted by a
/// Landlock ruleset (both open descriptors, held by the caller until the spawn returns).
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Placement {
    pub(crate) cgroup: Option<RawFd>,
    pub(crate) ruleset: Option<RawFd>,
}

/// Spawns `argv` with `envp` in `cwd`, as the leader of a new process group, with stdout and
/// stderr on new pipes. Returns without waiting for the child's exec: what fails in the child
/// is reported by its [`Launch`]. Fails with [`io::ErrorKind::Unsupported`], having started
/// nothing, if the child is to be born in a cgroup and this kernel cannot do that.
#[cfg(target_os = "linux")]
pub(crate) fn spawn(
    argv: CStrings,
    envp: CStrings,
    cwd: &Path,
    stdin: Stdin<'_>,
    placement: Placement,
) -> io::Result<Spawned> {
    let cwd = std::ffi::CString::new(cwd.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in the working directory",
        )
    })?;
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (in_child, in_parent) = match stdin {
        Stdin::From(_) => (None, None),
        Stdin::Piped => {
            let (read, write) = pipe()?;
            (Some(read), Some(write))
        }
    };
    let stdin_fd: RawFd = match (&stdin, &in_child) {
        (Stdin::From(fd), _) => fd.as_raw_fd(),
        (Stdin::Piped, Some(read)) => read.as_raw_fd(),
        (Stdin::Piped, None) => unreachable!("a piped stdin has its pipe"),
    };
    // Before the clone: if this fails, no child exists to be left unsupervised.
    for fd in [&out_read, &err_read].into_iter().chain(in_parent.as_ref()) {
        set_nonblocking(fd)?;
    }
    let (started, launch) = crate::clone_exec::start(Command {
        argv,
        envp,
        cwd,
        fds: [stdin_fd, out_write.as_raw_fd(), err_write.as_raw_fd()],
        cgroup: placement.cgroup,
        ruleset: placement.ruleset,
    })?;
    // The child's ends: the child has copies of its own (its descriptor table was copied at
    // the clone). Closing ours is what lets the pipes reach EOF when the child's side is done.
    drop((out_write, err_write, in_child));
    Ok(Spawned {
        pid: started.pid,
        pidfd: started.pidfd,
        launch: Some(launch),
        stdin: in_parent,
        stdout: out_read,
        stderr: err_read,
    })
}

/// A pipe whose ends are both close-on-exec: the child gets its end by `dup2`, which clears
/// the flag on the copy. Fails if an end would land on 0, 1 or 2 (baton's own were closed),
/// where `dup2` onto itself would leave the flag set.
#[cfg(target_os = "linux")]
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    if read.as_raw_fd() <= 2 || write.as_raw_fd() <= 2 {
        return Err(io::Error::other(
            "baton's own stdin, stdout or stderr is closed",
        ));
    }
    Ok((read, write))
}

pub(crate) fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // A new pipe end has no other status flags, so this does not need to read them first.
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    use std::ffi::OsString;

    use super::*;

    #[cfg(target_os = "linux")]
    fn strings(c: &CStrings) -> Vec<String> {
        c.bytes
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_last_value_of_a_variable_wins_in_its_first_place() {
        let mut spec = AttemptSpec::new(Program::Shell("true".into()), "/", "/dev/null");
        spec.inherit_env = false;
        spec.env = vec![
            (OsString::from("A"), OsString::from("1")),
            (OsString::from("B"), OsString::from("2")),
            (OsString::from("A"), OsString::from("3")),
            (OsString::from("C=D"), OsString::from("skipped")),
        ];
        let envp = environment(&spec).unwrap();
        assert_eq!(strings(&envp), ["B=2", "A=3"]);
        assert_eq!(envp.pointers().len(), 3, "two strings and the NULL");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_nul_byte_is_refused_not_cut_short() {
        let spec = AttemptSpec::new(Program::Shell("echo a\0b".into()), "/", "/dev/null");
        let err = command_line(&spec).unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn only_std_and_clone_choose_a_spawn() {
        assert_eq!(with_std(None), Some(false));
        assert_eq!(with_std(Some("clone".as_ref())), Some(false));
        assert_eq!(with_std(Some("std".as_ref())), Some(true));
        assert_eq!(with_std(Some("Std".as_ref())), None);
        assert_eq!(with_std(Some("".as_ref())), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_bare_program_name_is_left_to_std() {
        let spec = AttemptSpec::new(
            Program::Exec {
                program: "git".into(),
                args: vec![],
            },
            "/",
            "/dev/null",
        );
        assert!(command_line(&spec).is_none());
    }
}
