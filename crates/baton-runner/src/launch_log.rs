//! The attempts a driver launched, noted before their processes start.
//!
//! An attempt's `attempt-started` is committed after its process starts (it carries the pid,
//! and the commit is on the recorder's thread, off the path from one task's end to the next
//! one's start). A driver killed in between leaves a process that ran, and may have done its
//! work, with no record of its attempt: a takeover would run the task again as the same
//! attempt, and the record would show one run where there were two. So each turn's launches
//! are appended to `SCRATCH/RUN/launched` — one `write` a turn, no sync: a killed process's
//! writes are not lost — before any of them starts, and a takeover records every attempt
//! noted there and not in the store as started and interrupted. Attempts queued for workers
//! are not noted: the queue holds them, and a takeover adopts them from there (`coordinate`).
//!
//! What it costs: an append of a line measured under a microsecond here (tmpfs 0.7 µs, ext4
//! 0.8 µs), so 10,000 tasks' notes take ~8 ms of a run of 5 s; `bench.py` cannot tell that from
//! its noise (two runs of the same binary in one sitting differed by 10%). It lives in
//! SCRATCH, the run's private directory (tmpfs where there is one, see `layout.rs`), until the
//! run ends; what tmpfs does not keep, a reboot, it does not keep with the processes either.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use baton_layout::RunDirs;
use baton_model::TaskId;

/// The run's launch log, open for appending.
#[derive(Debug)]
pub(crate) struct LaunchLog {
    /// `None` where it cannot be written (a read-only or full disk): the run goes on, with the
    /// guarantee this gives only as good as the store's commits.
    file: Option<File>,
    line: Vec<u8>,
}

fn path(dirs: &RunDirs) -> PathBuf {
    dirs.launched()
}

impl LaunchLog {
    pub(crate) fn open(dirs: &RunDirs) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path(dirs))
            .ok();
        Self {
            file,
            line: Vec::new(),
        }
    }

    /// Notes `launches` (task, attempt), in one write, before they start.
    pub(crate) fn note<'a>(&mut self, launches: impl IntoIterator<Item = (&'a TaskId, u32)>) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        self.line.clear();
        for (task, attempt) in launches {
            // Ids hold no spaces or newlines (baton-graph's rules).
            let _ = writeln!(self.line, "{task} {attempt}");
        }
        if !self.line.is_empty() && file.write_all(&self.line).is_err() {
            self.file = None;
        }
    }

    /// The last attempt noted of each task, from what the run's drivers noted.
    pub(crate) fn read(dirs: &RunDirs) -> HashMap<TaskId, u32> {
        let mut last: HashMap<TaskId, u32> = HashMap::new();
        let Ok(text) = std::fs::read_to_string(path(dirs)) else {
            return last;
        };
        // A line cut short by a crash has no attempt number, or a wrong one: no full line
        // ends there (every note ends with a newline), so only whole lines count.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in whole.lines() {
            let Some((task, attempt)) = line.rsplit_once(' ') else {
                continue;
            };
            let (Ok(task), Ok(attempt)) = (TaskId::new(task), attempt.parse::<u32>()) else {
                continue;
            };
            let noted = last.entry(task).or_insert(0);
            *noted = (*noted).max(attempt);
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> TaskId {
        TaskId::new(name).unwrap()
    }

    #[test]
    fn the_last_attempt_noted_of_each_task_is_read_back_and_a_cut_line_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let run = baton_model::RunId::new("20261202-010203-abcd".to_owned()).unwrap();
        let mut dirs = RunDirs::new(dir.path(), &run);
        dirs.scratch = dir.path().join("scratch");
        std::fs::create_dir_all(&dirs.scratch).unwrap();
        let mut log = LaunchLog::open(&dirs);
        log.note([(&id("build"), 1), (&id("plan/api"), 1)]);
        log.note([(&id("build"), 2)]);
        drop(log);
        // A driver killed in the middle of a line.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(path(&dirs))
            .unwrap();
        file.write_all(b"test 1").unwrap();
        let read = LaunchLog::read(&dirs);
        assert_eq!(read.get(&id("build")), Some(&2));
        assert_eq!(read.get(&id("plan/api")), Some(&1));
        assert_eq!(read.get(&id("test")), None);
        assert_eq!(read.len(), 2);
    }
}
