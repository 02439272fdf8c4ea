//! The profile lines of a rank that writes no profile file (the `otlp` or
//! `console` exporter): held in memory, whole lines, at most a fixed number
//! of bytes, until a gather (`TelemetryHandle::gather_profiles`) takes
//! them. Past the bound the oldest lines are dropped and counted.

use std::collections::VecDeque;

/// The most bytes of lines held between two gathers (a few hundred
/// bytes a step: about 500 to 900 steps); the buffer itself stays under
/// twice that.
pub(crate) const HELD_BYTES: usize = 256 * 1024;

/// Whole lines in one buffer, the oldest first.
#[derive(Debug)]
pub(super) struct Held {
    /// `buf[start..]` are the lines held.
    buf: Vec<u8>,
    start: usize,
    /// The length of each line held, the oldest first.
    lens: VecDeque<usize>,
    cap: usize,
    /// Lines dropped to stay within `cap`, ever.
    dropped: u64,
}

impl Held {
    /// An empty buffer of at most `cap` bytes.
    pub(super) fn new(cap: usize) -> Held {
        Held {
            buf: Vec::new(),
            start: 0,
            lens: VecDeque::new(),
            cap,
            dropped: 0,
        }
    }

    /// Appends one whole line; drops the oldest lines to make room (a line
    /// longer than the bound is dropped itself). Returns the lines dropped.
    pub(super) fn push(&mut self, line: &[u8]) -> u64 {
        if line.len() > self.cap {
            self.dropped += 1;
            return 1;
        }
        let mut dropped = 0;
        while self.buf.len() - self.start + line.len() > self.cap {
            let Some(n) = self.lens.pop_front() else {
                break;
            };
            self.start += n;
            dropped += 1;
        }
        if self.start > 0 && self.buf.len() + line.len() > 2 * self.cap {
            // move the lines held to the front: at most `cap` bytes, once
            // per `cap` bytes dropped (the buffer stays under twice the
            // bound, and a step costs no memmove of the whole buffer)
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(line);
        self.lens.push_back(line.len());
        self.dropped += dropped;
        dropped
    }

    /// Every line held, in order, as one buffer; the lines taken are no
    /// longer held. Returns the bytes and the count of lines.
    pub(super) fn take(&mut self) -> (Vec<u8>, u64) {
        let lines = self.lens.len() as u64;
        self.lens.clear();
        let mut out = std::mem::take(&mut self.buf);
        out.drain(..self.start);
        self.start = 0;
        (out, lines)
    }

    /// Lines dropped to stay within the bound, ever.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Lines held now.
    pub(super) fn len(&self) -> u64 {
        self.lens.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_lines_go_first_and_the_bound_holds() {
        let mut h = Held::new(10);
        assert_eq!(h.push(b"aaaa\n"), 0);
        assert_eq!(h.push(b"bbbb\n"), 0);
        assert_eq!(h.len(), 2);
        // a third line does not fit: the oldest goes
        assert_eq!(h.push(b"cc\n"), 1);
        assert_eq!(h.take(), (b"bbbb\ncc\n".to_vec(), 2));
        assert_eq!((h.len(), h.dropped()), (0, 1));
        // a line past the bound is dropped itself; what is held stays
        h.push(b"d\n");
        assert_eq!(h.push(b"0123456789ab\n"), 1);
        assert_eq!(h.take(), (b"d\n".to_vec(), 1));
        assert_eq!(h.dropped(), 2);
        // many pushes: never more than the bound
        for i in 0..1000u32 {
            h.push(format!("{}\n", i % 97).as_bytes());
            assert!(h.buf.len() <= 2 * 10, "{}", h.buf.len());
            assert!(h.buf.len() - h.start <= 10);
        }
        let (bytes, n) = h.take();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.lines().count() as u64, n);
        assert!(text.ends_with(&format!("{}\n", 999 % 97)), "{text}");
        assert_eq!(h.take(), (Vec::new(), 0));
    }
}
