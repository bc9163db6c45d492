//! The monitoring stack the scenarios share: a real collector on the host
//! (gRPC on every address, so agents in the bed's namespaces reach it over
//! their management veths), Debian's `prometheus` scraping it and
//! evaluating the shipped rules every second, `prometheus-alertmanager`,
//! and a webhook receiver this test serves that records every alert
//! Alertmanager delivers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use boltwatch_tests::cmd::find_tool;
use boltwatch_tests::procs::{bin, free_tcp_port, http_get, Proc};
use serde_json::Value;

/// Upper bound on any one wait; reaching it is a failure, not a figure.
pub const WAIT: Duration = Duration::from_secs(240);

/// The collector's cluster, a target label of its scrape job.
pub const CLUSTER: &str = "lab1";

/// The rules with every `for: Nm` read as `for: Ns`. Only `for:` lines
/// change; any other duration form in a `for:` line fails the test, so
/// the substitution stays mechanical.
pub fn shorten_for(rules: &str) -> String {
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
pub struct Delivered {
    pub status: String,
    pub labels: Value,
}

impl Delivered {
    /// `status` ("firing"/"resolved") of `alertname` for `node`, in the
    /// scraped cluster.
    pub fn is(&self, status: &str, alertname: &str, node: &str) -> bool {
        self.status == status
            && self.labels["alertname"] == alertname
            && self.labels["node"] == node
            && self.labels["cluster"] == CLUSTER
    }

    /// Label `name`, or "" when absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels[name].as_str().unwrap_or("")
    }
}

/// The webhook receiver: a plain HTTP/1.1 server on loopback that records
/// every alert of every notification.
pub struct Webhook {
    pub port: u16,
    got: Arc<Mutex<Vec<Delivered>>>,
}

impl Webhook {
    pub fn start() -> Webhook {
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

    /// Everything delivered so far, in arrival order.
    pub fn all(&self) -> Vec<Delivered> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until a delivered alert matches; fails with what arrived and
    /// Prometheus' view of its alerts.
    pub fn wait(&self, what: &str, prom: &Prometheus, pred: impl Fn(&Delivered) -> bool) {
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

pub struct Prometheus {
    _proc: Proc,
    port: u16,
}

impl Prometheus {
    /// `/api/v1/alerts`, for failure messages.
    pub fn alerts(&self) -> String {
        http_get(&format!("http://127.0.0.1:{}/api/v1/alerts", self.port))
            .map(|(_, b)| b)
            .unwrap_or_else(|e| e.to_string())
    }

    /// The values of an instant query's result (empty when it has none
    /// or the query failed).
    pub fn query(&self, promql: &str) -> Vec<f64> {
        let url = format!(
            "http://127.0.0.1:{}/api/v1/query?query={}",
            self.port,
            percent_encode(promql)
        );
        let Ok((200, body)) = http_get(&url) else {
            return Vec::new();
        };
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["value"][1].as_str()?.parse().ok())
            .collect()
    }
}

/// Query-string encoding of PromQL (everything but unreserved bytes).
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The collector for the bed: gRPC on every address, HTTP on loopback,
/// a disconnected agent's gauges dropped after 3 s.
pub struct Collector {
    _proc: Proc,
    pub grpc_port: u16,
    pub http: String,
}

impl Collector {
    pub fn start(dir: &Path) -> Collector {
        let (grpc_port, http_port) = (free_tcp_port(), free_tcp_port());
        let cfg = dir.join("collector.toml");
        write(&cfg, "stale_after = \"3s\"\n");
        let mut cmd = Command::new(bin("boltwatch-collector"));
        cmd.arg("serve")
            .arg("--config")
            .arg(&cfg)
            .arg("--grpc-listen")
            .arg(format!("0.0.0.0:{grpc_port}"))
            .arg("--http-listen")
            .arg(format!("127.0.0.1:{http_port}"))
            .arg("--data-dir")
            .arg(dir.join("data"));
        let proc = Proc::spawn("collector", cmd, dir.join("collector.log"));
        let http = format!("127.0.0.1:{http_port}");
        wait_ready("collector", &format!("http://{http}/healthz"));
        Collector {
            _proc: proc,
            grpc_port,
            http,
        }
    }

    /// `/metrics` text ("" when it cannot be read).
    pub fn metrics(&self) -> String {
        http_get(&format!("http://{}/metrics", self.http))
            .map(|(_, b)| b)
            .unwrap_or_default()
    }
}

pub fn start_alertmanager(dir: &Path, webhook: u16) -> (Proc, u16) {
    let bin = find_tool("prometheus-alertmanager", "prometheus-alertmanager")
        .expect("apt-get install prometheus-alertmanager; the test does not skip");
    let port = free_tcp_port();
    let cfg = dir.join("alertmanager.yml");
    write(
        &cfg,
        &format!(
            "route:\n  receiver: hook\n  group_by: ['...']\n  \
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

pub fn start_prometheus(dir: &Path, collector_http: &str, alertmanager: u16) -> Prometheus {
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

/// Everything the scenarios share.
pub struct Stack {
    pub hook: Webhook,
    pub prom: Prometheus,
    _alertmanager: Proc,
    pub collector: Collector,
}

impl Stack {
    pub fn start(dir: &Path) -> Stack {
        let hook = Webhook::start();
        let collector = Collector::start(dir);
        let (am, am_port) = start_alertmanager(dir, hook.port);
        let prom = start_prometheus(dir, &collector.http, am_port);
        Stack {
            hook,
            prom,
            _alertmanager: am,
            collector,
        }
    }

    /// Waits for a delivered alert matching `pred`.
    pub fn wait(&self, what: &str, pred: impl Fn(&Delivered) -> bool) {
        self.hook.wait(what, &self.prom, pred)
    }

    /// Waits until `/metrics` satisfies `cond`; fails with the last body.
    pub fn wait_metrics(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let m = self.collector.metrics();
            if cond(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what} on /metrics within {WAIT:?}; last scrape:\n{m}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}
