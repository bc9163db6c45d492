//! Keeps `/metrics` following the running soaks: every [`REFRESH`] (and
//! right after a soak is changed over HTTP) it reads the soaks, computes
//! each running one's verdict so far and hands it to the exporter state.

use std::time::Duration;

use boltwatch_common::clock::now_unix_ns;
use tokio::sync::watch;

use crate::export::soak::{LiveMark, LiveSoak, MARKS_SHOWN};
use crate::export::SharedMetrics;
use boltwatch_store::{Db, StoreHandle};

use super::{stored, SoakError};

/// Shortest time between verdict refreshes.
pub const REFRESH: Duration = Duration::from_secs(60);
/// A refresh rescans the soak's records (a 72-hour soak is millions), so
/// the pause after one is at least this many times what it took: the
/// verdict refresh never takes more than a tenth of a core.
const PAUSE_FACTOR: u32 = 10;

/// Recomputes the running soaks' state once.
pub async fn refresh(store: &StoreHandle, metrics: &SharedMetrics) {
    let now = now_unix_ns();
    // The soaks table exists once the store has migrated; a read error is
    // logged, not fatal.
    let got = store.read(move |db| Ok(running(db, now))).await;
    match got.map_err(SoakError::from).and_then(|r| r) {
        Ok(running) => metrics.lock().set_soaks(running),
        Err(e) => tracing::warn!(error = %e, "soak verdict refresh failed"),
    }
}

/// Each running soak's verdict so far and newest marks.
fn running(db: &Db, now: u64) -> Result<Vec<LiveSoak>, SoakError> {
    let mut out = Vec::new();
    for s in stored::list(db)?.into_iter().filter(|s| s.running(now)) {
        let scope = super::load::scope_of(db, &s, now)?;
        let r = super::load::report(db, scope)?;
        let all = stored::marks(db, &s.name)?;
        let marks = all[all.len().saturating_sub(MARKS_SHOWN)..]
            .iter()
            .map(|m| LiveMark::new(&m.text, m.at_unix_ns, m.until_unix_ns))
            .collect();
        out.push(LiveSoak {
            nodes: s.nodes.join(","),
            elapsed_seconds: now.saturating_sub(s.start_unix_ns) as f64 / 1e9,
            pass: r.verdict.pass,
            lines: r
                .verdict
                .lines
                .iter()
                .filter_map(|l| Some((l.key, l.pass?)))
                .collect(),
            name: s.name,
            marks,
        });
    }
    Ok(out)
}

/// Refreshes until `stop` turns true.
pub async fn run(store: StoreHandle, metrics: SharedMetrics, mut stop: watch::Receiver<bool>) {
    loop {
        let took = tokio::time::Instant::now();
        refresh(&store, &metrics).await;
        let pause = REFRESH.max(took.elapsed() * PAUSE_FACTOR);
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
