//! Redaction of a stream of bytes cut anywhere.

use std::sync::Arc;

use regex_automata::hybrid;

use crate::engine::{Engine, Mode};
use crate::escaped;

/// Redacts one stream: [`push`](Self::push) chunks as they come, then
/// [`finish`](Self::finish). The bytes written, taken together, are exactly what
/// [`Redactor::redact`](crate::Redactor::redact) gives for the whole stream, wherever the
/// chunks were cut (inside a secret, inside a UTF-8 character, inside an escape).
///
/// It goes a line at a time (a line ends at `\n` or `\r`): a line is held until its end, so
/// that one holding JSON escapes can be searched decoded too (see `escaped`), then handed on.
/// A line longer than [`escaped::MAX_LINE`] is searched as printed only, and goes on as it
/// comes from there. A stream that has gone quiet is given [`release`](Self::release): what
/// it holds is decided as if the stream ended at its last line break, and a line not ended
/// yet, if it holds no backslash so far, goes on as printed (its end is searched as printed
/// only: an escape that comes after a pause in the middle of a line is not decoded).
pub struct StreamRedactor {
    raw: RawStream,
    /// The line so far, not handed on yet.
    line: Vec<u8>,
    /// The rest of the line goes to `raw` as it comes: it outgrew [`escaped::MAX_LINE`], or
    /// was released before its end.
    as_printed: bool,
    /// Bytes pushed so far.
    pushed: usize,
    /// Whole lines with nothing to decode, handed to `raw` together at the end of a push (or
    /// before anything else goes to it): the rules run over big stretches, not line by line.
    batch: Vec<u8>,
    /// For [`Redactor::find`](crate::Redactor::find): the lines redacted decoded, with where
    /// they start and what was found in them.
    trace: Option<Vec<(usize, usize, Vec<crate::Finding>)>>,
}

impl std::fmt::Debug for StreamRedactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRedactor")
            .field("line", &self.line.len())
            .field("raw", &self.raw)
            .finish()
    }
}

impl StreamRedactor {
    pub(crate) fn new(engine: Arc<Engine>) -> StreamRedactor {
        StreamRedactor {
            raw: RawStream::new(engine),
            line: Vec::new(),
            as_printed: false,
            pushed: 0,
            batch: Vec::new(),
            trace: None,
        }
    }

    /// A stream that notes what it redacted decoded, for `find`.
    pub(crate) fn traced(engine: Arc<Engine>) -> StreamRedactor {
        StreamRedactor {
            trace: Some(Vec::new()),
            ..StreamRedactor::new(engine)
        }
    }

    /// Takes the next chunk and appends to `out` whatever can be decided so far.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<u8>) {
        while !chunk.is_empty() {
            let (part, ends) = match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(at) => (&chunk[..=at], true),
                None => (chunk, false),
            };
            chunk = &chunk[part.len()..];
            self.pushed += part.len();
            if self.as_printed {
                self.flush(out);
                self.raw.push(part, out);
                self.as_printed = !ends;
                continue;
            }
            if ends && self.line.is_empty() && !part.contains(&b'\\') {
                // A whole line without a backslash: nothing to decode.
                self.batch.extend_from_slice(part);
                continue;
            }
            let room = escaped::MAX_LINE + 1 - self.line.len();
            if part.len() > room {
                // Too long to decode: as printed, from its start.
                self.flush(out);
                let line = std::mem::take(&mut self.line);
                self.raw.push(&line, out);
                self.raw.push(part, out);
                self.as_printed = !ends;
                continue;
            }
            self.line.extend_from_slice(part);
            if ends {
                self.end_line(out);
            }
        }
        self.flush(out);
    }

    /// Hands the batched lines to `raw`.
    fn flush(&mut self, out: &mut Vec<u8>) {
        if !self.batch.is_empty() {
            self.raw.push(&self.batch, out);
            self.batch.clear();
        }
    }

    /// Hands the held line on: decoded and searched where it holds an escape.
    fn end_line(&mut self, out: &mut Vec<u8>) {
        self.flush(out);
        let line = std::mem::take(&mut self.line);
        let body = line
            .strip_suffix(b"\n")
            .or_else(|| line.strip_suffix(b"\r"))
            .unwrap_or(&line);
        // A private key's `BEGIN` line without its end: its body is on the lines after, which
        // the rules as printed follow.
        let opens_a_key =
            last(body, b"-----BEGIN").is_some_and(|begin| last(body, b"-----END") < Some(begin));
        if !opens_a_key && escaped::has_escape(body) {
            // Only where the lines before are all decided: a secret that may go on from them
            // (an AWS key id at a line's end, a private key's body) goes on into this line as
            // printed.
            if self.raw.idle() {
                let engine = self.raw.engine();
                let find = |text: &[u8]| crate::redactor::find_with(engine, text);
                if let Some(found) = escaped::findings(body, &find) {
                    escaped::apply(body, &found, out);
                    out.extend_from_slice(&line[body.len()..]);
                    if let Some(trace) = &mut self.trace {
                        trace.push((self.pushed - line.len(), line.len(), found));
                    }
                    return;
                }
            }
        }
        self.raw.push(&line, out);
    }

    /// The producer has paused (for a moment, say 150 ms, with nothing new): decides the held
    /// bytes up to the last line break among them as if the stream ended there, and appends
    /// them to `out`, so that a quiet task's finished lines are seen while it is quiet. The
    /// line not ended yet goes on as printed unless it holds a backslash (an escape may be
    /// coming); a possible secret's start in it stays held, and so does everything after a
    /// private key's `BEGIN` line, whose body is still to come.
    pub fn release(&mut self, out: &mut Vec<u8>) {
        self.flush(out);
        if !self.line.is_empty() && !self.line.contains(&b'\\') {
            let line = std::mem::take(&mut self.line);
            self.raw.push(&line, out);
            self.as_printed = true;
        }
        self.raw.release(out);
    }

    /// Ends the stream: appends the rest to `out`.
    pub fn finish(self, out: &mut Vec<u8>) {
        self.finish_traced(out);
    }

    /// [`finish`](Self::finish), giving back the trace.
    pub(crate) fn finish_traced(
        mut self,
        out: &mut Vec<u8>,
    ) -> Option<Vec<(usize, usize, Vec<crate::Finding>)>> {
        if !self.line.is_empty() {
            self.end_line(out);
        }
        self.flush(out);
        self.raw.finish(out);
        self.trace
    }

    /// How many bytes are held back, waiting for more input.
    pub fn held(&self) -> usize {
        self.line.len() + self.raw.held()
    }
}

/// Where `needle` last starts in `hay`.
fn last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// What [`StreamRedactor`] hands lines to: the rules over bytes as printed, cut anywhere.
///
/// Between pushes it holds back only the bytes that more input could still change: from
/// where a secret could still be starting or going on. A line that ends in a newline goes
/// through whole, a secret in it redacted, unless a pattern can span lines (a private key's
/// `BEGIN` line, an AWS key id whose secret key may follow on the next line, a multi-line
/// secret value). It never holds more than [`Redactor::window`](crate::Redactor::window)
/// bytes, and never cuts a UTF-8 character of valid input between two pushes' outputs.
///
/// A stream that has gone quiet is given [`release`](Self::release): what it holds up to its
/// last line break is decided as if the stream ended there.
pub(crate) struct RawStream {
    engine: Arc<Engine>,
    /// Unsent bytes from `pos` on, after one byte already sent (look-behind for `\b`).
    buf: Vec<u8>,
    pos: usize,
    mode: Mode,
    starts: hybrid::dfa::Cache,
}

impl std::fmt::Debug for RawStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawStream")
            .field("held", &(self.buf.len() - self.pos))
            .field("mode", &self.mode)
            .finish()
    }
}

impl RawStream {
    pub(crate) fn new(engine: Arc<Engine>) -> RawStream {
        RawStream {
            starts: engine.starts.create_cache(),
            engine,
            buf: Vec::new(),
            pos: 0,
            mode: Mode::Scan,
        }
    }

    /// Takes the next chunk and appends to `out` whatever can be decided so far.
    pub(crate) fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        if chunk.is_empty() {
            return;
        }
        self.buf.extend_from_slice(chunk);
        self.pos = self.engine.run(
            &self.buf,
            self.pos,
            false,
            &mut self.mode,
            Some(&mut self.starts),
            out,
        );
        let drop = self.pos.saturating_sub(1);
        self.buf.drain(..drop);
        self.pos -= drop;
    }

    /// The producer has paused (for a moment, say 150 ms, with nothing new): decides the held
    /// bytes up to the last line break among them as if the stream ended there, and appends
    /// them to `out`, so that a quiet task's finished lines are seen while it is quiet. What
    /// follows the last line break (the start of a line, which may be the start of a secret)
    /// stays held; so does everything after a private key's `BEGIN` line, whose body is still
    /// to come. A secret that goes on after the release is still redacted as it goes on (the
    /// stream stays inside it); only one that spans a line break *and* a pause is seen as two
    /// pieces, each judged on its own.
    pub(crate) fn release(&mut self, out: &mut Vec<u8>) {
        let held = &self.buf[self.pos..];
        let Some(last) = held.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        if held.windows(16).any(|w| w == b"PRIVATE KEY-----") {
            return;
        }
        let cut = self.pos + last + 1;
        self.pos = self
            .engine
            .run(&self.buf[..cut], self.pos, true, &mut self.mode, None, out);
        let drop = self.pos.saturating_sub(1);
        self.buf.drain(..drop);
        self.pos -= drop;
    }

    /// Ends the stream: appends the rest to `out`.
    pub(crate) fn finish(mut self, out: &mut Vec<u8>) {
        self.engine
            .run(&self.buf, self.pos, true, &mut self.mode, None, out);
    }

    /// How many bytes are held back, waiting for more input.
    pub(crate) fn held(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Nothing held and inside no secret: what comes next starts afresh.
    pub(crate) fn idle(&self) -> bool {
        self.held() == 0 && matches!(self.mode, Mode::Scan)
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}
