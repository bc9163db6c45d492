//! The startup rebuild of the shared exporter state from the store, so
//! `/metrics` counters continue across collector restarts.

use std::time::Instant;

use boltwatch_store::{StoreError, StoreHandle, LOG_CHUNK};

use crate::export::SharedMetrics;

/// Replays every stored record (rollups of pruned minutes first, then the
/// raw records in store order) into the shared exporter
/// state, so `/metrics` counters continue across collector restarts (and
/// agree with what remote write pushes). Runs before ingest starts, so no
/// record is applied twice. Returns (records, seconds).
pub async fn rebuild(
    store: &StoreHandle,
    metrics: &SharedMetrics,
) -> Result<(u64, f64), StoreError> {
    let started = Instant::now();
    let end = store.read(|db| db.log_newest()).await?;
    let m = metrics.clone();
    let mut n = store
        .read(move |db| {
            db.replay_rollups(|records, replaced| m.lock().apply_rollup(records, replaced))
        })
        .await?;
    let mut pos = 0i64;
    while pos < end {
        let chunk = store.read(move |db| db.log_after(pos, LOG_CHUNK)).await?;
        let Some(last) = chunk.last() else { break };
        pos = last.pos;
        let mut m = metrics.lock();
        for l in chunk.iter().filter(|l| l.pos <= end) {
            if let Some(r) = &l.record {
                m.apply_record(r);
                n += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    // The chunks were read on blocking threads and are all freed; without
    // this their pages stay with the allocator for the process's life.
    let released = boltwatch_common::memory::release_free();
    tracing::info!(
        records = n,
        seconds = secs,
        released,
        "rebuilt /metrics state from the store"
    );
    Ok((n, secs))
}
