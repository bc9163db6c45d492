//! The crate's error type: what can stop the collector from starting or
//! keep it from serving. Per-stream and per-request failures are answered to
//! the client and counted, not turned into an [`Error`].

use crate::config::ConfigError;
use boltwatch_store::StoreError;

/// Why the collector could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration was rejected.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened or failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A socket or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The TLS files cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Grpc(#[from] tonic::transport::Error),
    /// A server task panicked or was cancelled.
    #[error("{0} task ended abnormally: {1}")]
    Task(&'static str, tokio::task::JoinError),
}
