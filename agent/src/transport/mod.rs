//! Ships records to the collector: one gRPC `Telemetry.Stream` at a time,
//! reconnecting with jittered backoff, resending whatever was not
//! acknowledged.
//!
//! Every record is appended to the [`Spool`] (numbered, written, fsynced
//! every [`SYNC_EVERY`]) before it is sent; sending reads the spool back
//! from disk. Probes keep running while the collector is away or refuses
//! (store full, rate limit, bad token): records pile up on disk (the oldest
//! dropped and counted beyond the cap) and go out on the next stream, from
//! the collector's per-boot watermarks in its `Welcome`.
//!
//! The transport needs no stop signal of its own: it flushes and returns
//! when the record channel closes, that is when the last
//! [`crate::sink::Sink`] is dropped. The agent drops its own only after
//! every producer has stopped and the final health record is out, so the
//! end of the channel is the end of the boot's records.

pub mod backoff;
pub mod reach;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use boltwatch_proto::v1::{
    agent_message, collector_message, telemetry_client::TelemetryClient, AgentMessage,
    CollectorMessage, Hello, RecordBatch,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tracing::{debug, info, warn};

use crate::health::Health;
use crate::sink::Emitted;
use crate::spool::Spool;
use backoff::Backoff;

/// How often appended records are fsynced.
pub const SYNC_EVERY: Duration = Duration::from_millis(200);

/// Records per batch; keeps a batch far under the 4 MiB message limit.
const BATCH_MAX: usize = 512;
/// Batches in flight on the HTTP/2 stream before we wait for it to drain.
/// Small on purpose: a replay of a large spool holds at most this many
/// decoded batches in memory, so RSS does not scale with the backlog.
const IN_FLIGHT_BATCHES: usize = 2;

/// Transport settings.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// Collector URL, `http://host:port`.
    pub collector: String,
    /// Sent first on every stream.
    pub hello: Hello,
    /// Bearer token sent as `authorization` metadata, if any.
    pub token: Option<String>,
    /// TLS files for an `https://` collector.
    pub tls: ClientTls,
    /// How long to keep trying to deliver queued records at shutdown.
    pub flush_timeout: Duration,
}

/// TLS to the collector: the CA that signed its certificate and, for
/// mutual TLS, the agent's own certificate and key. The files are read at
/// every connect, so rotated certificates are picked up by the next
/// reconnect without a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM CA certificate(s) trusted for the collector.
    pub ca: Option<PathBuf>,
    /// PEM client certificate chain.
    pub cert: Option<PathBuf>,
    /// PEM key of `cert`.
    pub key: Option<PathBuf>,
}

impl ClientTls {
    /// tonic's client config, or `None` without a CA (plaintext).
    fn load(&self) -> Result<Option<tonic::transport::ClientTlsConfig>, TransportError> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let Some(ca) = &self.ca else { return Ok(None) };
        let read = |p: &PathBuf| {
            std::fs::read(p)
                .map_err(|e| TransportError::Protocol(format!("TLS file {}: {e}", p.display())))
        };
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        Ok(Some(config))
    }
}

/// An error and its sources, `a: b: c`: tonic's own text is only
/// "transport error", the reason (a refused certificate, a reset
/// connection) is in the chain.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}

/// A plaintext HTTP/2 client that reaches a TLS port reads the server's
/// TLS alert as an HTTP/2 frame header, and h2 reports a frame size
/// error: on an `http://` URL that is almost always the reason, so say so.
fn plaintext_to_tls_hint(collector: &str, e: &TransportError) -> Option<&'static str> {
    let text = match e {
        TransportError::Status(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    (collector.starts_with("http://") && text.contains("FRAME_SIZE_ERROR")).then_some(
        "the collector may speak TLS on this port: use an https:// collector URL and --tls-ca",
    )
}

/// Transport failures that end one stream (the loop retries them).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Could not connect or the stream broke.
    #[error("collector connection: {}", causes(.0))]
    Connect(#[from] tonic::transport::Error),
    /// The collector answered with a gRPC error.
    #[error("collector refused: {0}")]
    Status(#[from] tonic::Status),
    /// The collector closed the stream or broke the protocol.
    #[error("collector protocol: {0}")]
    Protocol(String),
}

enum End {
    /// Every sink is gone and what could be flushed was.
    Shutdown,
    Failed(TransportError),
}

/// Runs until every [`crate::sink::Sink`] feeding `rx` is dropped (the
/// agent's producers have stopped), then flushes for at most
/// `flush_timeout`. Returns the spool (synced) so callers (and tests) can
/// see what was left undelivered.
pub async fn run(
    opts: TransportOptions,
    spool: Spool,
    rx: mpsc::UnboundedReceiver<Emitted>,
    health: Arc<Health>,
) -> Spool {
    let mut sync = tokio::time::interval(SYNC_EVERY);
    sync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut t = Transport {
        opts,
        queue: spool,
        rx,
        health,
        sync,
        backoff: Backoff::new(Duration::from_millis(200), Duration::from_secs(15)),
        connected_before: false,
    };
    t.publish();
    loop {
        match t.session().await {
            End::Shutdown => break,
            End::Failed(e) => {
                if t.wait_to_retry(e).await {
                    break;
                }
            }
        }
    }
    while let Ok(e) = t.rx.try_recv() {
        t.enqueue(e);
    }
    t.sync_spool();
    t.queue
}

/// The transport's state across streams.
struct Transport {
    opts: TransportOptions,
    queue: Spool,
    rx: mpsc::UnboundedReceiver<Emitted>,
    health: Arc<Health>,
    sync: tokio::time::Interval,
    backoff: Backoff,
    connected_before: bool,
}

impl Transport {
    /// Waits out the backoff after `e`, spooling records meanwhile. True
    /// when the sinks closed while waiting.
    async fn wait_to_retry(&mut self, e: TransportError) -> bool {
        let delay = self.backoff.next_delay(rand::random::<f64>());
        match plaintext_to_tls_hint(&self.opts.collector, &e) {
            Some(hint) => {
                warn!(collector = %self.opts.collector, error = %e, retry_in = ?delay, unacked = self.queue.unacked(), hint, "collector unavailable")
            }
            None => {
                warn!(collector = %self.opts.collector, error = %e, retry_in = ?delay, unacked = self.queue.unacked(), "collector unavailable")
            }
        }
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => return false,
                e = self.rx.recv() => match e {
                    Some(e) => self.enqueue(e),
                    None => return true,
                },
                _ = self.sync.tick() => self.sync_spool(),
            }
        }
    }

    fn sync_spool(&mut self) {
        if let Err(e) = self.queue.sync() {
            warn!(error = %e, "spool fsync failed");
        }
    }

    fn publish(&self) {
        self.health
            .dropped_records
            .store(self.queue.dropped(), Ordering::Relaxed);
        self.health
            .queued_records
            .store(self.queue.unacked(), Ordering::Relaxed);
        self.health
            .spool_bytes
            .store(self.queue.bytes(), Ordering::Relaxed);
        self.health.spool_oldest_unacked_unix_ns.store(
            self.queue.oldest_unacked_unix_ns().unwrap_or(0),
            Ordering::Relaxed,
        );
    }

    /// Appends `e` and whatever else is already waiting, with one write.
    fn enqueue(&mut self, e: Emitted) {
        let mut batch = vec![e];
        while batch.len() < 4096 {
            match self.rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        if let Err(e) = self.queue.append(batch) {
            warn!(error = %e, "spool write failed; records lost");
        }
        self.publish();
    }

    /// Applies the collector's per-boot watermarks.
    fn ack(&mut self, boots: &[boltwatch_proto::v1::BootWatermark]) {
        for b in boots {
            self.queue.ack(&b.boot_id, b.highest_seq);
        }
        self.publish();
    }

    /// One stream, from connecting to its end.
    async fn session(&mut self) -> End {
        // Connecting can take seconds; keep spooling records meanwhile.
        let opts = self.opts.clone();
        // The Hello announces the older boots the spool still holds: the
        // collector accepts records of no other old boot.
        let mut hello = opts.hello.clone();
        hello.spooled_boots = self.queue.older_boots();
        let connect = connect(&opts, hello);
        tokio::pin!(connect);
        let (out_tx, mut inbound) = loop {
            tokio::select! {
                r = &mut connect => match r {
                    Ok(c) => break c,
                    Err(e) => return End::Failed(e),
                },
                e = self.rx.recv() => match e {
                    Some(e) => self.enqueue(e),
                    None => return End::Shutdown,
                },
                _ = self.sync.tick() => self.sync_spool(),
            }
        };
        if let Err(e) = self.welcome(&mut inbound).await {
            return End::Failed(e);
        }
        // The backoff resets on the first Ack, not here: a collector that
        // welcomes and then refuses (store full, rate limit) must not be
        // hammered.
        self.queue.rewind();
        self.stream(&out_tx, &mut inbound).await
    }

    /// Reads the collector's `Welcome` and applies its watermarks.
    async fn welcome(
        &mut self,
        inbound: &mut tonic::Streaming<CollectorMessage>,
    ) -> Result<(), TransportError> {
        let welcome = match tokio::time::timeout(Duration::from_secs(10), inbound.message()).await {
            Ok(Ok(Some(m))) => m,
            Ok(Ok(None)) => {
                return Err(TransportError::Protocol(
                    "stream closed before Welcome".into(),
                ))
            }
            Ok(Err(s)) => return Err(s.into()),
            Err(_) => return Err(TransportError::Protocol("no Welcome within 10s".into())),
        };
        let Some(collector_message::Msg::Welcome(w)) = welcome.msg else {
            return Err(TransportError::Protocol(
                "first message was not Welcome".into(),
            ));
        };
        self.ack(&w.boots);
        info!(collector = %self.opts.collector, collector_version = %w.collector_version,
            unacked = self.queue.unacked(), "connected to collector");
        if self.connected_before {
            Health::incr(&self.health.reconnects);
        }
        self.connected_before = true;
        Ok(())
    }

    /// Sends the spool and applies acks until the stream fails or, once
    /// the sinks closed, everything is acknowledged or the flush times out.
    async fn stream(
        &mut self,
        out_tx: &mpsc::Sender<AgentMessage>,
        inbound: &mut tonic::Streaming<CollectorMessage>,
    ) -> End {
        let mut shutting_down = false;
        let flush_deadline = tokio::time::sleep(Duration::from_secs(86_400 * 365));
        tokio::pin!(flush_deadline);
        loop {
            if let Err(e) = self.fill(out_tx) {
                return End::Failed(e);
            }
            if shutting_down && self.queue.is_empty() {
                return End::Shutdown;
            }
            let has_unsent = self.queue.has_unsent();
            tokio::select! {
                m = inbound.message() => match m {
                    Ok(Some(m)) => {
                        if let Some(collector_message::Msg::Ack(a)) = m.msg {
                            self.backoff.reset();
                            self.ack(&a.boots);
                        }
                    }
                    Ok(None) => return End::Failed(TransportError::Protocol("collector closed the stream".into())),
                    Err(s) => return End::Failed(s.into()),
                },
                e = self.rx.recv(), if !shutting_down => match e {
                    Some(e) => self.enqueue(e),
                    None => {
                        shutting_down = true;
                        flush_deadline.as_mut().reset(tokio::time::Instant::now() + self.opts.flush_timeout);
                    }
                },
                _ = self.sync.tick() => self.sync_spool(),
                p = out_tx.reserve(), if has_unsent => {
                    // Room again: loop around and fill it.
                    drop(p);
                }
                _ = &mut flush_deadline, if shutting_down => {
                    warn!(undelivered = self.queue.unacked(), "shutdown flush timed out; kept in the spool");
                    return End::Shutdown;
                }
            }
        }
    }

    /// Sends whatever is unsent while the stream has room.
    fn fill(&mut self, out_tx: &mpsc::Sender<AgentMessage>) -> Result<(), TransportError> {
        while let Ok(permit) = out_tx.try_reserve() {
            let records = self.queue.next_batch(BATCH_MAX).map_err(|e| {
                warn!(error = %e, "reading the spool failed");
                TransportError::Protocol(format!("spool: {e}"))
            })?;
            if records.is_empty() {
                break;
            }
            debug!(n = records.len(), first = records[0].seq, "sending batch");
            permit.send(AgentMessage {
                msg: Some(agent_message::Msg::Batch(RecordBatch { records })),
            });
        }
        Ok(())
    }
}

/// Opens a stream and sends `hello` (the agent's, with the spool's older
/// boots filled in).
async fn connect(
    opts: &TransportOptions,
    hello: Hello,
) -> Result<
    (
        mpsc::Sender<AgentMessage>,
        tonic::Streaming<CollectorMessage>,
    ),
    TransportError,
> {
    let endpoint = tonic::transport::Endpoint::from_shared(opts.collector.clone())?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(10));
    let endpoint = match opts.tls.load()? {
        Some(tls) => endpoint.tls_config(tls)?,
        None => endpoint,
    };
    let channel = endpoint.connect().await?;
    let mut client = TelemetryClient::new(channel).max_decoding_message_size(16 * 1024 * 1024);
    let (out_tx, out_rx) = mpsc::channel(IN_FLIGHT_BATCHES);
    out_tx
        .send(AgentMessage {
            msg: Some(agent_message::Msg::Hello(hello)),
        })
        .await
        .map_err(|_| TransportError::Protocol("stream closed".into()))?;
    let mut request = tonic::Request::new(ReceiverStream::new(out_rx));
    if let Some(token) = &opts.token {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| TransportError::Protocol("token is not valid header text".into()))?;
        request.metadata_mut().insert("authorization", value);
    }
    let inbound = client.stream(request).await?.into_inner();
    Ok((out_tx, inbound))
}
