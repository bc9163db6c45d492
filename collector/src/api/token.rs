//! The optional read token of `/api/v1`: when `api_token_file` is set, a
//! request must carry `authorization: Bearer TOKEN` or gets 401. `/metrics`
//! and `/healthz` never need it; to keep them private instead, bind the API
//! and the metrics to different addresses (`api_listen`).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ingest::auth::ct_eq;

/// The token, shared by the API routes.
#[derive(Clone)]
pub struct ApiToken(Arc<[u8]>);

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(..)")
    }
}

impl ApiToken {
    /// A token from its text (surrounding whitespace dropped); `None` when
    /// empty.
    pub fn new(text: &str) -> Option<ApiToken> {
        let t = text.trim();
        (!t.is_empty()).then(|| ApiToken(t.as_bytes().into()))
    }

    /// Reads the token file; the error names the file.
    pub fn load(path: &Path) -> Result<ApiToken, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("api_token_file {}: {e}", path.display()))?;
        ApiToken::new(&text)
            .ok_or_else(|| format!("api_token_file {}: the file is empty", path.display()))
    }

    /// Whether an `authorization` header value carries this token.
    pub fn permits(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        ct_eq(given, &self.0)
    }
}

/// Middleware: 401 without the token, when one is configured.
pub async fn require(State(token): State<Option<ApiToken>>, req: Request, next: Next) -> Response {
    if let Some(t) = &token {
        let h = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if !t.permits(h) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(
                    serde_json::json!({ "error": "this API needs `authorization: Bearer TOKEN`" }),
                ),
            )
                .into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_token_must_match() {
        let t = ApiToken::new(" s3cret\n").unwrap();
        assert!(t.permits(Some(b"Bearer s3cret")));
        assert!(!t.permits(Some(b"Bearer s3cre")));
        assert!(!t.permits(Some(b"s3cret")));
        assert!(!t.permits(None));
        assert!(ApiToken::new(" \n").is_none());
    }
}
