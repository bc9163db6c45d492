//! Ships records to the collector: one gRPC `Telemetry.Stream` at a time,
//! reconnecting with jittered backoff, resending whatever was not
//! acknowledged.
//!
//! The queue ([`queue::Queue`]) is the ledger; this module is only the I/O
//! around it. Probes keep running while the collector is away: records pile
//! up in the bounded queue (oldest dropped and counted when full) and go out
//! on the next stream. A durable on-disk spool replaces the in-memory queue
//! in a later step; the protocol (Welcome watermarks, per-boot acks) is
//! already shaped for it.

pub mod backoff;
pub mod queue;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use boltwatch_proto::v1::{
    agent_message, collector_message, telemetry_client::TelemetryClient, AgentMessage, Hello,
    RecordBatch,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tracing::{debug, info, warn};

use crate::health::Health;
use crate::sink::Emitted;
use backoff::Backoff;
use queue::Queue;

/// Records per batch; keeps a batch far under the 4 MiB message limit.
const BATCH_MAX: usize = 512;
/// Batches in flight on the HTTP/2 stream before we wait for it to drain.
const IN_FLIGHT_BATCHES: usize = 8;

/// Transport settings.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// Collector URL, `http://host:port`.
    pub collector: String,
    /// Sent first on every stream.
    pub hello: Hello,
    /// In-memory queue capacity in records.
    pub queue_capacity: usize,
    /// How long to keep trying to deliver queued records at shutdown.
    pub flush_timeout: Duration,
}

/// Transport failures that end one stream (the loop retries them).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Could not connect or the stream broke.
    #[error("collector connection: {0}")]
    Connect(#[from] tonic::transport::Error),
    /// The collector answered with a gRPC error.
    #[error("collector refused: {0}")]
    Status(#[from] tonic::Status),
    /// The collector closed the stream or broke the protocol.
    #[error("collector protocol: {0}")]
    Protocol(String),
}

enum End {
    Shutdown,
    Failed(TransportError),
}

/// Runs until `shutdown` becomes true, then flushes for at most
/// `flush_timeout`. Returns the queue so callers (and tests) can see what was
/// left undelivered.
pub async fn run(
    opts: TransportOptions,
    mut rx: mpsc::UnboundedReceiver<Emitted>,
    health: Arc<Health>,
    mut shutdown: watch::Receiver<bool>,
) -> Queue {
    let mut queue = Queue::new(&opts.hello.node, &opts.hello.boot_id, opts.queue_capacity);
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(15));
    let mut connected_before = false;
    loop {
        match session(
            &opts,
            &mut queue,
            &mut rx,
            &health,
            &mut shutdown,
            &mut connected_before,
            &mut backoff,
        )
        .await
        {
            End::Shutdown => return queue,
            End::Failed(e) => {
                let delay = backoff.next_delay(rand::random::<f64>());
                warn!(error = %e, retry_in = ?delay, queued = queue.len(), "collector unavailable");
                let sleep = tokio::time::sleep(delay);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        e = rx.recv() => match e {
                            Some(e) => enqueue(&mut queue, e, &health),
                            None => return queue,
                        },
                        _ = shutdown.changed() => return queue,
                    }
                }
            }
        }
    }
}

fn enqueue(queue: &mut Queue, e: Emitted, health: &Health) {
    queue.push(e);
    health
        .dropped_records
        .store(queue.dropped(), Ordering::Relaxed);
    health
        .queued_records
        .store(queue.len() as u64, Ordering::Relaxed);
}

async fn session(
    opts: &TransportOptions,
    queue: &mut Queue,
    rx: &mut mpsc::UnboundedReceiver<Emitted>,
    health: &Health,
    shutdown: &mut watch::Receiver<bool>,
    connected_before: &mut bool,
    backoff: &mut Backoff,
) -> End {
    // Connecting can take seconds; keep draining probes meanwhile.
    let connect = connect(opts);
    tokio::pin!(connect);
    let (out_tx, mut inbound) = loop {
        tokio::select! {
            r = &mut connect => match r {
                Ok(c) => break c,
                Err(e) => return End::Failed(e),
            },
            e = rx.recv() => match e {
                Some(e) => enqueue(queue, e, health),
                None => return End::Shutdown,
            },
            _ = shutdown.changed() => return End::Shutdown,
        }
    };
    let welcome = match tokio::time::timeout(Duration::from_secs(10), inbound.message()).await {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => {
            return End::Failed(TransportError::Protocol(
                "stream closed before Welcome".into(),
            ))
        }
        Ok(Err(s)) => return End::Failed(s.into()),
        Err(_) => return End::Failed(TransportError::Protocol("no Welcome within 10s".into())),
    };
    match welcome.msg {
        Some(collector_message::Msg::Welcome(w)) => {
            if let Some(b) = w.boots.iter().find(|b| b.boot_id == queue.boot_id()) {
                queue.ack(b.highest_seq);
            }
            info!(collector = %opts.collector, collector_version = %w.collector_version, acked = queue.acked(), "connected to collector");
        }
        _ => {
            return End::Failed(TransportError::Protocol(
                "first message was not Welcome".into(),
            ))
        }
    }
    if *connected_before {
        Health::incr(&health.reconnects);
    }
    *connected_before = true;
    backoff.reset();
    queue.rewind();

    let mut shutting_down = false;
    let flush_deadline = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(flush_deadline);
    loop {
        // Send whatever is unsent while the stream has room.
        while let Ok(permit) = out_tx.try_reserve() {
            let records = queue.take_unsent(BATCH_MAX);
            if records.is_empty() {
                break;
            }
            debug!(n = records.len(), first = records[0].seq, "sending batch");
            permit.send(AgentMessage {
                msg: Some(agent_message::Msg::Batch(RecordBatch { records })),
            });
        }
        if shutting_down && queue.is_empty() {
            return End::Shutdown;
        }
        let has_unsent = queue.has_unsent();
        tokio::select! {
            m = inbound.message() => match m {
                Ok(Some(m)) => {
                    if let Some(collector_message::Msg::Ack(a)) = m.msg {
                        if let Some(b) = a.boots.iter().find(|b| b.boot_id == queue.boot_id()) {
                            queue.ack(b.highest_seq);
                            health.queued_records.store(queue.len() as u64, Ordering::Relaxed);
                        }
                    }
                }
                Ok(None) => return End::Failed(TransportError::Protocol("collector closed the stream".into())),
                Err(s) => return End::Failed(s.into()),
            },
            e = rx.recv(), if !shutting_down => match e {
                Some(e) => {
                    enqueue(queue, e, health);
                    while let Ok(e) = rx.try_recv() {
                        enqueue(queue, e, health);
                    }
                }
                None => shutting_down = true,
            },
            p = out_tx.reserve(), if has_unsent => {
                // Room again: loop around and fill it.
                drop(p);
            }
            _ = shutdown.changed(), if !shutting_down => {
                shutting_down = true;
                while let Ok(e) = rx.try_recv() {
                    enqueue(queue, e, health);
                }
                flush_deadline.as_mut().reset(tokio::time::Instant::now() + opts.flush_timeout);
            }
            _ = &mut flush_deadline, if shutting_down => {
                warn!(undelivered = queue.len(), "shutdown flush timed out");
                return End::Shutdown;
            }
        }
    }
}

async fn connect(
    opts: &TransportOptions,
) -> Result<
    (
        mpsc::Sender<AgentMessage>,
        tonic::Streaming<boltwatch_proto::v1::CollectorMessage>,
    ),
    TransportError,
> {
    let endpoint = tonic::transport::Endpoint::from_shared(opts.collector.clone())?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(10));
    let channel = endpoint.connect().await?;
    let mut client = TelemetryClient::new(channel);
    let (out_tx, out_rx) = mpsc::channel(IN_FLIGHT_BATCHES);
    out_tx
        .send(AgentMessage {
            msg: Some(agent_message::Msg::Hello(opts.hello.clone())),
        })
        .await
        .map_err(|_| TransportError::Protocol("stream closed".into()))?;
    let inbound = client
        .stream(ReceiverStream::new(out_rx))
        .await?
        .into_inner();
    Ok((out_tx, inbound))
}
