//! Which datagrams the reflector answers; pure (addresses, bytes and the
//! time come in, a verdict goes out).
//!
//! A stateless reflector that answers anything decodable can be made to
//! answer itself or another reflector forever: one datagram spoofed from
//! reflector B's address to reflector A starts a ping-pong, and one spoofed
//! from A's own address loops on A. Three rules end that:
//!
//! 1. A reflected packet is never answered again. A Session-Sender packet
//!    leaves octets 16-43 zero (RFC 8762 section 4.2.1: MBZ), while a
//!    reflector fills the receive timestamp (16-23), which is never zero,
//!    and copies the sender's fields (24-37) and TTL (40). RFC 8972's SSID
//!    at octets 14-15 is allowed; padding past octet 44 is not looked at.
//! 2. A datagram from the reflector's own socket address is refused.
//! 3. What is left is rate limited per source IP ([`RateLimiter`]): a token
//!    bucket per source, in a table of bounded size, so spoofed sources
//!    cannot grow memory and one source cannot make us send without bound.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::stamp::packet::PACKET_LEN;

/// Why a datagram was not answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than a STAMP packet.
    Malformed,
    /// Octets 16-43 are not zero: a reflected packet (or not a sender's).
    Reflected,
    /// Sent from the reflector's own address and port.
    OwnAddress,
    /// The source used up its token bucket.
    RateLimited,
}

/// Octets a Session-Sender packet leaves zero and a reflected one fills.
const REFLECTOR_ONLY: std::ops::Range<usize> = 16..PACKET_LEN;

/// Checks the octets only: `Ok` for a Session-Sender packet, the reason
/// otherwise.
pub fn check_packet(request: &[u8]) -> Result<(), Refusal> {
    if request.len() < PACKET_LEN {
        return Err(Refusal::Malformed);
    }
    if request[REFLECTOR_ONLY].iter().any(|&b| b != 0) {
        return Err(Refusal::Reflected);
    }
    Ok(())
}

/// True when `from` is the reflector's own socket: the same address and
/// port, or, for a socket bound to the unspecified address, the same port
/// from an address `is_local` says is one of ours.
pub fn is_own_address(
    from: SocketAddr,
    local: SocketAddr,
    is_local: impl FnOnce(IpAddr) -> bool,
) -> bool {
    if from.port() != local.port() {
        return false;
    }
    let ip = from.ip().to_canonical();
    if local.ip().is_unspecified() {
        ip.is_loopback() || ip.is_unspecified() || is_local(ip)
    } else {
        ip == local.ip().to_canonical()
    }
}

/// Token-bucket parameters per source IP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained replies per second to one source.
    pub per_second: f64,
    /// Replies a source may get at once (bucket size).
    pub burst: f64,
    /// Sources tracked at most; past this, new sources share one bucket.
    pub max_sources: usize,
}

impl Default for RateLimit {
    /// 2000 replies/s per source IP with a burst of 500: twice the
    /// agent's fastest probe interval (1 ms), several lab agents sharing
    /// loopback included. 4096 sources (~100 kB) is far more peers than a
    /// cluster has.
    fn default() -> Self {
        RateLimit {
            per_second: 2000.0,
            burst: 500.0,
            max_sources: 4096,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ns: u64,
}

impl Bucket {
    fn full(limit: &RateLimit, now_ns: u64) -> Bucket {
        Bucket {
            tokens: limit.burst,
            at_ns: now_ns,
        }
    }

    /// Refills for the time since the last look, then takes one token.
    fn take(&mut self, limit: &RateLimit, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.at_ns) as f64 / 1e9;
        self.tokens = (self.tokens + dt * limit.per_second).min(limit.burst);
        self.at_ns = self.at_ns.max(now_ns);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// A bucket back to full carries no state: forgetting it is free.
    fn refilled(&self, limit: &RateLimit, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.at_ns) as f64 / 1e9;
        self.tokens + dt * limit.per_second >= limit.burst
    }
}

/// Per-source token buckets in a table of at most `max_sources` entries.
/// When the table is full, buckets that have refilled are forgotten; if
/// none has, new sources share one overflow bucket, so a flood of spoofed
/// sources gets at most one more source's worth of replies.
#[derive(Debug)]
pub struct RateLimiter {
    limit: RateLimit,
    buckets: HashMap<IpAddr, Bucket>,
    overflow: Bucket,
}

impl RateLimiter {
    /// An empty table.
    pub fn new(limit: RateLimit) -> RateLimiter {
        RateLimiter {
            limit,
            buckets: HashMap::new(),
            overflow: Bucket::full(&limit, 0),
        }
    }

    /// Takes a token for a reply to `ip` at `now_ns` (any monotonic ns).
    pub fn allow(&mut self, ip: IpAddr, now_ns: u64) -> bool {
        let ip = ip.to_canonical();
        let limit = self.limit;
        if !self.buckets.contains_key(&ip) && self.buckets.len() >= limit.max_sources {
            self.buckets.retain(|_, b| !b.refilled(&limit, now_ns));
            if self.buckets.len() >= limit.max_sources {
                return self.overflow.take(&limit, now_ns);
            }
        }
        self.buckets
            .entry(ip)
            .or_insert_with(|| Bucket::full(&limit, now_ns))
            .take(&limit, now_ns)
    }

    /// Sources tracked now.
    #[cfg(test)]
    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::packet::{ErrorEstimate, NtpTimestamp, ReflectorPacket, SenderPacket};

    fn sender(ssid: u16) -> [u8; PACKET_LEN] {
        SenderPacket {
            seq: 7,
            timestamp: NtpTimestamp::from_unix_ns(1_700_000_000_000_000_000),
            error_estimate: ErrorEstimate::AGENT,
            ssid,
        }
        .encode()
    }

    #[test]
    fn sender_packets_pass_with_ssid_and_padding() {
        assert_eq!(check_packet(&sender(0)), Ok(()));
        assert_eq!(check_packet(&sender(0xbeef)), Ok(()));
        let mut padded = sender(1).to_vec();
        padded.extend_from_slice(&[0xa5; 100]);
        assert_eq!(check_packet(&padded), Ok(()));
    }

    #[test]
    fn reflected_packets_are_refused() {
        let s = SenderPacket::decode(&sender(3)).unwrap();
        let r = ReflectorPacket::reflect(
            &s,
            NtpTimestamp::from_unix_ns(1_700_000_000_000_001_000),
            NtpTimestamp::from_unix_ns(1_700_000_000_000_002_000),
            64,
        );
        assert_eq!(check_packet(&r.encode()), Err(Refusal::Reflected));
        // Any one reflector-only octet is enough.
        for i in REFLECTOR_ONLY {
            let mut b = sender(0);
            b[i] = 1;
            assert_eq!(check_packet(&b), Err(Refusal::Reflected), "octet {i}");
        }
        assert_eq!(check_packet(&[0u8; 43]), Err(Refusal::Malformed));
    }

    #[test]
    fn own_address_is_recognised() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let never = |_| false;
        assert!(is_own_address(
            a("127.0.0.1:862"),
            a("127.0.0.1:862"),
            never
        ));
        assert!(!is_own_address(
            a("127.0.0.1:863"),
            a("127.0.0.1:862"),
            never
        ));
        assert!(!is_own_address(
            a("127.0.0.2:862"),
            a("127.0.0.1:862"),
            never
        ));
        // Unspecified bind: loopback and our own addresses, same port.
        assert!(is_own_address(a("127.0.0.9:862"), a("0.0.0.0:862"), never));
        assert!(is_own_address(
            a("[::ffff:10.0.0.1]:862"),
            a("[::]:862"),
            |ip| { ip == "10.0.0.1".parse::<IpAddr>().unwrap() }
        ));
        assert!(!is_own_address(a("10.0.0.2:862"), a("0.0.0.0:862"), never));
    }

    fn limiter(per_second: f64, burst: f64, max_sources: usize) -> RateLimiter {
        RateLimiter::new(RateLimit {
            per_second,
            burst,
            max_sources,
        })
    }

    #[test]
    fn bucket_allows_burst_then_rate() {
        let mut rl = limiter(10.0, 5.0, 4);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let ok = (0..20).filter(|_| rl.allow(ip, 0)).count();
        assert_eq!(ok, 5);
        // 1 s later: 10 more tokens, capped at the burst of 5.
        let ok = (0..20).filter(|_| rl.allow(ip, 1_000_000_000)).count();
        assert_eq!(ok, 5);
        // 100 ms later: one token.
        let ok = (0..20).filter(|_| rl.allow(ip, 1_100_000_000)).count();
        assert_eq!(ok, 1);
        // Another source has its own bucket.
        assert!(rl.allow("10.0.0.2".parse().unwrap(), 1_100_000_000));
    }

    #[test]
    fn table_stays_bounded_and_overflow_is_shared() {
        let mut rl = limiter(1.0, 2.0, 3);
        let ip = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        for i in 0..3 {
            assert!(rl.allow(ip(i), 0));
        }
        // Full table, no bucket refilled: new sources share the overflow
        // bucket (burst 2), whatever their number.
        let ok = (3..1000).filter(|&i| rl.allow(ip(i), 0)).count();
        assert_eq!(ok, 2);
        assert_eq!(rl.sources(), 3);
        // Ten seconds on, every bucket has refilled and may be forgotten.
        assert!(rl.allow(ip(5000), 10_000_000_000));
        assert!(rl.sources() <= 3);
    }
}
