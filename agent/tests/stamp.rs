//! STAMP over real loopback sockets: the reflector against hand-built RFC
//! 8762 packets, the session-sender against the reflector, a black hole, a
//! closed port and a misbehaving reflector. No wall-clock assertions: every
//! wait is bounded and the checks are on counts and fields.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use boltwatch_agent::health::Health;
use boltwatch_agent::sink::{Emitted, Sink};
use boltwatch_agent::stamp::packet::{NtpTimestamp, ReflectorPacket, SenderPacket};
use boltwatch_agent::stamp::ping::{ping, PingOptions};
use boltwatch_agent::stamp::reflector::ReflectorOptions;
use boltwatch_agent::stamp::{spawn_reflector, spawn_sender, ProbeEvent, SenderOptions, Target};
use boltwatch_common::clock::now_unix_ns as unix_ns;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{RttSummary, TimestampClock, TimestampSource};
use tokio_util::sync::CancellationToken;

mod support;
use support::Reflector;

const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// `clock_getres(CLOCK_REALTIME)` asked of the kernel directly: what
/// `SO_TIMESTAMPNS` stamps resolve to.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn realtime_resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the timespec, which outlives the call.
    assert_eq!(
        unsafe { libc::clock_getres(libc::CLOCK_REALTIME, &mut ts) },
        0
    );
    (ts.tv_sec * 1_000_000_000 + ts.tv_nsec) as u64
}

/// NTP 32.32 from unix ns, written out independently of the crate's codec.
fn ntp_bytes(ns: u64) -> [u8; 8] {
    let secs = ns / 1_000_000_000 + NTP_UNIX_OFFSET;
    let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000;
    (((secs & 0xffff_ffff) << 32) | frac).to_be_bytes()
}

fn ntp_to_unix_ns(b: &[u8]) -> u64 {
    let secs = u32::from_be_bytes(b[0..4].try_into().unwrap()) as u64;
    let frac = u32::from_be_bytes(b[4..8].try_into().unwrap()) as u64;
    (secs - NTP_UNIX_OFFSET) * 1_000_000_000 + ((frac * 1_000_000_000) >> 32)
}

/// Reads `counter` until it reaches `want` (the reflector counts a reply
/// after `sendto` returns, which may be after the client already has it),
/// for at most 5 s; returns the last value.
fn settled(counter: &std::sync::atomic::AtomicU64, want: u64) -> u64 {
    for _ in 0..500 {
        if Health::get(counter) >= want {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Health::get(counter)
}

fn client() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

#[test]
fn reflector_answers_hand_built_packet_field_by_field() {
    let r = Reflector::start(ReflectorOptions::default());
    let c = client();
    c.set_ttl(37).unwrap();
    for len in [44usize, 100] {
        // RFC 8762 4.2.1: seq(4) timestamp(8) error estimate(2) MBZ(30),
        // then padding, here a pattern the reflector must copy back.
        let mut req = vec![0u8; len];
        req[0..4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let t1 = unix_ns();
        req[4..12].copy_from_slice(&ntp_bytes(t1));
        req[12..14].copy_from_slice(&[0x80, 0x0c]); // S=1, Z=0, scale 0, mult 12
        for (i, b) in req.iter_mut().enumerate().skip(44) {
            *b = (i as u8).wrapping_mul(7) ^ 0xa5;
        }
        let before = unix_ns();
        c.send_to(&req, r.addr).unwrap();
        let mut buf = [0u8; 2048];
        let (n, from) = c.recv_from(&mut buf).unwrap();
        let after = unix_ns();
        let rep = &buf[..n];
        assert_eq!(from, r.addr);
        assert_eq!(n, len, "reply length equals request length");
        // RFC 8762 4.3.1 offsets.
        assert_eq!(rep[0..4], [0xde, 0xad, 0xbe, 0xef], "stateless: seq copied");
        let t3 = ntp_to_unix_ns(&rep[4..12]);
        let ee = u16::from_be_bytes([rep[12], rep[13]]);
        assert_eq!(ee & 0x4000, 0, "Z=0: NTP timestamps");
        assert_ne!(ee & 0xff, 0, "multiplier must not be zero");
        assert_eq!(rep[14..16], [0, 0], "MBZ/SSID");
        let t2 = ntp_to_unix_ns(&rep[16..24]);
        assert_eq!(rep[24..28], [0xde, 0xad, 0xbe, 0xef], "sender seq");
        assert_eq!(rep[28..36], req[4..12], "sender timestamp");
        assert_eq!(rep[36..38], [0x80, 0x0c], "sender error estimate");
        assert_eq!(rep[38..40], [0, 0], "MBZ");
        assert_eq!(rep[40], 37, "sender TTL as received");
        assert_eq!(rep[41..44], [0, 0, 0], "MBZ");
        assert_eq!(rep[44..], req[44..], "padding copied");
        // t2 and t3 were taken between our send and our receive, in order.
        assert!(
            before <= t2 + 1 && t2 <= t3 && t3 <= after + 1,
            "{before} {t2} {t3} {after}"
        );
    }
    assert_eq!(settled(&r.health.reflected_packets, 2), 2);
    assert_eq!(Health::get(&r.health.malformed_packets), 0);
}

#[test]
fn malformed_datagrams_are_counted_and_reflector_keeps_answering() {
    let r = Reflector::start(ReflectorOptions::default());
    let c = client();
    for len in [0usize, 1, 10, 43] {
        c.send_to(&vec![0xff; len], r.addr).unwrap();
    }
    let req = SenderPacket {
        seq: 5,
        timestamp: NtpTimestamp::from_unix_ns(unix_ns()),
        ..Default::default()
    }
    .encode();
    c.send_to(&req, r.addr).unwrap();
    let mut buf = [0u8; 128];
    let (n, _) = c.recv_from(&mut buf).unwrap();
    let rep = ReflectorPacket::decode(&buf[..n]).unwrap();
    assert_eq!(rep.sender_seq, 5);
    // Datagrams are handled in order, so the four came before the answer.
    assert_eq!(Health::get(&r.health.malformed_packets), 4);
    assert_eq!(settled(&r.health.reflected_packets, 1), 1);
    // And it still answers after them.
    c.send_to(&req, r.addr).unwrap();
    c.recv_from(&mut buf).unwrap();
    assert_eq!(settled(&r.health.reflected_packets, 2), 2);
    assert_eq!(Health::get(&r.health.malformed_packets), 4);
}

struct Run {
    records: Vec<(u64, RttSummary)>,
    events: Vec<ProbeEvent>,
    health: Arc<Health>,
}

/// Probes every 10 ms, lost after `timeout_ms`.
fn every_10ms(timeout_ms: u64) -> SenderOptions {
    SenderOptions::every(Duration::from_millis(10), Duration::from_millis(timeout_ms))
}

/// Runs a sender against `addr` until `done(records)` or 15 s, then stops it.
fn run_sender(
    addr: SocketAddr,
    opts: SenderOptions,
    done: impl Fn(&[(u64, RttSummary)]) -> bool,
) -> Run {
    let (sink, mut rx) = Sink::new();
    let health = Arc::new(Health::default());
    let stop = CancellationToken::new();
    let (otx, orx) = mpsc::channel();
    let target = Target {
        peer: "peer-b".into(),
        addr,
        interface: "lo".into(),
        bind_device: None,
        bind_required: false,
    };
    let opts = SenderOptions {
        observer: Some(otx.into()),
        ..opts
    };
    let h = spawn_sender(target, opts, sink, health.clone(), stop.clone()).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline && !done(&records) {
        while let Ok(Emitted { unix_ns, payload }) = rx.try_recv() {
            match payload {
                Payload::Rtt(s) => records.push((unix_ns, s)),
                other => panic!("unexpected payload {other:?}"),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.cancel();
    h.join().expect("sender thread must not panic");
    Run {
        records,
        events: orx.try_iter().collect(),
        health,
    }
}

fn total(records: &[(u64, RttSummary)], f: impl Fn(&RttSummary) -> u64) -> u64 {
    records.iter().map(|(_, r)| f(r)).sum()
}

fn check_invariants(records: &[(u64, RttSummary)], addr: SocketAddr) {
    for (at, r) in records {
        assert_eq!(r.sent, r.received + r.lost, "{r:?}");
        assert_eq!(r.window_ns, 1_000_000_000);
        assert_eq!(r.window_start_unix_ns % 1_000_000_000, 0, "aligned");
        assert_eq!(
            *at,
            r.window_start_unix_ns + r.window_ns,
            "stamped at window end"
        );
        assert_eq!(r.peer, "peer-b");
        assert_eq!(r.interface, "lo");
        assert_eq!(r.peer_address, addr.to_string());
        let samples = r.received - r.discarded;
        assert_eq!(r.buckets.iter().map(|b| b.count).sum::<u64>(), samples);
        if samples > 0 {
            assert!(r.min_ns <= r.p50_ns && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns);
            assert!(r.min_ns <= r.mean_ns && r.mean_ns <= r.max_ns);
            assert!(r.sum_ns >= r.min_ns * samples && r.sum_ns <= r.max_ns * samples);
        }
    }
    let starts: Vec<u64> = records
        .iter()
        .map(|(_, r)| r.window_start_unix_ns)
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "one record per window, in order"
    );
}

#[test]
fn sender_and_reflector_on_loopback() {
    let r = Reflector::start(ReflectorOptions::default());
    let run = run_sender(r.addr, every_10ms(500), |recs| {
        total(recs, |s| s.sent) >= 30
    });
    let recs = &run.records;
    assert!(total(recs, |s| s.sent) >= 30, "{recs:?}");
    check_invariants(recs, r.addr);
    let received = total(recs, |s| s.received);
    assert!(received > 0);
    for (_, s) in recs {
        if s.received > s.discarded {
            assert_eq!(s.timestamp_source, TimestampSource::Kernel as i32);
            assert!(s.min_ns > 0);
            #[cfg(target_os = "linux")]
            {
                assert_eq!(s.timestamp_clock, TimestampClock::KernelRealtimeNs as i32);
                assert_eq!(s.timestamp_resolution_ns, realtime_resolution_ns());
            }
            #[cfg(target_os = "macos")]
            assert_eq!(
                s.timestamp_clock,
                TimestampClock::KernelMonotonicMach as i32
            );
        }
    }
    assert_eq!(total(recs, |s| s.duplicates), 0);
    assert_eq!(Health::get(&run.health.malformed_packets), 0);
    // Every reply in the records was also reported to the observer (the
    // observer also saw replies of windows not yet emitted at stop).
    let replies: Vec<u32> = run
        .events
        .iter()
        .filter_map(|e| match e {
            ProbeEvent::Reply { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert!(replies.len() as u64 >= received);
    let mut sorted = replies.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), replies.len(), "one Reply per probe");
    // The reflector answered at least what the sender received.
    assert!(settled(&r.health.reflected_packets, received) >= received);
}

fn assert_all_lost(run: &Run, addr: SocketAddr) {
    let recs = &run.records;
    check_invariants(recs, addr);
    assert!(total(recs, |s| s.lost) >= 10, "{recs:?}");
    assert_eq!(total(recs, |s| s.received), 0);
    assert!(recs
        .iter()
        .all(|(_, s)| s.buckets.is_empty() && s.max_ns == 0));
    // Never answered, the link's round trips are unknown: the late bound
    // is the timeout, so each probe is reported late, then lost.
    assert!(run
        .events
        .iter()
        .all(|e| matches!(e, ProbeEvent::Lost { .. } | ProbeEvent::Late { .. })));
    let lost: Vec<u32> = run
        .events
        .iter()
        .filter_map(|e| match e {
            ProbeEvent::Lost { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    // Every lost probe was reported lost, in order, with no gaps: what the
    // outage tracker needs to see three in a row.
    assert!(lost.len() as u64 >= total(recs, |s| s.lost));
    assert!(lost.windows(2).all(|w| w[1] == w[0] + 1), "{lost:?}");
}

#[test]
fn black_hole_probes_are_lost_and_reported_lost() {
    // Bound but never read: the datagrams vanish into its queue.
    let hole = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = hole.local_addr().unwrap();
    let run = run_sender(addr, every_10ms(100), |recs| total(recs, |s| s.lost) >= 10);
    assert_all_lost(&run, addr);
    drop(hole);
}

#[test]
fn closed_port_probes_are_lost() {
    // Nothing listens: the kernel answers ICMP port unreachable.
    let addr = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let run = run_sender(addr, every_10ms(100), |recs| total(recs, |s| s.lost) >= 10);
    assert_all_lost(&run, addr);
}

/// A reflector that misbehaves on purpose for each probe: a runt datagram,
/// a correct-looking answer from another port, an answer with the wrong t1,
/// then the real answer twice.
fn spawn_noisy_reflector(stop: Arc<AtomicBool>) -> (SocketAddr, JoinHandle<()>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let req = SenderPacket::decode(&buf[..n]).unwrap();
            let now = NtpTimestamp::from_unix_ns(unix_ns());
            let good = ReflectorPacket::reflect(&req, now, now, 64);
            let mut wrong_t1 = good;
            wrong_t1.sender_timestamp = NtpTimestamp(req.timestamp.0 ^ 1);
            sock.send_to(&[1, 2, 3], from).unwrap();
            other.send_to(&good.encode(), from).unwrap();
            sock.send_to(&wrong_t1.encode(), from).unwrap();
            sock.send_to(&good.encode(), from).unwrap();
            sock.send_to(&good.encode(), from).unwrap();
        }
    });
    (addr, h)
}

#[test]
fn sender_survives_malformed_foreign_and_duplicate_replies() {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, h) = spawn_noisy_reflector(stop.clone());
    let run = run_sender(addr, every_10ms(500), |recs| total(recs, |s| s.sent) >= 20);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let recs = &run.records;
    check_invariants(recs, addr);
    let received = total(recs, |s| s.received);
    let dups = total(recs, |s| s.duplicates);
    assert!(received > 0);
    // Foreign answers were not taken as replies: had they been, the real
    // answers would all be duplicates (two per probe). A duplicate can miss
    // its window only when it straddles the window's emission.
    assert!(dups <= received, "{dups} > {received}");
    assert!(dups + recs.len() as u64 >= received, "{dups} vs {received}");
    assert!(Health::get(&run.health.malformed_packets) >= received);
}

fn ping_opts(target: SocketAddr, count: u64, timeout_ms: u64) -> PingOptions {
    PingOptions {
        target,
        count,
        interval: Duration::from_millis(10),
        timeout: Duration::from_millis(timeout_ms),
        bind_device: None,
        kernel_tx: true,
    }
}

#[test]
fn ping_against_the_reflector() {
    let r = Reflector::start(ReflectorOptions::default());
    let mut out = Vec::new();
    let report = ping(
        &ping_opts(r.addr, 8, 1000),
        &CancellationToken::new(),
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(report.sent, 8);
    assert_eq!(report.sent, report.received + report.lost);
    assert!(report.received > 0, "{text}");
    assert_eq!(report.rtt.count, report.received - report.discarded);
    let replies = text.lines().filter(|l| l.contains(" rtt=")).count() as u64;
    assert_eq!(replies, report.received - report.discarded, "{text}");
    let last = text.lines().last().unwrap();
    assert!(last.starts_with("8 sent, "), "{last}");
    if report.rtt.count > 0 {
        assert!(last.contains("rtt min/p50/avg/p99/max = "), "{last}");
    }
    if cfg!(target_os = "linux") {
        // Both t1 and t4 from the kernel (SO_TIMESTAMPING TX, SO_TIMESTAMPNS).
        assert!(report.kernel_rx && report.kernel_tx, "{text}");
        assert!(text.contains("(kernel timestamps)"), "{text}");
    }
    // And with t1 forced to userspace.
    let mut out = Vec::new();
    let opts = PingOptions {
        kernel_tx: false,
        ..ping_opts(r.addr, 3, 1000)
    };
    let report = ping(&opts, &CancellationToken::new(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(report.received > 0 && !report.kernel_tx, "{text}");
    assert!(!text.contains("(kernel timestamps)"), "{text}");
}

#[test]
fn ping_against_a_black_hole() {
    let hole = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut out = Vec::new();
    let opts = ping_opts(hole.local_addr().unwrap(), 4, 50);
    let report = ping(&opts, &CancellationToken::new(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!((report.sent, report.received, report.lost), (4, 0, 4));
    assert_eq!(
        text.lines().filter(|l| l.contains(" lost ")).count(),
        4,
        "{text}"
    );
    assert!(text.ends_with("4 sent, 0 received, 100% loss\n"), "{text}");
    drop(hole);
}

#[test]
fn ping_over_ipv6_loopback() {
    let socket = UdpSocket::bind("[::1]:0").expect("IPv6 loopback must be available");
    let addr = socket.local_addr().unwrap();
    let health = Arc::new(Health::default());
    let stop = CancellationToken::new();
    let h = spawn_reflector(socket, health.clone(), stop.clone(), Default::default()).unwrap();
    let mut out = Vec::new();
    let report = ping(
        &ping_opts(addr, 5, 1000),
        &CancellationToken::new(),
        &mut out,
    )
    .unwrap();
    stop.cancel();
    h.join().unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(report.sent, report.received + report.lost);
    assert!(report.received > 0, "{text}");
    if cfg!(target_os = "linux") {
        assert!(report.kernel_rx && report.kernel_tx, "{text}");
    }
}
