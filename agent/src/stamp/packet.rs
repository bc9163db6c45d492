//! STAMP (RFC 8762) unauthenticated test packets: the 44-octet
//! Session-Sender packet (section 4.2.1), the 44-octet Session-Reflector
//! packet (section 4.3.1), NTP 64-bit timestamps and the Error Estimate.
//!
//! Pure: bytes in, values out. Sockets, clocks and the choice of which
//! timestamps go where live in the reflector and the sender.
//!
//! Layout (offsets in octets):
//!
//! ```text
//! Sender:    0 seq(4) | 4 timestamp(8) | 12 error estimate(2) | 14 MBZ(30)
//! Reflector: 0 seq(4) | 4 timestamp(8) | 12 error estimate(2) | 14 SSID/MBZ(2)
//!            16 receive timestamp(8) | 24 sender seq(4) | 28 sender timestamp(8)
//!            36 sender error estimate(2) | 38 MBZ(2) | 40 sender TTL(1) | 41 MBZ(3)
//! ```
//!
//! A sender may pad its packet past 44 octets; the reflector answers with a
//! packet of the same length (RFC 8762 section 4.3: symmetrical size), and
//! copies the padding octets 44.. unchanged, so a sender that fills them
//! with a pattern sees it come back.

/// Length of both unauthenticated STAMP packets.
pub const PACKET_LEN: usize = 44;

/// The default STAMP UDP port (RFC 8762 section 4.1).
pub const DEFAULT_PORT: u16 = 862;

/// Seconds between the NTP epoch (1900-01-01) and the unix epoch.
const NTP_UNIX_OFFSET_S: u64 = 2_208_988_800;
const NS_PER_S: u64 = 1_000_000_000;

/// Why a datagram is not a STAMP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the 44-octet unauthenticated packet.
    #[error("datagram of {len} octets is shorter than the {PACKET_LEN}-octet STAMP packet")]
    Truncated {
        /// Length received.
        len: usize,
    },
}

/// A 64-bit NTP timestamp: 32 bits of seconds since 1900 and 32 bits of
/// fraction (RFC 5905 section 6), as carried on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NtpTimestamp(pub u64);

impl NtpTimestamp {
    /// The timestamp of `unix_ns` nanoseconds since 1970. Exact to the
    /// 0.23 ns resolution of the format; the fraction is truncated so that
    /// [`NtpTimestamp::to_unix_ns`] gives back the same nanosecond.
    pub fn from_unix_ns(unix_ns: u64) -> NtpTimestamp {
        // Seconds wrap modulo 2^32 into the next NTP era (2036-02-07).
        let secs = (unix_ns / NS_PER_S + NTP_UNIX_OFFSET_S) & 0xffff_ffff;
        let frac = ((unix_ns % NS_PER_S) << 32) / NS_PER_S;
        NtpTimestamp((secs << 32) | frac)
    }

    /// Unix nanoseconds of this timestamp. Seconds values below 2^31 are
    /// read as NTP era 1 (2036 onwards), as RFC 4330 section 3 suggests,
    /// so the mapping covers 1968 to 2104.
    pub fn to_unix_ns(self) -> u64 {
        let secs = self.seconds() as u64;
        let era_secs = if secs & 0x8000_0000 == 0 {
            secs + (1 << 32)
        } else {
            secs
        };
        let unix_s = era_secs.saturating_sub(NTP_UNIX_OFFSET_S);
        // Round to nearest so a truncated fraction maps back exactly.
        let ns = ((self.fraction() as u64) * NS_PER_S + (1 << 31)) >> 32;
        unix_s * NS_PER_S + ns
    }

    /// Whole seconds since 1900 (modulo the era).
    pub fn seconds(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// Fraction of a second in units of 2^-32 s.
    pub fn fraction(self) -> u32 {
        self.0 as u32
    }

    /// `self - earlier` in nanoseconds, signed, correct across an era wrap
    /// as long as the true difference is under 68 years.
    pub fn ns_since(self, earlier: NtpTimestamp) -> i64 {
        let units = self.0.wrapping_sub(earlier.0) as i64 as i128;
        // Round to nearest: units are 2^-32 s.
        ((units * NS_PER_S as i128 + (1 << 31)) >> 32) as i64
    }
}

/// The 16-bit Error Estimate (RFC 4656 section 4.1.2, used by RFC 8762):
/// `S(1) Z(1) Scale(6) Multiplier(8)`, error = Multiplier * 2^(Scale-32) s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ErrorEstimate {
    /// S: the clock is synchronized to an external UTC source.
    pub synchronized: bool,
    /// Z: timestamps are PTPv2 truncated (1) rather than NTP (0).
    pub ptp: bool,
    /// Scale, 6 bits (higher bits are dropped on encode).
    pub scale: u8,
    /// Multiplier; RFC 4656 says it must not be zero.
    pub multiplier: u8,
}

impl ErrorEstimate {
    /// What this agent claims for its own timestamps: unsynchronized NTP
    /// format, error 2^-20 s (about 1 us), the order of a kernel software
    /// timestamp taken on a busy host.
    pub const AGENT: ErrorEstimate = ErrorEstimate {
        synchronized: false,
        ptp: false,
        scale: 12,
        multiplier: 1,
    };

    /// The wire form.
    pub fn to_u16(self) -> u16 {
        ((self.synchronized as u16) << 15)
            | ((self.ptp as u16) << 14)
            | (((self.scale & 0x3f) as u16) << 8)
            | self.multiplier as u16
    }

    /// From the wire form.
    pub fn from_u16(v: u16) -> ErrorEstimate {
        ErrorEstimate {
            synchronized: v & 0x8000 != 0,
            ptp: v & 0x4000 != 0,
            scale: ((v >> 8) & 0x3f) as u8,
            multiplier: v as u8,
        }
    }

    /// The estimated error in seconds.
    pub fn seconds(self) -> f64 {
        self.multiplier as f64 * (self.scale as f64 - 32.0).exp2()
    }
}

/// A Session-Sender test packet (RFC 8762 section 4.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderPacket {
    /// Sequence number, from 0, one per probe.
    pub seq: u32,
    /// t1: when the sender sent it.
    pub timestamp: NtpTimestamp,
    /// The sender's clock error estimate.
    pub error_estimate: ErrorEstimate,
    /// RFC 8972 Session-Sender Identifier at octets 14-15 (MBZ, thus 0, in
    /// plain RFC 8762).
    pub ssid: u16,
}

impl SenderPacket {
    /// Writes the packet into the first 44 octets of `buf`, zeroing the MBZ
    /// octets; octets past 44 (padding) are left as they are.
    ///
    /// # Panics
    /// If `buf` is shorter than [`PACKET_LEN`] (a caller bug, not input).
    pub fn encode_into(&self, buf: &mut [u8]) {
        let b = &mut buf[..PACKET_LEN];
        b.fill(0);
        b[0..4].copy_from_slice(&self.seq.to_be_bytes());
        b[4..12].copy_from_slice(&self.timestamp.0.to_be_bytes());
        b[12..14].copy_from_slice(&self.error_estimate.to_u16().to_be_bytes());
        b[14..16].copy_from_slice(&self.ssid.to_be_bytes());
    }

    /// The 44-octet packet.
    pub fn encode(&self) -> [u8; PACKET_LEN] {
        let mut b = [0u8; PACKET_LEN];
        self.encode_into(&mut b);
        b
    }

    /// Reads a Session-Sender packet. MBZ octets are not checked
    /// (RFC 8762 says receivers ignore them); padding is ignored.
    pub fn decode(buf: &[u8]) -> Result<SenderPacket, DecodeError> {
        if buf.len() < PACKET_LEN {
            return Err(DecodeError::Truncated { len: buf.len() });
        }
        Ok(SenderPacket {
            seq: be_u32(&buf[0..4]),
            timestamp: NtpTimestamp(be_u64(&buf[4..12])),
            error_estimate: ErrorEstimate::from_u16(be_u16(&buf[12..14])),
            ssid: be_u16(&buf[14..16]),
        })
    }
}

/// A Session-Reflector test packet (RFC 8762 section 4.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReflectorPacket {
    /// The reflector's sequence number; a stateless reflector copies the
    /// sender's.
    pub seq: u32,
    /// t3: when the reflector sent the reply.
    pub timestamp: NtpTimestamp,
    /// The reflector's clock error estimate.
    pub error_estimate: ErrorEstimate,
    /// Octets 14-15: MBZ in RFC 8762, the SSID copied back in RFC 8972.
    pub ssid: u16,
    /// t2: when the reflector received the sender's packet.
    pub receive_timestamp: NtpTimestamp,
    /// The sender's sequence number, copied.
    pub sender_seq: u32,
    /// t1, copied from the sender's packet.
    pub sender_timestamp: NtpTimestamp,
    /// The sender's error estimate, copied.
    pub sender_error_estimate: ErrorEstimate,
    /// TTL (or hop limit) of the sender's packet as it arrived.
    pub sender_ttl: u8,
}

impl ReflectorPacket {
    /// Writes the packet into the first 44 octets of `buf`, zeroing the MBZ
    /// octets; octets past 44 (padding) are left as they are.
    ///
    /// # Panics
    /// If `buf` is shorter than [`PACKET_LEN`] (a caller bug, not input).
    pub fn encode_into(&self, buf: &mut [u8]) {
        // Octets 0-15 are laid out as in a Session-Sender packet.
        SenderPacket {
            seq: self.seq,
            timestamp: self.timestamp,
            error_estimate: self.error_estimate,
            ssid: self.ssid,
        }
        .encode_into(buf);
        let b = &mut buf[..PACKET_LEN];
        b[16..24].copy_from_slice(&self.receive_timestamp.0.to_be_bytes());
        b[24..28].copy_from_slice(&self.sender_seq.to_be_bytes());
        b[28..36].copy_from_slice(&self.sender_timestamp.0.to_be_bytes());
        b[36..38].copy_from_slice(&self.sender_error_estimate.to_u16().to_be_bytes());
        b[40] = self.sender_ttl;
    }

    /// The 44-octet packet.
    pub fn encode(&self) -> [u8; PACKET_LEN] {
        let mut b = [0u8; PACKET_LEN];
        self.encode_into(&mut b);
        b
    }

    /// Reads a Session-Reflector packet; MBZ octets and padding are ignored.
    pub fn decode(buf: &[u8]) -> Result<ReflectorPacket, DecodeError> {
        // Octets 0-15 are laid out as in a Session-Sender packet.
        let head = SenderPacket::decode(buf)?;
        Ok(ReflectorPacket {
            seq: head.seq,
            timestamp: head.timestamp,
            error_estimate: head.error_estimate,
            ssid: head.ssid,
            receive_timestamp: NtpTimestamp(be_u64(&buf[16..24])),
            sender_seq: be_u32(&buf[24..28]),
            sender_timestamp: NtpTimestamp(be_u64(&buf[28..36])),
            sender_error_estimate: ErrorEstimate::from_u16(be_u16(&buf[36..38])),
            sender_ttl: buf[40],
        })
    }

    /// The stateless reflection of `sender` (RFC 8762 section 4.3): every
    /// sender field copied, the reflector's own fields from `t2`, `t3`.
    pub fn reflect(
        sender: &SenderPacket,
        t2: NtpTimestamp,
        t3: NtpTimestamp,
        ttl: u8,
    ) -> ReflectorPacket {
        ReflectorPacket {
            seq: sender.seq,
            timestamp: t3,
            error_estimate: ErrorEstimate::AGENT,
            ssid: sender.ssid,
            receive_timestamp: t2,
            sender_seq: sender.seq,
            sender_timestamp: sender.timestamp,
            sender_error_estimate: sender.error_estimate,
            sender_ttl: ttl,
        }
    }

    /// The reflector's turnaround `t3 - t2` in nanoseconds (may be negative
    /// if the reflector is broken).
    pub fn turnaround_ns(&self) -> i64 {
        self.timestamp.ns_since(self.receive_timestamp)
    }
}

/// Builds the reply datagram to a sender datagram of `request.len()` octets
/// into `out`: the 44-octet reflector packet, then the sender's padding
/// copied, so the reply has the request's length. Returns that length.
///
/// # Panics
/// If `out` is shorter than `request` (a caller bug).
pub fn build_reply(request: &[u8], reply: &ReflectorPacket, out: &mut [u8]) -> usize {
    let n = request.len().max(PACKET_LEN);
    if request.len() > PACKET_LEN {
        out[PACKET_LEN..n].copy_from_slice(&request[PACKET_LEN..n]);
    }
    reply.encode_into(out);
    n
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ntp_epoch_and_known_dates() {
        assert_eq!(NtpTimestamp::from_unix_ns(0).0, NTP_UNIX_OFFSET_S << 32);
        // 2024-01-01T00:00:00.5Z = unix 1704067200.5; NTP 3913056000 + 2^31.
        let t = NtpTimestamp::from_unix_ns(1_704_067_200_500_000_000);
        assert_eq!(t.seconds(), 3_913_056_000);
        assert_eq!(t.fraction(), 1 << 31);
        assert_eq!(t.to_unix_ns(), 1_704_067_200_500_000_000);
    }

    #[test]
    fn ntp_round_trips_every_nanosecond_offset_sampled() {
        let base = 1_764_470_000_000_000_000u64;
        for ns in (0..NS_PER_S).step_by(7_919).chain([1, 999_999_999]) {
            let t = base + ns;
            assert_eq!(NtpTimestamp::from_unix_ns(t).to_unix_ns(), t, "{t}");
        }
    }

    #[test]
    fn ntp_era_one_after_2036() {
        // 2036-02-07T06:28:16Z = unix 2085978496: NTP seconds wrap to 0.
        let t = NtpTimestamp::from_unix_ns(2_085_978_496 * NS_PER_S);
        assert_eq!(t.seconds(), 0);
        assert_eq!(t.to_unix_ns(), 2_085_978_496 * NS_PER_S);
        let before = NtpTimestamp::from_unix_ns(2_085_978_495 * NS_PER_S);
        assert_eq!(before.seconds(), u32::MAX);
        assert_eq!(before.to_unix_ns(), 2_085_978_495 * NS_PER_S);
        assert_eq!(t.ns_since(before), 1_000_000_000);
    }

    #[test]
    fn ns_since_is_signed_and_rounded() {
        let a = NtpTimestamp::from_unix_ns(1_700_000_000_000_000_000);
        let b = NtpTimestamp::from_unix_ns(1_700_000_000_000_012_345);
        assert_eq!(b.ns_since(a), 12_345);
        assert_eq!(a.ns_since(b), -12_345);
    }

    #[test]
    fn error_estimate_bits() {
        let e = ErrorEstimate {
            synchronized: true,
            ptp: false,
            scale: 0x2a,
            multiplier: 0x7f,
        };
        assert_eq!(e.to_u16(), 0x8000 | (0x2a << 8) | 0x7f);
        assert_eq!(ErrorEstimate::from_u16(e.to_u16()), e);
        let z = ErrorEstimate::from_u16(0x4001);
        assert!(z.ptp && !z.synchronized);
        assert_eq!(z.scale, 0);
        assert_eq!(z.multiplier, 1);
        assert_eq!(ErrorEstimate::AGENT.seconds(), (-20f64).exp2());
    }

    /// Bytes from hex digits; white space separates fields.
    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
        assert!(digits.len().is_multiple_of(2), "odd hex: {s}");
        digits
            .chunks(2)
            .map(|d| u8::from_str_radix(&d.iter().collect::<String>(), 16).unwrap())
            .collect()
    }

    #[test]
    fn sender_offsets() {
        let p = SenderPacket {
            seq: 0x0102_0304,
            timestamp: NtpTimestamp(0x1112_1314_1516_1718),
            error_estimate: ErrorEstimate::from_u16(0x8c01),
            ssid: 0xabcd,
        };
        let b = p.encode();
        // Sequence number, timestamp, error estimate, SSID, then zeros.
        assert_eq!(b[..16], hex("01020304 1112131415161718 8c01 abcd"));
        assert!(b[16..44].iter().all(|&x| x == 0));
        assert_eq!(SenderPacket::decode(&b), Ok(p));
    }

    #[test]
    fn reflector_offsets() {
        let p = ReflectorPacket {
            seq: 0x0a0b_0c0d,
            timestamp: NtpTimestamp(0x2122_2324_2526_2728),
            error_estimate: ErrorEstimate::from_u16(0x0c01),
            ssid: 0x0102,
            receive_timestamp: NtpTimestamp(0x3132_3334_3536_3738),
            sender_seq: 0x4142_4344,
            sender_timestamp: NtpTimestamp(0x5152_5354_5556_5758),
            sender_error_estimate: ErrorEstimate::from_u16(0x8e02),
            sender_ttl: 64,
        };
        let b = p.encode();
        // The sender's four fields, then receive timestamp, the sender's
        // sequence number, timestamp and error estimate, 2 zero bytes,
        // the sender's TTL and 3 zero bytes.
        let want = hex(concat!(
            "0a0b0c0d 2122232425262728 0c01 0102 ",
            "3132333435363738 41424344 5152535455565758 8e02 0000 40 000000"
        ));
        assert_eq!(b[..], want[..]);
        assert_eq!(ReflectorPacket::decode(&b), Ok(p));
    }

    #[test]
    fn short_packets_rejected() {
        for len in [0, 1, 14, 43] {
            let b = vec![0u8; len];
            assert_eq!(
                SenderPacket::decode(&b),
                Err(DecodeError::Truncated { len })
            );
            assert_eq!(
                ReflectorPacket::decode(&b),
                Err(DecodeError::Truncated { len })
            );
        }
        assert!(SenderPacket::decode(&[0u8; 44]).is_ok());
    }

    #[test]
    fn reply_keeps_length_and_padding() {
        let mut req = vec![0u8; 100];
        SenderPacket {
            seq: 7,
            timestamp: NtpTimestamp(42),
            error_estimate: ErrorEstimate::AGENT,
            ssid: 0,
        }
        .encode_into(&mut req);
        for (i, x) in req[44..].iter_mut().enumerate() {
            *x = i as u8 ^ 0x5a;
        }
        let s = SenderPacket::decode(&req).unwrap();
        let r = ReflectorPacket::reflect(&s, NtpTimestamp(100), NtpTimestamp(200), 61);
        let mut out = vec![0xffu8; 2048];
        let n = build_reply(&req, &r, &mut out);
        assert_eq!(n, 100);
        assert_eq!(out[44..100], req[44..100]);
        let back = ReflectorPacket::decode(&out[..n]).unwrap();
        assert_eq!(back.sender_seq, 7);
        assert_eq!(back.seq, 7);
        assert_eq!(back.sender_timestamp, NtpTimestamp(42));
        assert_eq!(back.sender_ttl, 61);
        assert_eq!(back.turnaround_ns(), ((100u64 * NS_PER_S) >> 32) as i64);
    }
}
