//! The stateless STAMP Session-Reflector (RFC 8762 section 4.3): answers
//! Session-Sender packets of at least 44 octets with a reflector packet of
//! the same length, on its own thread with a blocking socket.
//!
//! Before answering, [`admission`] refuses what must not be answered: a
//! reflected packet (so two reflectors, or one reflector and itself, never
//! ping-pong), a packet from the reflector's own address, and a source over
//! its rate. Each refusal is counted in [`Health`] by reason.
//!
//! t2 is the kernel's RX timestamp (userspace time if the OS gave none);
//! t3 is read right before `sendto`, after the reply is built, so the
//! sender subtracts as much of the reflector's own delay as userspace can
//! see. Shorter datagrams are counted in `health.malformed_packets` and
//! dropped. The caller binds the socket, so tests bind port 0.
//!
//! Replies leave with don't-fragment set: a reply that does not fit the
//! reflector's interface MTU is dropped (`EMSGSIZE`), never sent in
//! fragments. A padded path MTU probe ([`super::pmtu`]) thus comes back
//! only when its size crossed both ways whole; fragments would have made
//! the sender read a path MTU the reverse direction does not carry. The
//! reply is never larger than the request (RFC 8762 section 4.3: the
//! reflected packet keeps the sender's length, padding included), so the
//! reflector cannot be used to amplify.

mod admission;

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::imp;
use super::packet::{build_reply, NtpTimestamp, ReflectorPacket, SenderPacket};
use super::MAX_DATAGRAM;
use crate::health::Health;

/// How often the thread looks at the stop flag when no packet arrives.
const STOP_POLL: Duration = Duration::from_millis(100);

/// TTL reported when the OS does not say (RFC 8762 section 4.3.1 asks for
/// the received TTL; 255 is what a one-hop sender would have set).
const UNKNOWN_TTL: u8 = 255;

pub use admission::RateLimit;
use admission::{RateLimiter, Refusal};

/// How long the set of local addresses (for the own-address rule on a
/// socket bound to the unspecified address) is trusted before re-reading.
const LOCAL_ADDRS_TTL: Duration = Duration::from_secs(10);

/// The reflector's limits.
#[derive(Debug, Clone, Default)]
pub struct ReflectorOptions {
    /// Replies per source IP.
    pub rate: RateLimit,
}

/// Starts the reflector on `socket` (already bound) with the limits of
/// `opts` (`ReflectorOptions::default()` for the stock ones). It answers
/// until `stop` is cancelled, then returns within about 100 ms. Fails only
/// if the socket cannot be configured or the thread cannot start.
pub fn spawn_reflector(
    socket: UdpSocket,
    health: Arc<Health>,
    stop: CancellationToken,
    opts: ReflectorOptions,
) -> io::Result<JoinHandle<()>> {
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(STOP_POLL))?;
    imp::enable_rx_metadata(&socket)?;
    let local = socket.local_addr()?;
    dont_fragment(&socket, local);
    std::thread::Builder::new()
        .name("stamp-reflector".into())
        .spawn(move || {
            if let Err(e) = imp::prioritize_current_thread() {
                debug!(error = %e, "reflector thread keeps its scheduling priority");
            }
            info!(%local, "STAMP reflector started");
            run(&socket, local, &health, &stop, &opts);
            info!(%local, "STAMP reflector stopped");
        })
}

fn run(
    socket: &UdpSocket,
    local: SocketAddr,
    health: &Health,
    stop: &CancellationToken,
    opts: &ReflectorOptions,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut out = vec![0u8; MAX_DATAGRAM];
    let mut gate = Gatekeeper {
        local,
        limiter: RateLimiter::new(opts.rate),
        locals: LocalAddrs::default(),
        epoch: Instant::now(),
    };
    while !stop.is_cancelled() {
        let rx = match imp::recv(socket, &mut buf, false) {
            Ok(rx) => rx,
            Err(e) if is_timeout(&e) => continue,
            Err(e) => {
                // Nothing a reflector can fix; do not spin on it.
                warn!(error = %e, "STAMP reflector receive failed");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let Some(from) = rx.from else { continue };
        let request = &buf[..rx.len.min(buf.len())];
        let verdict = gate.admit(from, request);
        if let Err(why) = verdict {
            Health::incr(match why {
                Refusal::Malformed => &health.malformed_packets,
                Refusal::Reflected => &health.stamp_refused_reflected,
                Refusal::OwnAddress => &health.stamp_refused_own_address,
                Refusal::RateLimited => &health.stamp_refused_rate_limited,
            });
            debug!(%from, len = rx.len, reason = ?why, "STAMP reflector refused a datagram");
            continue;
        }
        let t2 = rx.kernel_rx_unix_ns.unwrap_or_else(imp::now_ns);
        let Some(len) = reply_into(request, t2, rx.ttl.unwrap_or(UNKNOWN_TTL), &mut out) else {
            Health::incr(&health.malformed_packets);
            continue;
        };
        // On the clock t2 came from, so t3 - t2 is exact.
        stamp_t3(&mut out, imp::now_ns());
        match socket.send_to(&out[..len], from) {
            Ok(_) => Health::incr(&health.reflected_packets),
            Err(e) => debug!(%from, error = %e, "STAMP reflector send failed"),
        }
    }
}

/// Don't fragment the replies (see the module doc); an IPv6 socket may
/// answer IPv4-mapped peers too, so it sets both families' options. Not
/// fatal: without it the reflector still answers every probe but padded
/// ones may come back in fragments.
fn dont_fragment(socket: &UdpSocket, local: SocketAddr) {
    let v6 = local.is_ipv6();
    if let Err(e) = imp::set_dont_fragment(socket, v6) {
        warn!(error = %e, "STAMP reflector replies may be fragmented");
    }
    if v6 {
        if let Err(e) = imp::set_dont_fragment(socket, false) {
            debug!(error = %e, "IPv4-mapped STAMP replies may be fragmented");
        }
    }
}

/// Builds the reflection of `request` into `out` with t3 still zero;
/// `None` when `request` is not a STAMP packet.
pub(crate) fn reply_into(
    request: &[u8],
    t2_unix_ns: u64,
    ttl: u8,
    out: &mut [u8],
) -> Option<usize> {
    let sender = SenderPacket::decode(request).ok()?;
    let reply = ReflectorPacket::reflect(
        &sender,
        NtpTimestamp::from_unix_ns(t2_unix_ns),
        NtpTimestamp(0),
        ttl,
    );
    Some(build_reply(request, &reply, out))
}

/// Writes t3 into a built reply (octets 4-11).
pub(crate) fn stamp_t3(out: &mut [u8], t3_unix_ns: u64) {
    out[4..12].copy_from_slice(&NtpTimestamp::from_unix_ns(t3_unix_ns).0.to_be_bytes());
}

/// The admission rules of [`admission`] with their state for one socket.
struct Gatekeeper {
    local: SocketAddr,
    limiter: RateLimiter,
    locals: LocalAddrs,
    epoch: Instant,
}

impl Gatekeeper {
    /// `Ok` when `request` from `from` may be answered; cheapest checks
    /// first, and a refused datagram never takes a token.
    fn admit(&mut self, from: SocketAddr, request: &[u8]) -> Result<(), Refusal> {
        admission::check_packet(request)?;
        if admission::is_own_address(from, self.local, |ip| self.locals.contains(ip)) {
            return Err(Refusal::OwnAddress);
        }
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        if !self.limiter.allow(from.ip(), now_ns) {
            return Err(Refusal::RateLimited);
        }
        Ok(())
    }
}

/// This host's addresses, read lazily: only a datagram from our own port
/// asks, so normal traffic never pays for `getifaddrs`.
#[derive(Default)]
struct LocalAddrs {
    ips: HashSet<IpAddr>,
    read_at: Option<Instant>,
}

impl LocalAddrs {
    fn contains(&mut self, ip: IpAddr) -> bool {
        if self.read_at.is_none_or(|t| t.elapsed() > LOCAL_ADDRS_TTL) {
            self.ips = local_ips();
            self.read_at = Some(Instant::now());
        }
        self.ips.contains(&ip.to_canonical())
    }
}

fn local_ips() -> HashSet<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return HashSet::new();
    };
    addrs
        .filter_map(|a| a.address)
        .filter_map(|a| {
            if let Some(v4) = a.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect()
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::packet::{ErrorEstimate, PACKET_LEN};

    #[test]
    fn short_requests_get_no_reply() {
        let mut out = vec![0u8; 64];
        for len in [0usize, 1, 43] {
            assert_eq!(reply_into(&vec![1u8; len], 1, 64, &mut out), None);
        }
    }

    #[test]
    fn reply_carries_t2_t3_and_sender_fields() {
        let req = SenderPacket {
            seq: 9,
            timestamp: NtpTimestamp::from_unix_ns(1_000),
            error_estimate: ErrorEstimate::AGENT,
            ssid: 3,
        }
        .encode();
        let mut out = vec![0u8; 64];
        let n = reply_into(&req, 5_000, 63, &mut out).unwrap();
        stamp_t3(&mut out, 7_000);
        assert_eq!(n, PACKET_LEN);
        let r = ReflectorPacket::decode(&out[..n]).unwrap();
        assert_eq!(r.receive_timestamp.to_unix_ns(), 5_000);
        assert_eq!(r.timestamp.to_unix_ns(), 7_000);
        assert_eq!(r.turnaround_ns(), 2_000);
        assert_eq!((r.seq, r.sender_seq, r.ssid, r.sender_ttl), (9, 9, 3, 63));
    }
}
