//! Remote write end to end against real receivers from Debian:
//! `victoria-metrics` and `prometheus --web.enable-remote-write-receiver`.
//!
//! Records go in through the real gRPC ingest with timestamps in the last
//! hour (Prometheus's head refuses older samples); both receivers are then
//! queried through their HTTP APIs for exactly the stored values at the
//! records' timestamps. Prometheus is down while the first stretch is
//! ingested (the collector retries, then is stopped) and started before
//! the collector restarts; the second stretch then goes to both, and the
//! counters continue across the restart.

mod common;

use std::path::{Path, PathBuf};

use boltwatch_common::testing::free_tcp_port;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{metric, record, thermal, Collector};

/// Polls at most this many times, `POLL` apart (so at most 60 s).
const TRIES: u32 = 240;
const POLL: Duration = Duration::from_millis(250);

/// A receiver process, killed when dropped.
struct Receiver {
    child: Child,
    /// `http://127.0.0.1:PORT`, or `https://` when it serves TLS.
    base: String,
    /// A client that trusts the receiver's certificate, if it has one.
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// The files of a TLS receiver: its certificate and key, and the CA that
/// alone vouches for it.
struct Tls<'a> {
    cert: &'a Path,
    key: &'a Path,
    ca: &'a Path,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(cmd: &mut Command, what: &str) -> Child {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} must be installed (apt-get install {what}): {e}"))
}

impl Receiver {
    /// VictoriaMetrics on `port`, serving https with `tls` when given.
    fn victoria_metrics(port: u16, tls: Option<Tls<'_>>) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("victoria-metrics");
        cmd.arg(format!("-httpListenAddr=127.0.0.1:{port}"))
            .arg(format!("-storageDataPath={}", dir.path().display()))
            .arg("-retentionPeriod=1y");
        let (base, client) = match tls {
            None => (format!("http://127.0.0.1:{port}"), reqwest::Client::new()),
            Some(tls) => {
                cmd.arg("-tls")
                    .arg(format!("-tlsCertFile={}", tls.cert.display()))
                    .arg(format!("-tlsKeyFile={}", tls.key.display()));
                let ca = std::fs::read(tls.ca).unwrap();
                let client = reqwest::Client::builder()
                    .use_rustls_tls()
                    .tls_built_in_root_certs(false)
                    .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
                    .build()
                    .unwrap();
                (format!("https://127.0.0.1:{port}"), client)
            }
        };
        Receiver {
            child: spawn(&mut cmd, "victoria-metrics"),
            base,
            client,
            _dir: dir,
        }
    }

    fn prometheus(port: u16) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 1m\n").unwrap();
        let child = spawn(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("tsdb").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--web.enable-remote-write-receiver"),
            "prometheus",
        );
        Receiver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn ready(&mut self, path: &str) {
        for _ in 0..TRIES {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("receiver exited early: {status}");
            }
            if let Ok(r) = self.client.get(self.url(path)).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("{} never became ready", self.url(path));
    }
}

/// (timestamp ms, value) pairs of the one series matching `selector`.
async fn victoria_samples(vm: &Receiver, selector: &str, start_s: i64) -> Vec<(i64, f64)> {
    let _ = vm.client.get(vm.url("/internal/force_flush")).send().await;
    let r = vm
        .client
        .get(vm.url("/api/v1/export"))
        .query(&[("match[]", selector), ("start", &start_s.to_string())])
        .send()
        .await
        .expect("export");
    assert!(r.status().is_success(), "{}", r.status());
    let body = r.text().await.unwrap();
    let lines: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Vec::new();
    }
    assert_eq!(lines.len(), 1, "one series for {selector}: {body}");
    let series: Exported = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(series.timestamps.len(), series.values.len(), "{body}");
    let mut out: Vec<(i64, f64)> = series.timestamps.into_iter().zip(series.values).collect();
    out.sort_by_key(|p| p.0);
    out
}

/// One series of VictoriaMetrics' `/api/v1/export` (JSON lines).
#[derive(serde::Deserialize)]
struct Exported {
    timestamps: Vec<i64>,
    values: Vec<f64>,
}

/// [`victoria_samples`], polled (bounded) until there are at least `n`.
async fn victoria_at_least(
    vm: &Receiver,
    selector: &str,
    start_s: i64,
    n: usize,
) -> Vec<(i64, f64)> {
    let mut got = Vec::new();
    for _ in 0..TRIES {
        got = victoria_samples(vm, selector, start_s).await;
        if got.len() >= n {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    got
}

/// (timestamp ms, value) pairs of the one series matching `selector`.
async fn prometheus_samples(p: &Receiver, selector: &str, at_s: i64) -> Vec<(i64, f64)> {
    let r = reqwest::Client::new()
        .get(p.url("/api/v1/query"))
        .query(&[
            ("query", format!("{selector}[3h]")),
            ("time", at_s.to_string()),
        ])
        .send()
        .await
        .expect("query");
    assert!(r.status().is_success(), "{}", r.status());
    let v: serde_json::Value = r.json().await.unwrap();
    let result = v["data"]["result"].as_array().unwrap();
    if result.is_empty() {
        return Vec::new();
    }
    assert_eq!(result.len(), 1, "one series for {selector}: {v}");
    result[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let ts = (p[0].as_f64().unwrap() * 1000.0).round() as i64;
            (ts, p[1].as_str().unwrap().parse::<f64>().unwrap())
        })
        .collect()
}

/// The records of this test: node `a`, one thermal reading every 10 s.
fn ts_ms(base_ms: i64, seq: u64) -> i64 {
    base_ms + seq as i64 * 10_000
}

fn celsius(seq: u64) -> f64 {
    30.0 + seq as f64 * 0.25
}

async fn ingest(c: &Collector, base_ms: i64, seqs: std::ops::RangeInclusive<u64>) {
    let (mut agent, _) = c.agent("a", "boot1").await;
    let records = seqs
        .map(|s| {
            let mut r = record("a", "boot1", s, thermal("cpu", celsius(s)));
            r.unix_ns = ts_ms(base_ms, s) as u64 * 1_000_000;
            r
        })
        .collect();
    agent.send(records).await.expect("batch acked");
}

/// A collector that writes to `urls`, trusting only `ca` for https when
/// given.
async fn start(dir: &Path, urls: &[String], ca: Option<PathBuf>) -> Collector {
    let urls = urls.to_vec();
    Collector::start_with(dir, move |c| {
        c.remote_write.urls = urls;
        c.remote_write.external_labels = vec![("cluster".into(), "c1".into())];
        c.remote_write.batch_records = 7; // several batches per stretch
        c.remote_write.max_backlog_records = 1_000_000;
        c.remote_write.timeout = Duration::from_secs(10);
        c.remote_write.tls_ca_file = ca;
    })
    .await
}

const TEMP: &str = r#"boltwatch_temperature_celsius{cluster="c1",node="a",sensor="cpu"}"#;
const RECEIVED: &str = r#"boltwatch_records_received_total{cluster="c1",node="a",kind="thermal"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn victoria_metrics_and_prometheus_hold_exactly_the_stored_values() {
    let now_ms = boltwatch_common::clock::now_unix_ns() as i64 / 1_000_000;
    // Half an hour ago, on a whole second: inside Prometheus's head window.
    let base_ms = (now_ms - 30 * 60 * 1000) / 1000 * 1000;
    let start_s = base_ms / 1000 - 60;
    let at_s = now_ms / 1000 + 60;

    let mut vm = Receiver::victoria_metrics(free_tcp_port(), None);
    vm.ready("/health").await;
    let prom_port = free_tcp_port();
    let urls = vec![
        vm.url("/api/v1/write"),
        format!("http://127.0.0.1:{prom_port}/api/v1/write"),
    ];
    let dir = tempfile::tempdir().unwrap();

    // Stretch 1: Prometheus is down.
    let c = start(dir.path(), &urls, None).await;
    ingest(&c, base_ms, 1..=20).await;
    let want = |seqs: std::ops::RangeInclusive<u64>, f: fn(u64) -> f64| -> Vec<(i64, f64)> {
        seqs.map(|s| (ts_ms(base_ms, s), f(s))).collect()
    };
    let got = victoria_at_least(&vm, TEMP, start_s, 20).await;
    assert_eq!(got, want(1..=20, celsius), "VictoriaMetrics, stretch 1");
    let body = c.metrics().await;
    let prom_endpoint = format!(
        r#"boltwatch_remote_write_samples_sent_total{{endpoint="{}"}}"#,
        urls[1]
    );
    assert_eq!(metric(&body, &prom_endpoint), Some(0.0), "{body}");
    // The endpoint that is down falls behind: its lag grows past 0 while
    // the sender retries.
    let prom_lag = format!(
        r#"boltwatch_remote_write_lag_seconds{{endpoint="{}"}}"#,
        urls[1]
    );
    let mut body = body;
    for _ in 0..TRIES {
        if metric(&body, &prom_lag).is_some_and(|l| l > 0.0) {
            break;
        }
        tokio::time::sleep(POLL).await;
        body = c.metrics().await;
    }
    assert!(metric(&body, &prom_lag).is_some_and(|l| l > 0.0), "{body}");
    c.stop().await;

    // Prometheus comes up; the collector restarts and resumes both.
    let mut prom = Receiver::prometheus(prom_port);
    prom.ready("/-/ready").await;
    let c = start(dir.path(), &urls, None).await;
    let body = c.metrics().await;
    assert_eq!(
        metric(
            &body,
            r#"boltwatch_records_received_total{node="a",kind="thermal"}"#
        ),
        Some(20.0),
        "counters rebuilt from the store:\n{body}"
    );
    ingest(&c, base_ms, 21..=40).await;

    let (mut vm_temp, mut prom_temp) = (Vec::new(), Vec::new());
    for _ in 0..TRIES {
        vm_temp = victoria_samples(&vm, TEMP, start_s).await;
        prom_temp = prometheus_samples(&prom, TEMP, at_s).await;
        if vm_temp.len() >= 40 && prom_temp.len() >= 40 {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert_eq!(
        vm_temp,
        want(1..=40, celsius),
        "VictoriaMetrics temperature"
    );
    assert_eq!(prom_temp, want(1..=40, celsius), "Prometheus temperature");
    let count = |s: u64| s as f64;
    let vm_received = victoria_samples(&vm, RECEIVED, start_s).await;
    let prom_received = prometheus_samples(&prom, RECEIVED, at_s).await;
    assert_eq!(vm_received, want(1..=40, count), "VictoriaMetrics counter");
    assert_eq!(prom_received, want(1..=40, count), "Prometheus counter");

    // The last batch is in the receivers; its sender marks it delivered
    // (pending back to 0) just after.
    let caught_up = |body: &str| {
        urls.iter().all(|u| {
            let pending = format!(r#"boltwatch_remote_write_pending_samples{{endpoint="{u}"}}"#);
            metric(body, &pending) == Some(0.0)
        })
    };
    let mut body = c.metrics().await;
    for _ in 0..TRIES {
        if caught_up(&body) {
            break;
        }
        tokio::time::sleep(POLL).await;
        body = c.metrics().await;
    }
    assert_eq!(
        metric(
            &body,
            r#"boltwatch_records_received_total{node="a",kind="thermal"}"#
        ),
        Some(40.0)
    );
    for url in &urls {
        let failed = format!(r#"boltwatch_remote_write_samples_failed_total{{endpoint="{url}"}}"#);
        let dropped =
            format!(r#"boltwatch_remote_write_samples_dropped_total{{endpoint="{url}"}}"#);
        let pending = format!(r#"boltwatch_remote_write_pending_samples{{endpoint="{url}"}}"#);
        assert_eq!(metric(&body, &failed), Some(0.0), "{body}");
        assert_eq!(metric(&body, &dropped), Some(0.0), "{body}");
        assert_eq!(metric(&body, &pending), Some(0.0), "{body}");
        let lag = format!(r#"boltwatch_remote_write_lag_seconds{{endpoint="{url}"}}"#);
        assert_eq!(metric(&body, &lag), Some(0.0), "caught up: {body}");
        let sent = format!(r#"boltwatch_remote_write_samples_sent_total{{endpoint="{url}"}}"#);
        // At least this collector's 20 temperatures and 20 counter values.
        assert!(metric(&body, &sent).is_some_and(|n| n >= 40.0), "{body}");
    }
    c.stop().await;
}

/// A CA and a server certificate for 127.0.0.1, as PEM files in `dir`:
/// (ca, cert, key).
fn tls_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rw-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let key = KeyPair::generate().unwrap();
    let cert = params
        .signed_by(&key, &Issuer::from_params(&ca_params, &ca_key))
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// Remote write to an https:// receiver (VictoriaMetrics with its own TLS)
/// whose certificate only the configured CA vouches for (the client has no
/// bundled roots): the stored values arrive exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn victoria_metrics_over_tls_holds_exactly_the_stored_values() {
    let now_ms = boltwatch_common::clock::now_unix_ns() as i64 / 1_000_000;
    let base_ms = (now_ms - 30 * 60 * 1000) / 1000 * 1000;
    let start_s = base_ms / 1000 - 60;
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_files(certs.path());

    let tls = Tls {
        cert: &cert,
        key: &key,
        ca: &ca,
    };
    let mut vm = Receiver::victoria_metrics(free_tcp_port(), Some(tls));
    vm.ready("/health").await;

    let dir = tempfile::tempdir().unwrap();
    let c = start(dir.path(), &[vm.url("/api/v1/write")], Some(ca.clone())).await;
    ingest(&c, base_ms, 1..=20).await;
    let got = victoria_at_least(&vm, TEMP, start_s, 20).await;
    let want: Vec<(i64, f64)> = (1..=20).map(|s| (ts_ms(base_ms, s), celsius(s))).collect();
    assert_eq!(got, want, "VictoriaMetrics over TLS");
    c.stop().await;
}
