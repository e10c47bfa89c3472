//! Redaction of a stream of bytes cut anywhere.

use std::sync::Arc;

use regex_automata::hybrid;

use crate::engine::{Engine, Mode};

/// Redacts one stream: [`push`](Self::push) chunks as they come, then
/// [`finish`](Self::finish). The bytes written, taken together, are exactly what
/// [`Redactor::redact`](crate::Redactor::redact) gives for the whole stream, wherever the
/// chunks were cut (inside a secret, inside a UTF-8 character).
///
/// Between pushes it holds back only the bytes from where a secret could still be starting
/// (a line that ends in a newline usually goes through whole), and never more than
/// [`Redactor::window`](crate::Redactor::window) bytes; it never cuts a UTF-8 character of
/// valid input between two pushes' outputs.
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
