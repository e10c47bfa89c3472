//! Containing an attempt in a cgroup v2 of its own, where the hierarchy is there and writable.
//!
//! A process group holds what an attempt starts only until a descendant calls `setsid` (a
//! daemonizing server, `nohup`-style wrappers, some test runners); a cgroup holds everything
//! forked inside it, whatever it does to its session, and `cgroup.kill` ends it whole. The
//! child joins its cgroup between fork and exec, so nothing it starts is ever outside. No
//! controller is enabled or needed: the cgroup only names the processes.
//!
//! The attempt's cgroup is made beneath baton's own (the `0::` line of `/proc/self/cgroup`,
//! under the `cgroup2` mount of `/proc/self/mountinfo`): that works in hybrid mode (the v2
//! hierarchy at `/sys/fs/cgroup/unified`), in a delegated systemd scope, and in a container
//! with its own cgroup namespace. Anything odd (no v2 mount, a read-only one, no permission,
//! unparsable `/proc` files) means process groups, silently: the attempt records which.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Set (to anything) in baton's environment, it never uses cgroups: every attempt is held by
/// its process group only. For machines where cgroups misbehave, and for tests.
pub const NO_CGROUP_ENV: &str = "BATON_NO_CGROUP";

/// The prefix of every cgroup baton makes for an attempt.
const PREFIX: &str = "baton-";

/// How long the end of an attempt waits for its killed cgroup to empty before leaving the
/// directory for later (a process in uninterruptible sleep, a slow NFS close). Killed processes
/// are normally gone within a millisecond.
const EMPTY_WAIT: Duration = Duration::from_millis(500);

/// baton's own cgroup, if attempts can be given cgroups beneath it. Looked up once.
#[derive(Debug)]
struct Hierarchy {
    dir: PathBuf,
    /// `cgroup.kill` exists (Linux 5.14+); otherwise members are killed one by one.
    has_kill: bool,
}

static HIERARCHY: OnceLock<Option<Hierarchy>> = OnceLock::new();

/// Set when a child could not join a cgroup although the probe said it could: from then on
/// this process uses process groups.
static BROKEN: AtomicBool = AtomicBool::new(false);

fn hierarchy() -> Option<&'static Hierarchy> {
    if BROKEN.load(Ordering::Relaxed) {
        return None;
    }
    HIERARCHY.get_or_init(detect).as_ref()
}

/// Whether attempts that ask for a cgroup get one: cgroup v2 is mounted, baton's own cgroup in
/// it is writable, and [`NO_CGROUP_ENV`] is not set. Found out once per process.
pub fn cgroups_available() -> bool {
    hierarchy().is_some()
}

/// Stops using cgroups in this process after a child failed to join one.
pub(crate) fn mark_broken() {
    BROKEN.store(true, Ordering::Relaxed);
}

fn detect() -> Option<Hierarchy> {
    if std::env::var_os(NO_CGROUP_ENV).is_some() {
        return None;
    }
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own_v2_path(&cgroup)?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let dir = v2_mounts(&mountinfo)
        .into_iter()
        .filter_map(|(root, mount)| join_under_mount(&root, &mount, path))
        .find(|dir| dir.join("cgroup.procs").is_file())?;
    let has_kill = probe(&dir)?;
    Some(Hierarchy { dir, has_kill })
}

/// The path of the `0::` (cgroup v2) line, if it is an absolute, live path.
fn own_v2_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .filter(|path| path.starts_with('/') && !path.ends_with(" (deleted)"))
}

/// `(root, mount point)` of each `cgroup2` mount in a `/proc/self/mountinfo` text.
fn v2_mounts(mountinfo: &str) -> Vec<(String, PathBuf)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            if right.split(' ').next()? != "cgroup2" {
                return None;
            }
            let mut fields = left.split(' ');
            let root = unescape(fields.nth(3)?);
            let mount = unescape(fields.next()?);
            Some((root, PathBuf::from(mount)))
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(code) = bytes
                .get(i + 1..i + 4)
                .and_then(|digits| std::str::from_utf8(digits).ok())
                .and_then(|digits| u8::from_str_radix(digits, 8).ok())
        {
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where cgroup `path` is under a mount of the hierarchy's `root`; `None` if the mount does
/// not show it (a bind mount of another subtree).
fn join_under_mount(root: &str, mount: &Path, path: &str) -> Option<PathBuf> {
    let relative = if root == "/" {
        path
    } else {
        let rest = path.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    let relative = relative.trim_start_matches('/');
    if relative.split('/').any(|part| part == "..") {
        return None;
    }
    Some(if relative.is_empty() {
        mount.to_owned()
    } else {
        mount.join(relative)
    })
}

/// Whether baton can make a cgroup beneath `dir` and move a child into it: it can make the
/// directory, write its `cgroup.procs`, and write `dir`'s own (moving a process needs write
/// access to the common ancestor's). Returns whether `cgroup.kill` exists.
fn probe(dir: &Path) -> Option<bool> {
    let probe = dir.join(format!("{PREFIX}probe-{}", std::process::id()));
    // A probe left by a crashed process with the same pid.
    let _ = fs::remove_dir(&probe);
    fs::create_dir(&probe).ok()?;
    let writable = |file: &Path| fs::OpenOptions::new().write(true).open(file).is_ok();
    let usable = writable(&probe.join("cgroup.procs")) && writable(&dir.join("cgroup.procs"));
    let has_kill = probe.join("cgroup.kill").is_file();
    let _ = fs::remove_dir(&probe);
    usable.then_some(has_kill)
}

/// One attempt's cgroup: made before the spawn, joined by the child before exec, killed whole
/// and removed when the attempt ends. Dropping it kills what is left and removes it, so no
/// process outlives its attempt even if the supervision is dropped half way.
#[derive(Debug)]
pub(crate) struct CgroupScope {
    dir: PathBuf,
    /// `cgroup.procs` of the cgroup, open for writing: the child writes `0` to it to join.
    procs: OwnedFd,
    has_kill: bool,
    removed: bool,
}

impl CgroupScope {
    /// A new cgroup named `baton-LABEL-PID-N`, or `None` where cgroups cannot be used (or this
    /// one could not be made: the attempt then runs in its process group only).
    pub(crate) fn create(label: &str) -> Option<CgroupScope> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let hierarchy = hierarchy()?;
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = format!(
            "{PREFIX}{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = hierarchy.dir.join(name);
        fs::create_dir(&dir).ok()?;
        let procs = match open_write(&dir.join("cgroup.procs")) {
            Ok(fd) => fd,
            Err(_) => {
                let _ = fs::remove_dir(&dir);
                return None;
            }
        };
        Some(CgroupScope {
            dir,
            procs,
            has_kill: hierarchy.has_kill,
            removed: false,
        })
    }

    /// The descriptor the child passes to [`join`] between fork and exec.
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// SIGKILLs every process in the cgroup, including those that left the process group.
    pub(crate) fn kill(&self) {
        kill_members(&self.dir, self.has_kill);
    }

    /// Kills what is left and removes the cgroup, waiting (briefly, without blocking the
    /// runtime) for killed processes to go. In the usual case the cgroup is already empty and
    /// this is one `rmdir`.
    pub(crate) async fn finish(mut self) {
        if self.try_remove() {
            return;
        }
        self.kill();
        let give_up = tokio::time::Instant::now() + EMPTY_WAIT;
        let mut pause = Duration::from_millis(1);
        while tokio::time::Instant::now() < give_up {
            tokio::time::sleep(pause).await;
            if self.try_remove() {
                return;
            }
            pause = (pause * 2).min(Duration::from_millis(50));
        }
        // Dropped here: one more kill and removal, then a thread keeps trying.
    }

    /// Removes the cgroup if it is empty; `true` once it is gone.
    fn try_remove(&mut self) -> bool {
        if !self.removed {
            match fs::remove_dir(&self.dir) {
                Ok(()) => self.removed = true,
                Err(error) if error.kind() == io::ErrorKind::NotFound => self.removed = true,
                Err(_) => {}
            }
        }
        self.removed
    }
}

impl Drop for CgroupScope {
    fn drop(&mut self) {
        if self.try_remove() {
            return;
        }
        self.kill();
        if self.try_remove() {
            return;
        }
        // Killed processes take a moment to leave; the directory is removed once they have.
        // Only reached when supervision was dropped half way or a process would not die.
        let dir = std::mem::take(&mut self.dir);
        let _ = std::thread::Builder::new()
            .name("baton-cgroup-rm".into())
            .spawn(move || remove_when_empty(&dir, EMPTY_WAIT * 4));
    }
}

/// SIGKILLs every process in the cgroup at `dir` and in the cgroups beneath it.
fn kill_members(dir: &Path, has_kill: bool) {
    if has_kill && fs::write(dir.join("cgroup.kill"), b"1").is_ok() {
        return;
    }
    // Before Linux 5.14: one by one. A member may fork between the read and the kill, so read
    // again until nothing is left (bounded: a fork bomb is not outrun forever).
    for _ in 0..64 {
        let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) else {
            return;
        };
        let pids: Vec<i32> = procs
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn remove_when_empty(dir: &Path, within: Duration) {
    let give_up = std::time::Instant::now() + within;
    while std::time::Instant::now() < give_up {
        if fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn open_write(path: &Path) -> io::Result<OwnedFd> {
    let name = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
    // SAFETY: a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(name.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `open` returned a descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is open as `procs`. For the
/// child between fork and exec: one `write`, async-signal-safe, nothing allocated.
pub(crate) fn join(procs: RawFd) -> io::Result<()> {
    // SAFETY: writing one byte from a static buffer to a descriptor the parent keeps open
    // until the spawn returns. "0" means the writing process itself.
    let written = unsafe { libc::write(procs, b"0".as_ptr().cast(), 1) };
    if written < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Kills and removes the cgroups a dead baton left for `label` (its run id): every
/// `baton-LABEL-*` directory in the cgroup v2 hierarchy. Walks the whole hierarchy, since the
/// dead process may have lived in another cgroup than this one (another terminal, another
/// systemd scope). Returns how many were found. A no-op where cgroups are not usable.
pub fn kill_leftover_cgroups(label: &str) -> usize {
    let Some(hierarchy) = hierarchy() else {
        return 0;
    };
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return 0;
    };
    let prefix = format!("{PREFIX}{label}-");
    let mut found = Vec::new();
    for (_, mount) in v2_mounts(&mountinfo) {
        find_named(&mount, &prefix, 0, &mut found);
    }
    found.sort();
    found.dedup();
    for dir in &found {
        kill_members(dir, hierarchy.has_kill);
        // The attempt's cgroup may hold cgroups of its own (a task that runs baton): the kill
        // reached them (`cgroup.kill` takes the subtree), and they go first, deepest first.
        let mut inner = Vec::new();
        descendants(dir, 0, &mut inner);
        inner.sort_by_key(|c| std::cmp::Reverse(c.components().count()));
        for child in inner.iter().chain(std::iter::once(dir)) {
            remove_when_empty(child, EMPTY_WAIT);
        }
    }
    found.len()
}

/// Collects every directory beneath `dir`.
fn descendants(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > 32 {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let path = entry.path();
            descendants(&path, depth + 1, found);
            found.push(path);
        }
    }
}

/// Collects the directories under `dir` whose name starts with `prefix` (not below them: an
/// attempt's own cgroups go with it).
fn find_named(dir: &Path, prefix: &str, depth: usize, found: &mut Vec<PathBuf>) {
    // Deeper than any real hierarchy: a guard against a loop, not a limit in practice.
    if depth > 32 {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if entry.file_name().as_bytes().starts_with(prefix.as_bytes()) {
            found.push(path);
        } else {
            find_named(&path, prefix, depth + 1, found);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v2_path() {
        let text = "9:name=systemd:/\n4:memory:/x\n0::/user.slice/a.scope\n";
        assert_eq!(own_v2_path(text), Some("/user.slice/a.scope"));
        assert_eq!(own_v2_path("1:cpu:/\n"), None);
        assert_eq!(own_v2_path("0::/gone (deleted)\n"), None);
        assert_eq!(own_v2_path("0::\n"), None);
        assert_eq!(own_v2_path(""), None);
    }

    #[test]
    fn finds_cgroup2_mounts() {
        let text = "\
25 31 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
43 31 0:40 /sub /mnt/my\\040cg rw - cgroup2 none rw
garbage
";
        assert_eq!(
            v2_mounts(text),
            vec![
                ("/".to_owned(), PathBuf::from("/sys/fs/cgroup/unified")),
                ("/sub".to_owned(), PathBuf::from("/mnt/my cg")),
            ]
        );
    }

    #[test]
    fn joins_the_path_under_its_mount() {
        let mount = Path::new("/sys/fs/cgroup");
        assert_eq!(join_under_mount("/", mount, "/"), Some(mount.to_owned()));
        assert_eq!(
            join_under_mount("/", mount, "/a/b"),
            Some(mount.join("a/b"))
        );
        assert_eq!(join_under_mount("/a", mount, "/a/b"), Some(mount.join("b")));
        assert_eq!(join_under_mount("/a", mount, "/ab"), None);
        assert_eq!(join_under_mount("/", mount, "/../etc"), None);
    }
}
