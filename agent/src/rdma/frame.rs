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

/// Which way a frame goes: the pinging side sends `Ping`, the peer echoes
/// the same sequence back as `Pong`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A probe sent to the peer.
    Ping = 1,
    /// The peer's echo of a ping.
    Pong = 2,
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
    #[error("frame kind {0} is neither ping nor pong")]
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
        k => return Err(FrameError::Kind(k)),
    };
    let seq = u64::from_le_bytes(buf[4..12].try_into().expect("8 bytes"));
    Ok(Frame {
        kind,
        seq,
        size: end + TRAILER,
    })
}
