//! The queue-pair exchange's one frame: what each agent of a link tells
//! the other before its QP can go to RTR (the peer's QP number, GID and
//! first packet sequence number). Pure codec, no I/O. Fixed 32 bytes,
//! little-endian: magic `BWRH`, version 1, three zero bytes, QP number,
//! PSN, GID. Its first 16 bytes can never decode as a beat (other magic),
//! so the side channel tells the two apart from the first read.

use thiserror::Error;

/// Bytes of a hello.
pub const LEN: usize = 32;
/// Bytes the side channel reads before it knows beat from hello.
pub const HEAD: usize = 16;
const MAGIC: &[u8; 4] = b"BWRH";
const VERSION: u8 = 1;
/// QP numbers and PSNs are 24-bit on the wire (InfiniBand BTH).
const MAX_24: u32 = 0x00ff_ffff;

/// One side's queue-pair coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The sender's QP number (24 bits, never 0 or 1: those are the
    /// special QPs, never a UC one).
    pub qpn: u32,
    /// The first packet sequence number the sender sends with (24 bits).
    pub psn: u32,
    /// The sender's GID at the probed index (never all zero).
    pub gid: [u8; 16],
}

/// Why bytes are not a hello.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HelloError {
    /// Not 32 bytes.
    #[error("a hello is {LEN} bytes, got {0}")]
    Length(usize),
    /// Not magic `BWRH` version 1 with zero padding.
    #[error("not a version-1 hello")]
    Header,
    /// QP number 0, 1 or wider than 24 bits.
    #[error("QP number {0} is not a UC queue pair's")]
    Qpn(u32),
    /// PSN wider than 24 bits.
    #[error("PSN {0} is wider than 24 bits")]
    Psn(u32),
    /// An all-zero GID routes nowhere.
    #[error("GID is all zero")]
    Gid,
}

/// True when `head` (the first [`HEAD`] bytes on the side channel)
/// starts a hello, so the rest is worth reading.
pub fn starts(head: &[u8; HEAD]) -> bool {
    &head[..4] == MAGIC && head[4] == VERSION && head[5..8] == [0, 0, 0]
}

/// Encodes `h`; refuses what [`decode`] would refuse, so a bad local
/// value never leaves the agent.
pub fn encode(h: &Hello) -> Result<[u8; LEN], HelloError> {
    check(h)?;
    let mut b = [0u8; LEN];
    b[..4].copy_from_slice(MAGIC);
    b[4] = VERSION;
    b[8..12].copy_from_slice(&h.qpn.to_le_bytes());
    b[12..16].copy_from_slice(&h.psn.to_le_bytes());
    b[16..].copy_from_slice(&h.gid);
    Ok(b)
}

/// The hello in `b`, validated.
pub fn decode(b: &[u8]) -> Result<Hello, HelloError> {
    let b: &[u8; LEN] = b.try_into().map_err(|_| HelloError::Length(b.len()))?;
    let head: &[u8; HEAD] = b[..HEAD].try_into().expect("16 bytes");
    if !starts(head) {
        return Err(HelloError::Header);
    }
    let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let h = Hello {
        qpn: word(8),
        psn: word(12),
        gid: b[16..].try_into().expect("16 bytes"),
    };
    check(&h)?;
    Ok(h)
}

fn check(h: &Hello) -> Result<(), HelloError> {
    if h.qpn < 2 || h.qpn > MAX_24 {
        return Err(HelloError::Qpn(h.qpn));
    }
    if h.psn > MAX_24 {
        return Err(HelloError::Psn(h.psn));
    }
    if h.gid == [0; 16] {
        return Err(HelloError::Gid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    use super::*;
    use crate::rdma::beat;

    fn sample() -> Hello {
        let mut gid = [0u8; 16];
        gid[10..12].copy_from_slice(&[0xff, 0xff]);
        gid[12..].copy_from_slice(&[169, 254, 7, 2]);
        Hello {
            qpn: 0x11,
            psn: 0x00ab_cdef,
            gid,
        }
    }

    #[test]
    fn a_hello_round_trips_and_is_never_a_beat() {
        let b = encode(&sample()).unwrap();
        assert_eq!(decode(&b), Ok(sample()));
        let head: [u8; HEAD] = b[..HEAD].try_into().unwrap();
        assert!(starts(&head));
        assert_eq!(beat::decode(&head), None);
        assert!(!starts(&beat::encode(7)));
    }

    #[test]
    fn hostile_hellos_are_refused_with_why() {
        let good = encode(&sample()).unwrap();
        assert_eq!(decode(&good[..31]), Err(HelloError::Length(31)));
        assert_eq!(decode(&[0u8; 33]), Err(HelloError::Length(33)));
        assert_eq!(decode(&[]), Err(HelloError::Length(0)));
        let bad = |at: usize, v: u8| {
            let mut b = good;
            b[at] = v;
            decode(&b)
        };
        assert_eq!(bad(0, b'X'), Err(HelloError::Header));
        assert_eq!(bad(4, 2), Err(HelloError::Header));
        assert_eq!(bad(7, 1), Err(HelloError::Header));
        assert_eq!(bad(11, 1), Err(HelloError::Qpn(0x0100_0011)));
        assert_eq!(bad(15, 1), Err(HelloError::Psn(0x01ab_cdef)));
        let mut zero = sample();
        zero.gid = [0; 16];
        assert_eq!(encode(&zero), Err(HelloError::Gid));
        for qpn in [0, 1] {
            let h = Hello { qpn, ..sample() };
            assert_eq!(encode(&h), Err(HelloError::Qpn(qpn)));
        }
        let mut http = [0u8; LEN];
        http.copy_from_slice(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\0\0\0\0\0");
        assert_eq!(decode(&http), Err(HelloError::Header));
    }

    #[test]
    fn random_bytes_never_panic_and_what_decodes_re_encodes_the_same() {
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[28; 32]);
        let mut runner = TestRunner::new_with_rng(Config::with_cases(2000), rng);
        let bytes = proptest::collection::vec(any::<u8>(), 0..64);
        runner
            .run(&bytes, |b| {
                if let Ok(h) = decode(&b) {
                    prop_assert_eq!(encode(&h).unwrap().to_vec(), b);
                }
                Ok(())
            })
            .unwrap();
        // Valid hellos with random fields round-trip.
        let fields = (2u32..=MAX_24, 0u32..=MAX_24, any::<[u8; 16]>());
        runner
            .run(&fields, |(qpn, psn, gid)| {
                let h = Hello { qpn, psn, gid };
                match encode(&h) {
                    Ok(b) => prop_assert_eq!(decode(&b), Ok(h)),
                    Err(e) => prop_assert_eq!(e, HelloError::Gid),
                }
                Ok(())
            })
            .unwrap();
    }
}
