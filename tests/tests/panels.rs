//! Every panel of the shipped Grafana dashboard shows data from a live lab,
//! through Debian's real `prometheus`.
//!
//! The lab, on the namespace test bed: a real collector on the host and two
//! real agents, one per node namespace, probing each other over the veth
//! "cable" every 50 ms; SSH-named service checks against a listener in each
//! node; scheduled bandwidth tests both ways; node n0's thermals from a
//! sysfs fixture (a thermal zone, cpufreq, and a throttle counter a thread
//! keeps counting, as a throttled CPU's does); one link flap (n1's end set
//! down and up with `ip link`). Prometheus scrapes the collector every
//! second (the `cluster` target label as in the example config) and loads
//! the shipped `recording.yml` unchanged, once-a-minute group included.
//! The collector is restarted (same ports and store) with a remote write
//! endpoint that refuses connections and its CA file, for the remote write
//! lag and certificate expiry panels. No RDMA device exists here, so n0's
//! RDMA probe is a stand-in ([`boltwatch_tests::rdma_feed`]): windows of
//! its link to n1 (RTTs, a lost ping now and then, CRC mismatches and
//! sequence gaps) and one wedged port, through the agent's own transport
//! and the collector's real gRPC ingest; then n0's real agent is made to
//! reconnect, so its `Hello` (interfaces, peers, version) is the node's
//! latest again.
//!
//! Then every query of every panel (`dashboards/grafana/boltwatch.json`),
//! with Grafana's variables substituted as Grafana would (`$__range` the
//! time since the lab started, `$__interval` the step, `$__rate_interval`
//! from the 1 s scrape; the filters at All, then again at one value each:
//! cluster, the collector's job and instance, node n0, peer n1), goes
//! through Prometheus' HTTP API (`/api/v1/query` for instant targets, `/api/v1/query_range`
//! for range targets and the annotations) until each returns at least one
//! finite value and the flap shows as a link-down event and an outage. A
//! target whose unit is not its metric's fails first, without waiting. A
//! soak with one workload mark feeds the marks annotation.
//!
//! Needs root, iproute2, nftables and `prometheus`; without them it fails
//! with a message, it never skips. Every wait is bounded and fails listing
//! the queries still without data and what they last returned; nothing
//! asserts how long anything took.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use boltwatch_tests::cluster::{AgentOptions, Cluster};
use boltwatch_tests::grafana::{self, substitute, Query, Vars};
use boltwatch_tests::procs::{
    bin, http_post_json, sample, wait_for, Collector, CollectorOptions, Proc,
};
use boltwatch_tests::prometheus::{PromConfig, Prometheus};
use boltwatch_tests::rdma_feed::{self, RdmaFeed};
use boltwatch_tests::units::{expr_unit, shows};
use boltwatch_tests::{NetIf, SysfsFixture};
use serde_json::Value;

/// Upper bound on the wait for data; reaching it is a failure.
const WAIT: Duration = Duration::from_secs(420);
/// The collector's cluster, a target label of its scrape job.
const CLUSTER: &str = "lab1";
/// Port of the service the agents check, named `ssh` as the panels expect.
const SSH_PORT: u16 = 8022;
/// Scrape and evaluation interval, seconds.
const SCRAPE_S: u64 = 1;
/// Step of the range queries, seconds.
const STEP_S: u64 = 2;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
}

/// n0's /sys: its link interface (40 Gbit/s, a Thunderbolt port of 2 + 2
/// lanes), a thermal zone, cpufreq at two thirds of the maximum, a throttle
/// counter, and an active soft-RoCE device on the link (for the fabric
/// row's RDMA panel).
fn thermal_fixture() -> SysfsFixture {
    let f = SysfsFixture::new().unwrap();
    let tb = NetIf {
        speed_mbps: Some(40_000),
        ..NetIf::default()
    };
    f.set_netif("tb1", &tb).unwrap();
    // A Thunderbolt port for the fabric row's lanes and downshift panels.
    f.set_thunderbolt("tb1", 2, "20.0 Gb/s", "n1").unwrap();
    f.set_thermal_zone(0, "x86_pkg_temp", 61_000).unwrap();
    let policy = "devices/system/cpu/cpufreq/policy0";
    f.write(&format!("{policy}/scaling_cur_freq"), "2000000")
        .unwrap();
    f.write(&format!("{policy}/cpuinfo_max_freq"), "3000000")
        .unwrap();
    f.write(THROTTLE_COUNT, "0").unwrap();
    let port = "class/infiniband/rxe0/ports/1";
    f.write(&format!("{port}/state"), "4: ACTIVE").unwrap();
    f.write(&format!("{port}/gid_attrs/ndevs/0"), "tb1")
        .unwrap();
    f
}

const THROTTLE_COUNT: &str = "devices/system/cpu/cpu0/thermal_throttle/core_throttle_count";

/// Counts throttle events in the fixture every 200 ms until dropped.
struct Throttling(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Throttling {
    fn on(f: &SysfsFixture) -> Throttling {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let path = f.path(THROTTLE_COUNT);
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                n += 1;
                let tmp = path.with_extension("tmp");
                if std::fs::write(&tmp, format!("{n}\n")).is_ok() {
                    let _ = std::fs::rename(&tmp, &path);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Throttling(stop)
    }
}

impl Drop for Throttling {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A TCP listener inside `node` standing in for its SSH server.
fn ssh_listener(c: &Cluster, node: usize) -> Proc {
    let exe = bin("bw-listen");
    let cmd = c
        .bed
        .exec(
            node,
            &exe.to_string_lossy(),
            [format!("0.0.0.0:{SSH_PORT}")],
        )
        .unwrap();
    Proc::spawn(
        &format!("ssh listener n{node}"),
        cmd,
        c.path().join(format!("listener-{node}.log")),
    )
}

/// Restarts the lab's collector (same ports and store: the agents
/// reconnect) with a remote write endpoint that refuses connections and
/// its CA file, so the collector-watched panels have series: the remote
/// write lag grows while the sender retries, and the CA file has an
/// expiry.
fn watched_collector(c: &mut Cluster) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(vec!["lab-ca".into()]).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_path = c.path().join("rw-ca.pem");
    std::fs::write(&ca_path, ca.self_signed(&key).unwrap().pem()).unwrap();
    let refused = boltwatch_common::testing::free_tcp_port();
    let config = c.path().join("collector.toml");
    std::fs::write(
        &config,
        format!(
            "[remote_write]\nurls = [\"https://127.0.0.1:{refused}/api/v1/write\"]\n\
             tls_ca_file = \"{}\"\n",
            ca_path.display()
        ),
    )
    .unwrap();
    let ports = (c.collector.grpc.port(), c.collector.http.port());
    c.collector.proc.terminate();
    let opts = CollectorOptions {
        ports: Some(ports),
        for_bed: true,
        flags: vec!["--config".into(), config.display().to_string()],
    };
    c.collector = Collector::launch(c.path(), &c.path().join("data"), &opts);
    c.wait_all_probing();
}

/// Starts n0's stand-in RDMA probe (its link to n1 on the fixture's
/// `rxe0`, and a second port, `rxe1`, wedged) and waits for its windows;
/// then resets n0's agent's connection to the collector and waits until
/// the real agent's `Hello` is the latest again: the stand-in's names no
/// interface or peer, and the collector takes a node's links and cables
/// from its latest `Hello`. The real agents must be connected first (the
/// caller's [`Cluster::wait_all_probing`] waits for that): one still in
/// its retry backoff after the collector's restart would send its `Hello`
/// after the stand-in's, which then never shows as latest.
fn rdma_stand_in(c: &Cluster) -> RdmaFeed {
    let link = |interface: &str, device: &str| rdma_feed::Link {
        peer: "n1".into(),
        interface: interface.into(),
        device: device.into(),
    };
    let feed = RdmaFeed::start(
        &c.collector.grpc_url(),
        &c.path().join("spool-rdma-stand-in"),
        rdma_feed::Feed {
            node: "n0".into(),
            probed: link("tb1", "rxe0"),
            wedged: link("tb2", "rxe1"),
            every: Duration::from_secs(1),
            wedge_again_after: None,
        },
    );
    let n0 = [("node", "n0")];
    wait_for("the stand-in's RDMA windows", WAIT, || {
        let m = c.collector.metrics();
        sample(
            &m,
            "boltwatch_rdma_probe_sent_total",
            &[("node", "n0"), ("peer", "n1")],
        )
        .is_some()
            && sample(
                &m,
                "boltwatch_agent_info",
                &[("node", "n0"), ("version", rdma_feed::VERSION)],
            )
            .is_some()
    });
    c.bed
        .reset_tcp(0, c.collector.grpc.port(), Duration::from_secs(2))
        .unwrap();
    wait_for("n0's real agent's Hello, the latest again", WAIT, || {
        let m = c.collector.metrics();
        sample(&m, "boltwatch_agent_info", &n0).is_some()
            && sample(
                &m,
                "boltwatch_agent_info",
                &[("node", "n0"), ("version", rdma_feed::VERSION)],
            )
            .is_none()
    });
    c.wait_all_probing();
    feed
}

/// One query's last outcome.
struct Outcome {
    query: Query,
    expr: String,
    result: Result<Vec<Value>, String>,
}

fn finite(v: &Value) -> Option<f64> {
    v.as_array()?
        .get(1)?
        .as_str()?
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
}

impl Outcome {
    /// At least one series with a finite value.
    fn has_data(&self) -> bool {
        self.result.as_ref().is_ok_and(|series| {
            series.iter().any(|s| {
                finite(&s["value"]).is_some()
                    || s["values"]
                        .as_array()
                        .is_some_and(|vs| vs.iter().any(|v| finite(v).is_some()))
            })
        })
    }

    /// The largest finite value of any series.
    fn max(&self) -> Option<f64> {
        let series = self.result.as_ref().ok()?;
        series
            .iter()
            .flat_map(|s| {
                let one = finite(&s["value"]);
                let many: Vec<f64> = s["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(finite)
                    .collect();
                one.into_iter().chain(many)
            })
            .reduce(f64::max)
    }

    /// Series count, the last finite value of the first series and the
    /// largest value of all.
    fn summary_with_max(&self) -> String {
        format!("{}; max {:?}", self.summary(), self.max())
    }

    /// Series count and the last finite value of the first series.
    fn summary(&self) -> String {
        match &self.result {
            Err(e) => format!("error: {e}"),
            Ok(series) if series.is_empty() => "no series".into(),
            Ok(series) => {
                let first = &series[0];
                let last = finite(&first["value"]).or_else(|| {
                    first["values"]
                        .as_array()
                        .and_then(|vs| vs.iter().rev().find_map(finite))
                });
                let mut labels = first["metric"].clone();
                if let Some(m) = labels.as_object_mut() {
                    for k in ["cluster", "job", "instance"] {
                        m.remove(k);
                    }
                }
                format!("{} series; {labels} = {last:?}", series.len())
            }
        }
    }
}

/// Runs every query once over the time since `since`, the filter
/// variables as `pick` sets them on top of All.
fn run_all(
    prom: &Prometheus,
    queries: &[Query],
    since: f64,
    pick: impl Fn(Vars) -> Vars,
) -> Vec<Outcome> {
    let end = now();
    let range_s = ((end - since).ceil() as u64).max(STEP_S);
    let vars = pick(Vars::all(range_s, STEP_S, SCRAPE_S));
    queries
        .iter()
        .map(|q| {
            let expr = substitute(&q.expr, &vars);
            let result = if q.instant {
                prom.query(&expr, end)
            } else {
                prom.query_range(&expr, end - range_s as f64, end, STEP_S)
            };
            Outcome {
                query: q.clone(),
                expr,
                result,
            }
        })
        .collect()
}

fn report(outcomes: &[Outcome]) -> String {
    outcomes
        .iter()
        .map(|o| {
            format!(
                "{:<5} {} {} [{}]: {}",
                if o.has_data() { "data" } else { "EMPTY" },
                o.query.panel,
                o.query.ref_id,
                o.query.unit.as_deref().unwrap_or("-"),
                o.summary_with_max()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_panel_shows_data_from_a_live_lab() {
    // Units first: a wrong unit is wrong however much data there is.
    let dash = grafana::load();
    let mut queries = grafana::queries(&dash);
    assert!(queries.len() > 60, "only {} queries", queries.len());
    let wrong: Vec<String> = queries
        .iter()
        .filter_map(|q| match expr_unit(&q.expr) {
            Ok(u) if shows(q.unit.as_deref(), u, &q.kind) => None,
            Ok(u) => Some(format!("{} {}: {:?} for {u:?}", q.panel, q.ref_id, q.unit)),
            Err(e) => Some(format!("{} {}: {e}", q.panel, q.ref_id)),
        })
        .collect();
    assert!(wrong.is_empty(), "panel units:\n{}", wrong.join("\n"));
    // The annotations must show too (their values are times, not units).
    let annotations = grafana::annotations(&dash);
    assert_eq!(annotations.len(), 2, "{annotations:?}");
    queries.extend(annotations);

    let fixture = thermal_fixture();
    let opts = AgentOptions {
        probe_interval: "50ms".into(),
        extra: vec![
            vec![
                "--sysfs-root".into(),
                fixture.root().display().to_string(),
                "--service".into(),
                format!("ssh={SSH_PORT}"),
            ],
            vec!["--service".into(), format!("ssh={SSH_PORT}")],
        ],
        config: "thermal_interval = \"1s\"\ncounters_interval = \"1s\"\n\
                 [services]\ninterval = \"1s\"\n\
                 [bandwidth]\ninterval = \"10s\"\nduration = \"1s\"\nstreams = 1\n\
                 duty_cycle = 0.5\nexpected = 1000\n"
            .into(),
        ..Default::default()
    };
    let since = now();
    let mut c = Cluster::start(2, &opts);
    watched_collector(&mut c);
    let _rdma = rdma_stand_in(&c);
    assert_eq!(
        c.bed.link_if(0, 1).unwrap(),
        "tb1",
        "the fixture's interface"
    );
    let _throttled = Throttling::on(&fixture);
    // The SSH stand-ins come up after the agents (whose first checks may
    // fail: a short service outage before Prometheus starts).
    let _ssh = [ssh_listener(&c, 0), ssh_listener(&c, 1)];

    // A soak with a workload mark, for the annotation that shows marks.
    let http = c.collector.http;
    http_post_json(http, "/api/v1/soaks", r#"{"name":"panels"}"#);
    http_post_json(
        http,
        "/api/v1/soaks/panels/marks",
        r#"{"text":"bandwidth tests every 10 s"}"#,
    );

    let prom = Prometheus::start(
        c.path(),
        &PromConfig {
            interval_s: SCRAPE_S,
            rule_files: vec![grafana::dashboards_dir().join("prometheus/recording.yml")],
            scrape_configs: format!(
                "  - job_name: boltwatch-collector\n    honor_labels: true\n    \
                 static_configs:\n      - targets: ['{}']\n        labels:\n          \
                 cluster: {CLUSTER}\n",
                c.collector.http
            ),
            ..Default::default()
        },
    );

    // One link flap: n1's end of the cable down and up; both agents see
    // the outage, n1 the carrier drop. Only once Prometheus holds samples
    // of the counters from before it, so their increase shows the flap.
    let deadline = Instant::now() + WAIT;
    let before = r#"count_over_time(boltwatch_link_down_events_total{node="n1"}[1m]) >= 3
        and on () count_over_time(boltwatch_outages_total{node="n0",peer="n1"}[1m]) >= 3"#;
    loop {
        let got = prom.query(before, now());
        if got.as_ref().is_ok_and(|r| !r.is_empty()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never held the link counters: {got:?}\n{}",
            prom.targets()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let n1_if = c.bed.link_if(1, 0).unwrap().to_owned();
    c.bed.flap(1, &n1_if, Duration::from_millis(2500)).unwrap();

    // Every variable at All first, then one value of each (the collector's
    // job and instance, the thermal node and its peer): recorded series
    // must carry the labels the filters select.
    let all = |v: Vars| v;
    let instance = c.collector.http.to_string();
    let one = |v: Vars| Vars {
        cluster: CLUSTER.into(),
        job: "boltwatch-collector".into(),
        instance: instance.clone(),
        node: "n0".into(),
        peer: "n1".into(),
        // The repeated running-soak row's copy for the test's soak.
        soak: "panels".into(),
        ..v
    };
    for (what, pick) in [
        ("All", &all as &dyn Fn(Vars) -> Vars),
        ("one of each", &one),
    ] {
        let outcomes = loop {
            let outcomes = run_all(&prom, &queries, since, pick);
            if outcomes.iter().all(Outcome::has_data) && flap_shown(&outcomes) {
                break outcomes;
            }
            assert!(
                Instant::now() < deadline,
                "variables at {what}: panels without data (or without the flap) after {WAIT:?}:\n{}\n\nall queries:\n{}\n\ntargets: {}\n{}",
                outcomes
                    .iter()
                    .filter(|o| !o.has_data())
                    .map(|o| format!("{} {}: {}", o.query.panel, o.query.ref_id, o.expr))
                    .collect::<Vec<_>>()
                    .join("\n"),
                report(&outcomes),
                prom.targets(),
                c.logs()
            );
            std::thread::sleep(Duration::from_secs(3));
        };
        println!("--- variables at {what}\n{}", report(&outcomes));
    }
}

/// The flap reached the verdict: a link-down event and an outage.
fn flap_shown(outcomes: &[Outcome]) -> bool {
    ["A", "B"].iter().all(|r| {
        outcomes
            .iter()
            .find(|o| o.query.panel == "Link interruptions" && o.query.ref_id == *r)
            .is_some_and(|o| o.max().is_some_and(|m| m >= 1.0))
    })
}
