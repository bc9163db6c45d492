//! The `[tls]` keys both binaries have: a PEM certificate (the agent's
//! client certificate, the collector's server chain) and its private key,
//! which come together or not at all.

use std::path::PathBuf;

use super::{ConfigError, Key, Schema, Where};

/// A configuration whose `[tls]` section holds a certificate and its key.
pub trait HasTlsPair {
    /// The fields `tls.cert` and `tls.key` set.
    fn tls_pair(&mut self) -> TlsPair<'_>;
}

/// The certificate and key fields of a `[tls]` section.
#[derive(Debug)]
pub struct TlsPair<'a> {
    /// `tls.cert`.
    pub cert: &'a mut Option<PathBuf>,
    /// `tls.key`.
    pub key: &'a mut Option<PathBuf>,
}

impl<'a> TlsPair<'a> {
    /// The two fields.
    pub fn new(cert: &'a mut Option<PathBuf>, key: &'a mut Option<PathBuf>) -> Self {
        TlsPair { cert, key }
    }
}

/// `tls.cert` and `--tls-cert`; the help says whose certificate it is.
pub const fn tls_cert_key<C: HasTlsPair>(help: &'static str, default_doc: &'static str) -> Key<C> {
    Key::new("tls.cert", help, |c: &mut C, v| {
        *c.tls_pair().cert = Some(v.path()?);
        Ok(())
    })
    .flag("tls-cert", "FILE")
    .default_doc(default_doc)
}

/// `tls.key` and `--tls-key`, the same in every binary.
pub const fn tls_key_key<C: HasTlsPair>() -> Key<C> {
    Key::new(
        "tls.key",
        "PEM private key of `tls.cert`",
        |c: &mut C, v| {
            *c.tls_pair().key = Some(v.path()?);
            Ok(())
        },
    )
    .flag("tls-key", "FILE")
    .default_doc("none")
}

/// The rule both binaries keep: a certificate without its key (or a key
/// without its certificate) is refused with `message`, at whichever of the
/// two the operator set.
pub fn check_tls_pair<C: Schema + HasTlsPair>(
    c: &mut C,
    at: &Where<'_, C>,
    message: &str,
) -> Result<(), ConfigError> {
    let pair = c.tls_pair();
    if pair.cert.is_some() != pair.key.is_some() {
        return Err(at.error(&["tls.cert", "tls.key"], message));
    }
    Ok(())
}
