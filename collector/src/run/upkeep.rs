//! The store's upkeep roles: raw retention (when `retention.raw` is set)
//! and compaction (unless `--no-compact`), each bounded by what every
//! configured remote_write endpoint has delivered. Their steps are store
//! writer commands, so stopping them between steps (abort at shutdown)
//! leaves no half-done step.

use boltwatch_store::StoreHandle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::export::SharedMetrics;
use crate::Config;

/// Starts the configured upkeep tasks.
pub(super) fn start(
    config: &Config,
    store: &StoreHandle,
    metrics: &SharedMetrics,
    stop: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let endpoints = &config.remote_write.urls;
    let retention = config.raw_retention.map(|keep| {
        let m = metrics.clone();
        tokio::spawn(boltwatch_store::run_retention(
            store.clone(),
            keep,
            endpoints.clone(),
            move |mark, rollups| m.lock().set_retention(mark, rollups),
            stop.clone(),
        ))
    });
    let compaction = config.compact.then(|| {
        tokio::spawn(boltwatch_store::run_compaction(
            store.clone(),
            endpoints.clone(),
            boltwatch_store::UPKEEP_EVERY,
            stop.clone(),
        ))
    });
    retention.into_iter().chain(compaction).collect()
}
