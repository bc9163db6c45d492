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

pub mod backoff;

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
/// `flush_timeout`. Returns the spool (synced) so callers (and tests) can
/// see what was left undelivered.
pub async fn run(
    opts: TransportOptions,
    mut queue: Spool,
    mut rx: mpsc::UnboundedReceiver<Emitted>,
    health: Arc<Health>,
    mut shutdown: watch::Receiver<bool>,
) -> Spool {
    let mut sync = tokio::time::interval(SYNC_EVERY);
    sync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    publish(&queue, &health);
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(15));
    let mut connected_before = false;
    loop {
        let end = session(
            &opts,
            &mut queue,
            &mut rx,
            &health,
            &mut shutdown,
            &mut connected_before,
            &mut backoff,
            &mut sync,
        )
        .await;
        match end {
            End::Shutdown => break,
            End::Failed(e) => {
                let delay = backoff.next_delay(rand::random::<f64>());
                warn!(error = %e, retry_in = ?delay, unacked = queue.unacked(), "collector unavailable");
                let sleep = tokio::time::sleep(delay);
                tokio::pin!(sleep);
                let stop = loop {
                    tokio::select! {
                        _ = &mut sleep => break false,
                        e = rx.recv() => match e {
                            Some(e) => enqueue(&mut queue, e, &mut rx, &health),
                            None => break true,
                        },
                        _ = sync.tick() => sync_spool(&mut queue),
                        _ = shutdown.changed() => break true,
                    }
                };
                if stop {
                    break;
                }
            }
        }
    }
    while let Ok(e) = rx.try_recv() {
        enqueue(&mut queue, e, &mut rx, &health);
    }
    sync_spool(&mut queue);
    queue
}

fn sync_spool(queue: &mut Spool) {
    if let Err(e) = queue.sync() {
        warn!(error = %e, "spool fsync failed");
    }
}

fn publish(queue: &Spool, health: &Health) {
    health
        .dropped_records
        .store(queue.dropped(), Ordering::Relaxed);
    health
        .queued_records
        .store(queue.unacked(), Ordering::Relaxed);
}

/// Appends `e` and whatever else is already waiting, with one write.
fn enqueue(
    queue: &mut Spool,
    e: Emitted,
    rx: &mut mpsc::UnboundedReceiver<Emitted>,
    health: &Health,
) {
    let mut batch = vec![e];
    while batch.len() < 4096 {
        match rx.try_recv() {
            Ok(e) => batch.push(e),
            Err(_) => break,
        }
    }
    if let Err(e) = queue.append(batch) {
        warn!(error = %e, "spool write failed; records lost");
    }
    publish(queue, health);
}

#[allow(clippy::too_many_arguments)]
async fn session(
    opts: &TransportOptions,
    queue: &mut Spool,
    rx: &mut mpsc::UnboundedReceiver<Emitted>,
    health: &Health,
    shutdown: &mut watch::Receiver<bool>,
    connected_before: &mut bool,
    backoff: &mut Backoff,
    sync: &mut tokio::time::Interval,
) -> End {
    // Connecting can take seconds; keep draining probes meanwhile.
    let mut hello = opts.hello.clone();
    hello.spooled_boots = queue.older_boots();
    let connect = connect(opts, hello);
    tokio::pin!(connect);
    let (out_tx, mut inbound) = loop {
        tokio::select! {
            r = &mut connect => match r {
                Ok(c) => break c,
                Err(e) => return End::Failed(e),
            },
            e = rx.recv() => match e {
                Some(e) => enqueue(queue, e, rx, health),
                None => return End::Shutdown,
            },
            _ = sync.tick() => sync_spool(queue),
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
            for b in &w.boots {
                queue.ack(&b.boot_id, b.highest_seq);
            }
            publish(queue, health);
            info!(collector = %opts.collector, collector_version = %w.collector_version,
                unacked = queue.unacked(), "connected to collector");
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
    // The backoff resets on the first Ack, not here: a collector that
    // welcomes and then refuses (store full, rate limit) must not be
    // hammered.
    queue.rewind();

    let mut shutting_down = false;
    let flush_deadline = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(flush_deadline);
    loop {
        // Send whatever is unsent while the stream has room.
        while let Ok(permit) = out_tx.try_reserve() {
            let records = match queue.next_batch(BATCH_MAX) {
                Ok(r) => r,
                Err(e) => {
                    warn!(error = %e, "reading the spool failed");
                    return End::Failed(TransportError::Protocol(format!("spool: {e}")));
                }
            };
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
                        backoff.reset();
                        for b in &a.boots {
                            queue.ack(&b.boot_id, b.highest_seq);
                        }
                        publish(queue, health);
                    }
                }
                Ok(None) => return End::Failed(TransportError::Protocol("collector closed the stream".into())),
                Err(s) => return End::Failed(s.into()),
            },
            e = rx.recv(), if !shutting_down => match e {
                Some(e) => enqueue(queue, e, rx, health),
                None => shutting_down = true,
            },
            _ = sync.tick() => sync_spool(queue),
            p = out_tx.reserve(), if has_unsent => {
                // Room again: loop around and fill it.
                drop(p);
            }
            _ = shutdown.changed(), if !shutting_down => {
                shutting_down = true;
                while let Ok(e) = rx.try_recv() {
                    enqueue(queue, e, rx, health);
                }
                flush_deadline.as_mut().reset(tokio::time::Instant::now() + opts.flush_timeout);
            }
            _ = &mut flush_deadline, if shutting_down => {
                warn!(undelivered = queue.unacked(), "shutdown flush timed out; kept in the spool");
                return End::Shutdown;
            }
        }
    }
}

/// Opens a stream and sends `hello` (the agent's, with the spool's older
/// boots filled in).
async fn connect(
    opts: &TransportOptions,
    hello: boltwatch_proto::v1::Hello,
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
