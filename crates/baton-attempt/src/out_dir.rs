//! Where attempts' `$BATON_OUTPUT` files are looked for.
//!
//! Every attempt may write one, and most do not: looking for a file that is not there costs
//! the kernel a path lookup and a negative directory entry, ~4 µs, for each of thousands of
//! short tasks. So the directory is watched (inotify): a file is looked for only if a name
//! appeared for it, which costs one `read` of the watch (the event is queued while the task
//! creates the file, before it exits). Only on local file systems (tmpfs, ext4, XFS, btrfs):
//! on a network one, a task could write from another host. Where the watch cannot be had, or
//! stops being trustworthy (its queue overflowed, the directory was moved or removed), every
//! look opens the name, relative to the directory then open (a third less than by the whole
//! path). The portable process layer ([`baton_exec::Platform`]: macOS, or
//! `BATON_PLATFORM=portable`) always looks: macOS's kqueue says that a directory changed, not
//! which name appeared, so a look would still be needed, and FSEvents (the `notify` crate's
//! backend there) coalesces and delays what it reports.

#[cfg(target_os = "linux")]
use std::collections::HashSet;
use std::ffi::OsStr;
#[cfg(target_os = "linux")]
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;

use baton_layout::{RunDirs, structured_output_name};
use baton_model::TaskId;
#[cfg(target_os = "linux")]
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
#[cfg(target_os = "linux")]
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::stat::Mode;

#[derive(Debug)]
pub struct OutDir {
    /// `out/`, open, when it is not watched; `None` while it is watched or if it could not be
    /// opened (then every look goes by the path).
    dir: Option<OwnedFd>,
    /// The names that appeared in it; `None` when it is not watched.
    watch: Option<Watch>,
}

#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Watch {
    inotify: Inotify,
    appeared: HashSet<OsString>,
}

/// No directory is watched on the portable layer: no value of this type exists there.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
enum Watch {}

#[cfg(not(target_os = "linux"))]
impl Watch {
    fn start(_dirs: &RunDirs) -> Option<Self> {
        None
    }

    fn catch_up(&mut self) -> Result<(), ()> {
        match *self {}
    }

    fn take(&mut self, _name: &OsStr) -> bool {
        match *self {}
    }
}

impl OutDir {
    /// The watch shared by the attempt units, locked. A panic while it was held leaves names
    /// seen: still usable.
    pub fn lock(shared: &std::sync::Mutex<OutDir>) -> std::sync::MutexGuard<'_, OutDir> {
        shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Watches `dirs.out`, or, where it cannot be watched, opens it.
    pub fn open(dirs: &RunDirs) -> Self {
        match Watch::start(dirs) {
            // Not held open while watched: the watch would not hear of the directory's removal
            // while a descriptor of baton's kept it alive.
            Some(watch) => Self {
                dir: None,
                watch: Some(watch),
            },
            None => Self {
                dir: open_dir(dirs),
                watch: None,
            },
        }
    }

    /// Opens the `$BATON_OUTPUT` of `task`'s `attempt` for reading: `NotFound` if the task
    /// wrote none.
    pub fn open_output(&mut self, dirs: &RunDirs, task: &TaskId, attempt: u32) -> io::Result<File> {
        let name = structured_output_name(task, attempt);
        if let Some(watch) = &mut self.watch {
            match watch.catch_up() {
                Ok(()) if watch.take(OsStr::new(&name)) => {
                    return File::open(dirs.out.join(&name));
                }
                Ok(()) => return Err(io::ErrorKind::NotFound.into()),
                // Not to be trusted any more: look every time from now on, in what is at the
                // path now (the directory may have been replaced).
                Err(()) => {
                    self.watch = None;
                    self.dir = open_dir(dirs);
                }
            }
        }
        match &self.dir {
            Some(dir) => {
                let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
                Ok(File::from(openat(
                    dir,
                    name.as_str(),
                    flags,
                    Mode::empty(),
                )?))
            }
            None => File::open(dirs.out.join(&name)),
        }
    }
}

/// Whether writes to `dir` all pass through this machine's kernel, where inotify hears of
/// them: not on a network file system, where another host may write.
#[cfg(target_os = "linux")]
fn local_file_system(dir: &std::path::Path) -> bool {
    use nix::sys::statfs::{
        BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC, statfs,
    };
    statfs(dir).is_ok_and(|fs| {
        [
            TMPFS_MAGIC,
            EXT4_SUPER_MAGIC,
            XFS_SUPER_MAGIC,
            BTRFS_SUPER_MAGIC,
        ]
        .contains(&fs.filesystem_type())
    })
}

/// `out/`, opened only to look names up in (`O_PATH`), on Linux's layer. The portable layer
/// looks by the whole path every time: a directory replaced under it is then looked in as it
/// is now, with no watch to say it was.
#[cfg(target_os = "linux")]
fn open_dir(dirs: &RunDirs) -> Option<OwnedFd> {
    if !baton_exec::platform().is_linux() {
        return None;
    }
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    nix::fcntl::open(&dirs.out, flags, Mode::empty()).ok()
}

#[cfg(not(target_os = "linux"))]
fn open_dir(_dirs: &RunDirs) -> Option<OwnedFd> {
    None
}

impl OutDir {
    /// Removes what is at the `$BATON_OUTPUT` path of `task`'s `attempt` before it starts. Free
    /// while the directory is watched and no such name appeared (the usual case).
    pub fn clear(&mut self, dirs: &RunDirs, task: &TaskId, attempt: u32) {
        if let Some(watch) = &mut self.watch {
            // Leftovers were there when the watch began: they are among the names listed then
            // (no need to read the watch's queue, which only holds what came after).
            let name = structured_output_name(task, attempt);
            if !watch.take(OsStr::new(&name)) {
                return;
            }
        }
        let _ = std::fs::remove_file(dirs.structured_output(task, attempt));
    }
}

#[cfg(target_os = "linux")]
impl Watch {
    fn start(dirs: &RunDirs) -> Option<Self> {
        if !baton_exec::platform().is_linux() {
            return None;
        }
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        if !local_file_system(&dirs.out) {
            return None;
        }
        // A file written anew over an old one (a fix round writes the same attempt's file
        // again) shows as closed after writing, not as created.
        let events = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF;
        inotify.add_watch(&dirs.out, events).ok()?;
        // Watched first, then listed: a file made in between is in one or the other. What an
        // earlier driver of the run left is found like a new file.
        let appeared = std::fs::read_dir(&dirs.out)
            .ok()?
            .filter_map(|entry| entry.ok().map(|entry| entry.file_name()))
            .collect();
        Some(Self { inotify, appeared })
    }

    /// Whether `name` appeared (and is forgotten now).
    fn take(&mut self, name: &OsStr) -> bool {
        self.appeared.remove(name)
    }

    /// Takes in the names that appeared since the last look. `Err` if the watch can no longer
    /// say what is in the directory.
    fn catch_up(&mut self) -> Result<(), ()> {
        let lost = AddWatchFlags::IN_Q_OVERFLOW
            | AddWatchFlags::IN_IGNORED
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF;
        loop {
            match self.inotify.read_events() {
                Ok(events) => {
                    for event in events {
                        if event.mask.intersects(lost) {
                            return Err(());
                        }
                        if let Some(name) = event.name {
                            self.appeared.insert(name);
                        }
                    }
                }
                Err(Errno::EAGAIN) => return Ok(()),
                Err(Errno::EINTR) => {}
                Err(_) => return Err(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> (tempfile::TempDir, RunDirs) {
        let root = tempfile::tempdir().unwrap();
        let dirs = RunDirs {
            run: root.path().join("run"),
            logs: root.path().join("logs"),
            scratch: root.path().to_owned(),
            handoff: root.path().join("handoff"),
            out: root.path().join("out"),
            own: root.path().join("own"),
            tmp: root.path().join("tmp"),
        };
        std::fs::create_dir(&dirs.out).unwrap();
        (root, dirs)
    }

    fn task(id: &str) -> TaskId {
        TaskId::new(id).unwrap()
    }

    #[test]
    fn only_a_file_that_appeared_is_opened_whichever_way_it_came() {
        let (_root, dirs) = dirs();
        std::fs::write(dirs.structured_output(&task("early"), 1), "{}").unwrap();
        let mut out = OutDir::open(&dirs);
        // Watched on Linux's layer (inotify is there); looked in on the portable one.
        assert_eq!(out.watch.is_some(), baton_exec::platform().is_linux());
        let missing = out.open_output(&dirs, &task("a"), 1).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        // Written in place, moved in, and there before the watch began.
        std::fs::write(dirs.structured_output(&task("a"), 2), "{\"a\":1}").unwrap();
        let elsewhere = dirs.scratch.join("made-elsewhere");
        std::fs::write(&elsewhere, "{\"b\":2}").unwrap();
        std::fs::rename(&elsewhere, dirs.structured_output(&task("b"), 1)).unwrap();
        assert_eq!(
            std::io::read_to_string(out.open_output(&dirs, &task("a"), 2).unwrap()).unwrap(),
            "{\"a\":1}"
        );
        assert_eq!(
            std::io::read_to_string(out.open_output(&dirs, &task("b"), 1).unwrap()).unwrap(),
            "{\"b\":2}"
        );
        assert!(out.open_output(&dirs, &task("early"), 1).is_ok());
        // Written again over itself (a fix round of the same attempt): no new name appears,
        // but the file was closed after writing.
        std::fs::write(dirs.structured_output(&task("a"), 2), "{\"a\":2}").unwrap();
        assert_eq!(
            std::io::read_to_string(out.open_output(&dirs, &task("a"), 2).unwrap()).unwrap(),
            "{\"a\":2}"
        );
    }

    #[test]
    fn a_leftover_of_an_earlier_driver_is_cleared_before_the_attempt() {
        let (_root, dirs) = dirs();
        std::fs::write(dirs.structured_output(&task("a"), 1), "{\"stale\":1}").unwrap();
        let mut out = OutDir::open(&dirs);
        out.clear(&dirs, &task("a"), 1);
        assert!(!dirs.structured_output(&task("a"), 1).exists());
        let missing = out.open_output(&dirs, &task("a"), 1).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_replaced_directory_is_looked_in_by_name() {
        let (_root, dirs) = dirs();
        let mut out = OutDir::open(&dirs);
        std::fs::remove_dir(&dirs.out).unwrap();
        std::fs::create_dir(&dirs.out).unwrap();
        std::fs::write(dirs.structured_output(&task("a"), 1), "{}").unwrap();
        // The watch saw its directory go: from now on the file is looked for by name, in the
        // directory now at the path.
        let found = out.open_output(&dirs, &task("a"), 1).unwrap();
        assert_eq!(std::io::read_to_string(found).unwrap(), "{}");
        assert!(out.watch.is_none());
    }
}
