//! The shipped alert rules, proven end to end in Debian's real
//! `prometheus` and `prometheus-alertmanager`: two real agents on loopback
//! (real STAMP, real scheduled bandwidth tests between their bandwidth
//! servers, thermals from a sysfs fixture) stream to a real collector;
//! Prometheus scrapes it every second and evaluates `alerts.yml` and
//! `recording.yml` every second; Alertmanager delivers to a webhook this
//! test serves, and the assertions are on what reaches the webhook.
//!
//! The one change to the rules: every `for: Nm` becomes `for: Ns` (minutes
//! read as seconds, [`shorten_for`]), mechanically, line by line; the
//! expressions are the shipped ones, byte for byte.
//!
//! Prometheus sets `cluster` as a target label of the collector's job, as
//! one collector per cluster is meant to be scraped, and every alert must
//! reach the webhook with it (the rules keep it through their aggregations
//! and joins; dashboards/prometheus/tests/clusters.yml proves two clusters
//! stay apart).
//!
//! Scenarios:
//! - a's links are expected to carry 1000 Gbit/s (`bandwidth.expected`),
//!   far above what loopback moves, and a's throttle fixture counts
//!   throttle events all along: `BoltwatchBandwidthLowThrottled` fires
//!   naming node a and peer b, and the plain `BoltwatchBandwidthLow` never
//!   does for a.
//! - b expects the same and is never throttled: the plain
//!   `BoltwatchBandwidthLow` fires for b -> a, the thermal one never does.
//! - a's agent is killed: `BoltwatchAgentDown` fires for a, and once the
//!   collector's `stale_after` (3 s here) has passed, a's thermal and
//!   bandwidth alerts resolve.
//!
//! Every wait is bounded and fails with the last state seen; nothing
//! asserts how long anything took.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use boltwatch_tests::cmd::find_tool;
use boltwatch_tests::procs::{agent, free_tcp_port, free_udp_port, http_get, Collector, Proc};
use boltwatch_tests::SysfsFixture;
use serde_json::Value;

/// Upper bound on any one wait; reaching it is a failure, not a figure.
const WAIT: Duration = Duration::from_secs(180);

/// The collector's cluster, a target label of its scrape job.
const CLUSTER: &str = "lab1";

/// The rules with every `for: Nm` read as `for: Ns`. Only `for:` lines
/// change; any other duration form in a `for:` line fails the test, so
/// the substitution stays mechanical.
fn shorten_for(rules: &str) -> String {
    let mut out = String::with_capacity(rules.len());
    for line in rules.lines() {
        let trimmed = line.trim_start();
        if let Some(d) = trimmed.strip_prefix("for: ") {
            let indent = &line[..line.len() - trimmed.len()];
            let minutes = d
                .strip_suffix('m')
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or_else(|| panic!("`for: {d}` is not in whole minutes"));
            out.push_str(&format!("{indent}for: {minutes}s\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// One alert as Alertmanager delivered it.
#[derive(Debug, Clone)]
struct Delivered {
    status: String,
    labels: Value,
}

impl Delivered {
    fn is(&self, status: &str, alertname: &str, node: &str) -> bool {
        self.status == status
            && self.labels["alertname"] == alertname
            && self.labels["node"] == node
            && self.labels["cluster"] == CLUSTER
    }
}

/// The webhook receiver: a plain HTTP/1.1 server on loopback that records
/// every alert of every notification.
struct Webhook {
    port: u16,
    got: Arc<Mutex<Vec<Delivered>>>,
}

impl Webhook {
    fn start() -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                if let Some(body) = read_request(&mut conn) {
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        let alerts = v["alerts"].as_array().cloned().unwrap_or_default();
                        let mut g = sink.lock().unwrap();
                        for a in alerts {
                            g.push(Delivered {
                                status: a["status"].as_str().unwrap_or("").to_string(),
                                labels: a["labels"].clone(),
                            });
                        }
                    }
                }
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Webhook { port, got }
    }

    fn all(&self) -> Vec<Delivered> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until a delivered alert matches; fails with what arrived and
    /// Prometheus' view of its alerts.
    fn wait(&self, what: &str, prom: &Prometheus, pred: impl Fn(&Delivered) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.all().iter().any(&pred) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "webhook never received {what} within {WAIT:?}\ndelivered: {:#?}\nprometheus alerts: {}",
                self.all(),
                prom.alerts()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// One HTTP request's body (Content-Length framed, bounded to 1 MiB).
fn read_request(conn: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut r = BufReader::new(conn.try_clone().ok()?);
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok()?;
            }
        }
    }
    if len > 1 << 20 {
        return None;
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(body)
}

struct Prometheus {
    _proc: Proc,
    port: u16,
}

impl Prometheus {
    fn alerts(&self) -> String {
        http_get(&format!("http://127.0.0.1:{}/api/v1/alerts", self.port))
            .map(|(_, b)| b)
            .unwrap_or_else(|e| e.to_string())
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn start_alertmanager(dir: &Path, webhook: u16) -> (Proc, u16) {
    let bin = find_tool("prometheus-alertmanager", "prometheus-alertmanager")
        .expect("apt-get install prometheus-alertmanager; the test does not skip");
    let port = free_tcp_port();
    let cfg = dir.join("alertmanager.yml");
    write(
        &cfg,
        &format!(
            "route:\n  receiver: hook\n  group_by: [alertname, cluster, node, peer]\n  \
             group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n\
             receivers:\n  - name: hook\n    webhook_configs:\n      \
             - url: http://127.0.0.1:{webhook}/\n        send_resolved: true\n"
        ),
    );
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.path={}", dir.join("am-data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // No gossip: a single instance.
        .arg("--cluster.listen-address=");
    let p = Proc::spawn("alertmanager", cmd, dir.join("alertmanager.log"));
    wait_ready("alertmanager", &format!("http://127.0.0.1:{port}/-/ready"));
    (p, port)
}

fn start_prometheus(dir: &Path, collector_http: &str, alertmanager: u16) -> Prometheus {
    let bin = find_tool("prometheus", "prometheus")
        .expect("apt-get install prometheus; the test does not skip");
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/prometheus");
    let alerts = std::fs::read_to_string(rules.join("alerts.yml")).unwrap();
    write(&dir.join("alerts.yml"), &shorten_for(&alerts));
    std::fs::copy(rules.join("recording.yml"), dir.join("recording.yml")).unwrap();
    let port = free_tcp_port();
    let cfg = dir.join("prometheus.yml");
    write(
        &cfg,
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
             rule_files:\n  - recording.yml\n  - alerts.yml\n\
             alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{alertmanager}']\n\
             scrape_configs:\n  - job_name: boltwatch-collector\n    honor_labels: true\n    \
             static_configs:\n      - targets: ['{collector_http}']\n        \
             labels:\n          cluster: {CLUSTER}\n"
        ),
    );
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("prom-data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--rules.alert.resend-delay=1s");
    let p = Proc::spawn("prometheus", cmd, dir.join("prometheus.log"));
    wait_ready("prometheus", &format!("http://127.0.0.1:{port}/-/ready"));
    Prometheus { _proc: p, port }
}

fn wait_ready(what: &str, url: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        if http_get(url).is_ok_and(|(code, _)| code == 200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never became ready at {url}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A loopback agent: STAMP reflector, bandwidth server, scheduled tests of
/// its peer every few seconds, thermals from `sysfs` every second.
struct Node {
    name: &'static str,
    stamp: u16,
    bandwidth: u16,
    sysfs: SysfsFixture,
}

impl Node {
    fn new(name: &'static str) -> Node {
        let sysfs = SysfsFixture::new().unwrap();
        sysfs.set_thermal_zone(0, "x86_pkg_temp", 50_000).unwrap();
        Node {
            name,
            stamp: free_udp_port(),
            bandwidth: free_tcp_port(),
            sysfs,
        }
    }

    fn start(&self, dir: &Path, collector: &Collector, peer: &Node) -> Proc {
        let cfg = dir.join(format!("agent-{}.toml", self.name));
        write(
            &cfg,
            &format!(
                "collector = \"{grpc}\"\nlisten = \"127.0.0.1:{stamp}\"\n\
                 sysfs_root = \"{sysfs}\"\nthermal_interval = \"1s\"\n\
                 [services]\ntcp = []\n\
                 [bandwidth]\ninterval = \"4s\"\nduration = \"1s\"\n\
                 streams = 1\nduty_cycle = 0.5\nexpected = 1000\n\
                 [bandwidth.peers]\n{peer} = \"127.0.0.1:{peer_bw}\"\n\
                 [peers]\n{peer} = \"127.0.0.1:{peer_stamp}\"\n",
                grpc = collector.grpc_url(),
                stamp = self.stamp,
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
}

/// Counts throttle events in `node`'s fixture every 200 ms until dropped:
/// the kernel's `thermal_throttle` counter of a CPU that stays throttled.
struct Throttling {
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Throttling {
    fn on(node: &Node) -> Throttling {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let path = node
            .sysfs
            .path("devices/system/cpu/cpu0/thermal_throttle/core_throttle_count");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "0\n").unwrap();
        let flag = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let tmp = path.with_extension("tmp");
                if std::fs::write(&tmp, format!("{n}\n")).is_ok() {
                    let _ = std::fs::rename(&tmp, &path);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Throttling { stop }
    }
}

impl Drop for Throttling {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn shorten_for_touches_only_whole_minute_for_lines() {
    let rules = "      - alert: X\n        expr: up == 0 # for: 3m\n        for: 30m\n";
    assert_eq!(
        shorten_for(rules),
        "      - alert: X\n        expr: up == 0 # for: 3m\n        for: 30s\n"
    );
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/prometheus/alerts.yml"),
    )
    .unwrap();
    let short = shorten_for(&shipped);
    let differ: Vec<(&str, &str)> = shipped
        .lines()
        .zip(short.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert!(!differ.is_empty());
    assert!(differ
        .iter()
        .all(|(a, _)| a.trim_start().starts_with("for: ")));
}

#[test]
fn thermal_bandwidth_and_agent_down_alerts_reach_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hook = Webhook::start();
    let collector_cfg = d.join("collector.toml");
    write(&collector_cfg, "stale_after = \"3s\"\n");
    let collector = Collector::start_with(
        d,
        &d.join("data"),
        free_tcp_port(),
        free_tcp_port(),
        &["--config".into(), collector_cfg.display().to_string()],
    );
    let (_am, am_port) = start_alertmanager(d, hook.port);
    let prom = start_prometheus(d, &collector.http.to_string(), am_port);

    let (a, b) = (Node::new("a"), Node::new("b"));
    let _throttled = Throttling::on(&a);
    let mut agent_a = a.start(d, &collector, &b);
    let _agent_b = b.start(d, &collector, &a);

    hook.wait(
        "BoltwatchBandwidthLowThrottled firing for a -> b",
        &prom,
        |x| x.is("firing", "BoltwatchBandwidthLowThrottled", "a") && x.labels["peer"] == "b",
    );
    hook.wait("BoltwatchBandwidthLow firing for b -> a", &prom, |x| {
        x.is("firing", "BoltwatchBandwidthLow", "b") && x.labels["peer"] == "a"
    });
    hook.wait("BoltwatchThermalThrottled firing for a", &prom, |x| {
        x.is("firing", "BoltwatchThermalThrottled", "a")
    });

    agent_a.kill9();
    hook.wait("BoltwatchAgentDown firing for a", &prom, |x| {
        x.is("firing", "BoltwatchAgentDown", "a")
    });
    hook.wait(
        "BoltwatchBandwidthLowThrottled resolved for a",
        &prom,
        |x| x.is("resolved", "BoltwatchBandwidthLowThrottled", "a"),
    );
    hook.wait("BoltwatchThermalThrottled resolved for a", &prom, |x| {
        x.is("resolved", "BoltwatchThermalThrottled", "a")
    });

    // The blame was never misplaced: no thermal verdict for the cool node,
    // no "check the cable" for the throttled one.
    let all = hook.all();
    let wrong: Vec<&Delivered> = all
        .iter()
        .filter(|x| {
            x.is("firing", "BoltwatchBandwidthLowThrottled", "b")
                || x.is("firing", "BoltwatchBandwidthLow", "a")
                || x.is("firing", "BoltwatchThermalThrottled", "b")
        })
        .collect();
    assert!(wrong.is_empty(), "misplaced alerts: {wrong:#?}");
    // Every alert kept the cluster its series came from.
    let unlabelled: Vec<&Delivered> = all
        .iter()
        .filter(|x| x.labels["cluster"] != CLUSTER)
        .collect();
    assert!(
        unlabelled.is_empty(),
        "alerts without cluster {CLUSTER}: {unlabelled:#?}"
    );
    // b is still connected: no agent-down for it.
    assert!(
        !all.iter()
            .any(|x| x.is("firing", "BoltwatchAgentDown", "b")),
        "{all:#?}"
    );
}
