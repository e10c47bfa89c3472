//! The one path every byte a child prints takes: into the attempt's log file and into the
//! bounded captures. Secret redaction goes here too, so nothing may reach memory or disk around
//! it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use std::time::Duration;

use baton_redact::{Redactor, StreamRedactor};
use tokio::time::Instant;

use crate::capture::{Capture, Captured};
use crate::watch::{LineSplitter, LineWatcher};

/// Big enough to turn a chatty child's many small writes into few, small enough not to matter
/// per attempt. Chunks larger than this bypass the buffer.
const LOG_BUFFER: usize = 32 * 1024;

/// How long a stream must be quiet before the redactor decides what it holds back at a line
/// break (see [`StreamRedactor::release`]) and the log gets the stream's unfinished line.
pub(crate) const HOLD_BACK: Duration = Duration::from_millis(150);

/// The longest unfinished line the log waits for before it takes it as it is.
const LOG_LINE: usize = 8 * 1024;

/// The most of a capped log's end kept (in memory until the attempt ends); a smaller cap keeps
/// half of itself for the end.
pub const LOG_TAIL: u64 = 4 * 1024 * 1024;

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout = 0,
    Stderr = 1,
}

impl Stream {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// What a sink holds once the attempt is over.
pub(crate) struct SinkOutput {
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
    pub(crate) log_bytes: u64,
    pub(crate) log_error: Option<String>,
    pub(crate) watcher: Option<Box<dyn LineWatcher>>,
}

pub(crate) struct OutputSink {
    /// Redaction is off when `None` (tests of the sink itself).
    redactor: Option<Redactor>,
    /// One per stream, so that a secret split across two writes of the same stream is still
    /// found; made on the stream's first byte, since most quick tasks print nothing and a
    /// stream's matching state is not free to set up.
    redact: [Option<StreamRedactor>; 2],
    /// Redacted bytes on their way to the log and the captures.
    scratch: Vec<u8>,
    log: Log,
    /// What the log may still take as it comes, and the end kept past that.
    cap: LogCap,
    unflushed: bool,
    log_bytes: u64,
    error: Option<String>,
    stdout: Capture,
    stderr: Capture,
    /// Follows stdout line by line, after redaction.
    lines: Option<LineSplitter>,
    /// Each stream's unfinished line, redacted, on its way to the log: the log takes whole
    /// lines, so one stream's line is never cut by the other's.
    partial: [Vec<u8>; 2],
    /// When each stream, quiet since, is due a [`release`](Self::release_quiet): while it holds
    /// something back.
    quiet_at: [Option<Instant>; 2],
}

impl std::fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSink")
            .field("redacting", &self.redactor.is_some())
            .field("log", &self.log)
            .field("log_bytes", &self.log_bytes)
            .finish_non_exhaustive()
    }
}

/// The log file, created when the first byte arrives. Creating a file costs more than the
/// whole rest of an attempt on some filesystems (0.6 ms of kernel time on ext4 here, against
/// 6 µs on tmpfs), and most quick tasks print nothing: those never pay for a log. A missing log
/// file therefore means the attempt printed nothing.
#[derive(Debug)]
enum Log {
    NotYet(PathBuf),
    Open(BufWriter<File>),
    /// Could not be opened or written: the attempt goes on, captured in memory only.
    Failed,
}

impl OutputSink {
    #[cfg(test)]
    pub(crate) fn new(log_path: PathBuf, output_limit: usize, stderr_limit: usize) -> Self {
        Self::with_redactor(log_path, (output_limit, stderr_limit, u64::MAX), None)
    }

    /// A sink whose bytes pass through `redactor` before anything else sees them, keeping
    /// `limits` (stdout and stderr in memory, the log file).
    pub(crate) fn with_redactor(
        log_path: PathBuf,
        (output_limit, stderr_limit, log_limit): (usize, usize, u64),
        redactor: Option<&Redactor>,
    ) -> Self {
        Self {
            redactor: redactor.cloned(),
            redact: [None, None],
            scratch: Vec::new(),
            log: Log::NotYet(log_path),
            cap: LogCap::new(log_limit),
            unflushed: false,
            log_bytes: 0,
            error: None,
            stdout: Capture::head_and_tail(output_limit),
            stderr: Capture::tail_only(stderr_limit),
            lines: None,
            partial: [Vec::new(), Vec::new()],
            quiet_at: [None, None],
        }
    }

    /// Hands every line of (redacted) stdout to `watcher`.
    pub(crate) fn watch(&mut self, watcher: Box<dyn LineWatcher>) {
        self.lines = Some(LineSplitter::new(watcher));
    }

    /// Whether the watcher asked to stop the attempt.
    pub(crate) fn stop_requested(&self) -> bool {
        self.lines
            .as_ref()
            .is_some_and(LineSplitter::stop_requested)
    }

    /// Whether the watcher saw the final result.
    pub(crate) fn result_seen(&self) -> bool {
        self.lines.as_ref().is_some_and(LineSplitter::finished)
    }

    /// Takes a chunk the child printed. Redaction comes first: what reaches the log file and
    /// the captures (and from them the store, the handoff and the screen) is what it let
    /// through.
    pub(crate) fn accept(&mut self, stream: Stream, bytes: &[u8]) {
        let Some(redactor) = &self.redactor else {
            self.write_through(stream, bytes);
            self.note_held(stream);
            return;
        };
        let redact = self.redact[stream as usize].get_or_insert_with(|| redactor.stream());
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        redact.push(bytes, &mut out);
        if !out.is_empty() {
            self.write_through(stream, &out);
        }
        self.scratch = out;
        self.note_held(stream);
    }

    /// After bytes came on `stream`: due a release once it has been quiet for [`HOLD_BACK`], if
    /// it holds anything back.
    fn note_held(&mut self, stream: Stream) {
        let i = stream as usize;
        let holds =
            !self.partial[i].is_empty() || self.redact[i].as_ref().is_some_and(|r| r.held() > 0);
        self.quiet_at[i] = holds.then(|| Instant::now() + HOLD_BACK);
    }

    /// When the next stream is due a [`release_quiet`](Self::release_quiet).
    pub(crate) fn next_release(&self) -> Option<Instant> {
        self.quiet_at.iter().flatten().min().copied()
    }

    /// Releases each stream that has been quiet for [`HOLD_BACK`]: the redactor decides what it
    /// holds up to its last line break, and the log takes the stream's unfinished line as it
    /// is, so that a quiet task's output is seen (in the log file, `logs --follow`, by an
    /// agent's parser) while it is quiet. What may still be the start of a secret stays held
    /// until more comes or the stream ends.
    pub(crate) fn release_quiet(&mut self, now: Instant) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let i = stream as usize;
            if self.quiet_at[i].is_none_or(|at| at > now) {
                continue;
            }
            self.quiet_at[i] = None;
            if let Some(redact) = &mut self.redact[i] {
                let mut out = std::mem::take(&mut self.scratch);
                out.clear();
                redact.release(&mut out);
                if !out.is_empty() {
                    self.write_through(stream, &out);
                }
                self.scratch = out;
            }
            let partial = std::mem::take(&mut self.partial[i]);
            self.write_log(&partial);
        }
    }

    fn write_through(&mut self, stream: Stream, bytes: &[u8]) {
        if let Log::NotYet(path) = &self.log {
            self.log = match open_log(path) {
                Ok(file) => Log::Open(BufWriter::with_capacity(LOG_BUFFER, file)),
                Err(error) => {
                    self.record_error(format!(
                        "cannot open log file `{}`: {error}",
                        path.display()
                    ));
                    Log::Failed
                }
            };
        }
        // The log takes whole lines: what follows the last line break waits for the rest of
        // its line (or for the stream to go quiet, or to end).
        let i = stream as usize;
        match bytes.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                let partial = std::mem::take(&mut self.partial[i]);
                self.write_log(&partial);
                self.write_log(&bytes[..=last]);
                self.partial[i] = partial;
                self.partial[i].clear();
                self.partial[i].extend_from_slice(&bytes[last + 1..]);
            }
            None => self.partial[i].extend_from_slice(bytes),
        }
        if self.partial[i].len() >= LOG_LINE {
            let partial = std::mem::take(&mut self.partial[i]);
            self.write_log(&partial);
        }
        match stream {
            Stream::Stdout => {
                self.stdout.push(bytes);
                if let Some(lines) = &mut self.lines {
                    lines.push(bytes);
                }
            }
            Stream::Stderr => self.stderr.push(bytes),
        }
    }

    fn write_log(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        // Past the cap, the end is kept for later, in memory.
        let bytes = self.cap.take(bytes);
        if bytes.is_empty() {
            return;
        }
        self.write_file(bytes);
    }

    fn write_file(&mut self, bytes: &[u8]) {
        // Writes go to the page cache and return at once; handing them to a blocking thread
        // would cost more per attempt than it could save.
        if let Log::Open(log) = &mut self.log {
            match log.write_all(bytes) {
                Ok(()) => {
                    self.log_bytes += bytes.len() as u64;
                    self.unflushed = true;
                }
                Err(error) => self.log_failed(&error),
            }
        }
    }

    /// Whether the log has bytes a reader of the file cannot see yet.
    pub(crate) fn has_unflushed(&self) -> bool {
        self.unflushed
    }

    pub(crate) fn flush(&mut self) {
        self.unflushed = false;
        let flushed = match &mut self.log {
            Log::Open(log) => log.flush(),
            Log::NotYet(_) | Log::Failed => Ok(()),
        };
        if let Err(error) = flushed {
            self.log_failed(&error);
        }
    }

    /// Records a problem with the output record that is not the log's: the first one wins.
    pub(crate) fn record_error(&mut self, message: String) {
        self.error.get_or_insert(message);
    }

    pub(crate) fn finish(mut self) -> SinkOutput {
        // What the redactors held back, waiting to see whether a secret went on.
        let [stdout, stderr] = std::mem::take(&mut self.redact);
        for (stream, redactor) in [(Stream::Stdout, stdout), (Stream::Stderr, stderr)] {
            if let Some(redactor) = redactor {
                let mut out = Vec::new();
                redactor.finish(&mut out);
                if !out.is_empty() {
                    self.write_through(stream, &out);
                }
            }
        }
        for partial in std::mem::take(&mut self.partial) {
            self.write_log(&partial);
        }
        // A capped log ends with what was cut, then the end it kept.
        let cap = std::mem::replace(&mut self.cap, LogCap::new(u64::MAX));
        if let Some((cut, tail)) = cap.finish() {
            let note = format!(
                "\n[baton: {cut} bytes of this attempt's output were cut here: the log keeps its \
                 first {} and its last {}]\n",
                baton_model::format_size(self.log_bytes),
                baton_model::format_size((tail.0.len() + tail.1.len()) as u64),
            );
            self.write_file(note.as_bytes());
            self.write_file(tail.0);
            self.write_file(tail.1);
        }
        self.flush();
        SinkOutput {
            stdout: self.stdout.finish(),
            stderr: self.stderr.finish(),
            log_bytes: self.log_bytes,
            log_error: self.error,
            watcher: self.lines.map(LineSplitter::finish),
        }
    }

    fn log_failed(&mut self, error: &io::Error) {
        self.record_error(format!("writing the log file: {error}"));
        if let Log::Open(log) = std::mem::replace(&mut self.log, Log::Failed) {
            // Dropping a BufWriter retries the failed write; `into_parts` discards it instead.
            let _ = log.into_parts();
        }
    }
}

/// A log's cap: the start goes to the file as it comes, up to `head`; past it the last
/// `tail` bytes are kept in a ring, written at the end after a note of what was cut.
#[derive(Debug)]
struct LogCap {
    head_left: u64,
    tail: Ring,
    /// Bytes past the head, all told.
    beyond: u64,
}

impl LogCap {
    fn new(limit: u64) -> Self {
        let tail = LOG_TAIL.min(limit / 2);
        Self {
            head_left: limit - tail,
            tail: Ring::new(tail as usize),
            beyond: 0,
        }
    }

    /// What of `bytes` goes to the file now; the rest is kept (or dropped) for the end.
    fn take<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        let now = (self.head_left.min(bytes.len() as u64)) as usize;
        self.head_left -= now as u64;
        let later = &bytes[now..];
        if !later.is_empty() {
            self.beyond += later.len() as u64;
            self.tail.push(later);
        }
        &bytes[..now]
    }

    /// How many bytes were cut and the end kept, if the cap was reached.
    fn finish(&self) -> Option<(u64, Pieces<'_>)> {
        if self.beyond == 0 {
            return None;
        }
        let tail = self.tail.contents();
        let kept = (tail.0.len() + tail.1.len()) as u64;
        Some((self.beyond - kept, tail))
    }
}

/// Bytes in two pieces, oldest first.
type Pieces<'a> = (&'a [u8], &'a [u8]);

/// The last `cap` bytes pushed.
#[derive(Debug)]
struct Ring {
    buf: Vec<u8>,
    cap: usize,
    /// Where the next byte goes once `buf` is full (and where the oldest one is).
    pos: usize,
}

impl Ring {
    fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            pos: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let cap = self.cap;
        let bytes = &bytes[bytes.len().saturating_sub(cap)..];
        let room = cap - self.buf.len();
        let fill = room.min(bytes.len());
        self.buf.extend_from_slice(&bytes[..fill]);
        let rest = &bytes[fill..];
        if rest.is_empty() {
            return;
        }
        // Full: overwrite from the oldest byte on, wrapping.
        let first = (cap - self.pos).min(rest.len());
        self.buf[self.pos..self.pos + first].copy_from_slice(&rest[..first]);
        let second = rest.len() - first;
        self.buf[..second].copy_from_slice(&rest[first..]);
        self.pos = (self.pos + rest.len()) % cap;
    }

    /// Oldest first, in two pieces.
    fn contents(&self) -> Pieces<'_> {
        if self.buf.len() < self.cap {
            (&self.buf, &[])
        } else {
            (&self.buf[self.pos..], &self.buf[..self.pos])
        }
    }
}

fn open_log(path: &Path) -> io::Result<File> {
    let open = || {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
    };
    // Most attempts log into a directory that exists already: try the one syscall first.
    match open() {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(parent)?;
            }
            open()
        }
        result => result,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn writes_interleaved_bytes_and_captures_each_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/attempt.log");
        let mut sink = OutputSink::new(path.clone(), 100, 100);
        sink.accept(Stream::Stdout, b"out 1\n");
        sink.accept(Stream::Stderr, b"err 1\n");
        assert!(sink.has_unflushed());
        sink.flush();
        assert_eq!(std::fs::read(&path).unwrap(), b"out 1\nerr 1\n");
        sink.accept(Stream::Stdout, b"out 2\n");
        let output = sink.finish();
        assert_eq!(std::fs::read(&path).unwrap(), b"out 1\nerr 1\nout 2\n");
        assert_eq!(output.stdout.text, "out 1\nout 2\n");
        assert_eq!(output.stderr.text, "err 1\n");
        assert_eq!(output.log_bytes, 18);
        assert_eq!(output.log_error, None);

        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("a/b")), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
    }

    #[test]
    fn a_capped_log_keeps_its_start_and_its_end_and_says_what_was_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capped.log");
        let mut sink = OutputSink::with_redactor(path.clone(), (64, 64, 100), None);
        let mut all = Vec::new();
        for i in 0..1000 {
            let line = format!("line {i:04}\n");
            all.extend_from_slice(line.as_bytes());
            sink.accept(Stream::Stdout, line.as_bytes());
        }
        let out = sink.finish();
        let log = std::fs::read_to_string(&path).unwrap();
        // 50 bytes of start, 50 of end, and the note between them.
        let (start, rest) = log.split_at(50);
        assert_eq!(start.as_bytes(), &all[..50]);
        assert!(
            rest.ends_with(std::str::from_utf8(&all[all.len() - 50..]).unwrap()),
            "{log}"
        );
        let cut = all.len() - 100;
        assert!(
            rest.contains(&format!(
                "[baton: {cut} bytes of this attempt's output were cut here"
            )),
            "{log}"
        );
        assert_eq!(out.log_bytes, log.len() as u64);
        // The captures are the captures, whatever the log keeps.
        assert_eq!(out.stdout.total_bytes, all.len() as u64);
    }

    #[test]
    fn the_ring_keeps_the_last_bytes_whatever_the_chunks() {
        let mut ring = Ring::new(10);
        let mut all = Vec::new();
        for (i, len) in [3usize, 4, 25, 1, 9, 10, 11, 2].into_iter().enumerate() {
            let chunk: Vec<u8> = (0..len).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect();
            all.extend_from_slice(&chunk);
            ring.push(&chunk);
            let (a, b) = ring.contents();
            let kept = [a, b].concat();
            assert_eq!(kept, all[all.len().saturating_sub(10)..], "after chunk {i}");
        }
    }

    #[test]
    fn no_output_no_log_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/attempt.log");
        let output = OutputSink::new(path.clone(), 100, 100).finish();
        assert!(!path.exists());
        assert_eq!(output.log_bytes, 0);
        assert_eq!(output.log_error, None);
    }

    #[test]
    fn a_full_disk_is_recorded_and_capture_goes_on() {
        let mut sink = OutputSink::new("/dev/full".into(), 100, 100);
        sink.accept(Stream::Stdout, &[b'x'; LOG_BUFFER + 1]);
        sink.accept(Stream::Stdout, b"more");
        let output = sink.finish();
        let error = output.log_error.unwrap();
        assert!(error.contains("No space left on device"), "{error}");
        assert_eq!(output.stdout.total_bytes, LOG_BUFFER as u64 + 5);
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let mut sink = OutputSink::new(file.join("attempt.log"), 100, 100);
        sink.accept(Stream::Stderr, b"still captured");
        let output = sink.finish();
        assert!(
            output
                .log_error
                .unwrap()
                .starts_with("cannot open log file")
        );
        assert_eq!(output.stderr.text, "still captured");
        assert_eq!(output.log_bytes, 0);
    }
}
