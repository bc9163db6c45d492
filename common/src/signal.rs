//! The shutdown signal both binaries stop on.

/// Resolves on SIGINT or SIGTERM (systemd and launchd stop services with
/// SIGTERM, a terminal with SIGINT). If the SIGTERM handler cannot be
/// installed, SIGINT alone still stops the process.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
