//! TLS, and with a client CA mutual TLS, on the gRPC port (rustls with the
//! ring provider: pure Rust plus ring's C, which cross-checks for macOS).
//!
//! The certificate, key and client CA are files read at start and again on
//! SIGHUP: [`Tls::reload`] builds a whole new server config and swaps it in
//! for connections accepted afterwards; streams already open keep theirs,
//! so a rotation drops no agent. A reload that fails (a half-written file)
//! keeps the old config and says why.
//!
//! With a client CA every connection must present a certificate that CA
//! signed, and a stream may speak only for a node its certificate names
//! (a DNS subject alternative name equal to the node name): the identity
//! comes from the certificate instead of, or besides, a bearer token.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tokio_rustls::rustls::{self, pki_types, server::WebPkiClientVerifier, ServerConfig};

use pki_types::pem::PemObject;
use pki_types::{CertificateDer, PrivateKeyDer};

/// The TLS files (`[tls]` in the config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Server certificate chain, PEM.
    pub cert: Option<PathBuf>,
    /// Its private key, PEM.
    pub key: Option<PathBuf>,
    /// CA whose client certificates are required (mutual TLS), PEM.
    pub client_ca: Option<PathBuf>,
}

/// Why the TLS files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file is missing, unreadable or not the PEM expected.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// rustls refused the combination (a key that does not match the
    /// certificate, an unusable CA).
    #[error("TLS setup ({cert}): {message}")]
    Config {
        /// The certificate file, to say which setup failed.
        cert: PathBuf,
        /// rustls's reason.
        message: String,
    },
}

/// The live TLS setup of the gRPC port.
#[derive(Debug)]
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    current: RwLock<Arc<ServerConfig>>,
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// Reads the files of `s`; `None` when TLS is off (no certificate).
    pub fn load(s: &Settings) -> Result<Option<Arc<Tls>>, TlsError> {
        let (Some(cert), Some(key)) = (&s.cert, &s.key) else {
            return Ok(None);
        };
        let tls = Tls {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: s.client_ca.clone(),
            current: RwLock::new(Arc::new(Self::build(cert, key, s.client_ca.as_deref())?)),
        };
        Ok(Some(Arc::new(tls)))
    }

    fn build(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<ServerConfig, TlsError> {
        let chain = certs(cert)?;
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| file_error(key, e))?;
        let setup = |e: rustls::Error| TlsError::Config {
            cert: cert.to_path_buf(),
            message: e.to_string(),
        };
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(setup)?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certs(ca)? {
                    roots.add(c).map_err(|e| file_error(ca, e))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots.into(), provider())
                        .build()
                        .map_err(|e| file_error(ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(chain, key_der).map_err(setup)?;
        // gRPC is HTTP/2 only; a client offering only http/1.1 fails the
        // handshake instead of failing later at the preface.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }

    /// Rereads the files and uses them for connections accepted from now
    /// on; on error the previous setup stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = Self::build(&self.cert, &self.key, self.client_ca.as_deref())?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
        Ok(())
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        tokio_rustls::TlsAcceptor::from(config)
    }

    /// Whether clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.client_ca.is_some()
    }
}

/// True when the (already verified) client certificate `cert` names
/// `node` as a DNS subject alternative name, exactly. DNS matching (what
/// webpki checks) ignores case and a trailing dot, so a certificate for
/// `node-a` would also speak for `NODE-A` and `node-a.`, each a node of
/// its own in the store: a node name must also equal one of the names
/// the certificate presents, byte for byte (no wildcard either). A node
/// name that is not a valid DNS name can never match.
pub fn cert_names_node(cert: &CertificateDer<'_>, node: &str) -> bool {
    let Ok(ee) = webpki::EndEntityCert::try_from(cert) else {
        return false;
    };
    let Ok(name) = pki_types::ServerName::try_from(node) else {
        return false;
    };
    ee.verify_is_valid_for_subject_name(&name).is_ok() && ee.valid_dns_names().any(|n| n == node)
}

/// Reloads `tls` on every SIGHUP until `stop` turns true.
#[cfg(unix)]
pub async fn reload_on_sighup(tls: Arc<Tls>, mut stop: tokio::sync::watch::Receiver<bool>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; TLS files are read at start only");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            got = hup.recv() => {
                if got.is_none() {
                    return;
                }
                match tls.reload() {
                    Ok(()) => tracing::info!(cert = %tls.cert.display(), "TLS files reloaded"),
                    Err(e) => tracing::error!(error = %e, "TLS reload failed; keeping the previous certificate"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_names_its_node_exactly() {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["node-a".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der();
        assert!(cert_names_node(der, "node-a"));
        for other in ["NODE-A", "Node-a", "node-a.", "node-b", "", "node a"] {
            assert!(!cert_names_node(der, other), "{other}");
        }
    }
}
