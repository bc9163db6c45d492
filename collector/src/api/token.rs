//! The tokens of `/api/v1`. The read token (`api_token_file`), when set,
//! is what every request must carry (`authorization: Bearer TOKEN`) or
//! get 401. The write token (`api_write_token_file`) is the only thing
//! that opens HTTP writes (soak create, stop, delete, marks): without it
//! configured they answer 403 for everyone, so a stranger who reaches the
//! port, or a Grafana holding the read token for annotations, can stop or
//! change nothing. The write token reads too. `/metrics` and `/healthz`
//! never need a token; to keep them private instead, bind the API and the
//! metrics to different addresses (`api_listen`).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
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

    /// Reads the token file of config key `key`; the error names both.
    pub fn load(key: &str, path: &Path) -> Result<ApiToken, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{key} {}: {e}", path.display()))?;
        ApiToken::new(&text).ok_or_else(|| format!("{key} {}: the file is empty", path.display()))
    }

    /// Whether an `authorization` header value carries this token.
    pub fn permits(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        ct_eq(given, &self.0)
    }
}

/// The API's tokens, as configured.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    /// Every request needs this one (or the write token), when set.
    pub read: Option<ApiToken>,
    /// Writes need this one; without it they are off.
    pub write: Option<ApiToken>,
}

impl Tokens {
    /// Whether a request with this `authorization` header may read.
    fn may_read(&self, header: Option<&[u8]>) -> bool {
        match (&self.read, &self.write) {
            (None, _) => true,
            (Some(r), w) => r.permits(header) || w.as_ref().is_some_and(|w| w.permits(header)),
        }
    }

    /// Why a request with these headers may not write, if it may not: 403
    /// when writes are off, 401 without the write token.
    pub fn write_refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let Some(w) = &self.write else {
            return Some(refusal(
                StatusCode::FORBIDDEN,
                "HTTP writes are off: the collector has no `api_write_token_file`; use the `soak` command on the collector host",
            ));
        };
        let h = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        (!w.permits(h)).then(|| {
            refusal(
                StatusCode::UNAUTHORIZED,
                "writes need `authorization: Bearer WRITE_TOKEN`",
            )
        })
    }
}

fn refusal(code: StatusCode, why: &str) -> Response {
    let mut r = (code, axum::Json(serde_json::json!({ "error": why }))).into_response();
    if code == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

/// Middleware, the API's door: every request that is not a read (`GET`,
/// `HEAD`) is a write and needs the write token (403 while writes are
/// off, 401 without it); a read needs a token that may read, when a read
/// token is configured (401).
pub async fn require(State(tokens): State<Tokens>, req: Request, next: Next) -> Response {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if !read {
        if let Some(refused) = tokens.write_refusal(req.headers()) {
            return refused;
        }
        return next.run(req).await;
    }
    let h = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if !tokens.may_read(h) {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "this API needs `authorization: Bearer TOKEN`",
        );
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

    #[test]
    fn the_write_token_reads_and_writes_the_read_token_only_reads() {
        let tokens = Tokens {
            read: ApiToken::new("r"),
            write: ApiToken::new("w"),
        };
        let with = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
            h
        };
        assert!(tokens.may_read(Some(b"Bearer r")) && tokens.may_read(Some(b"Bearer w")));
        assert!(!tokens.may_read(None) && !tokens.may_read(Some(b"Bearer x")));
        assert!(tokens.write_refusal(&with("w")).is_none());
        let no = tokens.write_refusal(&with("r")).unwrap();
        assert_eq!(no.status(), StatusCode::UNAUTHORIZED);
        let off = Tokens::default().write_refusal(&with("w")).unwrap();
        assert_eq!(off.status(), StatusCode::FORBIDDEN);
        assert!(Tokens::default().may_read(None));
    }
}
