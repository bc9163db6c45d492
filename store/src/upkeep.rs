//! The collector's minutely store upkeep, shared by raw retention and
//! compaction: every minute, steps until one says it is done, each step a
//! writer command (so batches queued meanwhile go first, and stopping
//! between steps leaves no half-done step), bounded by what every
//! configured remote_write endpoint has delivered.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use super::log::delivered_below;
use crate::error::StoreError;
use crate::handle::StoreHandle;

/// How often the collector's upkeep tasks look for work.
pub const EVERY: Duration = Duration::from_secs(60);

/// Records one upkeep step (a prune or a compaction) takes at most: a
/// bound on its transaction, on how long it holds the writer (batches
/// queue behind it) and on the memory it holds (100 to 200 bytes a
/// record).
pub const STEP_RECORDS: usize = 50_000;

/// Record bytes one upkeep step holds at most, however large a node made
/// its records (a node may send records up to the collector's
/// `max_record_bytes`; a pruned record is held whole and decoded, about
/// twice its size).
pub const STEP_BYTES: usize = 16 << 20;

/// What one step did, summed over a round.
pub trait Step: Copy + Default {
    /// Adds a later step's counts; its mark and verdict replace these.
    fn absorb(&mut self, later: Self);
    /// Nothing more to do now: the round ends.
    fn done(&self) -> bool;
}

/// The first position not yet delivered to every endpoint in `endpoints`
/// (the configured remote_write URLs): steps touch only rows before it.
pub async fn below(store: &StoreHandle, endpoints: &[String]) -> Result<i64, StoreError> {
    let urls = endpoints.to_vec();
    store
        .read_sql(move |c| delivered_below(c, Some(&urls)).map(|b| b.0))
        .await
}

/// Runs rounds of `step` every `every` until `stop` turns true, handing
/// each round's total to `round`. A failed step ends its round with a
/// warning naming `what`; the next round tries again.
pub async fn rounds<S, F, Fut, R, RFut>(
    what: &'static str,
    every: Duration,
    mut stop: watch::Receiver<bool>,
    mut step: F,
    mut round: R,
) where
    S: Step,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<S, StoreError>>,
    R: FnMut(S) -> RFut,
    RFut: Future<Output = ()>,
{
    loop {
        let mut total = S::default();
        loop {
            if *stop.borrow() {
                return;
            }
            match step().await {
                Ok(s) => {
                    total.absorb(s);
                    if s.done() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "{what} failed; retrying in a minute");
                    break;
                }
            }
            tokio::task::yield_now().await;
        }
        round(total).await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
    }
}
