//! Redaction of a stream of bytes cut anywhere.

use std::sync::Arc;

use regex_automata::hybrid;

use crate::engine::{Engine, Mode};

/// Redacts one stream: [`push`](Self::push) chunks as they come, then
/// [`finish`](Self::finish). The bytes written, taken together, are exactly what
/// [`Redactor::redact`](crate::Redactor::redact) gives for the whole stream, wherever the
/// chunks were cut (inside a secret, inside a UTF-8 character).
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
pub struct StreamRedactor {
    engine: Arc<Engine>,
    /// Unsent bytes from `pos` on, after one byte already sent (look-behind for `\b`).
    buf: Vec<u8>,
    pos: usize,
    mode: Mode,
    starts: hybrid::dfa::Cache,
}

impl std::fmt::Debug for StreamRedactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRedactor")
            .field("held", &(self.buf.len() - self.pos))
            .field("mode", &self.mode)
            .finish()
    }
}

impl StreamRedactor {
    pub(crate) fn new(engine: Arc<Engine>) -> StreamRedactor {
        StreamRedactor {
            starts: engine.starts.create_cache(),
            engine,
            buf: Vec::new(),
            pos: 0,
            mode: Mode::Scan,
        }
    }

    /// Takes the next chunk and appends to `out` whatever can be decided so far.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
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
    pub fn release(&mut self, out: &mut Vec<u8>) {
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
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.engine
            .run(&self.buf, self.pos, true, &mut self.mode, None, out);
    }

    /// How many bytes are held back, waiting for more input.
    pub fn held(&self) -> usize {
        self.buf.len() - self.pos
    }
}
