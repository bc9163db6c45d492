//! Agent authentication: which bearer token may speak for which node.
//! Pure: parses the `--auth-tokens` file text and checks a presented
//! `authorization` header; the service maps the outcome to a gRPC status.
//!
//! The file has one `NODE TOKEN` per line; `#` starts a comment, blank
//! lines are ignored, a token may be listed for several nodes (one line
//! each). Tokens are compared in constant time so the time to refuse does
//! not tell an attacker how much of a token was right.

use std::collections::BTreeSet;

/// A line of the tokens file that is not `NODE TOKEN`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct AuthFileError {
    /// File name.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Why a stream is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `authorization: Bearer ...` metadata (gRPC UNAUTHENTICATED).
    #[error("missing bearer token")]
    Missing,
    /// A token no line of the file has (UNAUTHENTICATED).
    #[error("unknown token")]
    Unknown,
}

/// The node names one token may speak for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed(BTreeSet<String>);

impl Allowed {
    /// True when the token may speak for `node`.
    pub fn permits(&self, node: &str) -> bool {
        self.0.contains(node)
    }
}

/// The parsed tokens file.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthTokens {
    entries: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for AuthTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the tokens themselves.
        f.debug_struct("AuthTokens")
            .field("entries", &self.entries.len())
            .finish()
    }
}

/// Constant-time equality of two byte strings (time depends on lengths
/// only).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

impl AuthTokens {
    /// Parses the text of a tokens file named `file`.
    pub fn parse(file: &str, text: &str) -> Result<AuthTokens, AuthFileError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let err = |message: String| AuthFileError {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(node), Some(token), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(err("expected `NODE TOKEN`".into()));
            };
            if token.len() < 16 {
                return Err(err(format!(
                    "token for `{node}` is {} characters; use at least 16",
                    token.len()
                )));
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(err("token must be printable ASCII".into()));
            }
            if entries
                .iter()
                .any(|(n, t): &(String, Vec<u8>)| n == node && t == token.as_bytes())
            {
                return Err(err(format!("`{node}` and this token are listed twice")));
            }
            entries.push((node.to_string(), token.as_bytes().to_vec()));
        }
        if entries.is_empty() {
            return Err(AuthFileError {
                file: file.to_string(),
                line: 0,
                message: "no `NODE TOKEN` lines: every agent would be refused".into(),
            });
        }
        Ok(AuthTokens { entries })
    }

    /// Builds the table from pairs (the lab's generated tokens).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> AuthTokens {
        AuthTokens {
            entries: pairs
                .into_iter()
                .map(|(n, t)| (n, t.into_bytes()))
                .collect(),
        }
    }

    /// Checks an `authorization` header value: the nodes its token may
    /// speak for. Every entry is compared, matched or not.
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<Allowed, AuthError> {
        let value = authorization.ok_or(AuthError::Missing)?;
        let token = value.strip_prefix(b"Bearer ").ok_or(AuthError::Missing)?;
        let mut nodes = BTreeSet::new();
        for (node, t) in &self.entries {
            if ct_eq(t, token) {
                nodes.insert(node.clone());
            }
        }
        if nodes.is_empty() {
            Err(AuthError::Unknown)
        } else {
            Ok(Allowed(nodes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# cluster tokens\n\
        m1 aaaaaaaaaaaaaaaaaaaa\n\
        \n\
        m2 bbbbbbbbbbbbbbbbbbbb   # second mini\n\
        m3 bbbbbbbbbbbbbbbbbbbb\n";

    #[test]
    fn tokens_map_to_their_nodes() {
        let t = AuthTokens::parse("tokens", FILE).unwrap();
        let a = t.check(Some(b"Bearer aaaaaaaaaaaaaaaaaaaa")).unwrap();
        assert!(a.permits("m1") && !a.permits("m2"));
        let b = t.check(Some(b"Bearer bbbbbbbbbbbbbbbbbbbb")).unwrap();
        assert!(b.permits("m2") && b.permits("m3") && !b.permits("m1"));
    }

    #[test]
    fn missing_and_unknown_tokens_are_refused() {
        let t = AuthTokens::parse("tokens", FILE).unwrap();
        assert_eq!(t.check(None), Err(AuthError::Missing));
        assert_eq!(
            t.check(Some(b"Basic aaaaaaaaaaaaaaaaaaaa")),
            Err(AuthError::Missing)
        );
        assert_eq!(
            t.check(Some(b"Bearer aaaaaaaaaaaaaaaaaaab")),
            Err(AuthError::Unknown)
        );
        assert_eq!(t.check(Some(b"Bearer aaaa")), Err(AuthError::Unknown));
        assert_eq!(t.check(Some(b"Bearer ")), Err(AuthError::Unknown));
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = AuthTokens::parse("t.txt", "# x\nm1\n").unwrap_err();
        assert_eq!(e.to_string(), "t.txt:2: expected `NODE TOKEN`");
        let e = AuthTokens::parse("t.txt", "m1 short\n").unwrap_err();
        assert!(e.to_string().starts_with("t.txt:1: token for `m1`"), "{e}");
        let e = AuthTokens::parse("t.txt", "m1 a b c\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = AuthTokens::parse("t.txt", "# nothing\n").unwrap_err();
        assert!(e.to_string().contains("no `NODE TOKEN`"), "{e}");
    }

    #[test]
    fn debug_does_not_leak_tokens() {
        let t = AuthTokens::parse("tokens", FILE).unwrap();
        assert!(!format!("{t:?}").contains("aaaa"));
    }

    #[test]
    fn ct_eq_is_equality() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
        assert!(!ct_eq(b"", b"a"));
        assert!(ct_eq(b"", b""));
    }
}
