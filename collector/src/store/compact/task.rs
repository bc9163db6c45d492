//! The collector's minutely compaction task: steps of [`super::compact_step`]
//! through the store's writer, up to what every configured remote_write
//! endpoint has delivered and the last closed minute.

use super::Compacted;
use crate::store::retention::delivered_below;
use crate::store::rollup::{minute_of, MINUTE_NS};
use crate::store::StoreHandle;

/// How often compaction looks for closed minutes.
const EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The first minute not yet compacted at `now_ns`: a minute is left alone
/// until a whole minute after it ended, so the records of agents whose
/// clocks or spools run a little behind land in it before it is packed.
pub fn closed_before(now_ns: u64) -> u64 {
    minute_of(now_ns).saturating_sub(MINUTE_NS)
}

/// Compacts every minute until `stop` turns true. Each step is one writer
/// command, so batches queued meanwhile go first and stopping between
/// steps leaves no half-done step.
pub async fn run(
    store: StoreHandle,
    endpoints: Vec<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let mut total = Compacted::default();
        loop {
            if *stop.borrow() {
                return;
            }
            let before = closed_before(boltwatch_common::clock::now_unix_ns());
            let urls = endpoints.clone();
            let below = store
                .read(move |c| delivered_below(c, Some(&urls)).map(|b| b.0))
                .await;
            let step = match below {
                Ok(below) => store.compact_step(before, below).await,
                Err(e) => Err(e),
            };
            match step {
                Ok(s) => {
                    total.absorb(s);
                    if s.done {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "compaction failed; retrying in a minute");
                    break;
                }
            }
            tokio::task::yield_now().await;
        }
        if total.rows_written < total.rows_read {
            tracing::debug!(
                rows_read = total.rows_read,
                rows_written = total.rows_written,
                mark = total.mark,
                "compacted closed minutes into packs"
            );
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => {}
        }
    }
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
