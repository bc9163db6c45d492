//! Records numbered but not yet on disk: the write buffer of the spool.
//! Pure: no files.
//!
//! Normally it holds one drain's records for the length of one `write`.
//! When that write fails (the spool's filesystem is full) the records stay
//! here, in order and with their sequence numbers, and every later flush
//! tries again, so space coming back loses nothing. While a failure is
//! outstanding the buffer is bounded: beyond the cap new records are
//! refused before they are numbered, and a failed batch that overshoots
//! gives back the numbers of its newest records. Either way the seqs that
//! reach the disk stay contiguous per boot, and each refusal is counted by
//! the spool as dropped.

/// Encoded frames waiting for a write, with their seqs.
#[derive(Debug)]
pub struct Held {
    buf: Vec<u8>,
    /// `(seq, frame bytes)` of each frame in `buf`, in order.
    frames: Vec<(u64, u64)>,
    cap: usize,
}

impl Held {
    /// An empty buffer that holds at most `cap` bytes across a failure.
    pub fn new(cap: usize) -> Held {
        Held {
            buf: Vec::new(),
            frames: Vec::new(),
            cap,
        }
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// True when a record may join records left by a failed write.
    pub fn has_room(&self) -> bool {
        self.buf.len() < self.cap
    }

    /// Adds the frame of record `seq`; `encode` appends it to the buffer.
    pub fn push(&mut self, seq: u64, encode: impl FnOnce(&mut Vec<u8>)) {
        let before = self.buf.len();
        encode(&mut self.buf);
        self.frames.push((seq, (self.buf.len() - before) as u64));
    }

    /// After a failed write: removes the newest frames until the buffer is
    /// within its cap (always keeping the oldest). Returns how many went;
    /// their seqs were the highest numbered, so the caller gives them back.
    pub fn trim_to_cap(&mut self) -> u64 {
        let mut gone = 0;
        while self.buf.len() > self.cap && self.frames.len() > 1 {
            let (_, n) = self.frames.pop().expect("more than one");
            self.buf.truncate(self.buf.len() - n as usize);
            gone += 1;
        }
        gone
    }

    /// Everything was written: the `(seq, frame bytes)` of each record, in
    /// order, and an empty buffer.
    pub fn written(&mut self) -> std::vec::Drain<'_, (u64, u64)> {
        self.buf.clear();
        self.frames.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(h: &mut Held, seq: u64, n: usize) {
        h.push(seq, |b| b.extend(std::iter::repeat_n(seq as u8, n)));
    }

    #[test]
    fn trim_keeps_the_oldest_within_the_cap() {
        let mut h = Held::new(25);
        for s in 1..=5 {
            push(&mut h, s, 10);
        }
        assert!(!h.has_room());
        assert_eq!(h.trim_to_cap(), 3);
        assert_eq!(h.len(), 2);
        assert_eq!(h.bytes(), &[[1u8; 10], [2u8; 10]].concat()[..]);
        assert!(h.has_room());
        assert_eq!(h.written().collect::<Vec<_>>(), vec![(1, 10), (2, 10)]);
        assert!(h.is_empty() && h.bytes().is_empty());
    }

    #[test]
    fn one_oversized_frame_is_kept() {
        let mut h = Held::new(4);
        push(&mut h, 7, 10);
        assert_eq!(h.trim_to_cap(), 0);
        assert_eq!(h.len(), 1);
    }
}
