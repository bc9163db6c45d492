//! The reflector under spoofed traffic, on loopback with a raw socket
//! (`IP_HDRINCL`) forging the source address: one datagram spoofed from
//! reflector B to reflector A must give at most one reflection, never a
//! ping-pong; one spoofed from A's own address to A must not loop on A; a
//! source over its rate is refused. Counts over a bounded window are
//! asserted, never times. Needs root (raw sockets); without it the test
//! fails loudly.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use boltwatch_agent::health::Health;
use boltwatch_agent::stamp::packet::{ErrorEstimate, NtpTimestamp, SenderPacket};
use boltwatch_agent::stamp::reflector::{RateLimit, ReflectorOptions};
use boltwatch_common::clock::now_unix_ns;

mod support;
use support::{spoof_udp, Reflector};

/// How long a loop is given to show itself. The old reflector pair
/// exchanged ~150k packets/s, so even a slow machine sees thousands here.
const WINDOW: Duration = Duration::from_millis(500);

fn sender_packet(seq: u32) -> [u8; 44] {
    let now = now_unix_ns();
    SenderPacket {
        seq,
        timestamp: NtpTimestamp::from_unix_ns(now),
        error_estimate: ErrorEstimate::AGENT,
        ssid: 0,
    }
    .encode()
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!("bound on 127.0.0.1"),
    }
}

/// Waits (at most 5 s) until `counter` reaches 1.
fn first(counter: &AtomicU64) {
    let t = Instant::now();
    while Health::get(counter) == 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// This process's CPU time from /proc/self/stat (utime + stime, at the
/// usual 100 ticks/s), for the figures printed (not asserted).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_comm = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<u64> = after_comm
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 of stat; 12 and 13 after "pid (comm)".
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

#[test]
fn spoofed_packet_between_two_reflectors_is_reflected_once() {
    let a = Reflector::start(ReflectorOptions::default());
    let b = Reflector::start(ReflectorOptions::default());
    let cpu0 = cpu();
    // From B's address to A: A answers B once, B sees a reflected packet.
    spoof_udp(v4(b.addr), v4(a.addr), &sender_packet(1));
    first(&a.health.reflected_packets);
    std::thread::sleep(WINDOW);
    let (ca, cb) = (a.counts(), b.counts());
    eprintln!(
        "spoofed B->A: A {ca:?} B {cb:?} [reflected, refused reflected, own address, rate] \
         in {WINDOW:?}, test process CPU {:?}",
        cpu() - cpu0
    );
    assert_eq!(
        ca[0] + cb[0],
        1,
        "one reflection in all, no loop: A {ca:?} B {cb:?}"
    );
    assert_eq!(ca[0], 1, "A answers the spoofed sender packet once");
    assert_eq!(cb[1], 1, "B refuses A's reflection as reflected");
    // Still a working reflector for a real sender.
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.send_to(&sender_packet(2), a.addr).unwrap();
    let mut buf = [0u8; 128];
    let (n, from) = c.recv_from(&mut buf).unwrap();
    assert_eq!((n, from), (44, a.addr));
}

#[test]
fn spoofed_packet_from_the_reflectors_own_address_does_not_loop() {
    let a = Reflector::start(ReflectorOptions::default());
    let cpu0 = cpu();
    spoof_udp(v4(a.addr), v4(a.addr), &sender_packet(1));
    first(&a.health.stamp_refused_own_address);
    std::thread::sleep(WINDOW);
    let ca = a.counts();
    eprintln!(
        "spoofed A->A: A {ca:?} in {WINDOW:?}, test process CPU {:?}",
        cpu() - cpu0
    );
    assert_eq!(ca, [0, 0, 1, 0], "refused once as our own, never answered");
}

#[test]
fn spoofed_packet_from_a_third_address_is_reflected_at_most_once() {
    let a = Reflector::start(ReflectorOptions::default());
    // 127.0.0.2 is loopback too, but no reflector listens there.
    let victim = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), a.addr.port() + 1);
    let sink = UdpSocket::bind(victim).unwrap();
    sink.set_read_timeout(Some(WINDOW)).unwrap();
    spoof_udp(victim, v4(a.addr), &sender_packet(1));
    let mut got = 0;
    let mut buf = [0u8; 128];
    while sink.recv_from(&mut buf).is_ok() {
        got += 1;
    }
    assert_eq!(got, 1, "the victim address got one reflection");
    assert_eq!(a.counts(), [1, 0, 0, 0]);
}

#[test]
fn a_source_over_its_rate_is_refused_and_counted() {
    // A bucket of 5 that refills one token in 1000 s: deterministic counts.
    let a = Reflector::start(ReflectorOptions {
        rate: RateLimit {
            per_second: 0.001,
            burst: 5.0,
            max_sources: 16,
        },
    });
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    for seq in 0..50 {
        c.send_to(&sender_packet(seq), a.addr).unwrap();
    }
    let t = Instant::now();
    while a.counts()[0] + a.counts()[3] < 50 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(a.counts(), [5, 0, 0, 45]);
}
