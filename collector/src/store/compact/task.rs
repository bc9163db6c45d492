//! The collector's minutely compaction task (see [`crate::store::upkeep`]):
//! up to what every configured remote_write endpoint has delivered and the
//! last closed minute.

use super::Compacted;
use crate::store::rollup::{minute_of, MINUTE_NS};
use crate::store::{upkeep, StoreHandle};

/// The first minute not yet compacted at `now_ns`: a minute is left alone
/// until a whole minute after it ended, so the records of agents whose
/// clocks or spools run a little behind land in it before it is packed.
pub fn closed_before(now_ns: u64) -> u64 {
    minute_of(now_ns).saturating_sub(MINUTE_NS)
}

/// Compacts every minute until `stop` turns true.
pub async fn run(
    store: StoreHandle,
    endpoints: Vec<String>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let (store, endpoints) = (&store, &endpoints);
    let step = || async move {
        let before = closed_before(boltwatch_common::clock::now_unix_ns());
        let below = upkeep::below(store, endpoints).await?;
        store.compact_step(before, below).await
    };
    let round = |total: Compacted| async move {
        if total.rows_written < total.rows_read {
            tracing::debug!(
                rows_read = total.rows_read,
                rows_written = total.rows_written,
                mark = total.mark,
                "compacted closed minutes into packs"
            );
        }
    };
    upkeep::every_minute("compaction", stop, step, round).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minute_before_the_current_one_is_still_open() {
        let m = 1_795_996_800_000_000_000;
        assert_eq!(closed_before(m + 5 * MINUTE_NS + 1), m + 4 * MINUTE_NS);
        assert_eq!(closed_before(m + 5 * MINUTE_NS), m + 4 * MINUTE_NS);
        assert_eq!(closed_before(0), 0);
    }
}
