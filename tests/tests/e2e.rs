//! End-to-end tests on loopback with the real binaries: agents probing each
//! other over real UDP, streaming over real gRPC to a real collector with a
//! real SQLite store; `/metrics` linted by the real promtool.

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::process::Command;
use std::time::Duration;

use boltwatch_common::testing::output_ok;
use boltwatch_tests::procs::{
    agent, bin, free_udp_port, promtool_check, sample, wait_for, Collector,
};

/// Every metric the foundation promises, for both directions of the link.
const PER_LINK: &[&str] = &[
    "boltwatch_rtt_seconds_bucket",
    "boltwatch_rtt_seconds_sum",
    "boltwatch_rtt_seconds_count",
    "boltwatch_probe_sent_total",
    "boltwatch_probe_lost_total",
];
const PER_INTERFACE: &[&str] = &[
    "boltwatch_interface_receive_bytes_total",
    "boltwatch_interface_transmit_bytes_total",
    "boltwatch_link_up",
];

struct Pair {
    dir: tempfile::TempDir,
    collector: Collector,
    a: boltwatch_tests::procs::Proc,
    b: boltwatch_tests::procs::Proc,
    a_port: u16,
}

fn start_pair(interval: &str) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let collector = Collector::start(dir.path(), &dir.path().join("data"));
    let (pa, pb) = (free_udp_port(), free_udp_port());
    let common = |listen: u16, peer: &str, peer_port: u16| -> Vec<String> {
        vec![
            "--collector".into(),
            collector.grpc_url(),
            "--listen".into(),
            format!("127.0.0.1:{listen}"),
            "--peer".into(),
            format!("{peer}=127.0.0.1:{peer_port}"),
            "--probe-interval".into(),
            interval.into(),
        ]
    };
    let a = agent(dir.path(), "a", &common(pa, "b", pb));
    let b = agent(dir.path(), "b", &common(pb, "a", pa));
    Pair {
        dir,
        collector,
        a,
        b,
        a_port: pa,
    }
}

fn both_directions_probed(m: &str) -> bool {
    [("a", "b"), ("b", "a")].iter().all(|(n, p)| {
        sample(
            m,
            "boltwatch_rtt_seconds_count",
            &[("node", n), ("peer", p)],
        )
        .unwrap_or(0.0)
            >= 10.0
    })
}

#[test]
fn agents_stream_to_collector_store_and_metrics() {
    let mut pair = start_pair("20ms");
    wait_for(
        "RTT of both directions in /metrics",
        Duration::from_secs(60),
        || both_directions_probed(&pair.collector.metrics()),
    );
    let m = pair.collector.metrics();
    for (node, peer) in [("a", "b"), ("b", "a")] {
        for name in PER_LINK {
            assert!(
                sample(&m, name, &[("node", node), ("peer", peer)]).is_some(),
                "{name}{{node={node},peer={peer}}} missing:\n{m}"
            );
        }
        for name in PER_INTERFACE {
            assert!(
                sample(&m, name, &[("node", node), ("interface", "lo")]).is_some(),
                "{name} for {node} missing:\n{m}"
            );
        }
        assert_eq!(
            sample(&m, "boltwatch_agent_up", &[("node", node)]),
            Some(1.0),
            "{m}"
        );
        assert!(
            sample(&m, "boltwatch_records_received_total", &[("node", node)]).unwrap_or(0.0) > 0.0,
            "{m}"
        );
        // Loopback answers every probe.
        let sent = sample(
            &m,
            "boltwatch_probe_sent_total",
            &[("node", node), ("peer", peer)],
        )
        .unwrap();
        assert!(sent >= 10.0, "{m}");
    }
    // The RTT buckets cover 10 us .. 5 ms with bounds at most 10% apart.
    let bounds: Vec<f64> = m
        .lines()
        .filter(|l| {
            l.starts_with("boltwatch_rtt_seconds_bucket{")
                && l.contains("node=\"a\"")
                && !l.contains("+Inf")
        })
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next()?.parse().ok())
        .collect();
    assert!(
        bounds.first().copied().unwrap_or(1.0) <= 10e-6,
        "{bounds:?}"
    );
    assert!(bounds.last().copied().unwrap_or(0.0) >= 5e-3, "{bounds:?}");
    assert!(bounds.windows(2).all(|w| w[1] / w[0] <= 1.10), "{bounds:?}");
    promtool_check(&m).unwrap_or_else(|e| panic!("promtool check metrics:\n{e}\n{m}"));

    // A clean stop flushes; afterwards every boot is contiguous.
    assert_eq!(pair.a.terminate(), Some(0), "agent a exit");
    assert_eq!(pair.b.terminate(), Some(0), "agent b exit");
    wait_for("agents shown disconnected", Duration::from_secs(20), || {
        let m = pair.collector.metrics();
        sample(&m, "boltwatch_agent_up", &[("node", "a")]) == Some(0.0)
            && sample(&m, "boltwatch_agent_up", &[("node", "b")]) == Some(0.0)
    });
    let nodes = pair.collector.nodes();
    let list = nodes["nodes"].as_array().expect("nodes array");
    assert_eq!(list.len(), 2, "{nodes}");
    for n in list {
        assert_eq!(n["connected"], false, "{n}");
        let boots = n["boots"].as_array().unwrap();
        assert_eq!(boots.len(), 1, "{n}");
        let b = &boots[0];
        assert_eq!(b["gaps"], 0, "{n}");
        assert!(b["highest_seq"].as_u64().unwrap() >= 2, "{n}");
        assert_eq!(b["records"], b["highest_seq"], "{n}");
    }
    // The series of a gone node stay, at their last values.
    let m = pair.collector.metrics();
    assert!(sample(
        &m,
        "boltwatch_probe_sent_total",
        &[("node", "a"), ("peer", "b")]
    )
    .is_some());
    drop(pair.dir);
}

#[test]
fn malformed_packets_and_connections_are_counted_and_dropped() {
    let mut pair = start_pair("50ms");
    // Wait until both agents run (their reflectors are bound and answering).
    wait_for("RTT of both directions", Duration::from_secs(60), || {
        both_directions_probed(&pair.collector.metrics())
    });
    // Garbage at the reflector: short, empty-ish, random.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for junk in [&b"x"[..], &[0u8; 10][..], &[0xffu8; 43][..]] {
        s.send_to(junk, ("127.0.0.1", pair.a_port)).unwrap();
    }
    // Garbage at the gRPC port: not an HTTP/2 preface.
    for _ in 0..3 {
        let mut t = TcpStream::connect(pair.collector.grpc).unwrap();
        let _ = t.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nthis is not grpc at all......");
    }
    // Both keep working: probes still flow both ways after the garbage.
    wait_for("RTT of both directions", Duration::from_secs(60), || {
        both_directions_probed(&pair.collector.metrics())
    });
    assert!(pair.a.alive() && pair.b.alive() && pair.collector.proc.alive());
    // A STAMP client still gets answers from the reflector that saw garbage.
    let out = output_ok(Command::new(bin("boltwatch-agent")).args([
        "ping",
        &format!("127.0.0.1:{}", pair.a_port),
        "-c",
        "3",
        "-i",
        "0.05",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 received") || text.contains("3 packets received"),
        "{text}"
    );

    // The agent reports its counters on exit (and every 10 s).
    assert_eq!(pair.a.terminate(), Some(0));
    wait_for(
        "malformed counters in /metrics",
        Duration::from_secs(30),
        || {
            let m = pair.collector.metrics();
            sample(
                &m,
                "boltwatch_agent_malformed_packets_total",
                &[("node", "a")],
            )
            .unwrap_or(0.0)
                >= 3.0
                && sample(&m, "boltwatch_ingest_malformed_connections_total", &[]).unwrap_or(0.0)
                    >= 3.0
        },
    );
    assert!(pair.collector.proc.alive());
}

#[test]
fn config_errors_exit_78_and_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, "node = \"a\"\n\nprobe_interval = \"often\"\n").unwrap();
    let out = Command::new(bin("boltwatch-agent"))
        .arg("run")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:3: key `probe_interval`", path.display())),
        "{err}"
    );
}

/// `--check-config` says yes or no without starting anything, and the
/// launchd override turns a config error's status into 0 (so launchd's
/// KeepAlive leaves the job stopped) while the message stays the same.
#[test]
fn check_config_and_the_launchd_config_error_status() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&good, "node = \"a\"\nlisten = \"127.0.0.1:0\"\n").unwrap();
    std::fs::write(&bad, "node = \"a\"\nprobe_interval = \"often\"\n").unwrap();
    let agent = |path: &std::path::Path, check: bool, env: Option<&str>| {
        let mut cmd = Command::new(bin("boltwatch-agent"));
        cmd.arg("run").arg("--config").arg(path);
        if check {
            cmd.arg("--check-config");
        }
        cmd.env_remove("BOLTWATCH_CONFIG_ERROR_EXIT_STATUS");
        if let Some(v) = env {
            cmd.env("BOLTWATCH_CONFIG_ERROR_EXIT_STATUS", v);
        }
        cmd.output().unwrap()
    };
    // The collector's port listening: no warning; closed: a warning naming
    // the URL, and the config is still OK (the agent spools meanwhile).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = format!("node = \"a\"\nlisten = \"127.0.0.1:0\"\ncollector = \"{url}\"\n");
    std::fs::write(&good, config).unwrap();
    let out = agent(&good, true, None);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("config OK: node a"), "{out:?}");
    assert!(!stdout.contains("warning"), "{out:?}");
    drop(listener);
    let out = agent(&good, true, None);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("warning: collector {url}: cannot reach it"))
            && stdout.contains("config OK: node a"),
        "{out:?}"
    );
    let out = agent(&bad, true, Some("0"));
    assert_eq!(
        out.status.code(),
        Some(78),
        "--check-config ignores the override: {out:?}"
    );
    let out = agent(&bad, false, Some("0"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:2: key `probe_interval`"), "{err}");
    assert!(err.contains("exiting with status 0"), "{err}");
}

#[test]
fn lab_runs_and_prints_a_table_per_link() {
    let out = Command::new(bin("boltwatch-lab"))
        .args([
            "--duration",
            "4s",
            "--nodes",
            "3",
            "--probe-interval",
            "20ms",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lab failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("/metrics"), "{stdout}");
    // A full mesh of 3 has 6 directed links, each a row with probes > 0.
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("lab-") && l.contains(" -> "))
        .collect();
    assert_eq!(rows.len(), 6, "{stdout}");
    let mut table_probes = 0;
    for r in rows {
        let probes: u64 = r
            .split_whitespace()
            .nth(3)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(probes > 0, "{r}");
        table_probes += probes;
    }
    // Not a terminal: plain status lines, the last one written after every
    // record was stored, so its probe count is the table's total.
    let status: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("  records stored "))
        .collect();
    assert!(
        !stdout.contains('\r'),
        "in-place updates off a terminal: {stdout:?}"
    );
    let last = status
        .last()
        .unwrap_or_else(|| panic!("no status line: {stdout}"));
    let field = |name: &str| -> u64 {
        let words: Vec<&str> = last.split_whitespace().collect();
        let i = words
            .iter()
            .position(|w| *w == name)
            .unwrap_or_else(|| panic!("{last}"));
        words[i + 1].parse().unwrap_or_else(|_| panic!("{last}"))
    };
    assert_eq!(field("probes"), table_probes, "{stdout}");
    assert!(field("stored") > 0, "{stdout}");
}
