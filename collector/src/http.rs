//! The HTTP servers: `/metrics` (Prometheus text format), `/healthz` and the
//! JSON API ([`crate::api`], which reads the same [`AppState`]), on listeners the caller bound. By default everything is on
//! one listener; with `api_listen` the API has its own, so `/metrics` can be
//! reachable by Prometheus while the API stays private (or the reverse).

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::future::IntoFuture;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::AppState;
use boltwatch_exposition::CONTENT_TYPE;

/// `/metrics` and `/healthz`.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// `/api/v1/*`, behind the read token when one is configured (writes
/// check the write token themselves).
pub fn api_router(state: AppState) -> Router {
    let token = state.tokens.clone();
    crate::api::routes()
        .merge(crate::soak::api::routes())
        .route_layer(middleware::from_fn_with_state(
            token,
            crate::api::token::require,
        ))
        .with_state(state)
}

/// All HTTP routes on one listener.
pub fn router(state: AppState) -> Router {
    metrics_router(state.clone()).merge(api_router(state))
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap) -> Response {
    // Copy the state under the lock and render outside it: rendering is the
    // slow part, and ingest needs the lock for every batch. The sweep
    // (stale agents) changes the shared state, so it runs under the lock.
    let snapshot = {
        let mut m = st.metrics.lock();
        m.sweep(std::time::Instant::now());
        m.clone()
    };
    let gzip = boltwatch_exposition::gzip::accepted(
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    let rendered = tokio::task::spawn_blocking(move || {
        let mut m = snapshot;
        m.set_process(boltwatch_exposition::process::read_self());
        let body = m.render();
        gzip.then(|| boltwatch_exposition::gzip::compress(body.as_bytes()))
            .ok_or(body)
    })
    .await;
    let text = (header::CONTENT_TYPE, CONTENT_TYPE);
    match rendered {
        Ok(Err(body)) => ([text], body).into_response(),
        Ok(Ok(gz)) => (
            [
                text,
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "accept-encoding"),
            ],
            gz,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
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

/// Serves `/metrics` and `/healthz` on `http` and the API on `api` (or on
/// `http` too when `api` is `None`) until `shutdown` turns true, then lets
/// in-flight requests finish.
pub async fn serve(
    http: TcpListener,
    api: Option<TcpListener>,
    state: AppState,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let stopped = |rx: watch::Receiver<bool>| async move {
        let mut rx = rx;
        let _ = rx.wait_for(|s| *s).await;
    };
    match api {
        None => {
            axum::serve(http, router(state))
                .with_graceful_shutdown(stopped(shutdown))
                .await
        }
        Some(api) => {
            let m = axum::serve(http, metrics_router(state.clone()))
                .with_graceful_shutdown(stopped(shutdown.clone()));
            let a = axum::serve(api, api_router(state)).with_graceful_shutdown(stopped(shutdown));
            tokio::try_join!(m.into_future(), a.into_future()).map(|_| ())
        }
    }
}
