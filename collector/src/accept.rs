//! What the collector's accept loops (gRPC ingest, HTTP) share: one rule
//! for a failed `accept`, and the wait for the shutdown signal.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The next connection on `listener`. A failed accept (EMFILE and
/// friends, under a flood of connections) is logged, naming `what`, and
/// waited out for 100 ms before the next try instead of spinning.
pub async fn next(listener: &TcpListener, what: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(x) => return x,
            Err(e) => {
                tracing::warn!(error = %e, "{what} accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Completes once `rx` reads true (shutdown was asked for) or its sender
/// is gone.
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    // Map the guard away here: it is not Send and must not live in callers'
    // futures.
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}
