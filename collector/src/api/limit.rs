//! How many `/api/v1` requests are handled at once (`api_max_concurrent`).
//! A request over the limit is answered 503 with `Retry-After` at once,
//! before it reads the store, and counted in
//! `boltwatch_http_refused_total{kind="api_busy"}`.
//!
//! Why: 300 report and list requests at once took 1.4 GB, 304 threads and
//! 889 fds, and a new agent's Hello waited 4.3 s behind them. Each request
//! holds a slot until its answer is built (our handlers build the whole
//! body), so the limit bounds the store reads, the decoding and the
//! answers in memory together. The limit sits behind the token check: a
//! stranger without the token gets 401 and takes no slot.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::export::SharedMetrics;

/// Seconds a refused client is told to wait: long enough that a retry
/// storm does not spin, short next to a dashboard's refresh.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// The API's request slots.
#[derive(Clone, Debug)]
pub struct ApiLimit {
    slots: Arc<Semaphore>,
    max: usize,
    metrics: SharedMetrics,
}

impl ApiLimit {
    /// At most `max` requests at once; refusals are counted in `metrics`.
    pub fn new(max: usize, metrics: SharedMetrics) -> ApiLimit {
        ApiLimit {
            slots: Arc::new(Semaphore::new(max)),
            max,
            metrics,
        }
    }
}

/// Middleware: runs the request in a slot, or answers 503 when none is
/// free.
pub async fn admit(State(limit): State<ApiLimit>, req: Request, next: Next) -> Response {
    let Ok(_slot) = limit.slots.clone().try_acquire_owned() else {
        limit.metrics.lock().on_http_refused("api_busy");
        return busy(limit.max);
    };
    next.run(req).await
}

fn busy(max: usize) -> Response {
    let why = format!(
        "{max} API requests are being handled (api_max_concurrent); retry after {RETRY_AFTER_SECONDS} s"
    );
    let mut r = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({ "error": why })),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    r
}
