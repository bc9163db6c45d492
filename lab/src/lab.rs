//! The lab: a real local soak on loopback. One collector
//! and N agents in one process, a full mesh of STAMP probing, the same code
//! paths as production (real UDP sockets with kernel timestamps, real gRPC,
//! the real SQLite store, the real `/metrics`). At the end it reads the
//! stored records back and prints a table per link direction.
//!
//! Every agent also runs its bandwidth server (on a free loopback port);
//! with `bandwidth_interval` the agents test each other that often, for a
//! quarter of the interval (1-10 s, whole seconds), with a 50 % duty-cycle
//! cap, and a bandwidth table follows. On loopback every peer has the same
//! IP, so a test against an agent's server marks all of its links under
//! load.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use boltwatch_agent::config::{Config as AgentConfig, PeerConfig};
use boltwatch_agent::run::Listeners as AgentListeners;
use boltwatch_common::duration::parse as parse_duration;
use boltwatch_proto::v1::record::Payload;
use prost::Message;
use tokio::sync::watch;

use boltwatch_collector::report::summary;
use boltwatch_collector::store::StoreReader;

use crate::progress::{self, Tally};

/// Lab settings: the command line (the doc comments are its `--help`).
#[derive(Debug, Clone, clap::Args)]
pub struct LabOptions {
    /// How long to probe.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Agents in the mesh (2..16).
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Probe interval of every agent.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub probe_interval: Duration,
    /// Where /metrics is served while the lab runs (127.0.0.1:0 picks a
    /// free port).
    #[arg(long, default_value = "127.0.0.1:9471")]
    pub http_listen: SocketAddr,
    /// Keep the store here instead of a temporary directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Run bandwidth tests between the agents this often (each agent has a
    /// bandwidth server either way).
    #[arg(long, value_parser = parse_duration)]
    pub bandwidth_interval: Option<Duration>,
}

/// The lab's test length for `interval`: a quarter of it, whole seconds in
/// 1..=10 s.
pub fn lab_test_duration(interval: Duration) -> Duration {
    Duration::from_secs((interval.as_secs() / 4).clamp(1, 10))
}

/// Lab failures.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// A socket or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The collector failed.
    #[error("collector: {0}")]
    Collector(#[from] boltwatch_collector::Error),
    /// An agent failed.
    #[error("agent: {0}")]
    Agent(#[from] boltwatch_agent::error::Error),
    /// Reading the results back failed.
    #[error("reading results: {0}")]
    Results(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

/// A random 128-bit bearer token, hex.
pub fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Runs the lab, printing progress (as `style` says) and the final table
/// to `out`.
pub async fn run(
    opts: LabOptions,
    style: progress::Style,
    out: &mut (impl Write + Send),
) -> Result<(), LabError> {
    if !(2..=16).contains(&opts.nodes) {
        return Err(LabError::Options(format!(
            "--nodes {} is outside 2..16",
            opts.nodes
        )));
    }
    if let Some(i) = opts.bandwidth_interval {
        if i <= lab_test_duration(i) {
            return Err(LabError::Options(format!(
                "--bandwidth-interval {i:?} must be at least 2s"
            )));
        }
    }
    let temp;
    let data_dir = match &opts.data_dir {
        Some(d) => d.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("boltwatch-lab-")
                .tempdir()
                .map_err(io("creating a temporary data dir"))?;
            temp.path().to_path_buf()
        }
    };

    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io("binding the gRPC listener"))?;
    let http = tokio::net::TcpListener::bind(opts.http_listen)
        .await
        .map_err(io(format!(
            "binding {} for /metrics (pass --http-listen 127.0.0.1:0 for any free port)",
            opts.http_listen
        )))?;
    let grpc_addr = grpc.local_addr().map_err(io("gRPC address"))?;
    let http_addr = http.local_addr().map_err(io("HTTP address"))?;

    // Every lab agent authenticates with a fresh token of its own.
    let names: Vec<String> = (1..=opts.nodes).map(|i| format!("lab-{i}")).collect();
    let tokens: Vec<String> = names.iter().map(|_| new_token()).collect();
    let auth = boltwatch_collector::ingest::auth::AuthTokens::from_pairs(
        names.iter().cloned().zip(tokens.iter().cloned()),
    );
    let config = boltwatch_collector::Config {
        auth: Some(auth),
        data_dir: data_dir.clone(),
        grpc_listen: grpc_addr,
        http_listen: http_addr,
        ..boltwatch_collector::Config::default()
    };
    let (collector_stop, collector_rx) = watch::channel(false);
    let collector = tokio::spawn(boltwatch_collector::run(
        config,
        boltwatch_collector::Listeners {
            grpc,
            http,
            api: None,
        },
        wait_true(collector_rx),
    ));

    // Bind every reflector first so each agent knows its peers' addresses.
    let mut listeners = Vec::new();
    for _ in 0..opts.nodes {
        let sock =
            std::net::UdpSocket::bind("127.0.0.1:0").map_err(io("binding a STAMP reflector"))?;
        let addr = sock.local_addr().map_err(io("reflector address"))?;
        let bw =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a bandwidth server"))?;
        let bw_addr = bw.local_addr().map_err(io("bandwidth server address"))?;
        listeners.push((
            AgentListeners {
                stamp: sock,
                bandwidth: Some(bw),
                metrics: None,
            },
            addr,
            bw_addr,
        ));
    }
    let addrs: Vec<SocketAddr> = listeners.iter().map(|(_, a, _)| *a).collect();
    let bw_addrs: Vec<SocketAddr> = listeners.iter().map(|(_, _, b)| *b).collect();
    let (agents_stop, agents_rx) = watch::channel(false);
    let mut agents = Vec::new();
    for (i, (l, _, _)) in listeners.into_iter().enumerate() {
        let config = AgentConfig {
            node: names[i].clone(),
            collector: format!("http://{grpc_addr}"),
            listen: addrs[i],
            peers: (0..opts.nodes)
                .filter(|&j| j != i)
                .map(|j| PeerConfig {
                    name: names[j].clone(),
                    addr: addrs[j],
                })
                .collect(),
            probe_interval: opts.probe_interval,
            // Nothing listens for SSH on loopback peers here.
            services: Vec::new(),
            spool_dir: data_dir.join("spool").join(&names[i]),
            token: Some(tokens[i].clone()),
            ..AgentConfig::default()
        };
        let config = lab_bandwidth(config, opts.bandwidth_interval, &names, &bw_addrs, i);
        agents.push(tokio::spawn(boltwatch_agent::run::run(
            config,
            l,
            wait_true(agents_rx.clone()),
        )));
    }

    let _ = writeln!(
        out,
        "boltwatch lab: {} agents on loopback, full mesh, probing every {:?} for {:?}\n  metrics: http://{http_addr}/metrics\n  nodes:   http://{http_addr}/api/v1/nodes\n  store:   {}",
        opts.nodes,
        opts.probe_interval,
        opts.duration,
        data_dir.display()
    );
    let _ = out.flush();
    let started = tokio::time::Instant::now();
    let reader = StoreReader::new(&data_dir);
    let mut tally = Tally::default();
    let mut ticks = tokio::time::interval(style.period());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = tokio::time::sleep(opts.duration);
    tokio::pin!(end);
    let interrupted = loop {
        tokio::select! {
            _ = &mut end => break false,
            _ = tokio::signal::ctrl_c() => break true,
            _ = ticks.tick() => {
                tally.refresh(&reader).await;
                let line = tally.line(started.elapsed(), opts.duration);
                progress::show(out, style, &line);
            }
        }
    };
    if style == progress::Style::Terminal {
        let _ = writeln!(out);
    }
    if interrupted {
        let _ = writeln!(out, "interrupted; stopping early");
    }

    // Agents first, so their last records are flushed and acknowledged.
    let _ = agents_stop.send(true);
    let mut undelivered = 0;
    for a in agents {
        match a.await {
            Ok(Ok(stopped)) => undelivered += stopped.undelivered,
            Ok(Err(e)) => return Err(e.into()),
            Err(e) => return Err(LabError::Results(format!("agent task: {e}"))),
        }
    }
    let _ = collector_stop.send(true);
    match collector.await {
        Ok(r) => r?,
        Err(e) => return Err(LabError::Results(format!("collector task: {e}"))),
    }
    // The last status line: every record is stored now, so its totals are
    // the table's.
    tally.refresh(&reader).await;
    let _ = writeln!(out, "{}", tally.line(started.elapsed(), opts.duration));
    // Read the results back from the store the collector wrote, the way a
    // report would.
    let store = boltwatch_collector::store::Store::open(&data_dir)
        .map_err(|e| LabError::Results(e.to_string()))?;
    let mut records = Vec::new();
    for kind in ["rtt", "thermal", "bandwidth"] {
        let rows = store
            .handle()
            .records(boltwatch_collector::store::RecordFilter {
                kind: Some(kind.into()),
                limit: u32::MAX,
                ..Default::default()
            })
            .await
            .map_err(|e| LabError::Results(e.to_string()))?;
        for row in rows {
            let r = boltwatch_proto::v1::Record::decode(row.raw.as_slice())
                .map_err(|e| LabError::Results(format!("stored record: {e}")))?;
            records.push(r);
        }
    }
    store.close().await;

    let rtt = by_node(&records, |p| match p {
        Payload::Rtt(s) => Some(s),
        _ => None,
    });
    let thermal = by_node(&records, |p| match p {
        Payload::Thermal(t) => Some(t),
        _ => None,
    });
    let links = summary::link_stats(rtt);
    let sensors = summary::sensor_stats(thermal);
    let _ = writeln!(out, "\n{}", summary::render_table(&links, &sensors));
    if opts.bandwidth_interval.is_some() {
        let results = records.iter().filter_map(|r| match &r.payload {
            Some(Payload::Bandwidth(b)) => Some((r.node.as_str(), b)),
            _ => None,
        });
        let _ = writeln!(out, "{}", bandwidth_table(results));
    }
    if undelivered > 0 {
        let _ = writeln!(
            out,
            "warning: {undelivered} records were not delivered before shutdown"
        );
    }
    Ok(())
}

/// Agent `i`'s bandwidth settings: its server is bound by the lab, its
/// peers' servers are at `bw_addrs`; tests only with an interval.
fn lab_bandwidth(
    mut c: AgentConfig,
    interval: Option<Duration>,
    names: &[String],
    bw_addrs: &[SocketAddr],
    i: usize,
) -> AgentConfig {
    c.bandwidth_listen = bw_addrs[i];
    c.bandwidth_peers = names
        .iter()
        .zip(bw_addrs)
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, (n, a))| (n.clone(), *a))
        .collect();
    c.bandwidth_enabled = interval.is_some();
    if let Some(iv) = interval {
        c.bandwidth_interval = iv;
        c.bandwidth_duration = lab_test_duration(iv);
        c.bandwidth_duty_cycle = 0.5;
        c.bandwidth_streams = 2;
    }
    c
}

/// One row per node, peer and direction: tests, failures, mean and
/// slowest Gbit/s of the successful ones.
fn bandwidth_table<'a>(
    results: impl Iterator<Item = (&'a str, &'a boltwatch_proto::v1::BandwidthResult)>,
) -> String {
    use std::collections::BTreeMap;
    /// Tests, failures, Gbit/s of each success.
    type Row = (u64, u64, Vec<f64>);
    let mut rows: BTreeMap<(String, String, i32), Row> = BTreeMap::new();
    for (node, b) in results {
        let row = rows
            .entry((node.to_string(), b.peer.clone(), b.direction))
            .or_default();
        row.0 += 1;
        if b.error.is_empty() {
            row.2.push(b.bits_per_second / 1e9);
        } else {
            row.1 += 1;
        }
    }
    let mut t = format!(
        "{:<24} {:<9} {:>6} {:>6} {:>10} {:>10}\n",
        "bandwidth", "direction", "tests", "failed", "mean Gb/s", "min Gb/s"
    );
    if rows.is_empty() {
        t.push_str("(no bandwidth tests ran; is the lab longer than the interval?)\n");
    }
    for ((node, peer, dir), (n, failed, gbps)) in rows {
        let dir = boltwatch_proto::v1::Direction::try_from(dir)
            .map(|d| {
                d.as_str_name()
                    .trim_start_matches("DIRECTION_")
                    .to_lowercase()
            })
            .unwrap_or_else(|_| dir.to_string());
        let mean = gbps.iter().sum::<f64>() / gbps.len().max(1) as f64;
        let min = gbps.iter().copied().fold(f64::INFINITY, f64::min);
        let fmt = |v: f64| {
            if gbps.is_empty() {
                "-".to_string()
            } else {
                format!("{v:.2}")
            }
        };
        t.push_str(&format!(
            "{:<24} {:<9} {:>6} {:>6} {:>10} {:>10}\n",
            format!("{node} -> {peer}"),
            dir,
            n,
            failed,
            fmt(mean),
            fmt(min)
        ));
    }
    t
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// `(node, payload)` of every record whose payload `pick` selects.
fn by_node<'r, T>(
    records: &'r [boltwatch_proto::v1::Record],
    pick: impl Fn(&'r Payload) -> Option<&'r T>,
) -> Vec<(&'r str, &'r T)> {
    records
        .iter()
        .filter_map(|r| Some((r.node.as_str(), pick(r.payload.as_ref()?)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_agents_point_at_each_others_bandwidth_servers() {
        let names: Vec<String> = ["lab-1", "lab-2", "lab-3"].map(String::from).into();
        let addrs: Vec<SocketAddr> = (0..3)
            .map(|i| format!("127.0.0.1:{}", 7000 + i).parse().unwrap())
            .collect();
        let c = lab_bandwidth(AgentConfig::default(), None, &names, &addrs, 1);
        assert!(!c.bandwidth_enabled, "no tests without an interval");
        assert_eq!(c.bandwidth_listen, addrs[1]);
        assert_eq!(c.bandwidth_peers.len(), 2);
        assert_eq!(c.bandwidth_peers["lab-3"], addrs[2]);
        let c = lab_bandwidth(
            AgentConfig::default(),
            Some(Duration::from_secs(8)),
            &names,
            &addrs,
            0,
        );
        assert!(c.bandwidth_enabled);
        assert_eq!(c.bandwidth_duration, Duration::from_secs(2));
        boltwatch_agent::bandwidth::schedule::plan_config(
            c.bandwidth_interval,
            c.bandwidth_duration,
            c.bandwidth_duty_cycle,
        )
        .expect("a feasible plan");
        assert_eq!(
            lab_test_duration(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
        assert_eq!(
            lab_test_duration(Duration::from_secs(600)),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn bandwidth_table_counts_failures_apart() {
        use boltwatch_proto::v1::{BandwidthResult, Direction};
        let ok = BandwidthResult {
            peer: "lab-2".into(),
            direction: Direction::Upload as i32,
            bits_per_second: 20e9,
            ..Default::default()
        };
        let bad = BandwidthResult {
            error: "refused".into(),
            ..ok.clone()
        };
        let t = bandwidth_table([("lab-1", &ok), ("lab-1", &bad)].into_iter());
        let row = t.lines().find(|l| l.starts_with("lab-1 -> lab-2")).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[3..], ["upload", "2", "1", "20.00", "20.00"], "{t}");
    }
}
