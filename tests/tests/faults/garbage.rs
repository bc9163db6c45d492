//! Garbage at every port: random bytes instead of the HTTP/2 preface,
//! broken frames, a gRPC message that is not protobuf, and short datagrams
//! at a reflector are counted, and every process survives and delivers.

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use boltwatch_tests::procs::{agent, sample, wait_for, Collector};

use crate::support::{agent_up, all_boots, pair_args};

/// An HTTP/2 frame header.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut v = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    v.extend_from_slice(&stream.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// HPACK literal header field without indexing, literal name.
fn hpack(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0);
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
}

#[test]
fn garbage_at_every_port_is_counted_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start(dir.path(), &dir.path().join("data"));
    let ([a_args, b_args], pa) = pair_args(&c.grpc_url(), "50ms");
    let mut a = agent(dir.path(), "a", &a_args);
    let mut b = agent(dir.path(), "b", &b_args);
    wait_for("agents connected", Duration::from_secs(60), || {
        agent_up(&c, "a") && agent_up(&c, "b")
    });
    let before = c.metrics();
    let count =
        |m: &str, name: &str, labels: &[(&str, &str)]| sample(m, name, labels).unwrap_or(0.0);

    // Seeded pseudo-random bytes (xorshift): reproducible garbage.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    // 1. Random bytes instead of a preface.
    for i in 0..5 {
        let mut t = TcpStream::connect(c.grpc).unwrap();
        let _ = t.write_all(&rnd(24 + i * 40));
    }
    // 2. A valid preface, then garbage and truncated frames.
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let garbage_frames: Vec<Vec<u8>> = vec![
        rnd(200),
        frame(0x4, 0, 0, &[])[..5].to_vec(), // truncated SETTINGS header
        frame(0x1, 0x4, 1, &rnd(30)),        // HEADERS with a garbage block
        frame(0x0, 0, 7, &rnd(10)),          // DATA on a stream never opened
    ];
    for g in &garbage_frames {
        let mut t = TcpStream::connect(c.grpc).unwrap();
        let _ = t.write_all(PREFACE);
        let _ = t.write_all(g);
        let _ = t.flush();
        std::thread::sleep(Duration::from_millis(100));
    }
    // 3. A well-formed gRPC call whose message is not protobuf.
    {
        let mut t = TcpStream::connect(c.grpc).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut block = Vec::new();
        for (k, v) in [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/boltwatch.v1.Telemetry/Stream"),
            (":authority", "x"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ] {
            hpack(&mut block, k, v);
        }
        let mut msg = vec![0u8];
        let body = vec![0xffu8; 16];
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
        msg.extend_from_slice(&body);
        let _ = t.write_all(PREFACE);
        let _ = t.write_all(&frame(0x4, 0, 0, &[]));
        let _ = t.write_all(&frame(0x1, 0x4, 1, &block));
        let _ = t.write_all(&frame(0x0, 0x1, 1, &msg));
        let mut sink = [0u8; 4096];
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match std::io::Read::read(&mut t, &mut sink) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    // 4. Random datagrams at a reflector.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..20 {
        let n = (i * 7) % 44; // all shorter than a STAMP packet
        s.send_to(&rnd(n.max(1)), ("127.0.0.1", pa)).unwrap();
    }

    wait_for("error counters moved", Duration::from_secs(40), || {
        let m = c.metrics();
        count(&m, "boltwatch_ingest_malformed_connections_total", &[])
            >= count(&before, "boltwatch_ingest_malformed_connections_total", &[]) + 5.0
            && count(&m, "boltwatch_ingest_errors_total", &[("kind", "transport")])
                > count(&before, "boltwatch_ingest_errors_total", &[("kind", "transport")])
            // The agent reports its counters every 10 s.
            && count(&m, "boltwatch_agent_malformed_packets_total", &[("node", "a")]) >= 20.0
    });
    let mut c = c;
    assert!(c.proc.alive(), "collector survives garbage");
    assert!(a.alive() && b.alive(), "agents survive garbage");
    // And still deliver.
    let stored = || -> u64 { all_boots(&c).iter().map(|b| b.held.records).sum() };
    let before_rows = stored();
    wait_for("records still flow", Duration::from_secs(30), || {
        stored() > before_rows
    });
}
