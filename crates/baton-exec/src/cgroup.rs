//! Containing an attempt in a cgroup v2 of its own, where the hierarchy is there and writable.
//!
//! A process group holds what an attempt starts only until a descendant calls `setsid` (a
//! daemonizing server, `nohup`-style wrappers, some test runners); a cgroup holds everything
//! forked inside it, whatever it does to its session, and `cgroup.kill` ends it whole. The
//! child is born in its cgroup (`clone3` with `CLONE_INTO_CGROUP`, Linux 5.7), or joins it
//! between fork and exec, so nothing it starts is ever outside. No controller is enabled or
//! needed: the cgroup only names the processes.
//!
//! Cost is what decides whether every task can have one (docs/PERFORMANCE.md): moving a
//! process into a cgroup takes a lock that every fork on the machine waits for, and a cgroup
//! made and removed per attempt is a kernfs directory of twenty-odd files and a new css_set
//! each time. So children are born in their cgroup instead of moved, and a run's cgroups are
//! pooled ([`CgroupPool`]): beneath one parent per run, `baton-RUN-PID-N`, one cgroup per
//! attempt running at once, handed to the next attempt once it is empty. Ending an attempt
//! then costs one read of its `cgroup.events`.
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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
    // cgroups are Linux's: the portable layer never uses them, even on Linux.
    if BROKEN.load(Ordering::Relaxed) || !crate::platform::linux() {
        return None;
    }
    HIERARCHY.get_or_init(detect).as_ref()
}

/// Whether attempts that ask for a cgroup get one: cgroup v2 is mounted, baton's own cgroup in
/// it is writable, and [`NO_CGROUP_ENV`] is not set. Found out once per process.
pub fn cgroups_available() -> bool {
    hierarchy().is_some()
}

/// Whether a cgroup costs an attempt next to nothing here: cgroups are available, and its
/// child can be born in one (baton's own clone, Linux 5.7 or later) instead of being moved
/// into it. Where it does, every task is contained by default; where it does not, only
/// agent tasks and those that ask.
pub fn cgroups_are_cheap() -> bool {
    #[cfg(target_os = "linux")]
    return cgroups_available()
        && !crate::spawn::spawns_with_std()
        && crate::clone_exec::clones_into_cgroups();
    #[cfg(not(target_os = "linux"))]
    false
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

/// The cgroups of one run's attempts in this process (see the module's comment): cheap to
/// make (nothing is made until an attempt asks for a cgroup), shared by cloning, and removed
/// with the last clone, killing whatever is still in them.
#[derive(Clone)]
pub struct CgroupPool(Arc<Pool>);

struct Pool {
    label: String,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// `baton-LABEL-PID-N`, once made; `Err(())` once making it failed (the pool then gives
    /// out nothing).
    parent: Option<Result<PathBuf, ()>>,
    /// Empty cgroups, for the next attempts.
    free: Vec<Slot>,
    /// Names the next new cgroup beneath the parent.
    next: u64,
}

/// One cgroup beneath a pool's parent, with the files an attempt uses open.
#[derive(Debug)]
struct Slot {
    dir: PathBuf,
    /// The directory itself: what `CLONE_INTO_CGROUP` takes.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "only Linux's own clone is born in a cgroup")
    )]
    dir_fd: OwnedFd,
    /// `cgroup.procs`, for writing: a child that cannot be born in it writes `0` to join.
    procs: OwnedFd,
    /// `cgroup.events`: `populated 0` once every process in it is gone.
    events: OwnedFd,
}

impl std::fmt::Debug for CgroupPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CgroupPool").field(&self.0.label).finish()
    }
}

impl CgroupPool {
    /// A pool for the attempts of `label` (the run id: whoever takes over after a crash finds
    /// `baton-LABEL-*` and kills it). Touches nothing until an attempt asks.
    pub fn new(label: &str) -> CgroupPool {
        let label = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        CgroupPool(Arc::new(Pool {
            label,
            state: Mutex::new(PoolState::default()),
        }))
    }

    /// An empty cgroup for one attempt, or `None` where cgroups cannot be used (or one could
    /// not be made: the attempt then runs in its process group only).
    pub(crate) fn acquire(&self) -> Option<CgroupScope> {
        let hierarchy = hierarchy()?;
        let mut state = self.0.lock();
        let slot = match state.free.pop() {
            Some(slot) => slot,
            None => {
                let parent = match &state.parent {
                    Some(Ok(parent)) => parent.clone(),
                    Some(Err(())) => return None,
                    None => {
                        static SWEPT: std::sync::Once = std::sync::Once::new();
                        SWEPT.call_once(|| sweep_empty_leftovers(&hierarchy.dir));
                        static NEXT: AtomicU64 = AtomicU64::new(1);
                        let parent = hierarchy.dir.join(format!(
                            "{PREFIX}{}-{}-{}",
                            self.0.label,
                            std::process::id(),
                            NEXT.fetch_add(1, Ordering::Relaxed)
                        ));
                        let made = fs::create_dir(&parent).map(|()| parent).map_err(drop);
                        if let Ok(parent) = &made {
                            no_pressure_accounting(parent);
                        }
                        state.parent = Some(made.clone());
                        made.ok()?
                    }
                };
                state.next += 1;
                Slot::create(parent.join(format!("a{}", state.next)))?
            }
        };
        drop(state);
        Some(CgroupScope {
            slot: Some(slot),
            pool: self.clone(),
            has_kill: hierarchy.has_kill,
            killed: AtomicBool::new(false),
        })
    }
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Pool {
    /// The last attempt is over: every cgroup of the pool is empty and free. Removes them and
    /// the parent (a cgroup still being emptied by its own thread takes the parent with it).
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for slot in state.free.drain(..) {
            let _ = fs::remove_dir(&slot.dir);
        }
        if let Some(Ok(parent)) = state.parent.take()
            && fs::remove_dir(&parent).is_err()
        {
            let _ = std::thread::Builder::new()
                .name("baton-cgroup-rm".into())
                .spawn(move || remove_when_empty(&parent, EMPTY_WAIT * 8));
        }
    }
}

impl Slot {
    fn create(dir: PathBuf) -> Option<Slot> {
        fs::create_dir(&dir).ok()?;
        no_pressure_accounting(&dir);
        let opened = (|| {
            Ok::<_, io::Error>(Slot {
                dir_fd: open(&dir, libc::O_RDONLY | libc::O_DIRECTORY)?,
                procs: open(&dir.join("cgroup.procs"), libc::O_WRONLY)?,
                events: open(&dir.join("cgroup.events"), libc::O_RDONLY)?,
                dir: dir.clone(),
            })
        })();
        if opened.is_err() {
            let _ = fs::remove_dir(&dir);
        }
        opened.ok()
    }

    /// Whether a process is still in the cgroup; `None` if that cannot be read (the cgroup
    /// was removed under baton: it is not reused).
    fn populated(&self) -> Option<bool> {
        let mut buf = [0u8; 128];
        // SAFETY: reads into a live local buffer of the length given. A kernfs file read at
        // offset 0 is generated afresh.
        let n = unsafe {
            libc::pread(
                self.events.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
            )
        };
        let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix("populated "))?;
        Some(value.trim() != "0")
    }
}

/// One attempt's cgroup, from its pool: empty when the attempt starts, killed whole when it
/// ends, and given back once empty again. Dropping it kills what is left, so no process
/// outlives its attempt even if the supervision is dropped half way.
#[derive(Debug)]
pub(crate) struct CgroupScope {
    /// `None` once given back.
    slot: Option<Slot>,
    pool: CgroupPool,
    has_kill: bool,
    /// [`CgroupScope::kill`] was called: the cgroup is removed, never reused. A child born
    /// in a cgroup that was ever killed through `cgroup.kill` is killed at birth (seen on
    /// Linux 6.18: the kill count is compared with the parent's cgroup's, not the new one's).
    killed: std::sync::atomic::AtomicBool,
}

impl CgroupScope {
    /// The cgroup's directory, open, for `CLONE_INTO_CGROUP`.
    #[cfg(target_os = "linux")]
    pub(crate) fn dir_fd(&self) -> RawFd {
        self.slot().dir_fd.as_raw_fd()
    }

    /// The descriptor a child passes to [`join`] between fork and exec, where it cannot be
    /// born in the cgroup.
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.slot().procs.as_raw_fd()
    }

    fn slot(&self) -> &Slot {
        self.slot
            .as_ref()
            .expect("a scope holds its slot until it ends")
    }

    /// SIGKILLs every process in the cgroup, including those that left the process group.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        kill_members(&self.slot().dir, self.has_kill);
    }

    /// Kills what is left and gives the cgroup back, waiting (briefly, without blocking the
    /// runtime) for killed processes to go. In the usual case the cgroup is already empty and
    /// this is one read.
    pub(crate) async fn finish(mut self) {
        if self.give_back_if_empty() {
            return;
        }
        self.kill();
        let give_up = tokio::time::Instant::now() + EMPTY_WAIT;
        let mut pause = Duration::from_millis(1);
        while tokio::time::Instant::now() < give_up {
            tokio::time::sleep(pause).await;
            if self.give_back_if_empty() {
                return;
            }
            pause = (pause * 2).min(Duration::from_millis(50));
        }
        // Dropped here: one more kill, then a thread removes it once it is empty.
    }

    /// Gives the cgroup back to its pool (or removes it, if it was killed) if nothing is left
    /// in it; `true` if it did.
    fn give_back_if_empty(&mut self) -> bool {
        let Some(slot) = &self.slot else {
            return true;
        };
        if slot.populated() != Some(false) {
            return false;
        }
        let slot = self.slot.take().expect("just looked");
        if self.killed.load(Ordering::Relaxed) {
            let _ = fs::remove_dir(&slot.dir);
        } else {
            self.pool.0.lock().free.push(slot);
        }
        true
    }
}

impl Drop for CgroupScope {
    fn drop(&mut self) {
        if self.give_back_if_empty() {
            return;
        }
        self.kill();
        if self.give_back_if_empty() {
            return;
        }
        // Killed processes take a moment to leave; the cgroup is removed (not reused) once
        // they have. Only reached when supervision was dropped half way or a process would not
        // die. The thread holds the pool, whose parent goes after it.
        let Some(Slot { dir, .. }) = self.slot.take() else {
            return;
        };
        let pool = self.pool.clone();
        let _ = std::thread::Builder::new()
            .name("baton-cgroup-rm".into())
            .spawn(move || {
                remove_when_empty(&dir, EMPTY_WAIT * 4);
                drop(pool);
            });
    }
}

/// Removes the pools that dead baton processes left empty beneath `dir` (a driver that was
/// SIGKILLed cannot remove its own): `baton-RUN-PID-N` whose PID is no live process and in
/// which no process is left. A pool with processes in it is a crashed run's leftovers, for
/// its takeover to kill ([`kill_leftover_cgroups`]); a live PID (even a reused one) is left
/// alone.
fn sweep_empty_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(pid) = pool_owner(name) else {
            continue;
        };
        let alive = pid == std::process::id()
            || kill(Pid::from_raw(i32::try_from(pid).unwrap_or(0)), None).is_ok();
        let path = entry.path();
        let populated = fs::read_to_string(path.join("cgroup.events"))
            .map_or(true, |events| !events.contains("populated 0"));
        if alive || populated {
            continue;
        }
        let mut inner = Vec::new();
        descendants(&path, 0, &mut inner);
        inner.sort_by_key(|c| std::cmp::Reverse(c.components().count()));
        for cgroup in inner.iter().chain(std::iter::once(&path)) {
            let _ = fs::remove_dir(cgroup);
        }
    }
}

/// The PID in a pool's name, `baton-LABEL-PID-N`; `None` for any other name.
fn pool_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut parts = rest.rsplitn(3, '-');
    let n = parts.next()?;
    let pid = parts.next()?;
    let label = parts.next()?;
    if label.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Turns off pressure-stall accounting for the cgroup at `dir` (Linux 6.1+; elsewhere the
/// file is missing and nothing changes): every sleep and wakeup of a process in a cgroup
/// updates the stall times of each ancestor that keeps them, and nobody reads an attempt's.
fn no_pressure_accounting(dir: &Path) {
    let _ = fs::write(dir.join("cgroup.pressure"), b"0");
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

fn open(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let name = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
    // SAFETY: a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(name.as_ptr(), flags | libc::O_CLOEXEC) };
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
///
/// `spare(pid)`: a directory any of whose members (in it or below) it says yes to is left
/// alone: one of a live worker's pools on this host, holding an attempt a takeover adopted.
pub fn kill_leftover_cgroups(label: &str, spare: &dyn Fn(u32) -> bool) -> usize {
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
    found.retain(|dir| !holds_any(dir, spare));
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

/// Whether `dir` or a cgroup below it has a member `which` says yes to.
fn holds_any(dir: &Path, which: &dyn Fn(u32) -> bool) -> bool {
    let mut dirs = vec![dir.to_path_buf()];
    descendants(dir, 0, &mut dirs);
    dirs.iter().any(|d| {
        fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|procs| {
            procs
                .lines()
                .filter_map(|line| line.trim().parse::<u32>().ok())
                .any(which)
        })
    })
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
    fn a_pool_s_name_gives_its_owner() {
        assert_eq!(
            pool_owner("baton-20261201-110317-5ded-29193-1"),
            Some(29193)
        );
        assert_eq!(pool_owner("baton-x-7-12"), Some(7));
        assert_eq!(pool_owner("baton-probe-7"), None);
        assert_eq!(pool_owner("baton--7-1"), None);
        assert_eq!(pool_owner("user.slice"), None);
        assert_eq!(pool_owner("baton-x-7-1a"), None);
    }

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
