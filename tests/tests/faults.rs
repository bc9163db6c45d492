//! Issue 5 "nothing lost", with the real binaries on loopback: the
//! collector killed with SIGKILL five times while two agents probe fast, an
//! agent killed and restarted on its spool, a spool cap hit while the
//! collector is away (drops counted, RSS flat), authenticated agents, and
//! garbage at every port. Every wait is bounded; no assertion is about
//! speed.

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use boltwatch_agent::sink::Emitted;
use boltwatch_agent::spool::{segment, Spool, SpoolOptions};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{HistogramBucket, Record, RttSummary};
use boltwatch_tests::procs::{
    agent, free_tcp_port, free_udp_port, sample, wait_for, Collector, Proc,
};
use prost::Message;

/// Flags of an agent probing `peer` at `interval`.
fn agent_args(collector: &str, listen: u16, peers: &[(&str, u16)], interval: &str) -> Vec<String> {
    let mut v = vec![
        "--collector".into(),
        collector.into(),
        "--listen".into(),
        format!("127.0.0.1:{listen}"),
        "--probe-interval".into(),
        interval.into(),
        "--no-services".into(),
    ];
    for (name, port) in peers {
        v.push("--peer".into());
        v.push(format!("{name}=127.0.0.1:{port}"));
    }
    v
}

/// Flags of two agents `a` and `b` on fresh UDP ports, each probing the
/// other at `interval`; and a's reflector port.
fn pair_args(collector: &str, interval: &str) -> ([Vec<String>; 2], u16) {
    let (pa, pb) = (free_udp_port(), free_udp_port());
    let a = agent_args(collector, pa, &[("b", pb)], interval);
    let b = agent_args(collector, pb, &[("a", pa)], interval);
    ([a, b], pa)
}

/// Agents `a` and `b` under `dir`, probing each other every 10 ms and
/// reporting to `home`; and a's flags, to restart it with.
fn start_pair(dir: &Path, home: &Home) -> (Proc, Proc, Vec<String>) {
    let ([a_args, b_args], _) = pair_args(&home.url(), "10ms");
    let a = agent(dir, "a", &a_args);
    let b = agent(dir, "b", &b_args);
    (a, b, a_args)
}

/// Where a collector lives across restarts: fixed free ports and one data
/// directory under the test's directory, so a killed collector comes back
/// where the agents expect it, with its store.
struct Home<'d> {
    dir: &'d Path,
    data: PathBuf,
    grpc_port: u16,
    http_port: u16,
}

impl<'d> Home<'d> {
    fn new(dir: &'d Path) -> Home<'d> {
        Home {
            dir,
            data: dir.join("data"),
            grpc_port: free_tcp_port(),
            http_port: free_tcp_port(),
        }
    }

    /// The gRPC URL agents are given, valid before the collector runs.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    fn start(&self) -> Collector {
        Collector::start_on(self.dir, &self.data, self.grpc_port, self.http_port)
    }
}

/// The log text without ANSI colour codes.
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `(boot_id, last_seq, undelivered)` from an agent's "agent stopped" line.
fn stopped_line(log: &str) -> (String, u64, u64) {
    let text = plain(log);
    let line = text
        .lines()
        .find(|l| l.contains("agent stopped"))
        .unwrap_or_else(|| panic!("no `agent stopped` line in:\n{text}"));
    let field = |k: &str| -> String {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {line}"))
            .to_string()
    };
    (
        field("boot_id"),
        field("last_seq").parse().unwrap(),
        field("undelivered").parse().unwrap(),
    )
}

/// `(records, highest_seq, gaps)` of `node`'s boot `boot`, if listed.
fn boot_row(c: &Collector, node: &str, boot: &str) -> Option<(u64, u64, u64)> {
    let v = c.nodes();
    let n = v["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["node"] == node)?
        .clone();
    let b = n["boots"]
        .as_array()?
        .iter()
        .find(|b| b["boot_id"] == boot)?
        .clone();
    Some((
        b["records"].as_u64()?,
        b["highest_seq"].as_u64()?,
        b["gaps"].as_u64()?,
    ))
}

/// Every boot of every node: `(node, boot, records, highest_seq, gaps)`.
fn all_boots(c: &Collector) -> Vec<(String, String, u64, u64, u64)> {
    let v = c.nodes();
    let mut out = Vec::new();
    for n in v["nodes"].as_array().expect("nodes") {
        for b in n["boots"].as_array().expect("boots") {
            out.push((
                n["node"].as_str().unwrap().to_string(),
                b["boot_id"].as_str().unwrap().to_string(),
                b["records"].as_u64().unwrap(),
                b["highest_seq"].as_u64().unwrap(),
                b["gaps"].as_u64().unwrap(),
            ));
        }
    }
    out
}

fn agent_up(c: &Collector, node: &str) -> bool {
    sample(&c.metrics(), "boltwatch_agent_up", &[("node", node)]) == Some(1.0)
}

/// Highest seq per boot found in a spool directory, read straight from the
/// segment files.
fn spooled(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "seg") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        for payload in segment::scan(&bytes).0 {
            let r = Record::decode(payload).unwrap();
            let m = out.entry(r.boot_id).or_insert(0);
            *m = (*m).max(r.seq);
        }
    }
    out
}

/// Resident set size of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[test]
fn collector_killed_five_times_every_seq_stored_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let mut c = home.start();
    let (mut a, mut b, _) = start_pair(dir.path(), &home);
    wait_for("both agents connected", Duration::from_secs(60), || {
        agent_up(&c, "a") && agent_up(&c, "b")
    });

    // About 60 s: five rounds of running, SIGKILL, a pause, a restart.
    for round in 0..5 {
        std::thread::sleep(Duration::from_secs(9));
        c.proc.kill9();
        std::thread::sleep(Duration::from_millis(1500 + 500 * round));
        c = home.start();
        assert!(a.alive() && b.alive(), "agents survive collector crashes");
    }
    wait_for("agents reconnected", Duration::from_secs(60), || {
        agent_up(&c, "a") && agent_up(&c, "b")
    });
    // Let the replay finish, then a clean stop flushes the rest.
    wait_for("spool replayed", Duration::from_secs(60), || {
        all_boots(&c).iter().all(|(.., gaps)| *gaps == 0)
    });
    assert_eq!(a.terminate(), Some(0));
    assert_eq!(b.terminate(), Some(0));
    for (node, p) in [("a", &a), ("b", &b)] {
        let (boot, last_seq, undelivered) = stopped_line(&p.log_text());
        assert_eq!(undelivered, 0, "{node} flushed everything");
        assert!(last_seq > 20, "{node} made only {last_seq} records");
        wait_for(
            &format!("{node} boot {boot} complete"),
            Duration::from_secs(30),
            || boot_row(&c, node, &boot) == Some((last_seq, last_seq, 0)),
        );
    }
    for row in all_boots(&c) {
        assert_eq!(row.2, row.3, "records == highest_seq: {row:?}");
        assert_eq!(row.4, 0, "no gaps: {row:?}");
    }
    assert_eq!(all_boots(&c).len(), 2, "one boot per agent");
}

#[test]
fn agent_killed_and_restarted_delivers_the_old_boots_spool() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let mut c = home.start();
    let (mut a, _b, a_args) = start_pair(dir.path(), &home);
    wait_for("a connected", Duration::from_secs(60), || agent_up(&c, "a"));
    std::thread::sleep(Duration::from_secs(2));

    // The collector goes away; a keeps spooling, then dies hard too.
    c.proc.kill9();
    std::thread::sleep(Duration::from_secs(4));
    a.kill9();
    let spool_dir = dir.path().join("spool-a");
    let held = spooled(&spool_dir);
    assert_eq!(held.len(), 1, "{held:?}");
    let (old_boot, old_last) = held.into_iter().next().unwrap();
    assert!(old_last > 3, "a spooled only {old_last}");

    let mut a = agent(dir.path(), "a", &a_args);
    let c = home.start();
    wait_for(
        "the old boot's spooled records arrive",
        Duration::from_secs(60),
        || boot_row(&c, "a", &old_boot) == Some((old_last, old_last, 0)),
    );
    assert_eq!(a.terminate(), Some(0));
    let (new_boot, new_last, _) = stopped_line(&a.log_text());
    assert_ne!(new_boot, old_boot, "a restart is a new boot");
    wait_for("the new boot complete", Duration::from_secs(30), || {
        boot_row(&c, "a", &new_boot) == Some((new_last, new_last, 0))
    });
}

#[test]
fn a_flipped_byte_in_the_spool_costs_one_record_shown_as_a_gap_and_a_drop() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    // No collector yet: a spools everything.
    let (mut a, _b, a_args) = start_pair(dir.path(), &home);
    let spool_dir = dir.path().join("spool-a");
    let frames_in = |p: &Path| -> Vec<(usize, usize)> {
        let bytes = std::fs::read(p).unwrap();
        let mut at = 0;
        segment::scan(&bytes)
            .0
            .iter()
            .map(|f| {
                let o = (at, segment::HEADER + f.len());
                at += o.1;
                o
            })
            .collect()
    };
    // The first segment; the spool directory exists a moment before it.
    let first_seg = || -> Option<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&spool_dir)
            .ok()?
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        v.sort();
        v.into_iter().next()
    };
    let seg = || first_seg().expect("a segment");
    wait_for("a spooled 20 records", Duration::from_secs(60), || {
        first_seg().is_some_and(|p| frames_in(&p).len() >= 20)
    });
    a.kill9();
    let held = spooled(&spool_dir);
    let (old_boot, old_last) = held.into_iter().next().unwrap();
    let path = seg();
    let frames = frames_in(&path);
    let (at, len) = frames[frames.len() / 2];
    let mut bytes = std::fs::read(&path).unwrap();
    let hit = Record::decode(&bytes[at + segment::HEADER..at + len])
        .unwrap()
        .seq;
    bytes[at + len / 2] ^= 0x04;
    std::fs::write(&path, &bytes).unwrap();

    let c = home.start();
    let mut a = agent(dir.path(), "a", &a_args);
    // Everything but the damaged record arrives; the collector sees the
    // hole as a gap, and the agent counts it as dropped.
    wait_for(
        "the old boot's intact records arrive",
        Duration::from_secs(60),
        || boot_row(&c, "a", &old_boot) == Some((old_last - 1, old_last, 1)),
    );
    wait_for("the drop reported", Duration::from_secs(40), || {
        sample(
            &c.metrics(),
            "boltwatch_agent_dropped_records_total",
            &[("node", "a")],
        ) == Some(1.0)
    });
    eprintln!(
        "corrupt spool frame: boot {old_boot} wrote {old_last}, record {hit} damaged, \
         {} stored, 1 gap, 1 counted dropped",
        old_last - 1
    );
    assert_eq!(a.terminate(), Some(0));
}

/// An RTT summary like the sender's (histogram and all), for prefilling.
fn rtt_payload(i: u64) -> Payload {
    Payload::Rtt(RttSummary {
        peer: "b".into(),
        interface: "lo".into(),
        peer_address: "127.0.0.1:862".into(),
        window_start_unix_ns: 1_700_000_000_000_000_000 + i * 1_000_000_000,
        window_ns: 1_000_000_000,
        sent: 100,
        received: 100,
        min_ns: 40_000,
        mean_ns: 50_000,
        max_ns: 90_000,
        p50_ns: 50_000,
        p99_ns: 88_000,
        sum_ns: 5_000_000,
        buckets: (0..12)
            .map(|k| HistogramBucket {
                index: 100 + k,
                count: 8,
            })
            .collect(),
        ..Default::default()
    })
}

#[test]
fn spool_cap_while_collector_is_down_counts_drops_and_rss_stays_flat() {
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool-a");
    // A previous boot (cap 4 MiB, so 256 KiB segments) left 3.5 MiB the
    // collector never saw.
    let prefilled = {
        let mut s = Spool::open(
            SpoolOptions {
                dir: spool_dir.clone(),
                max_bytes: 4 << 20,
            },
            "a",
            "prefill",
        )
        .unwrap();
        let mut n = 0u64;
        while s.bytes() < 7 << 19 {
            s.append((0..500).map(|i| Emitted {
                unix_ns: 1_700_000_000_000_000_000 + (n + i) * 1_000_000,
                payload: rtt_payload(n + i),
            }))
            .unwrap();
            n += 500;
        }
        s.sync().unwrap();
        assert_eq!(s.dropped(), 0);
        n
    };

    let cap = 2u64 << 20;
    let home = Home::new(dir.path());
    let pa = free_udp_port();
    let mut args = agent_args(&home.url(), pa, &[("b", pa)], "10ms");
    args.extend(["--spool-max-bytes".into(), cap.to_string()]);
    let mut a = agent(dir.path(), "a", &args);

    // Collector down: sample RSS for a while after warm-up.
    let on_disk = || -> u64 {
        std::fs::read_dir(&spool_dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    std::thread::sleep(Duration::from_secs(3));
    let warm = rss_kib(a.pid());
    let mut peak = warm;
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        assert!(a.alive());
        peak = peak.max(rss_kib(a.pid()));
        assert!(
            on_disk() <= cap + cap / 16 + 4096,
            "spool {} bytes over its cap",
            on_disk()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        peak * 10 <= warm * 13,
        "agent RSS grew from {warm} KiB to {peak} KiB with the collector down"
    );

    // The collector comes up: what survived the cap is replayed from disk.
    let c = home.start();
    let mut replay_peak = 0;
    wait_for(
        "the surviving prefill replayed",
        Duration::from_secs(120),
        || {
            replay_peak = replay_peak.max(rss_kib(a.pid()));
            matches!(boot_row(&c, "a", "prefill"), Some((r, h, _)) if h == prefilled && r > 0)
        },
    );
    assert!(
        replay_peak * 10 <= warm * 13,
        "agent RSS grew from {warm} KiB to {replay_peak} KiB replaying"
    );
    let (stored, highest, gaps) = boot_row(&c, "a", "prefill").unwrap();
    eprintln!(
        "spool cap: prefilled {prefilled}, stored {stored}, dropped {}; RSS warm {warm} KiB, \
         peak down {peak} KiB, peak replaying {replay_peak} KiB",
        prefilled - stored
    );
    assert_eq!(highest, prefilled);
    assert!(stored < prefilled, "the cap must have dropped some");
    // The oldest went: one gap run at the start, none elsewhere.
    assert_eq!(gaps, prefilled - stored);
    // Drops are counted and reported: exactly the missing records.
    wait_for("drops reported", Duration::from_secs(40), || {
        let m = c.metrics();
        let dropped = sample(
            &m,
            "boltwatch_agent_dropped_records_total",
            &[("node", "a")],
        );
        dropped == Some((prefilled - stored) as f64)
    });
    assert_eq!(a.terminate(), Some(0));
}

#[test]
fn tokens_are_required_and_bound_to_their_node() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "# node token\na aaaaaaaaaaaaaaaaaaaaaaaa\nb bbbbbbbbbbbbbbbbbbbbbbbb\n",
    )
    .unwrap();
    let good = dir.path().join("a.token");
    std::fs::write(&good, "aaaaaaaaaaaaaaaaaaaaaaaa\n").unwrap();
    let wrong = dir.path().join("b.token");
    std::fs::write(&wrong, "bbbbbbbbbbbbbbbbbbbbbbbb\n").unwrap();
    let c = Collector::start_with(
        dir.path(),
        &dir.path().join("data"),
        free_tcp_port(),
        free_tcp_port(),
        &["--auth-tokens".into(), tokens.display().to_string()],
    );
    let url = c.grpc_url();
    let port = |_| free_udp_port();
    let with = |node: &str, token: Option<&Path>| -> Proc {
        let mut args = agent_args(&url, port(()), &[], "100ms");
        if let Some(t) = token {
            args.extend(["--token-file".into(), t.display().to_string()]);
        }
        agent(dir.path(), node, &args)
    };
    let _none = with("n", None);
    let _wrong = with("x", Some(&wrong));
    wait_for("refusals counted", Duration::from_secs(60), || {
        let m = c.metrics();
        sample(
            &m,
            "boltwatch_ingest_errors_total",
            &[("kind", "unauthenticated")],
        )
        .unwrap_or(0.0)
            >= 1.0
            && sample(
                &m,
                "boltwatch_ingest_errors_total",
                &[("kind", "permission_denied")],
            )
            .unwrap_or(0.0)
                >= 1.0
    });
    let _good = with("a", Some(&good));
    wait_for("a accepted", Duration::from_secs(60), || agent_up(&c, "a"));
    let nodes: Vec<String> = all_boots(&c).into_iter().map(|r| r.0).collect();
    assert!(nodes.iter().all(|n| n == "a"), "stored: {nodes:?}");
}

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
    let before_rows: u64 = all_boots(&c).iter().map(|r| r.2).sum();
    wait_for("records still flow", Duration::from_secs(30), || {
        all_boots(&c).iter().map(|r| r.2).sum::<u64>() > before_rows
    });
}
