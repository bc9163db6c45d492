//! Spool record framing: `len: u32 LE | crc32: u32 LE | bytes`, where the
//! bytes are one encoded `Record` and the CRC covers them. Pure: no files.
//!
//! A frame is the unit of durability. A process killed mid-write leaves a
//! torn last frame (short, or with a CRC that does not match); [`scan`]
//! reports where the intact prefix ends so the spool can truncate there.

/// Bytes of the frame header.
pub const HEADER: usize = 8;
/// Largest frame payload accepted; a longer length field is corruption.
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the header or the announced length: a torn write.
    #[error("truncated frame: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes the frame needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The length field is beyond [`MAX_FRAME`].
    #[error("frame length {0} exceeds the limit")]
    TooLong(usize),
    /// The payload does not match its checksum.
    #[error("frame checksum mismatch")]
    BadCrc,
}

/// Appends one frame holding `payload` to `out`.
pub fn encode(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Reads the frame header at the start of `buf`: the payload length, after
/// checking it is plausible.
pub fn header(buf: &[u8]) -> Result<(usize, u32), FrameError> {
    if buf.len() < HEADER {
        return Err(FrameError::Truncated {
            need: HEADER,
            have: buf.len(),
        });
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if len > MAX_FRAME {
        return Err(FrameError::TooLong(len));
    }
    Ok((len, crc))
}

/// Decodes the frame at the start of `buf`: its payload and the frame's
/// total size.
pub fn decode(buf: &[u8]) -> Result<(&[u8], usize), FrameError> {
    let (len, crc) = header(buf)?;
    let total = HEADER + len;
    if buf.len() < total {
        return Err(FrameError::Truncated {
            need: total,
            have: buf.len(),
        });
    }
    let payload = &buf[HEADER..total];
    if crc32fast::hash(payload) != crc {
        return Err(FrameError::BadCrc);
    }
    Ok((payload, total))
}

/// Walks the frames of `buf`: the payloads of the intact prefix, and the
/// offset where it ends with the error that stopped it (`None` when every
/// byte belongs to an intact frame).
pub fn scan(buf: &[u8]) -> (Vec<&[u8]>, usize, Option<FrameError>) {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        match decode(&buf[at..]) {
            Ok((p, n)) => {
                out.push(p);
                at += n;
            }
            Err(e) => return (out, at, Some(e)),
        }
    }
    (out, at, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(ps: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in ps {
            encode(p, &mut v);
        }
        v
    }

    #[test]
    fn round_trip() {
        let buf = frames(&[b"one", b"", b"three"]);
        let (ps, end, err) = scan(&buf);
        assert_eq!(ps, vec![&b"one"[..], b"", b"three"]);
        assert_eq!(end, buf.len());
        assert_eq!(err, None);
    }

    #[test]
    fn torn_tail_stops_at_last_intact_frame() {
        let buf = frames(&[b"one", b"two"]);
        let first = HEADER + 3;
        for cut in first + 1..buf.len() {
            let (ps, end, err) = scan(&buf[..cut]);
            assert_eq!(ps, vec![&b"one"[..]], "cut at {cut}");
            assert_eq!(end, first);
            assert!(matches!(err, Some(FrameError::Truncated { .. })));
        }
    }

    #[test]
    fn flipped_bit_is_caught() {
        let mut buf = frames(&[b"one", b"two"]);
        let last = buf.len() - 1;
        buf[last] ^= 0x40;
        let (ps, end, err) = scan(&buf);
        assert_eq!(ps.len(), 1);
        assert_eq!(end, HEADER + 3);
        assert_eq!(err, Some(FrameError::BadCrc));
    }

    #[test]
    fn absurd_length_is_corruption_not_allocation() {
        let mut buf = vec![0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0];
        buf.extend_from_slice(b"xx");
        assert!(matches!(scan(&buf).2, Some(FrameError::TooLong(_))));
    }
}
