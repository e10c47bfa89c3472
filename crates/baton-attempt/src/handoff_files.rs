//! The files that hand a task its predecessors' results (`$BATON_HANDOFF_FILE`), reused from
//! task to task.
//!
//! Creating a file and removing it again, even on tmpfs, costs more than the rest of a short
//! task's bookkeeping together (~20 µs: an inode, a directory entry, memory-cgroup charges,
//! eviction). A task needs its file only from its first launch to its end, so a finished task's
//! file goes to the next task that needs one, rewritten in place through the descriptor baton
//! keeps open: one `pwrite` instead of create, write, close and unlink. No more files exist
//! than tasks were launched and unfinished at once (about the concurrency).
//!
//! A task runs as the user and could tamper with its file so that the next task reading that
//! path gets something else: replace it (unlink, rename over it, a symlink), link it elsewhere
//! to read later tasks' files, or make it readable to others. A file whose inode is not still
//! the only link at its path with mode 0600 is not reused: it is dropped and a new one made.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A handoff file in use by one task.
#[derive(Debug)]
pub struct HandoffFile {
    path: PathBuf,
    file: File,
    /// How many bytes it holds.
    len: u64,
    /// Its device and inode numbers: what must still be at its path for it to be reused.
    identity: (u64, u64),
}

impl HandoffFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The run's handoff files: those free for the next task, and how to make another.
///
/// Several processes may hand off in one run's directory at once — the workers on one machine,
/// and their coordinator — so a file's name is its maker's (`PID.N.json`): one process never
/// replaces a file another's task is reading.
#[derive(Debug)]
pub struct HandoffFiles {
    dir: PathBuf,
    free: Vec<HandoffFile>,
    /// Whose files these are: this process's id.
    owner: u32,
    /// Files made so far: the next one's number.
    made: u64,
}

impl HandoffFiles {
    pub fn new(dir: PathBuf) -> Self {
        Self::owned_by(dir, std::process::id())
    }

    fn owned_by(dir: PathBuf, owner: u32) -> Self {
        Self {
            dir,
            free: Vec::new(),
            owner,
            made: 0,
        }
    }

    /// A file holding exactly `bytes`, for a task to keep until it ends.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<HandoffFile> {
        let mut handoff = match self.reusable() {
            Some(handoff) => handoff,
            None => self.make()?,
        };
        handoff.file.write_all_at(bytes, 0)?;
        let len = bytes.len() as u64;
        if len < handoff.len {
            handoff.file.set_len(len)?;
        }
        handoff.len = len;
        Ok(handoff)
    }

    /// Takes back the file of a task that ended.
    pub fn release(&mut self, handoff: HandoffFile) {
        self.free.push(handoff);
    }

    /// A free file that is still what baton made.
    fn reusable(&mut self) -> Option<HandoffFile> {
        while let Some(handoff) = self.free.pop() {
            // Still at its path (not moved away and replaced, not a link to it), still the
            // one link, and 0600. One `lstat` tells all: when the inode at the path is ours,
            // its link count and mode are our file's.
            let intact = std::fs::symlink_metadata(&handoff.path).is_ok_and(|meta| {
                (meta.dev(), meta.ino()) == handoff.identity
                    && meta.nlink() == 1
                    && meta.mode() & 0o7777 == 0o600
            });
            if intact {
                return Some(handoff);
            }
        }
        None
    }

    fn make(&mut self) -> io::Result<HandoffFile> {
        self.made += 1;
        let path = self.dir.join(format!("{}.{}.json", self.owner, self.made));
        // A leftover of an earlier driver of this run whose process had the same id may be
        // there: it is replaced, never followed if it is a link.
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&path)?;
        let meta = file.metadata()?;
        Ok(HandoffFile {
            path,
            file,
            len: 0,
            identity: (meta.dev(), meta.ino()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (tempfile::TempDir, HandoffFiles) {
        let dir = tempfile::tempdir().unwrap();
        let files = HandoffFiles::new(dir.path().to_owned());
        (dir, files)
    }

    #[test]
    fn processes_handing_off_in_one_run_never_touch_each_others_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut one = HandoffFiles::owned_by(dir.path().to_owned(), 100);
        let mut other = HandoffFiles::owned_by(dir.path().to_owned(), 200);
        let mine = one.write(b"for one's task").unwrap();
        let theirs = other.write(b"for the other's task").unwrap();
        assert_ne!(mine.path(), theirs.path());
        assert_eq!(std::fs::read(mine.path()).unwrap(), b"for one's task");
        assert_eq!(
            std::fs::read(theirs.path()).unwrap(),
            b"for the other's task"
        );
    }

    #[test]
    fn a_released_file_is_rewritten_for_the_next_task() {
        let (_dir, mut files) = files();
        let first = files.write(b"a long first handoff").unwrap();
        let path = first.path().to_owned();
        assert_eq!(std::fs::read(&path).unwrap(), b"a long first handoff");
        files.release(first);
        let second = files.write(b"short").unwrap();
        assert_eq!(second.path(), path);
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
    }

    #[test]
    fn files_in_use_are_distinct() {
        let (_dir, mut files) = files();
        let a = files.write(b"a").unwrap();
        let b = files.write(b"b").unwrap();
        assert_ne!(a.path(), b.path());
        assert_eq!(std::fs::read(a.path()).unwrap(), b"a");
        assert_eq!(std::fs::read(b.path()).unwrap(), b"b");
    }

    #[test]
    fn a_tampered_file_is_not_reused() {
        let (dir, mut files) = files();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "not a handoff").unwrap();

        // Replaced by a symlink: the next task must not read (or baton write) its target.
        let replaced = files.write(b"one").unwrap();
        let path = replaced.path().to_owned();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        files.release(replaced);
        let next = files.write(b"two").unwrap();
        assert_ne!(next.path(), path);
        assert_eq!(std::fs::read(next.path()).unwrap(), b"two");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not a handoff");

        // Linked elsewhere, to read later tasks' handoffs.
        let linked = next;
        std::fs::hard_link(linked.path(), dir.path().join("spy")).unwrap();
        let linked_path = linked.path().to_owned();
        files.release(linked);
        let after_link = files.write(b"three").unwrap();
        assert_ne!(after_link.path(), linked_path);

        // Moved away, something else put at its path.
        let moved = after_link;
        let moved_path = moved.path().to_owned();
        std::fs::rename(&moved_path, dir.path().join("moved")).unwrap();
        std::fs::write(&moved_path, "planted").unwrap();
        files.release(moved);
        let after_link = files.write(b"three").unwrap();
        assert_ne!(after_link.path(), moved_path);
        assert_eq!(std::fs::read_to_string(&moved_path).unwrap(), "planted");

        // Made readable to others.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(after_link.path(), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let opened_path = after_link.path().to_owned();
        files.release(after_link);
        let after_chmod = files.write(b"four").unwrap();
        assert_ne!(after_chmod.path(), opened_path);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not a handoff");
        assert_eq!(std::fs::read(dir.path().join("spy")).unwrap(), b"two");
    }

    #[test]
    fn a_leftover_at_a_new_name_is_replaced_not_followed() {
        let (dir, mut files) = files();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let name = format!("{}.1.json", std::process::id());
        std::os::unix::fs::symlink(&target, dir.path().join(&name)).unwrap();
        let handoff = files.write(b"fresh").unwrap();
        assert_eq!(handoff.path(), dir.path().join(&name));
        assert_eq!(std::fs::read(handoff.path()).unwrap(), b"fresh");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
