//! gRPC ingest: one `Telemetry.Stream` per agent. Checks the `Hello`,
//! answers with a `Welcome` of the node's watermarks, stores each batch in
//! one transaction and acknowledges it only after the commit.
//!
//! - [`raw`]: the hand-wired tonic service (records kept as raw bytes).
//! - [`validate`]: pure checks of the `Hello` and of batches.
//! - [`decode`]: a batch's records decoded into storage kept per stream;
//!   [`fast`] reads the common record shapes.
//! - [`preface`]: the accept loop that turns away non-HTTP/2 connections.
//! - [`auth`]: bearer tokens and the nodes they may speak for.
//! - [`limit`]: per-node token buckets of records, bytes and Hellos.
//! - [`series`]: the per-node cardinality budget of `/metrics`.
//! - [`conn`]: connection caps of the gRPC port.
//! - [`pending`]: the places of connections without an accepted Hello.
//!
//! Failures are answered with a gRPC status and counted in
//! `boltwatch_ingest_errors_total{kind}`; the collector carries on. Refusals
//! that the agent should retry later (store full or read-only, rate limit)
//! are UNAVAILABLE or RESOURCE_EXHAUSTED and store nothing of the batch, so
//! the agent keeps the records in its spool. Without an auth table every
//! agent is accepted for any node name.

pub mod auth;
pub mod conn;
pub mod decode;
pub mod fast;
pub mod limit;
pub mod pending;
mod policy;
pub mod preface;
pub mod raw;
pub mod series;
pub mod service;
pub mod validate;

pub use policy::Policy;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use boltwatch_proto::v1::{
    collector_message, Ack, BootWatermark, CollectorMessage, Hello, Welcome,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::export::SharedMetrics;
use boltwatch_exposition::agent::AgentInfo;
use boltwatch_store::{StoreHandle, Watermark};
use raw::{RawAgentMessage, RawMsg, Responses};

/// How long a new stream may take to send its Hello.
pub const HELLO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The ingest logic behind [`service::TelemetryService`].
pub struct Ingest {
    store: StoreHandle,
    metrics: SharedMetrics,
    shutdown: watch::Receiver<bool>,
    policy: Policy,
    buckets: Mutex<HashMap<String, limit::NodeLimits>>,
    series: Mutex<series::Budget>,
}

fn to_proto(w: Vec<Watermark>) -> Vec<BootWatermark> {
    w.into_iter()
        .map(|w| BootWatermark {
            boot_id: w.boot_id,
            highest_seq: w.highest_seq,
        })
        .collect()
}

/// Who a stream's credentials say it may speak for: the nodes of its
/// bearer token and the names of its verified client certificate, each
/// when present.
#[derive(Clone, Copy)]
struct Identity<'a> {
    token: Option<&'a auth::Allowed>,
    cert: Option<&'a tokio_rustls::rustls::pki_types::CertificateDer<'static>>,
}

/// A stream that sent an accepted Hello.
struct Opened {
    node: String,
    guard: OpenStream,
    inbound: Streaming<RawAgentMessage>,
    rules: validate::Rules,
}

/// Marks the node's stream closed when the stream task ends, however it
/// ends.
struct OpenStream {
    node: String,
    metrics: SharedMetrics,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.metrics.lock().on_stream_closed(&self.node);
        tracing::info!(node = %self.node, "agent stream closed");
    }
}

impl Ingest {
    /// Ingest into `store`, reporting to `metrics`, under `policy`; open
    /// streams end with `UNAVAILABLE` once `shutdown` turns true.
    pub fn new(
        store: StoreHandle,
        metrics: SharedMetrics,
        shutdown: watch::Receiver<bool>,
        policy: Policy,
    ) -> Self {
        Ingest {
            store,
            metrics,
            shutdown,
            series: Mutex::new(series::Budget::new(policy.max_series_per_node)),
            policy,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `f` on `node`'s buckets (created full). Called only for nodes
    /// the series budget admitted, so the map is bounded.
    fn limits<T>(&self, node: &str, f: impl FnOnce(&mut limit::NodeLimits, Instant) -> T) -> T {
        let now = Instant::now();
        let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let l = b
            .entry(node.to_string())
            .or_insert_with(|| limit::NodeLimits::new(&self.policy, now));
        f(l, now)
    }

    fn series(&self) -> std::sync::MutexGuard<'_, series::Budget> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a committed batch's new records to the metrics, except those
    /// stamped too far ahead of the collector's clock or that would give
    /// their node more label sets than its series budget (they stay
    /// stored, and are counted).
    fn apply(&self, node: &str, records: &decode::Decoded, o: &boltwatch_store::BatchOutcome) {
        let now = boltwatch_common::clock::now_unix_ns();
        let mut budget = self.series();
        let mut budget = budget.node(node);
        let mut m = self.metrics.lock();
        m.on_commit(node, o.duplicates, o.total_records, o.commit_seconds);
        let mut ahead = 0;
        for (r, new) in records.records().zip(&o.inserted) {
            if !*new {
                continue;
            }
            if validate::too_far_ahead(r, now, self.policy.max_clock_skew) {
                m.on_ingest_error("clock_skew");
                ahead += 1;
                continue;
            }
            let admitted = match &mut budget {
                Some(b) => b.admit(r),
                None => Err(series::first_kind(r)),
            };
            match admitted {
                Ok(()) => m.apply_record(r),
                Err(dim) => m.on_series_refused(dim, 1),
            }
        }
        if ahead > 0 {
            tracing::warn!(node, records = ahead, skew = ?self.policy.max_clock_skew,
                "records stamped ahead of the collector's clock kept off /metrics; check the node's clock");
        }
    }

    fn fail(&self, kind: &'static str, status: Status) -> Status {
        self.metrics.lock().on_ingest_error(kind);
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
        let allowed = match &self.policy.auth {
            None => None,
            Some(table) => {
                let header = request
                    .metadata()
                    .get("authorization")
                    .map(|v| v.as_bytes());
                match table.check(header) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        let s = Status::unauthenticated(e.to_string());
                        return Err(self.fail("unauthenticated", s));
                    }
                }
            }
        };
        let conn = request.extensions().get::<preface::ConnInfo>().cloned();
        let seen = conn.as_ref().map(|c| c.hello.clone());
        let cert = conn.and_then(|c| c.peer_cert);
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let who = Identity {
                token: allowed.as_ref(),
                cert: cert.as_ref(),
            };
            let Some(opened) = self.open(inbound, &tx, who).await else {
                return;
            };
            if let Some(seen) = seen {
                seen.set();
            }
            let Opened {
                node,
                guard: _guard,
                inbound,
                rules,
            } = opened;
            self.serve_batches(&node, &rules, inbound, tx).await;
        });
        Ok(tonic::Response::new(ReceiverStream::new(rx)))
    }

    /// Counts and logs a refusal and sends it as the stream's last message.
    async fn refuse(&self, tx: &Responder, (kind, status): Refusal) {
        let _ = tx.send(Err(self.fail(kind, status))).await;
    }

    /// Reads and checks the Hello, records it and sends the Welcome. On
    /// failure the error status has been sent and `None` is returned.
    async fn open(
        &self,
        mut inbound: Streaming<RawAgentMessage>,
        tx: &Responder,
        who: Identity<'_>,
    ) -> Option<Opened> {
        let (hello, watermarks) = match self.accept(&mut inbound, who).await {
            Ok(a) => a,
            Err(r) => {
                self.refuse(tx, r).await;
                return None;
            }
        };
        self.on_hello(&hello);
        let rules = self.rules(&hello, &watermarks);
        let guard = OpenStream {
            node: hello.node.clone(),
            metrics: self.metrics.clone(),
        };
        tracing::info!(node = %hello.node, boot_id = %hello.boot_id, version = %hello.agent_version,
            boots = watermarks.len(), "agent stream opened");
        tx.send(Ok(welcome(watermarks))).await.ok()?;
        Some(Opened {
            node: hello.node,
            guard,
            inbound,
            rules,
        })
    }

    /// Reads the Hello and checks it and the stream's right to speak for
    /// its node; then stores the node's boot and returns the Hello with
    /// the node's watermarks.
    async fn accept(
        &self,
        inbound: &mut Streaming<RawAgentMessage>,
        who: Identity<'_>,
    ) -> Result<(Hello, Vec<Watermark>), Refusal> {
        let hello = read_hello(inbound).await?;
        let row = validate::hello(&hello).map_err(invalid_argument)?;
        who.permits(&hello.node)
            .map_err(|m| ("permission_denied", Status::permission_denied(m)))?;
        self.no_twin(&hello.node)?;
        self.admit(&hello.node)?;
        let watermarks = self
            .store
            .hello(row)
            .await
            .map_err(|e| ("store", Status::unavailable(format!("store: {e}"))))?;
        Ok((hello, watermarks))
    }

    /// Refuses a node name that differs from a known node's only by case
    /// or a trailing dot ([`validate::twin`]).
    fn no_twin(&self, node: &str) -> Result<(), Refusal> {
        let m = self.metrics.lock();
        match validate::twin(node, m.known_nodes()) {
            None => Ok(()),
            Some(known) => Err((
                "node_name_twin",
                Status::invalid_argument(format!(
                    "node `{node}` differs from the known node `{known}` only by case or a \
                     trailing dot; node names are compared exactly: use `{known}`"
                )),
            )),
        }
    }

    /// Whether `node` may open a stream now: within the collector's node
    /// count, and not opening streams faster than its Hello bucket allows.
    fn admit(&self, node: &str) -> Result<(), Refusal> {
        if !self.series().admit_node(node) {
            let s = Status::resource_exhausted(format!(
                "the collector already tracks {} nodes",
                series::MAX_NODES
            ));
            return Err(("too_many_nodes", s));
        }
        if !self.limits(node, |l, now| l.hellos.take(1, now)) {
            let s = Status::resource_exhausted(format!(
                "node `{node}` opens streams too often; retry later"
            ));
            return Err(("hello_rate_limited", s));
        }
        Ok(())
    }

    /// Hands an accepted Hello to the metrics: the agent's info and the
    /// interfaces within the node's series budget.
    fn on_hello(&self, hello: &Hello) {
        let info = AgentInfo {
            version: hello.agent_version.clone(),
            os: hello.os.clone(),
            boot_id: hello.boot_id.clone(),
        };
        let (interfaces, refused) = self.series().interfaces(&hello.node, &hello.interfaces);
        let mut m = self.metrics.lock();
        m.on_hello(&hello.node, info, &interfaces);
        // Every interface: an end's MTU is no series of its own.
        m.on_hello_links(hello);
        m.on_series_refused(series::Dim::Interface, refused as u64);
    }

    /// What the stream's records must satisfy: the size cap, and a boot
    /// that is the Hello's, one the store knows or one the agent's spool
    /// still holds.
    fn rules(&self, hello: &Hello, watermarks: &[Watermark]) -> validate::Rules {
        let mut boots: std::collections::BTreeSet<String> =
            watermarks.iter().map(|w| w.boot_id.clone()).collect();
        boots.insert(hello.boot_id.clone());
        // Boots the agent's spool still holds (validated like every label).
        boots.extend(
            hello
                .spooled_boots
                .iter()
                .take(validate::MAX_SPOOLED_BOOTS)
                .cloned(),
        );
        validate::Rules {
            max_record_bytes: self.policy.max_record_bytes,
            boots,
        }
    }

    /// Serves the stream's batches, each acked after its commit, until the
    /// agent ends the stream, a batch is refused or the collector stops.
    async fn serve_batches(
        &self,
        node: &str,
        rules: &validate::Rules,
        mut inbound: Streaming<RawAgentMessage>,
        tx: Responder,
    ) {
        let mut shutdown = self.shutdown.clone();
        // The stream's decoded records, kept from batch to batch so their
        // storage is reused.
        let mut decoded = decode::Decoded::default();
        loop {
            let msg = tokio::select! {
                _ = crate::accept::stopped(&mut shutdown) => {
                    let _ = tx.send(Err(Status::unavailable("collector shutting down"))).await;
                    return;
                }
                _ = tx.closed() => return,
                m = inbound.message() => m,
            };
            let batch = match batch_of(msg) {
                Ok(Some(b)) => b,
                Ok(None) => return,
                Err(r) => return self.refuse(&tx, r).await,
            };
            let ack = match self.store_batch(node, rules, batch, &mut decoded).await {
                Ok(a) => a,
                Err(r) => return self.refuse(&tx, r).await,
            };
            if tx.send(Ok(ack)).await.is_err() {
                return;
            }
        }
    }

    /// Checks one batch, takes it from the node's rate budget, stores it
    /// and hands its new records to the metrics; the Ack to send.
    async fn store_batch(
        &self,
        node: &str,
        rules: &validate::Rules,
        batch: raw::RawRecordBatch,
        decoded: &mut decode::Decoded,
    ) -> Result<CollectorMessage, Refusal> {
        let n = batch.records.len();
        if n > self.policy.max_batch_records {
            let s = Status::resource_exhausted(format!(
                "batch of {n} records; the limit is {}",
                self.policy.max_batch_records
            ));
            return Err(("batch_too_large", s));
        }
        let bytes: usize = batch.records.iter().map(|r| r.len()).sum();
        let checked = validate::batch_into(node, batch.records, rules, decoded)
            .map_err(|e| self.invalid_batch(e))?;
        self.limits(node, |l, now| l.take_batch(n, bytes, now))
            .map_err(|over| self.over_rate(node, over))?;
        let outcome = self.store.write_batch(checked).await.map_err(|e| {
            // Full disk, read-only file: nothing of the batch is stored and
            // it is not acked; the agent retries later from its spool.
            let s = Status::unavailable(format!("store cannot commit, retry later: {e}"));
            ("store", s)
        })?;
        self.apply(node, decoded, &outcome);
        Ok(CollectorMessage {
            msg: Some(collector_message::Msg::Ack(Ack {
                boots: to_proto(outcome.watermarks),
            })),
        })
    }

    /// The refusal of a batch that failed its checks.
    fn invalid_batch(&self, e: validate::Invalid) -> Refusal {
        match e {
            // With authentication, speaking for another node is a
            // permission matter, not a malformed batch.
            validate::Invalid::NodeMismatch { .. } if self.policy.auth.is_some() => (
                "permission_denied",
                Status::permission_denied(e.to_string()),
            ),
            e => invalid_argument(e),
        }
    }

    /// The refusal of a batch over the node's records or bytes per second.
    fn over_rate(&self, node: &str, over: limit::Over) -> Refusal {
        let (kind, what) = match over {
            limit::Over::Records => (
                "rate_limited",
                format!("{} records/s", self.policy.records_per_second),
            ),
            limit::Over::Bytes => (
                "byte_rate_limited",
                format!("{} bytes/s", self.policy.bytes_per_second),
            ),
        };
        let s = Status::resource_exhausted(format!("node `{node}` is over {what}; retry later"));
        (kind, s)
    }
}

/// What a stream answers on.
type Responder = mpsc::Sender<Result<CollectorMessage, Status>>;

/// A refused Hello or batch: the `boltwatch_ingest_errors_total` kind and
/// the status that ends the stream.
type Refusal = (&'static str, Status);

/// An [`validate::Invalid`] as the refusal of a malformed Hello or batch.
fn invalid_argument(e: validate::Invalid) -> Refusal {
    (e.kind(), Status::invalid_argument(e.to_string()))
}

impl Identity<'_> {
    /// Whether these credentials may speak for `node`; why not, if not.
    fn permits(&self, node: &str) -> Result<(), String> {
        if self.token.is_some_and(|a| !a.permits(node)) {
            return Err(format!("this token may not speak for node `{node}`"));
        }
        if self
            .cert
            .is_some_and(|c| !crate::tls::cert_names_node(c, node))
        {
            return Err(format!(
                "the client certificate does not name node `{node}`"
            ));
        }
        Ok(())
    }
}

/// The stream's first message, which must be a Hello, within
/// [`HELLO_TIMEOUT`].
async fn read_hello(inbound: &mut Streaming<RawAgentMessage>) -> Result<Hello, Refusal> {
    let first = match tokio::time::timeout(HELLO_TIMEOUT, inbound.message()).await {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => {
            let s = Status::invalid_argument("stream ended before a Hello");
            return Err(("no_hello", s));
        }
        Ok(Err(s)) => return Err(("transport", s)),
        Err(_) => {
            let s = Status::deadline_exceeded(format!("no Hello within {HELLO_TIMEOUT:?}"));
            return Err(("no_hello", s));
        }
    };
    match first.msg {
        Some(RawMsg::Hello(hello)) => Ok(hello),
        _ => {
            let s = Status::invalid_argument("the first message of a stream must be a Hello");
            Err(("no_hello", s))
        }
    }
}

/// The batch of a message after the Hello; `None` once the agent ended
/// the stream.
fn batch_of(
    msg: Result<Option<RawAgentMessage>, Status>,
) -> Result<Option<raw::RawRecordBatch>, Refusal> {
    match msg {
        Ok(Some(RawAgentMessage {
            msg: Some(RawMsg::Batch(b)),
        })) => Ok(Some(b)),
        Ok(Some(RawAgentMessage {
            msg: Some(RawMsg::Hello(_)),
        })) => {
            let s = Status::invalid_argument("Hello sent twice on one stream");
            Err(("bad_hello", s))
        }
        Ok(Some(RawAgentMessage { msg: None })) => {
            let s = Status::invalid_argument("empty AgentMessage");
            Err(("invalid_record", s))
        }
        Ok(None) => Ok(None),
        // An oversized or undecodable message, or the agent went away.
        // Send the status: ending the response stream without one would
        // tell the agent OK.
        Err(s) => Err(("transport", s)),
    }
}

/// The answer to an accepted Hello: the node's watermarks.
fn welcome(watermarks: Vec<Watermark>) -> CollectorMessage {
    CollectorMessage {
        msg: Some(collector_message::Msg::Welcome(Welcome {
            boots: to_proto(watermarks),
            collector_version: env!("CARGO_PKG_VERSION").into(),
        })),
    }
}
