//! A reader of an attempt's stdout, line by line, that can tell baton the work is done: how
//! agent engines follow their CLI's JSON stream. It sees the bytes after redaction, like
//! everything else downstream of the output sink.

use std::any::Any;

/// What a line told the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchSignal {
    Continue,
    /// The program printed its final result: from now on it gets
    /// [`AttemptSpec::finish_grace`](crate::AttemptSpec::finish_grace) to exit by itself before
    /// its group is terminated (some agent CLIs hang after their result).
    Finished,
    /// Stop the attempt now (TERM, then KILL after the grace): the watcher saw something that
    /// must not go on, such as an agent spending past its budget. The attempt ends as
    /// `Cancelled` with [`AttemptReport::stopped_by_watcher`](crate::AttemptReport) set.
    Stop,
}

/// Sees each line of redacted stdout, without its newline. A line longer than
/// [`MAX_WATCHED_LINE`] arrives cut to that length plus one byte, so the watcher can tell.
pub trait LineWatcher: Send + 'static {
    fn line(&mut self, line: &[u8]) -> WatchSignal;

    /// For the caller to take its own type back after the attempt.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// The longest line handed to a watcher whole.
pub const MAX_WATCHED_LINE: usize = 16 * 1024 * 1024;

/// Splits stdout into lines for a watcher, with bounded memory.
pub(crate) struct LineSplitter {
    watcher: Box<dyn LineWatcher>,
    line: Vec<u8>,
    /// The current line outgrew the limit: drop the rest of it.
    overflow: bool,
    finished: bool,
    stop: bool,
}

impl LineSplitter {
    pub(crate) fn new(watcher: Box<dyn LineWatcher>) -> Self {
        Self {
            watcher,
            line: Vec::new(),
            overflow: false,
            finished: false,
            stop: false,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, rest, ends) = match memchr_newline(bytes) {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            if !self.overflow {
                let room = MAX_WATCHED_LINE + 1 - self.line.len();
                if part.len() > room {
                    self.line.extend_from_slice(&part[..room]);
                    self.overflow = true;
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if ends {
                self.emit();
            }
            bytes = rest;
        }
    }

    fn emit(&mut self) {
        match self.watcher.line(&self.line) {
            WatchSignal::Continue => {}
            WatchSignal::Finished => self.finished = true,
            WatchSignal::Stop => self.stop = true,
        }
        self.line.clear();
        if self.line.capacity() > 64 * 1024 {
            self.line.shrink_to(64 * 1024);
        }
        self.overflow = false;
    }

    /// Whether the watcher has said the work is done.
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    /// Whether the watcher asked to stop the attempt.
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop
    }

    /// The last line, unterminated, then the watcher back.
    pub(crate) fn finish(mut self) -> Box<dyn LineWatcher> {
        if !self.line.is_empty() {
            self.emit();
        }
        self.watcher
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    struct Lines(Arc<Mutex<Vec<Vec<u8>>>>);

    impl LineWatcher for Lines {
        fn line(&mut self, line: &[u8]) -> WatchSignal {
            self.0.lock().unwrap().push(line.to_vec());
            if line == b"done" {
                WatchSignal::Finished
            } else {
                WatchSignal::Continue
            }
        }
        fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
            self
        }
    }

    #[test]
    fn lines_split_across_chunks_arrive_whole() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut split = LineSplitter::new(Box::new(Lines(seen.clone())));
        split.push(b"ab");
        split.push(b"c\nn");
        split.push(b"one\n\nlast");
        assert!(!split.finished());
        split.push(b"\ndone\n");
        assert!(split.finished());
        split.push(b"tail");
        split.finish();
        let seen = seen.lock().unwrap();
        let seen: Vec<&[u8]> = seen.iter().map(Vec::as_slice).collect();
        assert_eq!(seen, [&b"abc"[..], b"none", b"", b"last", b"done", b"tail"]);
    }

    #[test]
    fn an_endless_line_is_cut_not_hoarded() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut split = LineSplitter::new(Box::new(Lines(seen.clone())));
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..20 {
            split.push(&chunk);
        }
        split.push(b"\nnext\n");
        split.finish();
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].len(), MAX_WATCHED_LINE + 1);
        assert_eq!(seen[1], b"next");
    }
}
