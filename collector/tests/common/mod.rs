//! Shared harness for the collector's integration tests: a real collector
//! (`run` on port-0 loopback listeners and a temp data dir), a real tonic
//! agent client, reqwest for HTTP, and record builders.
#![allow(dead_code)] // Each test file uses a different subset.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use boltwatch_collector::{Config, Listeners};
use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::telemetry_client::TelemetryClient;
use boltwatch_proto::v1::{
    agent_message, collector_message, AgentMessage, AgentStats, BootWatermark, CollectorMessage,
    Hello, InterfaceCounters, LinkEvent, Record, RecordBatch, RttSummary, TemperatureSensor,
    ThermalReading,
};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

/// Upper bound on any single wait in these tests; reaching it is a failure,
/// not a measurement.
pub const WAIT: Duration = Duration::from_secs(20);

/// The API write token every test collector started here accepts (HTTP
/// writes are off without one).
pub const WRITE_TOKEN: &str = "test-write-token";

/// A collector running in this process.
pub struct Collector {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    /// The API's own address, when the test asked for `api_listen`.
    pub api: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), boltwatch_collector::Error>>,
}

/// A file holding [`WRITE_TOKEN`] beside the store in `dir`.
pub fn write_token_file(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("write-token");
    std::fs::write(&p, WRITE_TOKEN).unwrap();
    p
}

impl Collector {
    /// Starts a collector storing into a new temporary directory, which
    /// lives as long as the returned guard.
    pub async fn temp() -> (tempfile::TempDir, Collector) {
        Self::temp_with(|_| {}).await
    }

    /// [`Collector::temp`] with the configuration changed by `tune`.
    pub async fn temp_with(tune: impl FnOnce(&mut Config)) -> (tempfile::TempDir, Collector) {
        let dir = tempfile::tempdir().unwrap();
        let c = Collector::start_with(dir.path(), tune).await;
        (dir, c)
    }

    /// Starts a collector on `127.0.0.1:0` storing into `dir`.
    pub async fn start(dir: &Path) -> Collector {
        Self::start_with(dir, |_| {}).await
    }

    /// [`Collector::start`] with the configuration changed by `tune`.
    pub async fn start_with(dir: &Path, tune: impl FnOnce(&mut Config)) -> Collector {
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (grpc_addr, http_addr) = (grpc.local_addr().unwrap(), http.local_addr().unwrap());
        let mut config = Config {
            data_dir: dir.to_path_buf(),
            grpc_listen: grpc_addr,
            http_listen: http_addr,
            preface_timeout: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            api_write_token_file: Some(write_token_file(dir)),
            ..Config::default()
        };
        tune(&mut config);
        let api = match config.api_listen {
            Some(a) => Some(tokio::net::TcpListener::bind(a).await.unwrap()),
            None => None,
        };
        let api_addr = api.as_ref().map(|l| l.local_addr().unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(boltwatch_collector::run(
            config,
            Listeners { grpc, http, api },
            async move {
                let _ = rx.await;
            },
        ));
        Collector {
            grpc: grpc_addr,
            http: http_addr,
            api: api_addr,
            stop: Some(tx),
            task,
        }
    }

    /// Stops it and checks it ended cleanly.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("collector stopped in time")
            .expect("collector task did not panic")
            .expect("collector run returned Ok");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        tokio::time::timeout(WAIT, reqwest::get(self.url(path)))
            .await
            .expect("HTTP answered in time")
            .expect("HTTP request")
    }

    /// POSTs `body` to `path` with the write token: (status, JSON answer).
    pub async fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let r = reqwest::Client::new()
            .post(self.url(path))
            .bearer_auth(WRITE_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    pub async fn json(&self, path: &str) -> serde_json::Value {
        let r = self.get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        r.json().await.unwrap()
    }

    pub async fn metrics(&self) -> String {
        let r = self.get("/metrics").await;
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        r.text().await.unwrap()
    }

    /// Records stored over all nodes and boots, from `/api/v1/nodes`.
    pub async fn stored(&self) -> u64 {
        let v = self.json("/api/v1/nodes").await;
        let nodes = v["nodes"].as_array().unwrap().iter();
        let boots = nodes.flat_map(|n| n["boots"].as_array().unwrap().iter());
        boots.map(|b| b["records"].as_u64().unwrap()).sum()
    }

    /// `boltwatch_ingest_errors_total{kind}`; the series must exist.
    pub async fn errors(&self, kind: &str) -> f64 {
        let m = self.metrics().await;
        let series = format!("boltwatch_ingest_errors_total{{kind=\"{kind}\"}}");
        metric(&m, &series).unwrap_or_else(|| panic!("no error series for {kind}:\n{m}"))
    }

    /// Polls `/metrics` until `series` has `value` (bounded by [`WAIT`]).
    pub async fn wait_metric(&self, series: &str, value: f64) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let body = self.metrics().await;
            if metric(&body, series) == Some(value) {
                return body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{series} never became {value}; last:\n{body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Opens an agent stream and returns it with the Welcome's watermarks.
    pub async fn agent(&self, node: &str, boot: &str) -> (Agent, Vec<BootWatermark>) {
        self.agent_with(hello(node, boot)).await
    }

    /// [`Collector::agent`] with a Hello of the caller's.
    pub async fn agent_with(&self, hello: Hello) -> (Agent, Vec<BootWatermark>) {
        let mut agent = Agent::open(self.grpc, hello).await.expect("stream opens");
        let msg = agent.next().await.expect("a Welcome");
        let Some(collector_message::Msg::Welcome(w)) = msg.msg else {
            panic!("expected Welcome, got {msg:?}");
        };
        (agent, w.boots)
    }
}

/// The value of the sample whose name-and-labels is exactly `series`.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        let rest = l.strip_prefix(series)?.strip_prefix(' ')?;
        Some(if rest == "NaN" {
            f64::NAN
        } else {
            rest.parse().unwrap()
        })
    })
}

/// Asserts every `(series, value)` of `expect` in `body`, exactly or within
/// float rounding.
pub fn expect_metrics(body: &str, expect: &[(&str, f64)]) {
    for (series, want) in expect {
        let got = metric(body, series).unwrap_or_else(|| panic!("missing {series}\n{body}"));
        let close = (got - want).abs() <= want.abs() * 1e-12;
        assert!(close, "{series}: {got} != {want}");
    }
}

/// [`expect_metrics`] with the expectations written as exposition lines,
/// `series value`, one a line.
pub fn expect_exposition(body: &str, expect: &str) {
    let lines = expect.lines().map(str::trim).filter(|l| !l.is_empty());
    let pairs: Vec<(&str, f64)> = lines
        .map(|l| {
            let (series, v) = l.rsplit_once(' ').expect("`series value`");
            (series, v.parse().expect("a number"))
        })
        .collect();
    expect_metrics(body, &pairs);
}

pub fn hello(node: &str, boot: &str) -> Hello {
    Hello {
        schema_revision: boltwatch_proto::SCHEMA_REVISION,
        node: node.into(),
        agent_version: "0.1.0".into(),
        os: "linux 6.1.0".into(),
        boot_id: boot.into(),
        hostname: format!("{node}.local"),
        started_unix_ns: 1_700_000_000_000_000_000,
        ..Default::default()
    }
}

/// A real tonic client stream.
pub struct Agent {
    pub tx: mpsc::Sender<AgentMessage>,
    pub rx: tonic::Streaming<CollectorMessage>,
}

impl Agent {
    /// Opens a stream whose first message is `first`.
    pub async fn open_with(
        addr: SocketAddr,
        first: agent_message::Msg,
    ) -> Result<Agent, tonic::Status> {
        let mut client =
            tokio::time::timeout(WAIT, TelemetryClient::connect(format!("http://{addr}")))
                .await
                .expect("connected in time")
                .expect("gRPC connect");
        let (tx, rx) = mpsc::channel(16);
        tx.send(AgentMessage { msg: Some(first) }).await.unwrap();
        let resp = tokio::time::timeout(WAIT, client.stream(ReceiverStream::new(rx)))
            .await
            .expect("stream answered in time")?;
        Ok(Agent {
            tx,
            rx: resp.into_inner(),
        })
    }

    /// Opens a stream, waits for the response headers, and only then sends
    /// the Hello (as an agent awaiting `client.stream()` first would).
    pub async fn open_hello_after_headers(addr: SocketAddr, hello: Hello) -> Agent {
        let mut client = TelemetryClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let (tx, rx) = mpsc::channel(16);
        let resp = tokio::time::timeout(WAIT, client.stream(ReceiverStream::new(rx)))
            .await
            .expect("response headers without a Hello")
            .unwrap();
        tx.send(AgentMessage {
            msg: Some(agent_message::Msg::Hello(hello)),
        })
        .await
        .unwrap();
        Agent {
            tx,
            rx: resp.into_inner(),
        }
    }

    pub async fn open(addr: SocketAddr, hello: Hello) -> Result<Agent, tonic::Status> {
        Self::open_with(addr, agent_message::Msg::Hello(hello)).await
    }

    /// The next answer; panics if the stream ended or failed.
    pub async fn next(&mut self) -> Result<CollectorMessage, tonic::Status> {
        let m = tokio::time::timeout(WAIT, self.rx.message())
            .await
            .expect("answer in time")?;
        Ok(m.expect("stream still open"))
    }

    /// Sends a batch and waits for its Ack.
    pub async fn send(
        &mut self,
        records: Vec<Record>,
    ) -> Result<Vec<BootWatermark>, tonic::Status> {
        self.tx
            .send(AgentMessage {
                msg: Some(agent_message::Msg::Batch(RecordBatch { records })),
            })
            .await
            .expect("request stream open");
        let m = self.next().await?;
        match m.msg {
            Some(collector_message::Msg::Ack(a)) => Ok(a.boots),
            other => panic!("expected Ack, got {other:?}"),
        }
    }
}

/// Opens the telemetry stream on `addr` with messages of any type `M`
/// (hand-built wire shapes the generated client cannot send), sends
/// `msgs` and returns the still open sending side (the stream stays open
/// until it is dropped) and what the collector answers.
pub async fn raw_stream<M>(
    addr: SocketAddr,
    msgs: Vec<M>,
) -> Result<(mpsc::Sender<M>, tonic::Streaming<CollectorMessage>), tonic::Status>
where
    M: prost::Message + Default + Send + Sync + 'static,
{
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    for m in msgs {
        tx.send(m).await.unwrap();
    }
    let resp = grpc
        .streaming(
            tonic::Request::new(ReceiverStream::new(rx)),
            tonic::codegen::http::uri::PathAndQuery::from_static("/boltwatch.v1.Telemetry/Stream"),
            tonic_prost::ProstCodec::<M, CollectorMessage>::default(),
        )
        .await?;
    Ok((tx, resp.into_inner()))
}

pub fn wm(boot: &str, highest_seq: u64) -> BootWatermark {
    BootWatermark {
        boot_id: boot.into(),
        highest_seq,
    }
}

pub fn record(node: &str, boot: &str, seq: u64, payload: Payload) -> Record {
    Record {
        node: node.into(),
        boot_id: boot.into(),
        seq,
        unix_ns: 1_700_000_000_000_000_000 + seq * 1_000_000_000,
        payload: Some(payload),
    }
}

pub fn agent_stats(malformed: u64, dropped: u64) -> Payload {
    Payload::AgentStats(AgentStats {
        malformed_packets: malformed,
        dropped_records: dropped,
        ..Default::default()
    })
}

/// An RTT window with the given replies (ns) and losses.
pub fn rtt(peer: &str, window_start: u64, rtts_ns: &[u64], lost: u64) -> Payload {
    let mut sorted = rtts_ns.to_vec();
    sorted.sort();
    Payload::Rtt(RttSummary {
        peer: peer.into(),
        peer_address: "127.0.0.1:862".into(),
        interface: "lo".into(),
        window_start_unix_ns: window_start,
        window_ns: 1_000_000_000,
        sent: rtts_ns.len() as u64 + lost,
        received: rtts_ns.len() as u64,
        lost,
        min_ns: sorted[0],
        max_ns: *sorted.last().unwrap(),
        p50_ns: sorted[sorted.len() / 2],
        p99_ns: *sorted.last().unwrap(),
        mean_ns: sorted.iter().sum::<u64>() / sorted.len() as u64,
        sum_ns: sorted.iter().sum(),
        buckets: sparse_buckets(rtts_ns.iter().copied()),
        ..Default::default()
    })
}

pub fn counters(interface: &str, rx_bytes: u64, carrier: bool) -> Payload {
    Payload::Counters(InterfaceCounters {
        interface: interface.into(),
        receive_bytes: rx_bytes,
        transmit_bytes: rx_bytes * 2,
        receive_packets: 10,
        transmit_packets: 20,
        receive_errors: 1,
        transmit_errors: 2,
        receive_drops: 3,
        transmit_drops: 4,
        carrier,
        carrier_known: true,
        mtu: 9000,
        ..Default::default()
    })
}

pub fn thermal(sensor: &str, celsius: f64) -> Payload {
    Payload::Thermal(ThermalReading {
        sensors: vec![TemperatureSensor {
            name: sensor.into(),
            celsius,
            source: "fixture".into(),
            critical_celsius: 100.0,
        }],
        throttle: None,
    })
}

pub fn link_event(interface: &str, carrier: bool) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: interface.into(),
        carrier,
        admin_up: true,
        oper_state: if carrier { "up" } else { "lowerlayerdown" }.into(),
        ..Default::default()
    })
}

/// A tmpfs mounted for one test on a fresh temporary directory, unmounted
/// (then the directory removed) even if the test panics.
pub struct Tmpfs {
    dir: std::path::PathBuf,
    _outer: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs with `-o opts` (`size=4m`, `ro,size=1m`).
    pub fn mount(opts: &str) -> Tmpfs {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("mnt");
        std::fs::create_dir(&dir).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount(8) is required; run the tests as root (they never skip)");
        assert!(
            st.success(),
            "mount tmpfs needs root; the tests do not skip"
        );
        Tmpfs { dir, _outer: outer }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `mount -o remount,OPTS`.
    pub fn remount(&self, opts: &str) {
        let st = std::process::Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.dir)
            .status()
            .expect("mount(8)");
        assert!(st.success(), "remount {opts}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

/// Fills the file system of `dir` until ENOSPC; returns the filler's path.
pub fn fill(dir: &Path) -> std::path::PathBuf {
    use std::io::Write;
    let p = dir.join("filler");
    let mut f = std::fs::File::create(&p).unwrap();
    let chunk = vec![0xa5u8; 64 * 1024];
    for _ in 0..4096 {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    // Sub-chunk remainder.
    for _ in 0..65_536 {
        if f.write_all(&chunk[..512]).is_err() {
            break;
        }
    }
    let _ = f.sync_all();
    p
}
