//! The HTTP servers: `/metrics` (Prometheus text format), `/healthz` and the
//! JSON API ([`crate::api`], which reads the same [`AppState`]), on listeners the caller bound. By default everything is on
//! one listener; with `api_listen` the API has its own, so `/metrics` can be
//! reachable by Prometheus while the API stays private (or the reverse).
//!
//! Each listener has its own accept loop ([`server`]: connection cap,
//! header and idle deadlines) and the API its request limit
//! ([`crate::api::limit`]). Why no connections are held back for
//! `/metrics` on a shared listener: a connection says which path it wants
//! only in its request head, so a reserve could not tell Prometheus from
//! a stranger and the same flood of idle connections would fill it. The
//! header deadline bounds how long a silent connection holds a slot; to
//! keep `/metrics` reachable whatever happens on the API, give the API its
//! own listener (`api_listen`), whose connections never count against
//! `/metrics`' cap.

mod server;
mod stall;

pub use server::Limits;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::limit::ApiLimit;
use crate::api::AppState;
use crate::Config;
use boltwatch_exposition::CONTENT_TYPE;

/// `/metrics` and `/healthz`.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// `/api/v1/*`, behind the tokens ([`crate::api::token::require`]), then
/// the request limit `limit` (a request refused for its token takes no
/// slot).
pub fn api_router(state: AppState, limit: ApiLimit) -> Router {
    let token = state.tokens.clone();
    crate::api::routes()
        .merge(crate::soak::api::routes())
        .route_layer(middleware::from_fn_with_state(
            limit,
            crate::api::limit::admit,
        ))
        .route_layer(middleware::from_fn_with_state(
            token,
            crate::api::token::require,
        ))
        .with_state(state)
}

/// All HTTP routes on one listener.
pub fn router(state: AppState, limit: ApiLimit) -> Router {
    metrics_router(state.clone()).merge(api_router(state, limit))
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

/// The HTTP keys of the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Each listener's limits.
    pub limits: Limits,
    /// `/api/v1` requests handled at once.
    pub api_max_concurrent: usize,
}

impl Settings {
    /// The HTTP settings of `config`.
    pub fn of(config: &Config) -> Settings {
        Settings {
            limits: Limits {
                max_connections: config.http_max_connections,
                header_timeout: config.http_header_timeout,
                idle_timeout: config.http_idle_timeout,
            },
            api_max_concurrent: config.api_max_concurrent,
        }
    }
}

/// Serves `/metrics` and `/healthz` on `http` and the API on `api` (or on
/// `http` too when `api` is `None`), each listener within
/// `settings.limits` and the API within `api_max_concurrent` requests at
/// once, until `shutdown` turns true, then lets in-flight requests finish.
pub async fn serve(
    http: TcpListener,
    api: Option<TcpListener>,
    state: AppState,
    settings: Settings,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let metrics = state.metrics.clone();
    let limit = ApiLimit::new(settings.api_max_concurrent, metrics.clone());
    let limits = settings.limits;
    match api {
        None => server::serve(http, router(state, limit), limits, metrics, shutdown).await,
        Some(api) => {
            let m = server::serve(
                http,
                metrics_router(state.clone()),
                limits.clone(),
                metrics.clone(),
                shutdown.clone(),
            );
            let a = server::serve(api, api_router(state, limit), limits, metrics, shutdown);
            tokio::try_join!(m, a).map(|_| ())
        }
    }
}
