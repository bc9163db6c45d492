//! The node's exposition: the shared record families of this node only,
//! the agent's build info and `process_*`, nothing only the collector
//! knows; docs/metrics.md documents every family.

use boltwatch_exposition::process::ProcessStats;
use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{AgentStats, Hello, Interface, Record, RttSummary};

use super::*;

mod server;

fn hello() -> Hello {
    Hello {
        node: "n1".into(),
        agent_version: "9.9.9".into(),
        os: "linux 6.1".into(),
        boot_id: "b1".into(),
        interfaces: vec![Interface {
            name: "tb0".into(),
            kind: "thunderbolt".into(),
            generation: "4".into(),
            speed_bits_per_second: 40_000_000_000,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn rec(seq: u64, payload: Payload) -> Record {
    Record {
        node: "n1".into(),
        boot_id: "b1".into(),
        seq,
        unix_ns: seq * 1_000_000_000,
        payload: Some(payload),
    }
}

fn rtt(peer: &str, rtts_ns: &[u64]) -> Payload {
    Payload::Rtt(RttSummary {
        peer: peer.into(),
        window_start_unix_ns: 1,
        sent: rtts_ns.len() as u64,
        received: rtts_ns.len() as u64,
        min_ns: rtts_ns[0],
        p50_ns: rtts_ns[0],
        p99_ns: rtts_ns[0],
        max_ns: rtts_ns[0],
        sum_ns: rtts_ns.iter().sum(),
        buckets: sparse_buckets(rtts_ns.iter().copied()),
        ..Default::default()
    })
}

fn rendered() -> String {
    let m = NodeMetrics::new(&hello());
    let tap = m.tap();
    tap.call(&rec(1, rtt("n2", &[40_000, 60_000])));
    tap.call(&rec(
        2,
        Payload::AgentStats(AgentStats {
            dropped_records: 3,
            ..Default::default()
        }),
    ));
    let stats = ProcessStats {
        cpu_seconds: 1.5,
        resident_bytes: 4096,
        virtual_bytes: 8192,
        start_time_seconds: 1.7e9,
        open_fds: 9,
        max_fds: 1024,
        threads: 4,
    };
    render(&m.snapshot(), m.late_replies(), Some(stats))
}

fn value(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')
            .map(str::to_string)
    })
}

#[test]
fn tapped_records_and_the_hello_make_the_node_series() {
    let text = rendered();
    let expect = [
        ("boltwatch_probe_sent_total{node=\"n1\",peer=\"n2\"}", "2"),
        ("boltwatch_rtt_seconds_count{node=\"n1\",peer=\"n2\"}", "2"),
        ("boltwatch_rtt_seconds_sum{node=\"n1\",peer=\"n2\"}", "0.0001"),
        ("boltwatch_outages_total{node=\"n1\",peer=\"n2\"}", "0"),
        ("boltwatch_agent_dropped_records_total{node=\"n1\"}", "3"),
        (
            "boltwatch_agent_info{node=\"n1\",version=\"9.9.9\",os=\"linux 6.1\"}",
            "1",
        ),
        (
            "boltwatch_link_info{node=\"n1\",interface=\"tb0\",kind=\"thunderbolt\",generation=\"4\"}",
            "1",
        ),
        (
            "boltwatch_link_speed_bytes_per_second{node=\"n1\",interface=\"tb0\"}",
            "5000000000",
        ),
        ("process_threads", "4"),
    ];
    for (series, want) in expect {
        assert_eq!(
            value(&text, series).as_deref(),
            Some(want),
            "{series}\n{text}"
        );
    }
    let build = format!(
        "boltwatch_agent_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(value(&text, &build).as_deref(), Some("1"));
}

#[test]
fn every_declared_family_once_in_order_and_none_only_the_collector_knows() {
    let text = rendered();
    let rendered: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next())
        .collect();
    let declared: Vec<&str> = families().iter().map(|f| f.name).collect();
    assert_eq!(rendered, declared);
    for absent in [
        "boltwatch_agent_up",
        "boltwatch_records_duplicate_total",
        "boltwatch_records_received_total",
        "boltwatch_ingest_errors_total",
        "boltwatch_store_records",
        "boltwatch_collector_build_info",
    ] {
        assert!(!text.contains(absent), "{absent}");
    }
    // One node only, and never a cluster label (the scrape adds it).
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(!line.contains("cluster="), "{line}");
        if line.contains("node=") {
            assert!(line.contains("node=\"n1\""), "{line}");
        }
    }
}

#[test]
fn promtool_finds_nothing() {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool must be installed (apt-get install prometheus)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(rendered().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

/// A family's row in docs/metrics.md, in the collector's metric table format.
fn doc_row(f: &Family) -> String {
    format!(
        "| `{}` | {} | {} | {} |",
        f.name,
        f.kind.as_str(),
        f.labels.join(", "),
        f.help
    )
}

#[test]
fn docs_list_every_family_of_the_agent() {
    let doc = include_str!("../../../../docs/metrics.md");
    let missing: Vec<String> = families()
        .iter()
        .map(doc_row)
        .filter(|row| !doc.contains(row.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/metrics.md lacks these rows (the agent-only ones belong in \"Scrape a node directly\"):\n{}",
        missing.join("\n")
    );
}

#[test]
fn metrics_listen_is_off_by_default_and_checked() {
    use crate::config::{Config, Flags};
    let build = |text: &str, flags: &[(&str, &str)]| {
        let doc = Config::parse("agent.toml", text)?;
        Config::build(Some(&doc), &Flags::from_pairs(flags))
    };
    assert_eq!(build("", &[]).unwrap().metrics_listen, None);
    let c = build("metrics_listen = \"127.0.0.1:9472\"\n", &[]).unwrap();
    assert_eq!(c.metrics_listen, Some("127.0.0.1:9472".parse().unwrap()));
    let flag = [("metrics-listen", "[::1]:9000")];
    let c = build("metrics_listen = \"127.0.0.1:9472\"\n", &flag).unwrap();
    assert_eq!(c.metrics_listen, Some("[::1]:9000".parse().unwrap()));
    let e = build("node = \"n\"\nmetrics_listen = \"9472\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("agent.toml:2: key `metrics_listen`"), "{e}");
}
