//! What the fault tests share: agent flags, a collector that comes back
//! where the agents expect it, and readings of logs, the API, `/metrics`
//! and spool files.

use std::path::{Path, PathBuf};

use boltwatch_agent::spool::segment;
use boltwatch_proto::v1::Record;
use boltwatch_tests::procs::{
    agent, free_tcp_port, free_udp_port, sample, Collector, CollectorOptions, Proc,
};
use prost::Message;

/// Flags of an agent probing `peer` at `interval`.
pub fn agent_args(
    collector: &str,
    listen: u16,
    peers: &[(&str, u16)],
    interval: &str,
) -> Vec<String> {
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
pub fn pair_args(collector: &str, interval: &str) -> ([Vec<String>; 2], u16) {
    let (pa, pb) = (free_udp_port(), free_udp_port());
    let a = agent_args(collector, pa, &[("b", pb)], interval);
    let b = agent_args(collector, pb, &[("a", pa)], interval);
    ([a, b], pa)
}

/// Agents `a` and `b` under `dir`, probing each other every 10 ms and
/// reporting to `home`; and a's flags, to restart it with.
pub fn start_pair(dir: &Path, home: &Home) -> (Proc, Proc, Vec<String>) {
    let ([a_args, b_args], _) = pair_args(&home.url(), "10ms");
    let a = agent(dir, "a", &a_args);
    let b = agent(dir, "b", &b_args);
    (a, b, a_args)
}

/// Where a collector lives across restarts: fixed free ports and one data
/// directory under the test's directory, so a killed collector comes back
/// where the agents expect it, with its store.
pub struct Home<'d> {
    dir: &'d Path,
    data: PathBuf,
    grpc_port: u16,
    http_port: u16,
}

impl<'d> Home<'d> {
    pub fn new(dir: &'d Path) -> Home<'d> {
        Home {
            dir,
            data: dir.join("data"),
            grpc_port: free_tcp_port(),
            http_port: free_tcp_port(),
        }
    }

    /// The gRPC URL agents are given, valid before the collector runs.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    pub fn start(&self) -> Collector {
        Collector::launch(
            self.dir,
            &self.data,
            &CollectorOptions {
                ports: Some((self.grpc_port, self.http_port)),
                ..Default::default()
            },
        )
    }
}

/// The log text without ANSI colour codes.
pub fn plain(log: &str) -> String {
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

/// What an agent's "agent stopped" line says.
#[derive(Debug)]
pub struct Stopped {
    /// The boot that stopped.
    pub boot_id: String,
    /// Its last record's seq.
    pub last_seq: u64,
    /// Records still in its spool.
    pub undelivered: u64,
}

/// The "agent stopped" line of an agent's log.
pub fn stopped_line(log: &str) -> Stopped {
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
    Stopped {
        boot_id: field("boot_id"),
        last_seq: field("last_seq").parse().unwrap(),
        undelivered: field("undelivered").parse().unwrap(),
    }
}

/// What the collector holds of one boot (`/api/v1/nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Records stored.
    pub records: u64,
    /// The highest seq stored.
    pub highest_seq: u64,
    /// Seqs missing below it.
    pub gaps: u64,
}

impl Held {
    /// Every record from 1 to `last_seq`, once, no gaps.
    pub fn complete(last_seq: u64) -> Held {
        Held {
            records: last_seq,
            highest_seq: last_seq,
            gaps: 0,
        }
    }
}

/// One boot of one node as the collector lists it.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The node.
    pub node: String,
    /// The boot.
    pub boot_id: String,
    /// What is stored of it.
    pub held: Held,
}

/// Every boot of every node.
pub fn all_boots(c: &Collector) -> Vec<Boot> {
    let v = c.nodes();
    let mut out = Vec::new();
    for n in v["nodes"].as_array().expect("nodes") {
        for b in n["boots"].as_array().expect("boots") {
            out.push(Boot {
                node: n["node"].as_str().unwrap().to_string(),
                boot_id: b["boot_id"].as_str().unwrap().to_string(),
                held: Held {
                    records: b["records"].as_u64().unwrap(),
                    highest_seq: b["highest_seq"].as_u64().unwrap(),
                    gaps: b["gaps"].as_u64().unwrap(),
                },
            });
        }
    }
    out
}

/// What is stored of `node`'s boot `boot`, if it is listed.
pub fn boot_held(c: &Collector, node: &str, boot: &str) -> Option<Held> {
    all_boots(c)
        .into_iter()
        .find(|b| b.node == node && b.boot_id == boot)
        .map(|b| b.held)
}

pub fn agent_up(c: &Collector, node: &str) -> bool {
    sample(&c.metrics(), "boltwatch_agent_up", &[("node", node)]) == Some(1.0)
}

/// Highest seq per boot found in a spool directory, read straight from the
/// segment files.
pub fn spooled(dir: &Path) -> std::collections::BTreeMap<String, u64> {
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
pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}
