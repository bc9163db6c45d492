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
use boltwatch_tests::grafana;
use boltwatch_tests::procs::{
    free_tcp_port, http_get, wait_for, Collector, CollectorOptions, Proc,
};
use boltwatch_tests::prometheus::{PromConfig, Prometheus};
use serde_json::Value;

/// Upper bound on any one wait; reaching it is a failure, not a figure.
pub const WAIT: Duration = Duration::from_secs(240);

/// The collector's cluster, a target label of its scrape job.
pub const CLUSTER: &str = "lab1";

/// The rules with every `for:` divided by 60: `for: Nm` reads as
/// `for: Ns`, `for: 30s` as `for: 1s` (rounded up). Only `for:` lines
/// change; a duration not N followed by s, m or h fails the test, so the
/// substitution stays mechanical.
pub fn shorten_for(rules: &str) -> String {
    let mut out = String::with_capacity(rules.len());
    for line in rules.lines() {
        let trimmed = line.trim_start();
        if let Some(d) = trimmed.strip_prefix("for: ") {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(&format!("{indent}for: {}s\n", sixtieth(d.trim())));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The shipped Alertmanager configuration as the test runs it: every
/// webhook `url:` delivers to `hook` under its receiver's name (the path
/// tells the pager from chat), and every `group_wait`, `group_interval`
/// and `repeat_interval` is divided by 60, as [`shorten_for`] reads the
/// rules' minutes as seconds, but kept at 5 s or more: rules are
/// evaluated every 5 s in production and every second here (a factor 5,
/// not 60), and the 30 s `group_wait` that spans six evaluations there
/// must still span several here, or the two ends of one cable, firing an
/// evaluation apart, would split into two groups only in the test.
/// Nothing else changes.
pub fn alertmanager_for_test(config: &str, hook: u16) -> String {
    let mut out = String::with_capacity(config.len());
    let mut receiver = None;
    for line in config.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        if let Some(name) = trimmed.strip_prefix("- name: ") {
            receiver = Some(name.trim().to_string());
        }
        let key = trimmed.trim_start_matches("- ");
        let dash = if trimmed.starts_with("- ") { "- " } else { "" };
        if key.starts_with("url: ") {
            let name = receiver.as_deref().expect("a url inside a receiver");
            out.push_str(&format!(
                "{indent}{dash}url: http://127.0.0.1:{hook}/{name}\n"
            ));
        } else if let Some((k, d)) = key
            .split_once(": ")
            .filter(|(k, _)| ["group_wait", "group_interval", "repeat_interval"].contains(k))
        {
            let secs = sixtieth(d.trim()).max(5);
            out.push_str(&format!("{indent}{dash}{k}: {secs}s\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Seconds in `d` (`30s`, `5m`, `4h`) divided by 60, rounded up.
fn sixtieth(d: &str) -> u64 {
    let (n, unit) = d.split_at(d.len() - 1);
    let n: u64 = n
        .parse()
        .unwrap_or_else(|_| panic!("duration {d:?} is not N followed by s, m or h"));
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => panic!("duration {d:?} is not N followed by s, m or h"),
    };
    secs.div_ceil(60)
}

/// The receivers of the shipped configuration.
pub const PAGER: &str = "on-call-pager";
pub const CHAT: &str = "team-chat";

/// One alert as Alertmanager delivered it, to which receiver, in which
/// notification (one webhook request; numbered from 0 in arrival order).
#[derive(Debug, Clone)]
pub struct Delivered {
    pub notification: usize,
    pub receiver: String,
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
            for (notification, conn) in listener.incoming().enumerate() {
                let Ok(mut conn) = conn else { continue };
                if let Some((path, body)) = read_request(&mut conn) {
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        let alerts = v["alerts"].as_array().cloned().unwrap_or_default();
                        let mut g = sink.lock().unwrap();
                        for a in alerts {
                            g.push(Delivered {
                                notification,
                                receiver: path.trim_start_matches('/').to_string(),
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

/// One HTTP request's path and body (Content-Length framed, bounded to
/// 1 MiB).
fn read_request(conn: &mut std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut r = BufReader::new(conn.try_clone().ok()?);
    let mut request = String::new();
    r.read_line(&mut request).ok()?;
    // "POST /on-call-pager HTTP/1.1"
    let path = request.split_whitespace().nth(1)?.to_string();
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
    Some((path, body))
}

/// The collector for the bed: gRPC on every address, HTTP on loopback,
/// a disconnected agent's gauges dropped after 3 s.
fn start_collector(dir: &Path) -> Collector {
    let cfg = dir.join("collector.toml");
    write(&cfg, "stale_after = \"3s\"\n");
    Collector::launch(
        dir,
        &dir.join("data"),
        &CollectorOptions {
            for_bed: true,
            flags: vec!["--config".into(), cfg.display().to_string()],
            ..Default::default()
        },
    )
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

pub fn start_alertmanager(dir: &Path, webhook: u16) -> (Proc, u16) {
    let bin = find_tool("prometheus-alertmanager", "prometheus-alertmanager")
        .expect("apt-get install prometheus-alertmanager; the test does not skip");
    let port = free_tcp_port();
    let shipped = grafana::dashboards_dir().join("alertmanager/alertmanager.yml");
    let shipped =
        std::fs::read_to_string(&shipped).unwrap_or_else(|e| panic!("{}: {e}", shipped.display()));
    let cfg = dir.join("alertmanager.yml");
    write(&cfg, &alertmanager_for_test(&shipped, webhook));
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.path={}", dir.join("am-data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // No gossip: a single instance.
        .arg("--cluster.listen-address=");
    let p = Proc::spawn("alertmanager", cmd, dir.join("alertmanager.log"));
    wait_for("alertmanager ready", WAIT, || {
        http_get(&format!("http://127.0.0.1:{port}/-/ready")).is_ok_and(|(c, _)| c == 200)
    });
    (p, port)
}

/// Prometheus scraping the collector every second, with the shipped
/// recording rules and the alerts with their `for:` shortened
/// ([`shorten_for`]), sending to Alertmanager on `alertmanager`.
pub fn start_prometheus(dir: &Path, collector_http: &str, alertmanager: u16) -> Prometheus {
    let rules = grafana::dashboards_dir().join("prometheus");
    let alerts = std::fs::read_to_string(rules.join("alerts.yml")).unwrap();
    // Beside, not in, `dir`: Prometheus::start copies rule files into it.
    let short = dir.join("shortened");
    std::fs::create_dir_all(&short).unwrap();
    write(&short.join("alerts.yml"), &shorten_for(&alerts));
    Prometheus::start(
        dir,
        &PromConfig {
            interval_s: 1,
            rule_files: vec![rules.join("recording.yml"), short.join("alerts.yml")],
            scrape_configs: format!(
                "  - job_name: boltwatch-collector\n    honor_labels: true\n    \
                 static_configs:\n      - targets: ['{collector_http}']\n        \
                 labels:\n          cluster: {CLUSTER}\n"
            ),
            flags: vec!["--rules.alert.resend-delay=1s".into()],
            alertmanager: Some(alertmanager),
        },
    )
}

/// Everything the scenarios share.
pub struct Stack {
    pub hook: Webhook,
    pub prom: Prometheus,
    _alertmanager: Proc,
    am_port: u16,
    pub collector: Collector,
}

impl Stack {
    pub fn start(dir: &Path) -> Stack {
        let hook = Webhook::start();
        let collector = start_collector(dir);
        let (am, am_port) = start_alertmanager(dir, hook.port);
        let prom = start_prometheus(dir, &collector.http.to_string(), am_port);
        Stack {
            hook,
            prom,
            _alertmanager: am,
            am_port,
            collector,
        }
    }

    /// POSTs a JSON body to the collector's HTTP API with the write token;
    /// panics unless 2xx.
    pub fn post(&self, path: &str, body: &str) {
        boltwatch_tests::procs::http_post_json(self.collector.http, path, body);
    }

    /// Waits for a delivered alert matching `pred`.
    pub fn wait(&self, what: &str, pred: impl Fn(&Delivered) -> bool) {
        self.hook.wait(what, &self.prom, pred)
    }

    /// Waits until the webhook received `alertname` with `status`
    /// (`firing`, `resolved`) for `node`.
    pub fn wait_alert(&self, status: &str, alertname: &str, node: &str) {
        self.wait(&format!("{alertname} {status} for {node}"), |x| {
            x.is(status, alertname, node)
        })
    }

    /// Fails with `why` if the webhook has received `alertname` with
    /// `status` for `node`.
    pub fn assert_never(&self, status: &str, alertname: &str, node: &str, why: &str) {
        let all = self.hook.all();
        assert!(
            !all.iter().any(|x| x.is(status, alertname, node)),
            "{why}: {all:#?}"
        );
    }

    /// Waits until Alertmanager holds `alertname` for `node` (so
    /// Prometheus fired it) and suppresses it by inhibition; fails with
    /// what Alertmanager holds.
    pub fn wait_inhibited(&self, alertname: &str, node: &str) {
        let url = format!("http://127.0.0.1:{}/api/v2/alerts", self.am_port);
        let deadline = Instant::now() + WAIT;
        loop {
            let held: Value = http_get(&url)
                .ok()
                .and_then(|(_, body)| serde_json::from_str(&body).ok())
                .unwrap_or(Value::Null);
            let inhibited = held.as_array().into_iter().flatten().any(|a| {
                a["labels"]["alertname"] == alertname
                    && a["labels"]["node"] == node
                    && a["status"]["state"] == "suppressed"
                    && a["status"]["inhibitedBy"]
                        .as_array()
                        .is_some_and(|by| !by.is_empty())
            });
            if inhibited {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{alertname} for {node} never held inhibited within {WAIT:?}\n\
                 alertmanager: {held:#}\nprometheus alerts: {}",
                self.prom.alerts()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits until Prometheus holds no `alertname` for `node`, pending or
    /// firing.
    pub fn wait_inactive(&self, alertname: &str, node: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let active =
                self.prom.api("/api/v1/alerts").map(|d| {
                    d["alerts"].as_array().into_iter().flatten().any(|a| {
                        a["labels"]["alertname"] == alertname && a["labels"]["node"] == node
                    })
                });
            if active == Ok(false) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{alertname} for {node} still active after {WAIT:?}: {}",
                self.prom.alerts()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
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
