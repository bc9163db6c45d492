//! What the HTTP handlers share: `/metrics` and `/healthz` read it whole,
//! the API handlers take the parts they need (axum's `FromRef`).

use axum::extract::FromRef;

use super::token::ApiToken;
use crate::export::SharedMetrics;
use crate::store::StoreHandle;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The store (reads, and the health write check).
    pub store: StoreHandle,
    /// The metric state.
    pub metrics: SharedMetrics,
    /// The API read token, if one is configured.
    pub api_token: Option<ApiToken>,
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
