//! What the HTTP handlers share: `/metrics` and `/healthz` read it whole,
//! the API handlers take the parts they need (axum's `FromRef`).

use axum::extract::FromRef;

use super::token::Tokens;
use crate::export::SharedMetrics;
use boltwatch_store::StoreHandle;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The store (reads, and the health write check).
    pub store: StoreHandle,
    /// The metric state.
    pub metrics: SharedMetrics,
    /// The API's read and write tokens, as configured.
    pub tokens: Tokens,
}

impl FromRef<AppState> for StoreHandle {
    fn from_ref(s: &AppState) -> StoreHandle {
        s.store.clone()
    }
}

impl FromRef<AppState> for Tokens {
    fn from_ref(s: &AppState) -> Tokens {
        s.tokens.clone()
    }
}

impl FromRef<AppState> for SharedMetrics {
    fn from_ref(s: &AppState) -> SharedMetrics {
        s.metrics.clone()
    }
}
