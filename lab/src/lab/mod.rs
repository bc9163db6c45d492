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
//!
//! With `--soak NAME` the run is also a soak in the kept store, ending with
//! its verdict and report ([`soak`]).
//!
//! [`run`] is the steps in order; [`results`] reads the store back and
//! prints the tables.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use boltwatch_agent::config::{Config as AgentConfig, PeerConfig};
use boltwatch_agent::run::Listeners as AgentListeners;
use boltwatch_common::duration::parse as parse_duration;
use tokio::sync::watch;

use boltwatch_store::StoreReader;

use crate::progress::{self, Tally};

mod error;
mod results;
mod soak;

use error::io;
pub use error::LabError;

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
    /// Keep the store here instead of a temporary directory (with --soak
    /// the store is kept either way, in a new directory under the system's
    /// temporary directory when this is not given).
    #[arg(long = "keep", visible_alias = "data-dir", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Run the lab as the soak NAME: stored in the kept store, ended with
    /// its verdict and HTML report, continued with `boltwatch-collector`.
    #[arg(long, value_name = "NAME")]
    pub soak: Option<String>,
    /// The soak's SLO file (TOML, as `soak start --slo`); the defaults
    /// otherwise.
    #[arg(long, value_name = "FILE", requires = "soak")]
    pub slo: Option<PathBuf>,
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

/// A random 128-bit bearer token, hex.
pub fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Runs the lab, printing progress (as `style` says) and the final table
/// to `out`: start the collector, then the agents pointed at it and at each
/// other, show the status until the duration is up (or Ctrl-C), stop
/// everything, and read the store back into the tables.
pub async fn run(
    opts: LabOptions,
    style: progress::Style,
    out: &mut (impl Write + Send),
) -> Result<(), LabError> {
    check_options(&opts)?;
    let data = DataDir::new(opts.data_dir.as_deref(), opts.soak.as_deref())?;
    let db = data.path().join("boltwatch.db");
    let lab_soak = match &opts.soak {
        Some(name) => Some(soak::LabSoak::check(name, opts.slo.as_deref(), &db)?),
        None => None,
    };
    let nodes = Nodes::new(opts.nodes);
    let collector = Collector::start(&opts, data.path(), &nodes).await?;
    let agents = Agents::start(&opts, data.path(), &nodes, collector.grpc_addr)?;
    write_banner(out, &opts, collector.http_addr, data.path());
    let mut status = Status::new(data.path(), style, opts.duration);
    let mut ended = Ended::Done;
    if let Some(s) = &lab_soak {
        ended = status
            .until_measuring(nodes.len() * (nodes.len() - 1))
            .await;
        s.start(&db)?;
    }
    if ended == Ended::Done {
        ended = status.until_done(out).await;
    }
    if ended == Ended::Interrupted {
        let _ = writeln!(out, "interrupted; stopping early");
    }
    // The soak ends while every link still measures, so shutting down is
    // not an outage of it.
    if let Some(s) = &lab_soak {
        s.stop(&db)?;
    }
    // Agents first, so their last records are flushed and acknowledged.
    let undelivered = agents.stop().await?;
    collector.stop().await?;
    // The last status line: every record is stored now, so its totals are
    // the table's.
    status.last_line(out).await;
    let records = results::stored_records(data.path()).await?;
    results::write_tables(out, &records, opts.bandwidth_interval.is_some());
    if undelivered > 0 {
        let _ = writeln!(
            out,
            "warning: {undelivered} records were not delivered before shutdown"
        );
    }
    if let Some(s) = &lab_soak {
        finish_soak(out, s, &opts, data.path(), &db)?;
    }
    Ok(())
}

/// The soak's verdict, its HTML page beside the store, and the commands
/// that go on from it.
fn finish_soak(
    out: &mut impl Write,
    s: &soak::LabSoak,
    opts: &LabOptions,
    dir: &Path,
    db: &Path,
) -> Result<(), LabError> {
    let r = s.report(db)?;
    let _ = write!(out, "\n{}", soak::verdict_text(&r));
    let page = s.write_html(&r, dir)?;
    let mut lab_args = format!("--duration {:?} --nodes {}", opts.duration, opts.nodes);
    if let Some(slo) = &opts.slo {
        lab_args.push_str(&format!(" --slo {}", slo.display()));
    }
    soak::NextSteps {
        soak: opts.soak.as_deref().unwrap_or_default(),
        store: dir,
        page: &page,
        lab_args,
    }
    .write(out);
    Ok(())
}

/// Refuses node counts outside 2..=16 and bandwidth intervals too short
/// for a test.
fn check_options(opts: &LabOptions) -> Result<(), LabError> {
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
    Ok(())
}

/// Where the collector stores: `--keep`, or a temporary directory removed
/// when this is dropped, or kept for a soak.
struct DataDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl DataDir {
    fn new(given: Option<&Path>, soak: Option<&str>) -> Result<DataDir, LabError> {
        if let Some(d) = given {
            // Absolute, so the commands printed at the end work from
            // anywhere.
            let path = std::path::absolute(d).map_err(io(format!("resolving {}", d.display())))?;
            return Ok(DataDir { path, _temp: None });
        }
        let temp = tempfile::Builder::new()
            .prefix(&format!("boltwatch-lab-{}-", soak.unwrap_or("run")))
            .tempdir()
            .map_err(io("creating a temporary data dir"))?;
        if soak.is_some() {
            return Ok(DataDir {
                path: temp.keep(),
                _temp: None,
            });
        }
        Ok(DataDir {
            path: temp.path().to_path_buf(),
            _temp: Some(temp),
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// The lab's nodes, `lab-1`..`lab-N`, each with a fresh token of its own.
struct Nodes {
    names: Vec<String>,
    tokens: Vec<String>,
}

impl Nodes {
    fn new(n: usize) -> Nodes {
        let names: Vec<String> = (1..=n).map(|i| format!("lab-{i}")).collect();
        let tokens = names.iter().map(|_| new_token()).collect();
        Nodes { names, tokens }
    }

    fn len(&self) -> usize {
        self.names.len()
    }
}

/// The collector task, on a free gRPC port and the `/metrics` address of
/// the options.
struct Collector {
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), boltwatch_collector::Error>>,
}

impl Collector {
    /// Binds its ports and spawns it, accepting exactly the lab's nodes.
    async fn start(opts: &LabOptions, data_dir: &Path, nodes: &Nodes) -> Result<Self, LabError> {
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
        let auth = boltwatch_collector::ingest::auth::AuthTokens::from_pairs(
            nodes
                .names
                .iter()
                .cloned()
                .zip(nodes.tokens.iter().cloned()),
        );
        let config = boltwatch_collector::Config {
            auth: Some(auth),
            data_dir: data_dir.to_path_buf(),
            grpc_listen: grpc_addr,
            http_listen: http_addr,
            ..boltwatch_collector::Config::default()
        };
        let (stop, stopped) = watch::channel(false);
        let listeners = boltwatch_collector::Listeners {
            grpc,
            http,
            api: None,
        };
        let task = tokio::spawn(boltwatch_collector::run(
            config,
            listeners,
            wait_true(stopped),
        ));
        Ok(Collector {
            grpc_addr,
            http_addr,
            stop,
            task,
        })
    }

    /// Stops it and waits for its run to end.
    async fn stop(self) -> Result<(), LabError> {
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(r) => Ok(r?),
            Err(e) => Err(LabError::Results(format!("collector task: {e}"))),
        }
    }
}

/// One agent's sockets, bound by the lab before any agent starts.
struct Bound {
    listeners: AgentListeners,
    stamp: SocketAddr,
    bandwidth: SocketAddr,
}

impl Bound {
    fn new() -> Result<Bound, LabError> {
        let sock =
            std::net::UdpSocket::bind("127.0.0.1:0").map_err(io("binding a STAMP reflector"))?;
        let stamp = sock.local_addr().map_err(io("reflector address"))?;
        let bw =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a bandwidth server"))?;
        let bandwidth = bw.local_addr().map_err(io("bandwidth server address"))?;
        Ok(Bound {
            listeners: AgentListeners {
                stamp: sock,
                bandwidth: Some(bw),
                metrics: None,
            },
            stamp,
            bandwidth,
        })
    }
}

/// The agent tasks, a full mesh.
struct Agents {
    stop: watch::Sender<bool>,
    tasks: Vec<AgentTask>,
}

type AgentTask =
    tokio::task::JoinHandle<Result<boltwatch_agent::run::Stopped, boltwatch_agent::error::Error>>;

impl Agents {
    /// Binds every agent's reflector and bandwidth server first, so each
    /// agent knows its peers' addresses, then spawns them all.
    fn start(
        opts: &LabOptions,
        data_dir: &Path,
        nodes: &Nodes,
        collector: SocketAddr,
    ) -> Result<Self, LabError> {
        let bound = (0..nodes.len())
            .map(|_| Bound::new())
            .collect::<Result<Vec<_>, _>>()?;
        let addrs: Vec<SocketAddr> = bound.iter().map(|b| b.stamp).collect();
        let bw_addrs: Vec<SocketAddr> = bound.iter().map(|b| b.bandwidth).collect();
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        for (i, b) in bound.into_iter().enumerate() {
            let config = agent_config(opts, data_dir, nodes, collector, &addrs, i);
            let config = lab_bandwidth(config, opts.bandwidth_interval, &nodes.names, &bw_addrs, i);
            tasks.push(tokio::spawn(boltwatch_agent::run::run(
                config,
                b.listeners,
                wait_true(stopped.clone()),
            )));
        }
        Ok(Agents { stop, tasks })
    }

    /// Stops them all and waits for each; the records they could not
    /// deliver before shutdown.
    async fn stop(self) -> Result<usize, LabError> {
        let _ = self.stop.send(true);
        let mut undelivered = 0;
        for a in self.tasks {
            match a.await {
                Ok(Ok(stopped)) => undelivered += stopped.undelivered,
                Ok(Err(e)) => return Err(e.into()),
                Err(e) => return Err(LabError::Results(format!("agent task: {e}"))),
            }
        }
        Ok(undelivered)
    }
}

/// Agent `i`'s probing settings: its reflector at `addrs[i]`, every other
/// node a peer, streaming to `collector` with its own token.
fn agent_config(
    opts: &LabOptions,
    data_dir: &Path,
    nodes: &Nodes,
    collector: SocketAddr,
    addrs: &[SocketAddr],
    i: usize,
) -> AgentConfig {
    let names = &nodes.names;
    AgentConfig {
        node: names[i].clone(),
        collector: format!("http://{collector}"),
        listen: addrs[i],
        peers: (0..names.len())
            .filter(|&j| j != i)
            .map(|j| PeerConfig {
                name: names[j].clone(),
                addr: addrs[j],
                interface: None,
            })
            .collect(),
        probe_interval: opts.probe_interval,
        // Nothing listens for SSH on loopback peers here.
        services: Vec::new(),
        spool_dir: data_dir.join("spool").join(&names[i]),
        token: Some(nodes.tokens[i].clone()),
        ..AgentConfig::default()
    }
}

/// What the lab runs and where to look while it does.
fn write_banner(out: &mut impl Write, opts: &LabOptions, http: SocketAddr, data_dir: &Path) {
    let _ = writeln!(
        out,
        "boltwatch lab: {} agents on loopback, full mesh, probing every {:?} for {:?}\n  metrics: http://{http}/metrics\n  nodes:   http://{http}/api/v1/nodes\n  store:   {}",
        opts.nodes,
        opts.probe_interval,
        opts.duration,
        data_dir.display()
    );
    let _ = out.flush();
}

/// How the status loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The duration is up.
    Done,
    /// Ctrl-C.
    Interrupted,
}

/// The status line while the lab runs, read from the store.
struct Status {
    reader: StoreReader,
    tally: Tally,
    style: progress::Style,
    started: tokio::time::Instant,
    duration: Duration,
}

impl Status {
    fn new(data_dir: &Path, style: progress::Style, duration: Duration) -> Status {
        Status {
            reader: StoreReader::new(data_dir),
            tally: Tally::default(),
            style,
            started: tokio::time::Instant::now(),
            duration,
        }
    }

    /// Shows the status every period until the duration is up or Ctrl-C.
    async fn until_done(&mut self, out: &mut impl Write) -> Ended {
        let mut ticks = tokio::time::interval(self.style.period());
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let end = tokio::time::sleep(self.duration);
        tokio::pin!(end);
        let ended = loop {
            tokio::select! {
                _ = &mut end => break Ended::Done,
                _ = tokio::signal::ctrl_c() => break Ended::Interrupted,
                _ = ticks.tick() => {
                    self.tally.refresh(&self.reader).await;
                    let line = self.tally.line(self.started.elapsed(), self.duration);
                    progress::show(out, self.style, &line);
                }
            }
        };
        if self.style == progress::Style::Terminal {
            let _ = writeln!(out);
        }
        ended
    }

    /// Waits until `links` directed links have stored RTT windows (or 30 s,
    /// or Ctrl-C), then restarts the clock: the soak and its duration
    /// start when every link measures.
    async fn until_measuring(&mut self, links: usize) -> Ended {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
        let ended = loop {
            self.tally.refresh(&self.reader).await;
            if self.tally.links() >= links || tokio::time::Instant::now() >= give_up {
                break Ended::Done;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = tokio::signal::ctrl_c() => break Ended::Interrupted,
            }
        };
        self.started = tokio::time::Instant::now();
        ended
    }

    /// One more status line, as a plain line.
    async fn last_line(&mut self, out: &mut impl Write) {
        self.tally.refresh(&self.reader).await;
        let line = self.tally.line(self.started.elapsed(), self.duration);
        let _ = writeln!(out, "{line}");
    }
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
        .map(|(_, (n, a))| (n.clone(), (*a).into()))
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

async fn wait_true(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
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
        assert_eq!(c.bandwidth_peers["lab-3"].addr, addrs[2]);
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
}
