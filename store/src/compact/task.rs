//! The collector's minutely compaction task (see [`crate::upkeep`]).

use std::sync::atomic::{AtomicI64, Ordering};

use super::Compacted;
use crate::handle::StoreHandle;
use crate::{insert, upkeep};

/// Compacts, every `every` (a minute: [`upkeep::EVERY`]) until `stop`
/// turns true, the rows that every endpoint in `endpoints` (the
/// configured remote_write URLs) has and that arrived before the previous
/// round: the newest position is noted at each round's end and bounds the
/// next round. Rows already stored when the collector starts count as
/// arrived.
pub async fn run(
    store: StoreHandle,
    endpoints: Vec<String>,
    every: std::time::Duration,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    // A step and the round's end take turns on one task; the atomic only
    // lets both closures hold it.
    let arrived = match store.read_sql(insert::newest_pos).await {
        Ok(p) => AtomicI64::new(p),
        Err(e) => {
            tracing::warn!(error = %e, "compaction: reading the store failed; not compacting");
            return;
        }
    };
    let (store, endpoints, arrived) = (&store, &endpoints, &arrived);
    let step = || async move {
        let below = upkeep::below(store, endpoints).await?;
        store
            .compact_step(below.min(arrived.load(Ordering::Relaxed) + 1))
            .await
    };
    let round = |total: Compacted| async move {
        if total.rows_written < total.rows_read {
            tracing::debug!(
                rows_read = total.rows_read,
                rows_written = total.rows_written,
                mark = total.mark,
                "compacted live rows into packs"
            );
        }
        if let Ok(p) = store.read_sql(insert::newest_pos).await {
            arrived.store(p, Ordering::Relaxed);
        }
    };
    upkeep::rounds("compaction", every, stop, step, round).await
}
