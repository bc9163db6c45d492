//! A running boltwatch cluster on the test bed: a real collector on the host
//! (gRPC reachable from every node's management network), and a real agent
//! inside each node namespace probing its peers over the bed's links. Used
//! by the link-truth acceptance tests and the detection-latency bench.
//!
//! Dropping a [`Cluster`] kills the agents and the collector, then tears the
//! bed down (namespaces, veths, nft tables), also when a test panics.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::procs::{bin, sample, wait_for, Collector, Proc};
use crate::{BedOptions, TestBed};

/// UDP port of every agent's STAMP reflector inside its namespace.
pub const REFLECTOR_PORT: u16 = 8620;

/// Wall-clock now, unix ns (to compare with agent timestamps: the nodes
/// share the host's clock).
pub use boltwatch_common::clock::now_unix_ns;

/// A node's agent name: `n<index>`.
pub fn node_name(i: usize) -> String {
    format!("n{i}")
}

/// How the agents run.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// `--probe-interval`.
    pub probe_interval: String,
    /// Extra `run` arguments per node index (e.g. `--service`,
    /// `--sysfs-root`).
    pub extra: Vec<Vec<String>>,
    /// Config file lines for every agent (intervals without CLI flags).
    pub config: String,
    /// How the bed is built.
    pub bed: BedOptions,
}

impl Default for AgentOptions {
    fn default() -> AgentOptions {
        AgentOptions {
            probe_interval: "20ms".into(),
            extra: Vec::new(),
            config: String::new(),
            bed: BedOptions::default(),
        }
    }
}

/// Collector, agents and the bed they run on. Field order is drop order:
/// agents first, then the collector, then the bed.
pub struct Cluster {
    /// One agent per node (`None` once stopped).
    pub agents: Vec<Option<Proc>>,
    /// The collector on the host.
    pub collector: Collector,
    /// The namespaces.
    pub bed: TestBed,
    /// Logs, config files and the store.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Builds an `nodes`-node bed, starts the collector and one agent per
    /// node (every other node as a peer, no service checks unless `extra`
    /// asks), and waits until every agent's probes are answered.
    pub fn start(nodes: usize, opts: &AgentOptions) -> Cluster {
        let bed = TestBed::with_options(nodes, opts.bed)
            .unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
        let dir = tempfile::tempdir().expect("temp dir");
        let collector = Collector::for_bed(dir.path());
        let config = dir.path().join("agent.toml");
        std::fs::write(&config, &opts.config).expect("agent config");
        let mut agents = Vec::new();
        for i in 0..nodes {
            let extra = opts.extra.get(i).cloned().unwrap_or_default();
            agents.push(Some(start_agent(
                &bed,
                dir.path(),
                &collector,
                i,
                &config,
                &opts.probe_interval,
                &extra,
            )));
        }
        let c = Cluster {
            agents,
            collector,
            bed,
            dir,
        };
        c.wait_all_probing();
        c
    }

    /// Waits until every agent has a stream open to the collector and has
    /// had replies from every peer. Both: after a collector restart the
    /// probe counters come back from the store at once, before the agents,
    /// in their retry backoff, reconnect.
    pub fn wait_all_probing(&self) {
        let n = self.bed.nodes().len();
        wait_for(
            "every agent connected and probing every peer",
            Duration::from_secs(60),
            || {
                let m = self.collector.metrics();
                (0..n).all(|i| {
                    let up = sample(&m, "boltwatch_agent_up", &[("node", &node_name(i))]);
                    up == Some(1.0)
                        && (0..n).filter(|j| *j != i).all(|j| {
                            sample(
                                &m,
                                "boltwatch_probe_received_total",
                                &[("node", &node_name(i)), ("peer", &node_name(j))],
                            )
                            .unwrap_or(0.0)
                                >= 10.0
                        })
                })
            },
        );
    }

    /// `GET /api/v1/records?node=..&kind=..` (all of them).
    pub fn records(&self, node: usize, kind: &str) -> Vec<Value> {
        let path = format!(
            "/api/v1/records?node={}&kind={kind}&limit=100000",
            node_name(node)
        );
        self.collector.json(&path)["records"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `GET /api/v1/outages?node=..&since=..`.
    pub fn outages(&self, node: usize, since: u64) -> Vec<Value> {
        let path = format!("/api/v1/outages?node={}&since={since}", node_name(node));
        self.collector.json(&path)["outages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `/metrics` text.
    pub fn metrics(&self) -> String {
        self.collector.metrics()
    }

    /// A metric of the pair (node, peer), or `None` if absent.
    pub fn pair_metric(&self, name: &str, node: usize, peer: usize) -> Option<f64> {
        sample(
            &self.metrics(),
            name,
            &[("node", &node_name(node)), ("peer", &node_name(peer))],
        )
    }

    /// The agent logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for a in self.agents.iter().flatten() {
            s.push_str(&format!("--- {}\n{}\n", a.name, tail(&a.log_text(), 40)));
        }
        s
    }

    /// Where the test's files are.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn start_agent(
    bed: &TestBed,
    dir: &Path,
    collector: &Collector,
    i: usize,
    config: &Path,
    interval: &str,
    extra: &[String],
) -> Proc {
    let node = bed.node(i);
    let mut args: Vec<String> = vec![
        "run".into(),
        "--config".into(),
        config.display().to_string(),
        "--node".into(),
        node_name(i),
        "--collector".into(),
        format!("http://{}:{}", node.host_addr, collector.grpc.port()),
        "--listen".into(),
        format!("0.0.0.0:{REFLECTOR_PORT}"),
        "--probe-interval".into(),
        interval.into(),
    ];
    for j in (0..bed.nodes().len()).filter(|j| *j != i) {
        let addr = bed.link_addr(j, i).expect("link between every two nodes");
        args.push("--peer".into());
        args.push(format!("{}={addr}:{REFLECTOR_PORT}", node_name(j)));
    }
    if !extra.iter().any(|a| a == "--service") {
        args.push("--no-services".into());
    }
    // Each test its own spool: a shared default would replay another
    // run's records into this collector.
    if !extra.iter().any(|a| a == "--spool-dir") {
        args.push("--spool-dir".into());
        args.push(
            dir.join(format!("spool-{}", node_name(i)))
                .display()
                .to_string(),
        );
    }
    args.extend(extra.iter().cloned());
    let exe = bin("boltwatch-agent");
    let cmd = bed
        .exec(i, &exe.to_string_lossy(), &args)
        .expect("node exists");
    Proc::spawn(
        &format!("agent {}", node_name(i)),
        cmd,
        dir.join(format!("agent-{}.log", node_name(i))),
    )
}

/// A real agent in bed node `node`, named `name`, run from the config file
/// text `config` (written to `dir`), its spool and log in `dir`: for the
/// bed tests that shape one agent's config by hand.
pub fn agent_from_config(bed: &TestBed, node: usize, name: &str, dir: &Path, config: &str) -> Proc {
    let path = dir.join(format!("agent-{name}.toml"));
    std::fs::write(&path, config).unwrap();
    let args = [
        "run".to_string(),
        "--config".into(),
        path.display().to_string(),
        "--node".into(),
        name.into(),
        "--spool-dir".into(),
        dir.join(format!("spool-{name}")).display().to_string(),
    ];
    let cmd = bed
        .exec(node, &bin("boltwatch-agent").to_string_lossy(), &args)
        .unwrap();
    Proc::spawn(
        &format!("agent {name}"),
        cmd,
        dir.join(format!("agent-{name}.log")),
    )
}
