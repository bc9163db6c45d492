//! The probe's frame: what travels in one RDMA SEND. Pure codec, no I/O.
//!
//! Layout (little-endian): kind (1 B: ping or pong), 3 B zero, sequence
//! (8 B), payload length (4 B), payload, CRC-32 of everything before it
//! (4 B), zero padding to the frame size. Thunderbolt does no hardware
//! acknowledgement, so the receiver checks the CRC and the sequence itself:
//! a completion only says the local adapter took the buffer.

use thiserror::Error;

/// The two frame sizes the probe sends: a small message and one 4 KiB
/// frame (Apple's receive buffers are posted in 4 KiB frames).
pub const SMALL: usize = 64;
/// See [`SMALL`].
pub const PAGE: usize = 4096;
const HEADER: usize = 16;
const TRAILER: usize = 4;

/// What a frame is. The pinging side sends `Warm` then `Ping`, the peer
/// echoes each with the same number as `Pong`; a send-bandwidth burst is
/// `Ask`, `Go`, `Data`..., `Done`, `Tally` (docs/rdma.md, Design).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A measured probe sent to the peer.
    Ping = 1,
    /// The peer's echo of a ping (or of a warm-up ping).
    Pong = 2,
    /// A warm-up ping: echoed like a ping, and it tells the peer to poll
    /// its completion queue closely for the measured ping right behind.
    Warm = 3,
    /// Burst sender: may I send `count` data frames? (number: burst id
    /// and count, [`control`]).
    Ask = 4,
    /// Burst receiver: `count` receive frames are posted, send them.
    Go = 5,
    /// One 4 KiB burst frame (number: its index in the burst).
    Data = 6,
    /// Burst sender: the burst is over, `count` data frames were sent.
    Done = 7,
    /// Burst receiver: `count` data frames came in with a good CRC.
    Tally = 8,
}

/// A burst control frame's number: the burst's id above its count (a
/// count is at most 16 bits: `burst_bytes` is capped far below 256 MiB).
pub fn control(id: u64, count: u64) -> u64 {
    (id << 16) | (count & 0xffff)
}

/// The burst id and count of a control frame's number.
pub fn split(number: u64) -> (u64, u64) {
    (number >> 16, number & 0xffff)
}

/// A frame as decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Ping or pong.
    pub kind: Kind,
    /// The sender's sequence number.
    pub seq: u64,
    /// Bytes the frame uses, padding excluded.
    pub size: usize,
}

#[derive(Debug, Error, PartialEq, Eq)]
/// Why a received frame was refused.
pub enum FrameError {
    #[error("frame of {0} bytes is shorter than its header")]
    /// Fewer bytes than the header or its own length says.
    Short(usize),
    #[error("frame kind {0} is not one this build knows")]
    /// An unknown kind byte.
    Kind(u8),
    #[error("CRC mismatch")]
    /// The CRC does not match: corrupted on the way.
    Crc,
}

/// Encodes a frame of `size` bytes (at least 20); the payload is a pattern
/// derived from `seq`, so a corrupted byte anywhere shows as a CRC mismatch.
pub fn encode(kind: Kind, seq: u64, size: usize) -> Vec<u8> {
    let size = size.max(HEADER + TRAILER);
    let body = size - HEADER - TRAILER;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&[kind as u8, 0, 0, 0]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(body as u32).to_le_bytes());
    out.extend((0..body).map(|i| (seq as usize).wrapping_add(i) as u8));
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes and checks a received frame.
pub fn decode(buf: &[u8]) -> Result<Frame, FrameError> {
    if buf.len() < HEADER + TRAILER {
        return Err(FrameError::Short(buf.len()));
    }
    let body = u32::from_le_bytes(buf[12..16].try_into().expect("4 bytes")) as usize;
    let end = HEADER + body;
    if buf.len() < end + TRAILER {
        return Err(FrameError::Short(buf.len()));
    }
    let crc = u32::from_le_bytes(buf[end..end + 4].try_into().expect("4 bytes"));
    if crc32fast::hash(&buf[..end]) != crc {
        return Err(FrameError::Crc);
    }
    let kind = match buf[0] {
        1 => Kind::Ping,
        2 => Kind::Pong,
        3 => Kind::Warm,
        4 => Kind::Ask,
        5 => Kind::Go,
        6 => Kind::Data,
        7 => Kind::Done,
        8 => Kind::Tally,
        k => return Err(FrameError::Kind(k)),
    };
    let seq = u64::from_le_bytes(buf[4..12].try_into().expect("8 bytes"));
    Ok(Frame {
        kind,
        seq,
        size: end + TRAILER,
    })
}
