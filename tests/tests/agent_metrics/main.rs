//! Scraping nodes directly: two real agents on loopback (STAMP between
//! them, scheduled bandwidth tests, an `ssh` service check against a port
//! this test listens on, thermals, interface counters and an RDMA port
//! from a sysfs fixture) serve their own `/metrics` (`--metrics-listen`) while they
//! stream to a real collector.
//!
//! - `promtool check metrics` is clean on each agent's live scrape.
//! - Every family an agent serves (but its build info and `process_*`)
//!   is on the collector fed by the same agents, with the same type, help
//!   and label names.
//! - Debian's `prometheus` scrapes the agents (job `boltwatch-agent`,
//!   `cluster` as a target label) and, as the reference, a second one
//!   scrapes the collector; both evaluate `recording.yml`. Every query of
//!   the Grafana dashboard (variables substituted) whose metrics the
//!   agents export must return data from the agents' Prometheus (a failure
//!   shows what the collector's returns for the same query).
//! - An agent whose collector is gone keeps serving, and its counters keep
//!   moving.
//!
//! The port's own bounds (connections, header size, routes, gzip) are
//! tested on a loopback socket in the agent crate (`metrics::tests`).
//!
//! Every wait is bounded and fails with the last state seen; nothing
//! asserts how long anything took.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use boltwatch_tests::procs::{
    agent, free_tcp_port, free_udp_port, http_get, promtool_check, sample, wait_for, Collector,
    Proc,
};
use boltwatch_tests::{NetIf, SysfsFixture};

mod dashboard;
use dashboard::{dashboard_queries, metrics_read, recording_rules, start_prometheus};

/// Upper bound on any one wait; reaching it is a failure, not a figure.
const WAIT: Duration = Duration::from_secs(180);

/// The cluster both scrape jobs add as a target label.
const CLUSTER: &str = "lab1";

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A loopback agent serving its own `/metrics`.
struct Node {
    name: &'static str,
    stamp: u16,
    bandwidth: u16,
    metrics: SocketAddr,
    sysfs: SysfsFixture,
}

impl Node {
    fn new(name: &'static str) -> Node {
        let sysfs = SysfsFixture::new().unwrap();
        sysfs.set_thermal_zone(0, "x86_pkg_temp", 48_000).unwrap();
        let lo = NetIf {
            speed_mbps: Some(40_000),
            ..NetIf::default()
        };
        sysfs.set_netif("lo", &lo).unwrap();
        // The probed interface as a Thunderbolt port (2 + 2 lanes), so the
        // fabric row's lanes and downshift panels have series too.
        sysfs.set_thunderbolt("lo", 2, "20.0 Gb/s", "peer").unwrap();
        sysfs
            .write(
                "devices/system/cpu/cpu0/thermal_throttle/core_throttle_count",
                "0",
            )
            .unwrap();
        let policy = "devices/system/cpu/cpufreq/policy0";
        sysfs
            .write(&format!("{policy}/scaling_cur_freq"), "2400000")
            .unwrap();
        // An active soft-RoCE device on the probed interface, so the
        // fabric row's RDMA panel has a series on the agents too.
        let port = "class/infiniband/rxe0/ports/1";
        sysfs.write(&format!("{port}/state"), "4: ACTIVE").unwrap();
        sysfs
            .write(&format!("{port}/gid_attrs/ndevs/0"), "lo")
            .unwrap();
        sysfs
            .write(&format!("{policy}/cpuinfo_max_freq"), "3200000")
            .unwrap();
        Node {
            name,
            stamp: free_udp_port(),
            bandwidth: free_tcp_port(),
            metrics: format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap(),
            sysfs,
        }
    }

    fn start(&self, dir: &Path, collector: &Collector, peer: &Node, ssh: u16) -> Proc {
        let cfg = dir.join(format!("agent-{}.toml", self.name));
        write(
            &cfg,
            &format!(
                "collector = \"{grpc}\"\nlisten = \"127.0.0.1:{stamp}\"\n\
                 metrics_listen = \"{metrics}\"\ninterface = \"lo\"\n\
                 sysfs_root = \"{sysfs}\"\nthermal_interval = \"1s\"\n\
                 counters_interval = \"1s\"\n\
                 [services]\ntcp = [\"ssh={ssh}\"]\ninterval = \"1s\"\n\
                 [bandwidth]\ninterval = \"4s\"\nduration = \"1s\"\n\
                 streams = 1\nduty_cycle = 0.5\nexpected = 1000\n\
                 [bandwidth.peers]\n{peer} = \"127.0.0.1:{peer_bw}\"\n\
                 [peers]\n{peer} = \"127.0.0.1:{peer_stamp}\"\n",
                grpc = collector.grpc_url(),
                stamp = self.stamp,
                metrics = self.metrics,
                sysfs = self.sysfs.root().display(),
                peer = peer.name,
                peer_bw = peer.bandwidth,
                peer_stamp = peer.stamp,
            ),
        );
        // A --bandwidth flag also tells the helper not to add --no-bandwidth.
        let args = [
            "--config".into(),
            cfg.display().to_string(),
            "--bandwidth-listen".into(),
            format!("127.0.0.1:{}", self.bandwidth),
        ];
        agent(dir, self.name, &args)
    }

    fn scrape(&self) -> String {
        http_get(&format!("http://{}/metrics", self.metrics))
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

/// A family as an exposition declares and fills it.
#[derive(Debug, Clone, PartialEq)]
struct Declared {
    kind: String,
    help: String,
    /// Label names of its samples (`le` left out), if it has any.
    labels: Option<Vec<String>>,
}

/// Family name -> declaration, from exposition text.
fn families(text: &str) -> BTreeMap<String, Declared> {
    let mut out: BTreeMap<String, Declared> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let d = Declared {
                kind: String::new(),
                help: help.into(),
                labels: None,
            };
            out.insert(name.into(), d);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.get_mut(name).expect("TYPE after HELP").kind = kind.into();
        } else if !line.is_empty() {
            let series = line.rsplit_once(' ').unwrap().0;
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| out.contains_key(*f)))
                .unwrap_or(name);
            let names: Vec<String> = labels
                .trim_end_matches('}')
                .split("\",")
                .filter_map(|kv| Some(kv.split_once('=')?.0.to_string()))
                .filter(|k| k != "le")
                .collect();
            let d = out.get_mut(family).unwrap_or_else(|| panic!("{line}"));
            assert!(d.labels.as_ref().is_none_or(|l| *l == names), "{line}");
            d.labels = Some(names);
        }
    }
    out
}

/// Families only the agent serves: its build info, its senders' late
/// replies (declared beside them, in `boltwatch_agent::metrics`) and the
/// process's own.
fn agent_only(name: &str) -> bool {
    use boltwatch_agent::metrics;
    let own = metrics::FAMILIES.iter().chain(metrics::late::FAMILIES);
    own.into_iter().any(|f| f.name == name) || name.starts_with("process_")
}

/// Whether the agent serves `metric` (a family, or a histogram's series).
fn served(metric: &str, agent: &BTreeMap<String, Declared>) -> bool {
    agent.contains_key(metric)
        || ["_bucket", "_sum", "_count"].iter().any(|s| {
            metric
                .strip_suffix(s)
                .is_some_and(|f| agent.contains_key(f))
        })
}

/// Answers every connection to `listener` (the peers' `ssh`) and closes it.
fn serve_ssh(listener: TcpListener) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
        }
    });
}

#[test]
fn agents_serve_the_collectors_families_and_the_dashboard_works_on_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let collector = Collector::start(dir, &dir.join("data"));
    let ssh = TcpListener::bind("127.0.0.1:0").unwrap();
    let ssh_port = ssh.local_addr().unwrap().port();
    serve_ssh(ssh);
    let (a, b) = (Node::new("a"), Node::new("b"));
    let _pa = a.start(dir, &collector, &b, ssh_port);
    let _pb = b.start(dir, &collector, &a, ssh_port);

    // Every source has reported on both agents.
    let wanted = [
        "boltwatch_bandwidth_bytes_per_second",
        "boltwatch_service_up",
        "boltwatch_temperature_celsius",
        "boltwatch_interface_throughput_bytes_per_second",
        "boltwatch_rtt_p50_seconds",
    ];
    let mut last = String::new();
    wait_for("every source on both agents' /metrics", WAIT, || {
        [&a, &b].iter().all(|n| {
            last = n.scrape();
            wanted
                .iter()
                .all(|m| sample(&last, m, &[("node", n.name)]).is_some())
        })
    });

    // promtool on the live scrapes; each agent speaks for its node only,
    // and leaves `cluster` to the scrape.
    for n in [&a, &b] {
        let text = n.scrape();
        if let Err(e) = promtool_check(&text) {
            panic!("promtool check metrics on agent {}: {e}\n{text}", n.name);
        }
        let own = format!("node=\"{}\"", n.name);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(!line.contains("node=") || line.contains(&own), "{line}");
            assert!(!line.contains("cluster="), "{line}");
        }
    }

    // The same families as the collector's, by name, type, help and labels.
    wait_for(
        "the collector has both agents' bandwidth results",
        WAIT,
        || {
            let m = collector.metrics();
            ["a", "b"]
                .iter()
                .all(|n| sample(&m, wanted[0], &[("node", n)]).is_some())
        },
    );
    let on_collector = families(&collector.metrics());
    let on_agent = families(&a.scrape());
    let mut compared = 0;
    for (name, mine) in on_agent.iter().filter(|(n, _)| !agent_only(n)) {
        let theirs = on_collector
            .get(name)
            .unwrap_or_else(|| panic!("{name} is on the agent, not on the collector"));
        assert_eq!(mine.kind, theirs.kind, "{name}: type");
        assert_eq!(mine.help, theirs.help, "{name}: help");
        if let (Some(l), Some(r)) = (&mine.labels, &theirs.labels) {
            assert_eq!(l, r, "{name}: label names");
            compared += 1;
        }
    }
    assert!(
        compared >= 30,
        "only {compared} families had samples on both"
    );
    eprintln!("{compared} families compared with the collector's, label names included");
    for absent in ["boltwatch_agent_up", "boltwatch_records_received_total"] {
        assert!(!on_agent.contains_key(absent), "{absent} on the agent");
    }

    // The dashboard against the agents, the collector as the reference.
    let targets = [a.metrics.to_string(), b.metrics.to_string()];
    let agents_prom = start_prometheus(dir, "boltwatch-agent", &targets, false);
    let collector_prom = start_prometheus(
        dir,
        "boltwatch-collector",
        &[collector.http.to_string()],
        true,
    );
    let rules = recording_rules();
    let queries: Vec<(String, String)> = dashboard_queries()
        .into_iter()
        .filter(|(_, q)| {
            let read = metrics_read(q, &rules);
            // The RDMA probe's families are served but empty on both sides:
            // no RDMA device runs on this bed (the panels test feeds them
            // through a stand-in to the collector).
            let rdma = read.iter().any(|m| m.starts_with("boltwatch_rdma_"));
            !read.is_empty() && !rdma && read.iter().all(|m| served(m, &on_agent))
        })
        .collect();
    assert!(queries.len() >= 40, "{} agent queries", queries.len());
    eprintln!(
        "{} dashboard queries read only agent families",
        queries.len()
    );
    let mut missing: Vec<String> = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        missing.clear();
        for (title, q) in &queries {
            let reference = collector_prom.series(q).unwrap_or(0);
            let got = agents_prom
                .series(q)
                .unwrap_or_else(|e| panic!("{title}: {q}: {e}"));
            if got == 0 {
                missing.push(format!("{title}: {q} (collector: {reference} series)"));
            }
        }
        if missing.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        missing.is_empty(),
        "dashboard queries empty on the agents' Prometheus:\n{}",
        missing.join("\n")
    );
    let via_agent = agents_prom
        .series("up{job=\"boltwatch-agent\"} == 1")
        .unwrap();
    assert_eq!(
        via_agent, 2,
        "both agents scraped (gzip, as Prometheus asks)"
    );

    // Without the collector the agents still serve, and their counters move.
    drop(collector);
    let sent = |text: &str| sample(text, "boltwatch_probe_sent_total", &[("peer", "b")]);
    let before = sent(&a.scrape()).expect("probe counter");
    wait_for("a's probe counter moving with no collector", WAIT, || {
        sent(&a.scrape()).is_some_and(|now| now > before)
    });
}

/// The shared exposition crate is the only link between the two: neither
/// binary's dependency tree holds the other.
#[test]
fn collector_and_agent_do_not_depend_on_each_other() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    for (package, other) in [
        ("boltwatch-collector", "boltwatch-agent"),
        ("boltwatch-agent", "boltwatch-collector"),
    ] {
        let out = Command::new(&cargo)
            .arg("tree")
            .arg("--manifest-path")
            .arg(&manifest)
            .args(["-p", package, "-e", "normal,build", "--prefix", "none"])
            .output()
            .expect("cargo tree");
        assert!(out.status.success(), "{out:?}");
        let tree = String::from_utf8_lossy(&out.stdout);
        assert!(tree.contains("boltwatch-exposition"), "{package}:\n{tree}");
        assert!(
            !tree.lines().any(|l| l.starts_with(&format!("{other} "))),
            "{package} depends on {other}:\n{tree}"
        );
    }
}
