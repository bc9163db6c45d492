//! The HTTP listeners' accept loop: one per listener, each with its own
//! connection cap, serving a router over hyper's HTTP/1 with a header
//! deadline and an idle deadline, and draining on shutdown.
//!
//! Why not `axum::serve`: it has no header timeout, no idle timeout and no
//! connection cap, so 1100 idle connections used up the process's fds
//! (and ingest with them) and a request head sent a byte at a time stayed
//! open forever. Here, before anything is authorised or routed:
//!
//! - a connection over `http_max_connections` is closed at accept
//!   (`connection_limit`), so the fds a listener holds are bounded;
//! - a request head must be whole `http_header_timeout` after the
//!   connection opened or its previous answer was written (hyper's header
//!   read timeout, which also ends idle keep-alive connections, uncounted;
//!   `header_timeout`);
//! - a request body that sends no byte for `http_idle_timeout` fails the
//!   request (tower-http's body timeout, counted), and an answer the client does
//!   not read for as long ends the connection ([`super::stall`];
//!   `idle_timeout`).
//!
//! Each refusal is counted in `boltwatch_http_refused_total{kind}`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;
use tower_http::timeout::{TimeoutBody, TimeoutError};

use super::stall::{Activity, StallGuard};
use crate::export::SharedMetrics;

/// The limits of one HTTP listener (`http_*` keys).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections at most.
    pub max_connections: usize,
    /// Time to send a whole request head.
    pub header_timeout: Duration,
    /// Time a request body or an answer may move no byte.
    pub idle_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` turns true, then waits
/// until every open connection has ended (in-flight requests finish,
/// idle ones close; the caller bounds the wait with `shutdown_grace`).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    metrics: SharedMetrics,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let (stream, peer) = tokio::select! {
            _ = crate::accept::stopped(&mut shutdown) => break,
            x = crate::accept::next(&listener, "HTTP") => x,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.lock().on_http_refused("connection_limit");
            tracing::info!(%peer, "HTTP connection over http_max_connections closed");
            drop(stream);
            continue;
        };
        tokio::spawn(connection(
            stream,
            slot,
            router.clone(),
            limits.clone(),
            metrics.clone(),
            shutdown.clone(),
        ));
    }
    // Every connection holds a slot until it ends: having them all back
    // means every connection has ended.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
    Ok(())
}

/// Serves one connection until it ends, holding its slot.
async fn connection(
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    router: Router,
    limits: Limits,
    metrics: SharedMetrics,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let activity = Arc::new(Activity::default());
    let io = TokioIo::new(StallGuard::new(
        stream,
        limits.idle_timeout,
        metrics.clone(),
        activity.clone(),
    ));
    let idle = limits.idle_timeout;
    let count = metrics.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let count = count.clone();
        let req = req.map(|b| {
            // A body that stalled past the idle timeout fails its request
            // (the handler answers 400) and is counted as the refusal it is.
            Body::new(TimeoutBody::new(idle, b).map_err(move |e| {
                if e.is::<TimeoutError>() {
                    count.lock().on_http_refused("idle_timeout");
                }
                e
            }))
        });
        router.clone().oneshot(req)
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let ended: Result<(), hyper::Error> = tokio::select! {
        r = conn.as_mut() => r,
        _ = crate::accept::stopped(&mut shutdown) => {
            // Ends the connection after the request in flight, at once
            // when there is none.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    match ended {
        // A keep-alive connection that went quiet after its answer: the
        // deadline ends it as it should, but nobody was refused.
        Err(e) if e.is_timeout() && activity.idle_after_answer() => {
            tracing::debug!(?peer, "idle HTTP keep-alive connection closed");
        }
        Err(e) if e.is_timeout() => {
            metrics.lock().on_http_refused("header_timeout");
            tracing::info!(
                ?peer,
                "HTTP connection without a whole request head in time closed"
            );
        }
        Err(e) => tracing::debug!(?peer, error = %e, "HTTP connection ended"),
        Ok(()) => {}
    }
}
