//! The edges that drive pruning: which position every remote_write
//! endpoint has delivered, the `prune` command's loop, the collector's
//! minutely task, and the replay of rollups into `/metrics` and the
//! remote_write derivers at startup.

use boltwatch_proto::v1::Record;
use rusqlite::Connection;

use super::{minute_of, prune_step, scan, Pruned};
use crate::log::delivered_below;
use crate::upkeep::{self, Step};

/// Prunes every raw dense record before `cutoff_ns` in steps of one
/// transaction each (the `prune` command; safe beside `serve`, whose
/// writer takes turns through SQLite's lock). Returns the total and the
/// endpoint that held pruning back, if one did.
pub fn prune_before(
    conn: &mut Connection,
    cutoff_ns: u64,
    endpoints: Option<&[String]>,
) -> rusqlite::Result<(Pruned, Option<String>)> {
    let mut total = Pruned::default();
    loop {
        let (below, holder) = delivered_below(conn, endpoints)?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let p = prune_step(&tx, cutoff_ns, below)?;
        tx.commit()?;
        total.absorb(p);
        if p.done {
            let held = (p.until_ns < minute_of(cutoff_ns))
                .then_some(holder)
                .flatten();
            return Ok((total, held));
        }
    }
}

/// Prunes raw dense records older than `keep` every minute, in steps, until
/// `stop` turns true. Records not yet delivered to every endpoint in
/// `endpoints` (the configured remote_write URLs) are kept. After each
/// round, `status` gets the mark and the records held as rollups.
pub async fn run(
    store: crate::handle::StoreHandle,
    keep: std::time::Duration,
    endpoints: Vec<String>,
    status: impl Fn(u64, u64) + Send + 'static,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let keep_ns = keep.as_nanos().min(u128::from(u64::MAX)) as u64;
    let (store, endpoints, status) = (&store, &endpoints, &status);
    let step = || async move {
        let cutoff = boltwatch_common::clock::now_unix_ns().saturating_sub(keep_ns);
        let below = upkeep::below(store, endpoints).await?;
        store.prune_step(cutoff, below).await
    };
    let round = |total: Pruned| async move {
        if let Ok((mark, records)) = store.read_sql(super::status).await {
            status(mark, records);
        }
        if total.records > 0 {
            tracing::info!(
                records = total.records,
                rollups = total.rollups,
                pruned_until_unix_ns = total.until_ns,
                "retention: raw records replaced by per-minute rollups"
            );
        }
    };
    upkeep::rounds(
        "retention: pruning raw records",
        upkeep::EVERY,
        stop,
        step,
        round,
    )
    .await
}

/// A day of rollups: what a replay holds in memory at a time.
const DAY_NS: u64 = 86_400_000_000_000;

/// The first and last minute of the stored rollups, if any.
fn rollup_span(c: &Connection) -> rusqlite::Result<Option<(u64, u64)>> {
    c.query_row("SELECT min(minute), max(minute) FROM rollups", [], |r| {
        Ok(r.get::<_, Option<i64>>(0)?
            .zip(r.get::<_, Option<i64>>(1)?)
            .map(|(a, b)| (a as u64, b as u64)))
    })
}

/// The replay records of the rollups of minutes in `[from, to)`, each
/// rollup's with the number of raw records it stands for.
fn replay_range(c: &Connection, from: u64, to: u64) -> rusqlite::Result<Vec<(Vec<Record>, u64)>> {
    let mut out = Vec::new();
    scan(c, from, to, |s| {
        out.push((
            s.rollup.replay(s.node, s.boot_id, s.minute),
            s.rollup.records,
        ))
    })?;
    Ok(out)
}

/// Calls `f` with the records that stand for every stored rollup in a
/// replay of the store (see [`Rollup::replay`]), oldest minute first, a
/// day of rollups in memory at a time. What the `/metrics` rebuild and
/// each remote_write endpoint's restore apply before the raw records, so
/// cumulative series continue across a restart after pruning. On one
/// connection, so a caller can read the raw records in the same read
/// transaction (pruning between its reads would move records from the
/// raw log into rollups it had already read).
///
/// `f` gets one rollup's records at a time with the number of raw
/// records they stand for (more than there are of them).
pub fn replay(c: &Connection, mut f: impl FnMut(&[Record], u64)) -> rusqlite::Result<u64> {
    let Some((first, last)) = rollup_span(c)? else {
        return Ok(0);
    };
    let (mut from, mut n) = (first, 0u64);
    while from <= last {
        let to = from.saturating_add(DAY_NS);
        for (r, replaced) in &replay_range(c, from, to)? {
            f(r, *replaced);
            n += replaced;
        }
        from = to;
    }
    Ok(n)
}
