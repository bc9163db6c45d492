//! Keeps `/metrics` following the running soaks. Every [`REFRESH`] (paced
//! so that it costs at most a tenth of a core) it reads the soaks and
//! rebuilds each running one's verdict so far. A write to one soak costs
//! bounded work, never a rebuild of every soak: a new soak gets its own
//! verdict, a mark only its soak's marks, a stop or delete only takes
//! its soak off.

use std::time::Duration;

use boltwatch_common::clock::now_unix_ns;
use tokio::sync::watch;

use crate::export::soak::{live_marks, LiveMark, LiveSoak};
use crate::export::SharedMetrics;
use crate::report::soak::worst_link::{worst_link, LINK_SCOPED};
use crate::report::soak::Report;
use boltwatch_store::{Db, StoreHandle};

use super::{stored, Mark, Soak, SoakError};

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

/// What changed in one soak, for [`after_write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Created or stopped: its verdict is built while it runs (the one
    /// report a write costs), else it is taken off.
    Verdict,
    /// A mark added: its marks are read again, no report.
    Marked,
    /// Deleted: it is taken off, no report.
    Deleted,
}

/// Brings soak `name`'s live state up to date after a write.
pub async fn after_write(store: &StoreHandle, metrics: &SharedMetrics, name: String, c: Change) {
    let now = now_unix_ns();
    let key = name.clone();
    let got = store
        .read(move |db| {
            Ok(match c {
                Change::Verdict => one(db, &key, now).map(Update::Soak),
                Change::Marked => marks_of(db, &key).map(Update::Marks),
                Change::Deleted => Ok(Update::Soak(None)),
            })
        })
        .await;
    match got.map_err(SoakError::from).and_then(|r| r) {
        Ok(Update::Soak(s)) => metrics.lock().put_soak(&name, s),
        Ok(Update::Marks(m)) => metrics.lock().set_soak_marks(&name, m),
        Err(e) => tracing::warn!(error = %e, soak = %name, "soak live update failed"),
    }
}

/// What [`after_write`] read.
enum Update {
    Soak(Option<LiveSoak>),
    Marks(Vec<LiveMark>),
}

/// Soak `name`'s live state at `now`, if it runs.
fn one(db: &Db, name: &str, now: u64) -> Result<Option<LiveSoak>, SoakError> {
    let s = stored::get(db, name)?;
    if !s.running(now) {
        return Ok(None);
    }
    live(db, s, now).map(Some)
}

/// The marks `/metrics` shows of soak `name`.
fn marks_of(db: &Db, name: &str) -> Result<Vec<LiveMark>, SoakError> {
    Ok(shown(&stored::marks(db, name)?))
}

/// The marks `/metrics` shows of `all`.
fn shown(all: &[Mark]) -> Vec<LiveMark> {
    live_marks(
        all.iter()
            .map(|m| (m.text.as_str(), m.at_unix_ns, m.until_unix_ns)),
    )
}

/// A running soak's verdict so far and newest marks.
fn live(db: &Db, s: Soak, now: u64) -> Result<LiveSoak, SoakError> {
    let scope = super::load::scope_of(db, &s, now)?;
    // The scope read the marks for the report; /metrics shows the same.
    let marks = shown(&scope.marks);
    let r = super::load::report(db, scope)?;
    Ok(LiveSoak {
        nodes: s.nodes.join(","),
        elapsed_seconds: now.saturating_sub(s.start_unix_ns) as f64 / 1e9,
        pass: r.verdict.pass,
        lines: r
            .verdict
            .lines
            .iter()
            .filter_map(|l| Some((l.key, l.pass?)))
            .collect(),
        worst_links: worst_links(&r),
        marks,
        name: s.name,
    })
}

/// The link setting each judged link-scoped line of `r`.
fn worst_links(r: &Report) -> Vec<(&'static str, String, String)> {
    let judged = |k: &str| {
        r.verdict
            .lines
            .iter()
            .any(|l| l.key == k && l.pass.is_some())
    };
    LINK_SCOPED
        .into_iter()
        .filter(|k| judged(k))
        .filter_map(|k| {
            let (node, peer) = worst_link(k, &r.links)?;
            Some((k, node.to_string(), peer.to_string()))
        })
        .collect()
}

/// Each running soak's verdict so far and newest marks.
fn running(db: &Db, now: u64) -> Result<Vec<LiveSoak>, SoakError> {
    stored::list(db)?
        .into_iter()
        .filter(|s| s.running(now))
        .map(|s| live(db, s, now))
        .collect()
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
