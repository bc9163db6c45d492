//! The store side of remote write: records in store (arrival) order from
//! `record_log`, per-endpoint positions, and the startup rebuild of the
//! shared exporter state.
//!
//! Positions are written by the sender's own short-lived connection (as the
//! soak commands do): one small UPSERT per delivered batch, which WAL mode
//! lets run beside the ingest writer.

use std::path::Path;
use std::time::Instant;

use boltwatch_proto::v1::Record;
use prost::Message;
use rusqlite::{params, Connection, OptionalExtension};

use crate::export::SharedMetrics;
use crate::store::{StoreError, StoreHandle};

/// Records read per query.
pub const CHUNK: u32 = 2_000;

/// One logged record.
#[derive(Debug)]
pub struct Logged {
    /// Its position in store order.
    pub pos: i64,
    /// The record; `None` when the stored bytes no longer decode (counted by
    /// the caller, never retried).
    pub record: Option<Record>,
}

/// Up to `limit` records after `pos`, in store order.
pub fn read_after(conn: &Connection, pos: i64, limit: u32) -> rusqlite::Result<Vec<Logged>> {
    let mut stmt = conn.prepare_cached(
        "SELECT l.pos, r.record FROM record_log l
         JOIN records r ON r.node = l.node AND r.boot_id = l.boot_id AND r.seq = l.seq
         WHERE l.pos > ?1 ORDER BY l.pos LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![pos, limit], |row| {
        let blob: Vec<u8> = row.get(1)?;
        Ok(Logged {
            pos: row.get(0)?,
            record: Record::decode(blob.as_slice()).ok(),
        })
    })?;
    rows.collect()
}

/// The newest position (0 when nothing was stored).
pub fn newest(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT coalesce(max(pos), 0) FROM record_log", [], |r| {
        r.get(0)
    })
}

/// The last position `endpoint` delivered (0: none yet).
pub fn position(conn: &Connection, endpoint: &str) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT pos FROM remote_write_positions WHERE endpoint = ?1",
        [endpoint],
        |r| r.get(0),
    )
    .optional()
    .map(|p| p.unwrap_or(0))
}

/// Opens a read-write connection for [`save_position`].
pub fn open_writer(db: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open(db)?;
    c.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(c)
}

/// Records that `endpoint` delivered everything up to `pos`.
pub fn save_position(
    conn: &Connection,
    endpoint: &str,
    pos: i64,
    now_ns: u64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO remote_write_positions (endpoint, pos, updated_unix_ns) VALUES (?1, ?2, ?3)
         ON CONFLICT (endpoint) DO UPDATE SET pos = excluded.pos, updated_unix_ns = excluded.updated_unix_ns",
        params![endpoint, pos, now_ns as i64],
    )?;
    Ok(())
}

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
    let end = store.read(newest).await?;
    let mut n = crate::store::retention::replay(store, |records, replaced| {
        metrics.lock().apply_rollup(records, replaced)
    })
    .await?;
    let mut pos = 0i64;
    while pos < end {
        let chunk = store.read(move |c| read_after(c, pos, CHUNK)).await?;
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
    tracing::info!(
        records = n,
        seconds = secs,
        "rebuilt /metrics state from the store"
    );
    Ok((n, secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema;

    fn insert(c: &Connection, node: &str, seq: u64) {
        let r = Record {
            node: node.into(),
            boot_id: "b".into(),
            seq,
            unix_ns: seq,
            payload: None,
        };
        c.execute(
            "INSERT OR IGNORE INTO records (node, boot_id, seq, unix_ns, kind, record) VALUES (?1, 'b', ?2, ?2, 'x', ?3)",
            params![node, seq as i64, r.encode_to_vec()],
        )
        .unwrap();
    }

    #[test]
    fn log_follows_arrival_order_and_positions_persist() {
        let c = schema::memory();
        insert(&c, "b", 9);
        insert(&c, "a", 1);
        insert(&c, "a", 1); // duplicate: not logged again
        let got = read_after(&c, 0, 10).unwrap();
        let order: Vec<(i64, String)> = got
            .iter()
            .map(|l| (l.pos, l.record.as_ref().unwrap().node.clone()))
            .collect();
        assert_eq!(order, vec![(1, "b".into()), (2, "a".into())]);
        assert_eq!(newest(&c).unwrap(), 2);
        assert_eq!(read_after(&c, 1, 10).unwrap().len(), 1);
        assert_eq!(position(&c, "http://x").unwrap(), 0);
        save_position(&c, "http://x", 2, 5).unwrap();
        save_position(&c, "http://x", 3, 6).unwrap();
        assert_eq!(position(&c, "http://x").unwrap(), 3);
    }
}
