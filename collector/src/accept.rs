//! Accepting connections on a listener the collector serves (gRPC ingest,
//! HTTP): one rule for a failed `accept`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

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
