//! Collector ingest with many simulated agents at once, all over TLS, for
//! `bench/ingest-tls.sh`, which starts the real `boltwatch-collector`
//! (release) in its own process so its CPU and memory can be read from
//! /proc apart from this load generator's.
//!
//! `certs DIR` writes a throwaway CA and a server certificate for
//! 127.0.0.1/localhost (rcgen, as the TLS tests do). `run` connects
//! `--agents` streams, one TLS connection each (as each agent has), every
//! one a node of its own with the record mix of a real agent: one RTT
//! summary per peer per second, one counters record per interface per
//! second, a thermal reading every 5 s, sent once a second and awaited for
//! its Ack, as the agent does (what came due meanwhile goes into the next
//! batch, one batch in flight). The agents' seconds are spread over the
//! second so the load is as even as independent agents make it. After all
//! have connected and `--warmup` seconds passed, it measures for
//! `--seconds` and prints connected streams, records/s acked, the
//! collector's CPU % (of one core) and RSS, the ack latency p50/p99 and the
//! store's commits. Everything is bounded: agents, seconds, every wait.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use boltwatch_proto::v1::telemetry_client::TelemetryClient;
use boltwatch_proto::v1::{
    agent_message, collector_message, AgentMessage, CollectorMessage, Hello, Peer, RecordBatch,
};
use clap::{Parser, Subcommand};
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

mod procfs;
mod records;

use procfs::{clock_ticks_per_second, cpu_ticks, cpu_ticks_self, proc_memory};
use records::Seconds;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Longest any one connect, Welcome or Ack may take; past it the stream
/// counts as failed.
const WAIT: Duration = Duration::from_secs(30);
/// Connects in flight at once while ramping up (a TLS handshake each).
const RAMP: usize = 64;
/// The agent's largest batch (agent/src/transport).
const BATCH_MAX: usize = 512;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Writes ca.pem, server.pem and server.key into DIR.
    Certs { dir: PathBuf },
    /// Runs the load against a TLS collector.
    Run(Load),
}

#[derive(clap::Args, Clone)]
struct Load {
    /// The collector's gRPC URL, https://127.0.0.1:PORT (loopback only).
    #[arg(long)]
    url: String,
    /// CA that signed the collector's certificate.
    #[arg(long)]
    ca: PathBuf,
    /// Simulated agents, each its own node and TLS connection.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=4000))]
    agents: u32,
    /// Measured seconds once every agent is connected.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=600))]
    seconds: u64,
    /// Seconds of load after the last connect before measuring.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=120))]
    warmup: u64,
    /// Peers each agent probes (one RTT summary each per second).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=64))]
    peers: u32,
    /// Interfaces each agent counts (one counters record each per second).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=16))]
    interfaces: u32,
    /// The collector's pid, for CPU and RSS from /proc.
    #[arg(long)]
    collector_pid: u32,
    /// The collector's /metrics URL, to count the agents it reports up.
    #[arg(long)]
    metrics: String,
}

fn main() -> Result<(), BoxError> {
    match Cli::parse().cmd {
        Cmd::Certs { dir } => certs(&dir),
        Cmd::Run(load) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(run(load)),
    }
}

fn certs(dir: &Path) -> Result<(), BoxError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, SanType,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "boltwatch bench CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    std::fs::write(dir.join("ca.pem"), ca.self_signed(&ca_key)?.pem())?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()])?;
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &Issuer::from_params(&ca, &ca_key))?;
    std::fs::write(dir.join("server.pem"), cert.pem())?;
    std::fs::write(dir.join("server.key"), key.serialize_pem())?;
    Ok(())
}

/// What the agents share with the main task.
#[derive(Default)]
struct Shared {
    /// Set once every agent has connected or failed: acks count from here.
    measuring: AtomicBool,
    stop: AtomicBool,
    connected: AtomicUsize,
    failed: AtomicUsize,
    first_error: Mutex<Option<String>>,
    /// Records in batches acked while measuring.
    acked_records: AtomicU64,
}

impl Shared {
    fn fail(&self, e: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.first_error.lock().unwrap().get_or_insert(e);
    }
}

async fn run(load: Load) -> Result<(), BoxError> {
    let endpoint = endpoint(&load)?;
    let shared = Arc::new(Shared::default());
    let load = Arc::new(load);
    let started = Instant::now();
    let tasks = spawn_agents(&endpoint, &load, &shared);
    wait_connected(&load, &shared, started).await;
    let ramp_secs = started.elapsed().as_secs_f64();
    // The Hellos' own commits and the first batches are not the steady state.
    tokio::time::sleep(Duration::from_secs(load.warmup)).await;
    let window = measure(&load, &shared).await?;
    shared.stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for t in tasks {
        if let Ok(Ok(Ok(l))) = tokio::time::timeout(WAIT * 2, t).await {
            latencies.extend(l);
        }
    }
    latencies.sort();
    print_report(&load, &shared, ramp_secs, &window, &latencies)
}

/// The collector's TLS endpoint, loopback only, trusting `--ca`.
fn endpoint(load: &Load) -> Result<Endpoint, BoxError> {
    let url = load.url.clone();
    let host = url.trim_start_matches("https://");
    if !(host.starts_with("127.") || host.starts_with("localhost:") || host.starts_with("[::1]")) {
        return Err(format!("{url}: loopback only").into());
    }
    let tls =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(std::fs::read(&load.ca)?));
    Ok(Endpoint::from_shared(url)?
        .connect_timeout(WAIT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(10))
        .tls_config(tls)?)
}

type AgentTask = tokio::task::JoinHandle<Result<Vec<Duration>, ()>>;

/// Every agent's task. Ramp up: at most RAMP handshakes at once, each
/// agent then keeps going.
fn spawn_agents(endpoint: &Endpoint, load: &Arc<Load>, shared: &Arc<Shared>) -> Vec<AgentTask> {
    let ramp = Arc::new(tokio::sync::Semaphore::new(RAMP));
    (0..load.agents)
        .map(|i| {
            let (endpoint, shared, load, ramp) =
                (endpoint.clone(), shared.clone(), load.clone(), ramp.clone());
            tokio::spawn(async move { agent(i, endpoint, &load, &shared, ramp).await })
        })
        .collect()
}

/// Until every agent has connected or failed, or the ramp's deadline.
async fn wait_connected(load: &Load, shared: &Shared, started: Instant) {
    let ramp_deadline = started + WAIT * (load.agents / RAMP as u32 + 2);
    while shared.connected.load(Ordering::Relaxed) + shared.failed.load(Ordering::Relaxed)
        < load.agents as usize
        && Instant::now() < ramp_deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the measured window saw of the collector and this process.
struct Window {
    /// Its length.
    secs: f64,
    /// CPU ticks of the collector and of this process in it.
    collector_ticks: u64,
    self_ticks: u64,
    /// The collector's (VmRSS, VmHWM) at its end, KiB.
    memory: (u64, u64),
    /// /metrics at its start and end.
    before: Scrape,
    after: Scrape,
}

/// Counts acks for `--seconds`, with the collector's CPU and /metrics
/// read on either side.
async fn measure(load: &Load, shared: &Shared) -> Result<Window, BoxError> {
    let before = scrape(&load.metrics).await?;
    let cpu0 = (
        cpu_ticks(load.collector_pid)?,
        cpu_ticks_self()?,
        Instant::now(),
    );
    shared.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(load.seconds)).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let (ticks1, self1, at1) = (
        cpu_ticks(load.collector_pid)?,
        cpu_ticks_self()?,
        Instant::now(),
    );
    let secs = at1.duration_since(cpu0.2).as_secs_f64();
    let memory = proc_memory(load.collector_pid)?;
    let after = scrape(&load.metrics).await?;
    Ok(Window {
        secs,
        collector_ticks: ticks1 - cpu0.0,
        self_ticks: self1 - cpu0.1,
        memory,
        before,
        after,
    })
}

/// The figures: streams, records/s, CPU and RSS, ack latency, commits.
fn print_report(
    load: &Load,
    shared: &Shared,
    ramp_secs: f64,
    w: &Window,
    latencies: &[Duration],
) -> Result<(), BoxError> {
    let window = w.secs;
    let pct = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map(|d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
            .unwrap_or_else(|| "-".into())
    };
    let hz = clock_ticks_per_second()?;
    let acked = shared.acked_records.load(Ordering::Relaxed);
    let per_agent = load.peers as f64 + load.interfaces as f64 + 0.2;
    println!(
        "agents {} (each {} peers, {} interfaces: {per_agent:.1} records/s offered, one batch/s), TLS, measured {window:.1} s after {}s warm-up",
        load.agents, load.peers, load.interfaces, load.warmup
    );
    println!(
        "connected streams {} of {} in {ramp_secs:.1} s (failed {}); collector reports {} agents up",
        shared.connected.load(Ordering::Relaxed),
        load.agents,
        shared.failed.load(Ordering::Relaxed),
        w.after.up,
    );
    if let Some(e) = shared.first_error.lock().unwrap().as_ref() {
        println!("first stream error: {e}");
    }
    println!(
        "records/s acked {:.0} (offered {:.0}); batches acked {}, {:.1} records each",
        acked as f64 / window,
        per_agent * shared.connected.load(Ordering::Relaxed) as f64,
        latencies.len(),
        acked as f64 / latencies.len().max(1) as f64,
    );
    println!(
        "collector CPU {:.1} % of one core, RSS {} MiB (peak {} MiB); load generator CPU {:.1} %",
        w.collector_ticks as f64 / hz / window * 100.0,
        w.memory.0 / 1024,
        w.memory.1 / 1024,
        w.self_ticks as f64 / hz / window * 100.0,
    );
    println!("ack latency p50 {} p99 {}", pct(0.50), pct(0.99));
    let commits = w.after.commits - w.before.commits;
    println!(
        "store commits {:.0}/s, mean {:.2} ms each (boltwatch_store_commit_seconds)",
        commits / window,
        (w.after.commit_seconds - w.before.commit_seconds) / commits.max(1.0) * 1e3
    );
    Ok(())
}

/// One simulated agent: connect, Hello, Welcome, then a batch a second,
/// each awaited for its Ack. Returns the ack latencies seen while measuring.
async fn agent(
    i: u32,
    endpoint: Endpoint,
    load: &Load,
    shared: &Shared,
    ramp: Arc<tokio::sync::Semaphore>,
) -> Result<Vec<Duration>, ()> {
    let node = format!("bench-{i:04}");
    let peers = cluster_peers(i, load.peers);
    let permit = ramp.acquire_owned().await.map_err(|_| ())?;
    let (tx, mut rx) = match open(endpoint, hello(i, &node, &peers)).await {
        Ok(s) => s,
        Err(e) => {
            shared.fail(format!("{node}: {e}"));
            return Err(());
        }
    };
    drop(permit);
    shared.connected.fetch_add(1, Ordering::Relaxed);

    // Spread the agents' seconds over the second.
    let phase = Duration::from_micros(u64::from(i) * 1_000_000 / u64::from(load.agents));
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + phase, Duration::from_secs(1));
    let mut seconds = Seconds::new(&node, i, &peers, load.interfaces);
    let mut latencies = Vec::with_capacity(load.seconds as usize + 8);
    loop {
        tick.tick().await;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        // Like the agent's queue: every second that came due while the last
        // batch waited for its Ack goes into the next batch (up to the
        // agent's 512 records), so a slow Ack makes batches larger, not
        // the backlog longer.
        let mut records = seconds.next_second();
        while records.len() < BATCH_MAX && tick.tick().now_or_never().is_some() {
            records.extend(seconds.next_second());
        }
        let count = records.len() as u64;
        let sent = Instant::now();
        if let Err(e) = send_acked(&tx, &mut rx, records).await {
            shared.connected.fetch_sub(1, Ordering::Relaxed);
            shared.fail(format!("{node}: {e}"));
            return Ok(latencies);
        }
        if shared.measuring.load(Ordering::Relaxed) {
            latencies.push(sent.elapsed());
            shared.acked_records.fetch_add(count, Ordering::Relaxed);
        }
    }
    Ok(latencies)
}

/// The peers agent `i` probes: nodes come in clusters of peers+1, and an
/// agent probes the rest of its own.
fn cluster_peers(i: u32, peers: u32) -> Vec<String> {
    let cluster = i / (peers + 1);
    (0..=peers)
        .map(|k| cluster * (peers + 1) + k)
        .filter(|&k| k != i)
        .map(|k| format!("bench-{k:04}"))
        .collect()
}

/// Agent `i`'s Hello as `node`, with its peers.
fn hello(i: u32, node: &str, peers: &[String]) -> Hello {
    Hello {
        schema_revision: 1,
        node: node.to_string(),
        boot_id: format!("boot-{i}"),
        agent_version: "ingest-tls-bench".into(),
        os: "linux".into(),
        peers: peers
            .iter()
            .map(|p| Peer {
                name: p.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Sends one batch and waits (at most WAIT) for its Ack.
async fn send_acked(
    tx: &mpsc::Sender<AgentMessage>,
    rx: &mut tonic::Streaming<CollectorMessage>,
    records: Vec<boltwatch_proto::v1::Record>,
) -> Result<(), String> {
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Batch(RecordBatch { records })),
    })
    .await
    .map_err(|_| "stream closed".to_string())?;
    match tokio::time::timeout(WAIT, rx.message()).await {
        Ok(Ok(Some(m))) if matches!(m.msg, Some(collector_message::Msg::Ack(_))) => Ok(()),
        Ok(Ok(m)) => Err(format!("no Ack but {m:?}")),
        Ok(Err(status)) => Err(format!("{status}")),
        Err(_) => Err(format!("no Ack within {WAIT:?}")),
    }
}

type Stream = (
    mpsc::Sender<AgentMessage>,
    tonic::Streaming<CollectorMessage>,
);

/// Connects (TLS), sends Hello and waits for the Welcome.
async fn open(endpoint: Endpoint, hello: Hello) -> Result<Stream, String> {
    let causes = |e: &dyn std::error::Error| {
        let mut s = e.to_string();
        let mut next = e.source();
        while let Some(c) = next {
            s = format!("{s}: {c}");
            next = c.source();
        }
        s
    };
    let channel = endpoint.connect().await.map_err(|e| causes(&e))?;
    let mut client = TelemetryClient::new(channel);
    let (tx, out) = mpsc::channel(2);
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Hello(hello)),
    })
    .await
    .map_err(|_| "stream closed".to_string())?;
    let mut inbound = tokio::time::timeout(WAIT, client.stream(ReceiverStream::new(out)))
        .await
        .map_err(|_| "no response to the stream".to_string())?
        .map_err(|s| s.to_string())?
        .into_inner();
    match tokio::time::timeout(WAIT, inbound.message()).await {
        Ok(Ok(Some(m))) if matches!(m.msg, Some(collector_message::Msg::Welcome(_))) => {
            Ok((tx, inbound))
        }
        Ok(Ok(m)) => Err(format!("no Welcome but {m:?}")),
        Ok(Err(status)) => Err(status.to_string()),
        Err(_) => Err(format!("no Welcome within {WAIT:?}")),
    }
}

/// What the collector's /metrics says about the load.
struct Scrape {
    /// Agents connected.
    up: usize,
    /// `boltwatch_store_commit_seconds` count and sum.
    commits: f64,
    commit_seconds: f64,
}

async fn scrape(url: &str) -> Result<Scrape, BoxError> {
    let body =
        tokio::time::timeout(WAIT, async { reqwest::get(url).await?.text().await }).await??;
    let value = |name: &str| {
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(Scrape {
        up: body
            .lines()
            .filter(|l| l.starts_with("boltwatch_agent_up{") && l.ends_with(" 1"))
            .count(),
        commits: value("boltwatch_store_commit_seconds_count"),
        commit_seconds: value("boltwatch_store_commit_seconds_sum"),
    })
}
