//! The HTTP edge of the node's `/metrics`: HTTP/1.1 on the listener the
//! caller bound, `GET /metrics` only, gzip when the scraper asks for it
//! (Prometheus always does).
//!
//! Bounded like every port the agent opens: at most [`MAX_CONNECTIONS`]
//! at once (a connection beyond them is closed unanswered), one request
//! per connection, request headers within [`MAX_HEADER_BYTES`] and read
//! within [`HEADER_TIMEOUT`], the whole exchange within
//! [`CONNECTION_TIMEOUT`]. A request body is never read. The response is
//! bounded by the exposition itself: one node's series, whose peers,
//! interfaces, sensors and services come from this agent's own
//! configuration and discovery.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use boltwatch_exposition::{gzip, process, CONTENT_TYPE};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::NodeMetrics;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// Bytes of request line and headers (hyper's smallest read buffer).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// Time to receive the request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for a whole connection, request to last response byte.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The bounds of the port (the constants above; tests narrow them).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// Time to receive the request headers.
    pub header_timeout: Duration,
    /// Time for a whole connection.
    pub connection_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            connection_timeout: CONNECTION_TIMEOUT,
        }
    }
}

/// Serves `/metrics` on `listener` until the future is dropped (the agent
/// runs it as a crew task, which its stop token ends).
pub async fn serve(listener: TcpListener, metrics: NodeMetrics, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.connections));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // EMFILE and the like: wait instead of spinning.
                warn!(error = %e, "metrics listener accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!(%peer, "metrics connection refused: all {} slots taken", limits.connections);
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(respond(req, metrics).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(MAX_HEADER_BYTES)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(limits.connection_timeout, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(%peer, error = %e, "metrics connection failed"),
                Err(_) => debug!(%peer, "metrics connection timed out"),
            }
        });
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r
}

async fn respond(req: Request<Incoming>, metrics: NodeMetrics) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "only /metrics here\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let accepts_gzip = gzip::accepted(
        req.headers()
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    // Copy under the lock, render outside it: the spool's tap needs the
    // lock for every record.
    let snapshot = metrics.snapshot();
    let late = metrics.late_replies().clone();
    let rendered = tokio::task::spawn_blocking(move || {
        let text = super::render(&snapshot, &late, process::read_self());
        if accepts_gzip {
            gzip::compress(text.as_bytes())
        } else {
            text.into_bytes()
        }
    })
    .await;
    let Ok(body) = rendered else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "rendering failed\n");
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    if accepts_gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    r
}
