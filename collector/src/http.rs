//! The HTTP server: `/metrics` (Prometheus text format), `/healthz` and the
//! JSON API ([`crate::api`], which reads the same state through
//! [`FromRef`]), on a listener the caller bound.

use std::future::Future;

use axum::extract::{FromRef, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::export::{SharedMetrics, CONTENT_TYPE};
use crate::store::StoreHandle;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The store (reads, and the health write check).
    pub store: StoreHandle,
    /// The metric state.
    pub metrics: SharedMetrics,
}

impl FromRef<AppState> for StoreHandle {
    fn from_ref(s: &AppState) -> StoreHandle {
        s.store.clone()
    }
}

impl FromRef<AppState> for SharedMetrics {
    fn from_ref(s: &AppState) -> SharedMetrics {
        s.metrics.clone()
    }
}

/// All HTTP routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .merge(crate::api::routes())
        .merge(crate::soak::api::routes())
        .with_state(state)
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let process = crate::export::process::read_self();
    let body = {
        let mut m = st.metrics.lock();
        m.sweep(std::time::Instant::now());
        m.set_process(process);
        m.render()
    };
    if !crate::export::gzip::accepted(&headers) {
        return ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response();
    }
    let gz = crate::export::gzip::compress(body.as_bytes());
    (
        [
            (header::CONTENT_TYPE, CONTENT_TYPE),
            (header::CONTENT_ENCODING, "gzip"),
            (header::VARY, "accept-encoding"),
        ],
        gz,
    )
        .into_response()
}

async fn healthz(State(st): State<AppState>) -> impl IntoResponse {
    match st.store.ping().await {
        Ok(()) => (StatusCode::OK, "ok".to_string()),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store not writable: {e}"),
        ),
    }
}

/// Serves until `shutdown` completes, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
