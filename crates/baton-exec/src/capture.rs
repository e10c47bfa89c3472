//! Bounded capture of one output stream: the first bytes, the last bytes, and a count of what
//! fell between them. Memory stays within the limit however much the child prints.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::utf8;

/// What was kept of one output stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// Valid UTF-8: invalid bytes are replaced with U+FFFD, and where bytes were dropped a line
    /// such as `[… 12.3MiB cut …]` stands in for them.
    pub text: String,
    /// Bytes the stream carried in all.
    pub total_bytes: u64,
    /// Bytes that are not in `text`.
    pub cut_bytes: u64,
}

/// The head and tail of a stream as it goes by.
#[derive(Debug)]
pub(crate) struct Capture {
    head: Vec<u8>,
    head_limit: usize,
    tail: VecDeque<u8>,
    tail_limit: usize,
    total: u64,
}

impl Capture {
    /// Keeps half of `limit` from the start and the rest from the end: a task's output often
    /// says what it is doing first and what came of it last.
    pub(crate) fn head_and_tail(limit: usize) -> Self {
        Self::new(limit / 2, limit - limit / 2)
    }

    /// Keeps the end only: the cause of a failure is usually at the bottom of stderr.
    pub(crate) fn tail_only(limit: usize) -> Self {
        Self::new(0, limit)
    }

    fn new(head_limit: usize, tail_limit: usize) -> Self {
        Self {
            head: Vec::new(),
            head_limit,
            tail: VecDeque::new(),
            tail_limit,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;

        let room = self.head_limit - self.head.len();
        if room > 0 {
            let taken = room.min(bytes.len());
            // Growing exactly keeps a nearly full head from doubling past its limit.
            if self.head.capacity() - self.head.len() < taken {
                let wanted =
                    (self.head.capacity() * 2).clamp(self.head.len() + taken, self.head_limit);
                self.head.reserve_exact(wanted - self.head.len());
            }
            self.head.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
        }

        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.tail_limit..];
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
            self.tail.drain(..overflow);
        }
        if self.tail.capacity() - self.tail.len() < bytes.len() {
            let wanted =
                (self.tail.capacity() * 2).clamp(self.tail.len() + bytes.len(), self.tail_limit);
            self.tail.reserve_exact(wanted - self.tail.len());
        }
        self.tail.extend(bytes);
    }

    pub(crate) fn finish(self) -> Captured {
        let Self {
            mut head,
            tail,
            total,
            ..
        } = self;
        let mut tail = Vec::from(tail);
        let kept = (head.len() + tail.len()) as u64;
        if kept == total {
            head.append(&mut tail);
            return Captured {
                text: utf8::lossy(head),
                total_bytes: total,
                cut_bytes: 0,
            };
        }

        // Bytes were dropped between head and tail: cut both back to whole characters so the
        // marker does not glue two halves of different characters together.
        head.truncate(utf8::complete_prefix_len(&head));
        tail.drain(..utf8::partial_start_len(&tail));
        let cut = total - (head.len() + tail.len()) as u64;
        let mut text = utf8::lossy(head);
        text.push_str(&cut_marker(cut));
        text.push_str(&utf8::lossy(tail));
        Captured {
            text,
            total_bytes: total,
            cut_bytes: cut,
        }
    }
}

fn cut_marker(cut: u64) -> String {
    baton_model::cut_marker(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(mut capture: Capture, chunks: &[&[u8]]) -> Captured {
        for chunk in chunks {
            capture.push(chunk);
        }
        capture.finish()
    }

    #[test]
    fn short_output_is_kept_whole() {
        let out = captured(Capture::head_and_tail(100), &[b"hello ", b"world\n"]);
        assert_eq!(out.text, "hello world\n");
        assert_eq!((out.total_bytes, out.cut_bytes), (12, 0));
    }

    #[test]
    fn output_at_the_limit_is_kept_whole() {
        let out = captured(Capture::head_and_tail(10), &[b"0123456789"]);
        assert_eq!(out.text, "0123456789");
        assert_eq!(out.cut_bytes, 0);
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let out = captured(
            Capture::head_and_tail(8),
            &[b"abcd", b"ef", b"ghij", b"klmnop"],
        );
        assert_eq!(out.text, "abcd\n[… 8B cut …]\nmnop");
        assert_eq!((out.total_bytes, out.cut_bytes), (16, 8));
    }

    #[test]
    fn one_huge_chunk_is_cut_like_many_small_ones() {
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let whole = captured(Capture::head_and_tail(100), &[&data]);
        let mut capture = Capture::head_and_tail(100);
        for chunk in data.chunks(7) {
            capture.push(chunk);
        }
        assert_eq!(capture.finish(), whole);
        assert_eq!(whole.cut_bytes, 900);
    }

    #[test]
    fn tail_only_keeps_the_end() {
        let out = captured(Capture::tail_only(4), &[b"first line\n", b"last\n"]);
        assert_eq!(out.text, "\n[… 12B cut …]\nast\n");
        let out = captured(Capture::tail_only(0), &[b"gone"]);
        assert_eq!(out.text, "\n[… 4B cut …]\n");
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // Each € is 3 bytes; limits of 4 + 4 split one on both sides.
        let out = captured(Capture::head_and_tail(8), &["€€€€€€".as_bytes()]);
        assert_eq!(out.text, "€\n[… 12B cut …]\n€");
        assert_eq!(out.cut_bytes, 12);
        assert!(!out.text.contains('\u{FFFD}'));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let out = captured(Capture::head_and_tail(100), &[b"ok \xff\xfe end"]);
        assert_eq!(out.text, "ok \u{FFFD}\u{FFFD} end");
        assert_eq!(out.total_bytes, 9);
    }

    #[test]
    fn memory_stays_within_the_limit() {
        let mut capture = Capture::head_and_tail(1000);
        let chunk = [b'x'; 4096];
        for _ in 0..1000 {
            capture.push(&chunk);
        }
        assert!(capture.head.capacity() <= 500);
        assert!(
            capture.tail.capacity() <= 1000 * 2,
            "VecDeque may round up, never grow on"
        );
        assert_eq!(capture.finish().cut_bytes, 4096 * 1000 - 1000);
    }
}
