//! gRPC ingest: one `Telemetry.Stream` per agent. Checks the `Hello`,
//! answers with a `Welcome` of the node's watermarks, stores each batch in
//! one transaction and acknowledges it only after the commit.
//!
//! - [`raw`]: the hand-wired tonic service (records kept as raw bytes).
//! - [`validate`]: pure checks of the `Hello` and of batches.
//! - [`preface`]: the accept loop that turns away non-HTTP/2 connections.
//!
//! Failures are answered with a gRPC status and counted in
//! `boltwatch_ingest_errors_total{kind}`; the collector carries on.

pub mod preface;
pub mod raw;
pub mod validate;

use std::sync::{Arc, Mutex};

use boltwatch_proto::v1::{collector_message, Ack, BootWatermark, CollectorMessage, Welcome};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::export::prometheus::MetricsState;
use crate::store::{StoreHandle, Watermark};
use raw::{RawAgentMessage, RawMsg, Responses};

/// The metric state shared by ingest, the acceptor and `/metrics`.
pub type SharedMetrics = Arc<Mutex<MetricsState>>;

/// Locks the metric state; a panic elsewhere must not stop the exporter.
pub fn lock(m: &SharedMetrics) -> std::sync::MutexGuard<'_, MetricsState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a new stream may take to send its Hello.
pub const HELLO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Completes once `rx` reads true (or its sender is gone).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    // Map the guard away here: it is not Send and must not live in callers'
    // futures.
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}

/// The ingest logic behind [`raw::TelemetryService`].
pub struct Ingest {
    store: StoreHandle,
    metrics: SharedMetrics,
    shutdown: watch::Receiver<bool>,
}

fn to_proto(w: Vec<Watermark>) -> Vec<BootWatermark> {
    w.into_iter()
        .map(|w| BootWatermark {
            boot_id: w.boot_id,
            highest_seq: w.highest_seq,
        })
        .collect()
}

/// Marks the node's stream closed when the stream task ends, however it
/// ends.
struct OpenStream {
    node: String,
    metrics: SharedMetrics,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        lock(&self.metrics).on_stream_closed(&self.node);
        tracing::info!(node = %self.node, "agent stream closed");
    }
}

impl Ingest {
    /// Ingest into `store`, reporting to `metrics`; open streams end with
    /// `UNAVAILABLE` once `shutdown` turns true.
    pub fn new(
        store: StoreHandle,
        metrics: SharedMetrics,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Ingest {
            store,
            metrics,
            shutdown,
        }
    }

    fn fail(&self, kind: &'static str, status: Status) -> Status {
        lock(&self.metrics).on_ingest_error(kind);
        tracing::warn!(kind, message = status.message(), "ingest error");
        status
    }

    /// Handles one agent stream: reads the `Hello`, answers `Welcome`, then
    /// serves batches from a task until the agent or the collector ends it.
    pub async fn stream(
        self: Arc<Self>,
        request: tonic::Request<Streaming<RawAgentMessage>>,
    ) -> Result<tonic::Response<Responses>, Status> {
        // Answer the call at once and read the Hello in the task: an agent
        // that awaits the response headers before sending its Hello must
        // not deadlock against a collector that awaits the Hello first.
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let Some((node, open, inbound)) = self.open(inbound, &tx).await else {
                return;
            };
            let _open = open;
            self.serve_batches(&node, inbound, tx).await;
        });
        Ok(tonic::Response::new(ReceiverStream::new(rx)))
    }

    /// Reads and checks the Hello, records it and sends the Welcome. On
    /// failure the error status has been sent and `None` is returned.
    async fn open(
        &self,
        mut inbound: Streaming<RawAgentMessage>,
        tx: &mpsc::Sender<Result<CollectorMessage, Status>>,
    ) -> Option<(String, OpenStream, Streaming<RawAgentMessage>)> {
        let refuse = |kind, status| async move {
            let _ = tx.send(Err(self.fail(kind, status))).await;
            None
        };
        let first = match tokio::time::timeout(HELLO_TIMEOUT, inbound.message()).await {
            Ok(Ok(Some(m))) => m,
            Ok(Ok(None)) => {
                return refuse(
                    "no_hello",
                    Status::invalid_argument("stream ended before a Hello"),
                )
                .await
            }
            Ok(Err(s)) => return refuse("transport", s).await,
            Err(_) => {
                let s = Status::deadline_exceeded(format!("no Hello within {HELLO_TIMEOUT:?}"));
                return refuse("no_hello", s).await;
            }
        };
        let Some(RawMsg::Hello(hello)) = first.msg else {
            let s = Status::invalid_argument("the first message of a stream must be a Hello");
            return refuse("no_hello", s).await;
        };
        let row = match validate::hello(&hello) {
            Ok(r) => r,
            Err(e) => return refuse(e.kind(), Status::invalid_argument(e.to_string())).await,
        };
        let watermarks = match self.store.hello(row).await {
            Ok(w) => w,
            Err(e) => return refuse("store", Status::unavailable(format!("store: {e}"))).await,
        };
        {
            let mut m = lock(&self.metrics);
            m.on_hello(&hello.node, &hello.agent_version, &hello.os, &hello.boot_id);
            m.on_hello_interfaces(&hello.node, &hello.interfaces);
        }
        let open = OpenStream {
            node: hello.node.clone(),
            metrics: self.metrics.clone(),
        };
        tracing::info!(node = %hello.node, boot_id = %hello.boot_id, version = %hello.agent_version,
            boots = watermarks.len(), "agent stream opened");
        let welcome = CollectorMessage {
            msg: Some(collector_message::Msg::Welcome(Welcome {
                boots: to_proto(watermarks),
                collector_version: env!("CARGO_PKG_VERSION").into(),
            })),
        };
        tx.send(Ok(welcome)).await.ok()?;
        Some((hello.node, open, inbound))
    }

    async fn serve_batches(
        &self,
        node: &str,
        mut inbound: Streaming<RawAgentMessage>,
        tx: mpsc::Sender<Result<CollectorMessage, Status>>,
    ) {
        let mut shutdown = self.shutdown.clone();
        loop {
            let msg = tokio::select! {
                _ = stopped(&mut shutdown) => {
                    let _ = tx.send(Err(Status::unavailable("collector shutting down"))).await;
                    return;
                }
                _ = tx.closed() => return,
                m = inbound.message() => m,
            };
            let batch = match msg {
                Ok(Some(RawAgentMessage {
                    msg: Some(RawMsg::Batch(b)),
                })) => b,
                Ok(Some(RawAgentMessage {
                    msg: Some(RawMsg::Hello(_)),
                })) => {
                    let s = Status::invalid_argument("Hello sent twice on one stream");
                    let _ = tx.send(Err(self.fail("bad_hello", s))).await;
                    return;
                }
                Ok(Some(RawAgentMessage { msg: None })) => {
                    let s = Status::invalid_argument("empty AgentMessage");
                    let _ = tx.send(Err(self.fail("invalid_record", s))).await;
                    return;
                }
                Ok(None) => return,
                Err(s) => {
                    // The agent went away or sent something undecodable.
                    self.fail("transport", s);
                    return;
                }
            };
            let checked = match validate::batch(node, batch.records) {
                Ok(c) => c,
                Err(e) => {
                    let s = Status::invalid_argument(e.to_string());
                    let _ = tx.send(Err(self.fail(e.kind(), s))).await;
                    return;
                }
            };
            let (records, news): (Vec<_>, Vec<_>) =
                checked.into_iter().map(|c| (c.record, c.new)).unzip();
            let outcome = match self.store.write_batch(news).await {
                Ok(o) => o,
                Err(e) => {
                    let s = Status::unavailable(format!("store: {e}"));
                    let _ = tx.send(Err(self.fail("store", s))).await;
                    return;
                }
            };
            {
                let mut m = lock(&self.metrics);
                m.on_commit(
                    node,
                    outcome.duplicates,
                    outcome.total_records,
                    outcome.commit_seconds,
                );
                for (r, new) in records.iter().zip(&outcome.inserted) {
                    if *new {
                        m.apply_record(r);
                    }
                }
            }
            let ack = CollectorMessage {
                msg: Some(collector_message::Msg::Ack(Ack {
                    boots: to_proto(outcome.watermarks),
                })),
            };
            if tx.send(Ok(ack)).await.is_err() {
                return;
            }
        }
    }
}
