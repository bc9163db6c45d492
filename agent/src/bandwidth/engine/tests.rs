//! The engine on loopback sockets: real streams, real counts.

use super::*;

#[test]
fn tcp_streams_count_what_the_peer_receives() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    tune_tcp(&a, None).unwrap();
    tune_tcp(&b, None).unwrap();
    let cfg = EngineConfig {
        block_size: 64 * 1024,
        rate_bps: 200_000_000,
        udp_64bit: false,
    };
    let mut tx = Engine::start(
        vec![StreamSpec {
            id: 1,
            sender: true,
            socket: DataSocket::Tcp(a),
        }],
        &cfg,
    )
    .unwrap();
    let mut rx = Engine::start(
        vec![StreamSpec {
            id: 1,
            sender: false,
            socket: DataSocket::Tcp(b),
        }],
        &cfg,
    )
    .unwrap();
    while rx.snapshot().bytes(false) < 1_000_000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = tx.stop();
    // Let the receiver drain what is in flight, then compare exactly.
    let want = sent.streams[0].count.bytes;
    for _ in 0..500 {
        if rx.snapshot().bytes(false) == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = rx.stop();
    assert!(want > 0);
    assert_eq!(got.streams[0].count.bytes, want);
    assert!(!got.streams[0].udp);
}

#[test]
fn udp_streams_carry_sequence_numbers() {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    a.connect(b.local_addr().unwrap()).unwrap();
    b.connect(a.local_addr().unwrap()).unwrap();
    tune_udp(&a, None).unwrap();
    tune_udp(&b, None).unwrap();
    let cfg = EngineConfig {
        block_size: 1200,
        rate_bps: 20_000_000,
        udp_64bit: false,
    };
    let mut rx = Engine::start(
        vec![StreamSpec {
            id: 1,
            sender: false,
            socket: DataSocket::Udp(b),
        }],
        &cfg,
    )
    .unwrap();
    let mut tx = Engine::start(
        vec![StreamSpec {
            id: 1,
            sender: true,
            socket: DataSocket::Udp(a),
        }],
        &cfg,
    )
    .unwrap();
    while rx.snapshot().bytes(false) < 200 * 1200 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = tx.stop();
    std::thread::sleep(Duration::from_millis(200));
    let got = rx.stop();
    let s = &got.streams[0].udp_stats;
    assert!(s.received >= 200);
    assert_eq!(s.received * 1200, got.streams[0].count.bytes);
    assert!(s.highest <= sent.streams[0].packets_sent);
    assert_eq!(s.highest, s.received + s.lost);
    assert_eq!(
        sent.streams[0].count.bytes,
        sent.streams[0].packets_sent * 1200
    );
}
