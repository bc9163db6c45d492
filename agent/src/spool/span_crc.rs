//! The CRC-32 of any stretch of a buffer in constant time, after one pass
//! over it. Pure.
//!
//! Resynchronising after damage tries every byte offset as a frame start,
//! and each candidate names its own length (up to 4 MiB): hashing each
//! candidate's payload made a crafted file of plausible headers cost its
//! size times the frame size. CRC-32 is linear, so
//! `crc(a..b) = C(b) ^ C(a)·x^(8(b-a)) mod P` where `C(i)` is the CRC of the
//! buffer's first `i` bytes (zlib's `crc32_combine`). [`SpanCrc`] keeps
//! `C` at every [`STRIDE`] bytes (filled lazily, as far as asked), so a
//! candidate costs two short hashes and three products of 32-bit
//! polynomials, whatever its length.

use std::sync::OnceLock;

/// Bytes between two kept prefix CRCs: a lookup hashes fewer than this.
pub const STRIDE: usize = 64;

/// The reflected CRC-32 polynomial (IEEE, as `crc32fast` computes).
const POLY: u32 = 0xedb8_8320;

/// Lengths below this come from [`Powers::lo`]; the rest also use
/// [`Powers::hi`].
const SPLIT: usize = 1 << 11;

/// `a·b mod P`, reflected (bit 31 is x^0), as zlib's `multmodp`.
fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        if m == 0 {
            return p;
        }
    }
}

/// `x^(8n) mod P` for every `n` up to `SPLIT²`, as two tables.
struct Powers {
    /// `x^(8n)` for `n < SPLIT`.
    lo: Vec<u32>,
    /// `x^(8·SPLIT·n)` for `n <= SPLIT`.
    hi: Vec<u32>,
}

fn powers() -> &'static Powers {
    static P: OnceLock<Powers> = OnceLock::new();
    P.get_or_init(|| {
        let one = 1u32 << 31;
        let x8 = 1u32 << 23; // x^8
        let mut lo = Vec::with_capacity(SPLIT);
        let mut p = one;
        for _ in 0..SPLIT {
            lo.push(p);
            p = multmodp(p, x8);
        }
        // `p` is x^(8·SPLIT) now.
        let step = p;
        let mut hi = Vec::with_capacity(SPLIT + 1);
        let mut q = one;
        for _ in 0..=SPLIT {
            hi.push(q);
            q = multmodp(q, step);
        }
        Powers { lo, hi }
    })
}

/// `x^(8n) mod P`; `n` at most `SPLIT²` (4 MiB, the largest frame).
fn x8n(n: usize) -> u32 {
    let p = powers();
    multmodp(p.lo[n % SPLIT], p.hi[n / SPLIT])
}

/// The CRC of `bytes` after bytes whose CRC was `crc`.
fn extend(crc: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(bytes);
    h.finalize()
}

/// Prefix CRCs of one buffer, for [`SpanCrc::crc`] of any stretch of it.
pub struct SpanCrc<'a> {
    buf: &'a [u8],
    /// `marks[k]` is the CRC of `buf[..k * STRIDE]`.
    marks: Vec<u32>,
}

impl<'a> SpanCrc<'a> {
    /// Nothing computed yet: the first lookups fill the marks they need.
    pub fn new(buf: &'a [u8]) -> SpanCrc<'a> {
        SpanCrc {
            buf,
            marks: vec![0],
        }
    }

    /// The CRC of `buf[..i]`.
    fn prefix(&mut self, i: usize) -> u32 {
        let k = i / STRIDE;
        while self.marks.len() <= k {
            let j = self.marks.len();
            let last = self.marks[j - 1];
            self.marks
                .push(extend(last, &self.buf[(j - 1) * STRIDE..j * STRIDE]));
        }
        extend(self.marks[k], &self.buf[k * STRIDE..i])
    }

    /// `crc32fast::hash(&buf[a..b])`, in constant time once the marks up
    /// to `b` are in (each byte is passed once for all lookups).
    /// `b - a` is at most 4 MiB.
    pub fn crc(&mut self, a: usize, b: usize) -> u32 {
        let (ca, cb) = (self.prefix(a), self.prefix(b));
        cb ^ multmodp(x8n(b - a), ca)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stretch_hashes_as_crc32fast_does() {
        let buf: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut s = SpanCrc::new(&buf);
        for a in (0..buf.len()).step_by(37) {
            for b in (a..buf.len()).step_by(53) {
                assert_eq!(s.crc(a, b), crc32fast::hash(&buf[a..b]), "{a}..{b}");
            }
        }
        assert_eq!(s.crc(0, buf.len()), crc32fast::hash(&buf));
    }

    #[test]
    fn the_longest_frame_is_in_the_tables() {
        let n = crate::spool::segment::MAX_FRAME;
        assert!(n <= SPLIT * SPLIT);
        let buf = vec![0x5au8; n + 3];
        let mut s = SpanCrc::new(&buf);
        assert_eq!(s.crc(2, n + 2), crc32fast::hash(&buf[2..n + 2]));
    }
}
