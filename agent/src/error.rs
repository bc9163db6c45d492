//! The agent library's error type.

use std::net::SocketAddr;

/// Errors that stop the agent from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A listening socket could not be bound.
    #[error("binding {what} on {addr}: {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A worker thread could not be started.
    #[error("starting {what}: {source}")]
    Spawn {
        /// Which worker.
        what: String,
        /// Why.
        source: std::io::Error,
    },
}
