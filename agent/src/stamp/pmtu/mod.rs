//! In-band path MTU discovery: STAMP Session-Sender packets padded (RFC
//! 8762 section 4.2.1 lets a sender pad its test packets) to a size, sent
//! with don't-fragment set to the peer's reflector; the largest size whose
//! reflection comes back is the path MTU. The reflector answers with the
//! request's length, also with don't-fragment ([`super::reflector`]), so a
//! size returns only if it crossed whole both ways.
//!
//! [`search`] picks the sizes (pure); this file sends them. A discovery has
//! its own socket (a new ephemeral port each time) and sequence numbers, so
//! its probes and replies never reach the RTT session of the same peer:
//! an unanswered oversize probe is not RTT loss, and a padded reply's
//! round trip (longer by its serialisation) never enters an RTT window.
//!
//! Bounded: one packet per `pace` (the agent passes its probe interval, so
//! a discovery adds at most the RTT sender's own rate towards the peer, and
//! the reflector's default per-source limit, twice the fastest probe rate,
//! admits both), at most [`TRIES`] packets per size and
//! [`Search::max_steps`] sizes: 48 packets at most from 576 to 9000.

pub mod search;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::imp;
use super::packet::{ErrorEstimate, NtpTimestamp, ReflectorPacket, SenderPacket, PACKET_LEN};
use super::Target;
pub use search::{Search, FLOOR_V4, FLOOR_V6};

/// Packets sent of one size before it counts as not returning: one lost
/// to an unrelated drop does not lower the path MTU.
pub const TRIES: u32 = 3;

/// Session-Sender Identifier of discovery probes (RFC 8972): tells them
/// apart from the RTT session's (0) in a capture.
const SSID: u16 = 0x4d54;

/// IP and UDP header octets in front of the STAMP payload.
fn headers(v6: bool) -> u32 {
    (if v6 { 40 } else { 20 }) + 8
}

/// How a discovery runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest size tried: the MTU of the interface towards the peer.
    pub ceiling: u32,
    /// At least this long between two packets.
    pub pace: Duration,
    /// A packet unanswered this long did not return.
    pub timeout: Duration,
}

/// The largest IP packet, in octets, that reached `target`'s reflector and
/// came back with don't-fragment set; `Ok(None)` when not even the family's
/// floor (576 for IPv4, 1280 for IPv6) did, or when `stop` fired first.
pub fn discover(
    target: &Target,
    opts: &Options,
    stop: &CancellationToken,
) -> io::Result<Option<u32>> {
    let v6 = target.addr.is_ipv6();
    let floor = if v6 { FLOOR_V6 } else { FLOOR_V4 };
    let mut prober = Prober::open(target, opts)?;
    let mut search = Search::new(floor, opts.ceiling);
    while let Some(size) = search.next() {
        let mut returned = false;
        for _ in 0..TRIES {
            if stop.is_cancelled() {
                return Ok(None);
            }
            if prober.try_size(size)? {
                returned = true;
                break;
            }
        }
        search.answer(size, returned);
    }
    Ok(search.result())
}

/// One discovery's socket and pacing.
struct Prober {
    socket: UdpSocket,
    peer: SocketAddr,
    headers: u32,
    seq: u32,
    pace: Duration,
    timeout: Duration,
    last_send: Option<Instant>,
    tx: Vec<u8>,
    rx: Vec<u8>,
}

impl Prober {
    fn open(target: &Target, opts: &Options) -> io::Result<Prober> {
        let v6 = target.addr.is_ipv6();
        let socket = target.probe_socket("path MTU probes")?;
        // Without don't-fragment the search would measure the local
        // stack's reassembly, not the path.
        imp::set_dont_fragment(&socket, v6)?;
        let ceiling = opts.ceiling.max(if v6 { FLOOR_V6 } else { FLOOR_V4 });
        Ok(Prober {
            socket,
            peer: target.addr,
            headers: headers(v6),
            seq: 0,
            pace: opts.pace,
            timeout: opts.timeout,
            last_send: None,
            tx: vec![0u8; ceiling as usize],
            rx: vec![0u8; super::MAX_DATAGRAM],
        })
    }

    /// Sends one packet of `size` octets (IP header included) and waits
    /// for its reflection; `true` when it came back.
    fn try_size(&mut self, size: u32) -> io::Result<bool> {
        let payload = (size.saturating_sub(self.headers) as usize).max(PACKET_LEN);
        if let Some(wait) = self
            .last_send
            .and_then(|t| self.pace.checked_sub(t.elapsed()))
        {
            std::thread::sleep(wait);
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        SenderPacket {
            seq,
            timestamp: NtpTimestamp::from_unix_ns(imp::now_ns()),
            error_estimate: ErrorEstimate::AGENT,
            ssid: SSID,
        }
        .encode_into(&mut self.tx[..payload]);
        self.tx[PACKET_LEN..payload].fill(0);
        self.last_send = Some(Instant::now());
        match self.socket.send_to(&self.tx[..payload], self.peer) {
            Ok(_) => {}
            // Larger than the local interface takes: it cannot return.
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => return Ok(false),
            Err(e) => return Err(e),
        }
        self.await_reply(seq, payload)
    }

    /// Reads until the reflection of `seq` (of `len` octets) arrives or the
    /// timeout passes; older replies and strangers are skipped.
    fn await_reply(&mut self, seq: u32, len: usize) -> io::Result<bool> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.socket.set_read_timeout(Some(left))?;
            let (n, from) = match self.socket.recv_from(&mut self.rx) {
                Ok(r) => r,
                Err(e) if is_timeout(&e) => return Ok(false),
                Err(e) => return Err(e),
            };
            if from != self.peer || n != len {
                continue;
            }
            let Ok(reply) = ReflectorPacket::decode(&self.rx[..n]) else {
                continue;
            };
            if reply.sender_seq == seq && reply.ssid == SSID {
                return Ok(true);
            }
        }
    }
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
    use std::sync::Arc;

    use crate::health::Health;
    use crate::stamp::{spawn_reflector, ReflectorOptions};

    fn target(addr: SocketAddr) -> Target {
        Target {
            peer: "b".into(),
            addr,
            interface: "lo".into(),
            bind_device: None,
            bind_required: false,
        }
    }

    /// Over loopback (MTU 65536 on Linux) every size up to the ceiling
    /// returns: the search ends at the ceiling, through a real reflector.
    #[test]
    fn loopback_returns_the_ceiling_through_the_reflector() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = CancellationToken::new();
        let health = Arc::new(Health::default());
        let h = spawn_reflector(
            sock,
            health.clone(),
            stop.clone(),
            ReflectorOptions::default(),
        )
        .unwrap();
        let opts = Options {
            ceiling: 9000,
            pace: Duration::from_millis(1),
            timeout: Duration::from_secs(2),
        };
        let got = discover(&target(addr), &opts, &CancellationToken::new()).unwrap();
        stop.cancel();
        h.join().unwrap();
        assert_eq!(got, Some(9000));
        assert!(Health::get(&health.reflected_packets) >= 1);
    }

    /// No reflector: nothing returns, not even the floor; two sizes tried.
    #[test]
    fn a_silent_peer_has_no_path_mtu() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let opts = Options {
            ceiling: 1500,
            pace: Duration::from_millis(1),
            timeout: Duration::from_millis(20),
        };
        let got = discover(&target(addr), &opts, &CancellationToken::new()).unwrap();
        assert_eq!(got, None);
        // Every probe was a padded STAMP packet of the size tried.
        sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2000];
        let mut sizes = Vec::new();
        while let Ok(n) = sock.recv(&mut buf) {
            assert_eq!(SenderPacket::decode(&buf[..n]).unwrap().ssid, SSID);
            sizes.push(n + 28);
        }
        assert_eq!(sizes, [1500, 1500, 1500, 576, 576, 576]);
    }
}
