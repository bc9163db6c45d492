//! `boltwatch-collector lab`: a real local soak on loopback. One collector
//! and N agents in one process, a full mesh of STAMP probing, the same code
//! paths as production (real UDP sockets with kernel timestamps, real gRPC,
//! the real SQLite store, the real `/metrics`). At the end it reads the
//! stored records back and prints a table per link direction.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use boltwatch_agent::config::{Config as AgentConfig, PeerConfig};
use boltwatch_agent::run::Listeners as AgentListeners;
use boltwatch_proto::v1::record::Payload;
use prost::Message;
use tokio::sync::watch;

use crate::report::summary;

/// Lab settings.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// How long the agents probe.
    pub duration: Duration,
    /// Number of agents (full mesh).
    pub nodes: usize,
    /// Probe interval of every agent.
    pub probe_interval: Duration,
    /// Where `/metrics` is served.
    pub http_listen: SocketAddr,
    /// Store directory; a temporary one (removed at the end) when `None`.
    pub data_dir: Option<PathBuf>,
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
    Collector(#[from] crate::Error),
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

/// Runs the lab, printing progress and the final table to `out`.
pub async fn run(opts: LabOptions, out: &mut (impl Write + Send)) -> Result<(), LabError> {
    if !(2..=16).contains(&opts.nodes) {
        return Err(LabError::Options(format!(
            "--nodes {} is outside 2..16",
            opts.nodes
        )));
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
    let auth = crate::ingest::auth::AuthTokens::from_pairs(
        names.iter().cloned().zip(tokens.iter().cloned()),
    );
    let config = crate::config::Config {
        auth: Some(auth),
        data_dir: data_dir.clone(),
        grpc_listen: grpc_addr,
        http_listen: http_addr,
        ..crate::config::Config::default()
    };
    let (collector_stop, collector_rx) = watch::channel(false);
    let collector = tokio::spawn(crate::run(
        config,
        crate::Listeners { grpc, http },
        wait_true(collector_rx),
    ));

    // Bind every reflector first so each agent knows its peers' addresses.
    let mut listeners = Vec::new();
    for _ in 0..opts.nodes {
        let sock =
            std::net::UdpSocket::bind("127.0.0.1:0").map_err(io("binding a STAMP reflector"))?;
        let addr = sock.local_addr().map_err(io("reflector address"))?;
        listeners.push((AgentListeners { stamp: sock }, addr));
    }
    let addrs: Vec<SocketAddr> = listeners.iter().map(|(_, a)| *a).collect();
    let (agents_stop, agents_rx) = watch::channel(false);
    let mut agents = Vec::new();
    for (i, (l, _)) in listeners.into_iter().enumerate() {
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
    tokio::select! {
        _ = tokio::time::sleep(opts.duration) => {}
        _ = tokio::signal::ctrl_c() => { let _ = writeln!(out, "interrupted; stopping early"); }
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
    // Read the results back from the store the collector wrote, the way a
    // report would.
    let store =
        crate::store::Store::open(&data_dir).map_err(|e| LabError::Results(e.to_string()))?;
    let mut records = Vec::new();
    for kind in ["rtt", "thermal"] {
        let rows = store
            .handle()
            .records(crate::store::RecordFilter {
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

    let rtt: Vec<(&str, &boltwatch_proto::v1::RttSummary)> = records
        .iter()
        .filter_map(|r| match &r.payload {
            Some(Payload::Rtt(s)) => Some((r.node.as_str(), s)),
            _ => None,
        })
        .collect();
    let thermal: Vec<(&str, &boltwatch_proto::v1::ThermalReading)> = records
        .iter()
        .filter_map(|r| match &r.payload {
            Some(Payload::Thermal(t)) => Some((r.node.as_str(), t)),
            _ => None,
        })
        .collect();
    let links = summary::link_stats(rtt);
    let sensors = summary::sensor_stats(thermal);
    let _ = writeln!(out, "\n{}", summary::render_table(&links, &sensors));
    if undelivered > 0 {
        let _ = writeln!(
            out,
            "warning: {undelivered} records were not delivered before shutdown"
        );
    }
    Ok(())
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}
