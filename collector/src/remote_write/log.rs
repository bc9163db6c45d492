//! The store side of remote write: records in store (arrival) order from
//! `stored`, per-endpoint positions, and the startup rebuild of the
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
use crate::store::{layout, pack, StoreError, StoreHandle};

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

/// Up to `limit` records after `pos`, in store order. A packed row holds
/// the positions up to its own (see [`crate::store::pack`]), so the rows
/// after `pos` hold every record after it.
pub fn read_after(conn: &Connection, pos: i64, limit: u32) -> rusqlite::Result<Vec<Logged>> {
    let mut stmt = conn.prepare_cached(
        "SELECT coalesce(b.head, x''), s.pos, s.seq, s.unix_ns, s.whole, s.n, s.body
         FROM stored s JOIN boot_keys b ON b.id = s.boot
         WHERE s.pos > ?1 ORDER BY s.pos LIMIT ?2",
    )?;
    let mut rows = stmt.query(params![pos, limit])?;
    let mut out = Vec::new();
    let mut whole = Vec::new();
    while let Some(r) = rows.next()? {
        let head = r.get_ref(0)?.as_blob()?;
        let row = layout::packed_row(r, 1)?;
        let done = pack::each(&row, |i| {
            if i.pos > pos && out.len() < limit as usize {
                layout::join(i.whole, head, i.body, &mut whole);
                out.push(Logged {
                    pos: i.pos,
                    record: Record::decode(whole.as_slice()).ok(),
                });
            }
        });
        if let Err(e) = done {
            // The records past the damage cannot be read: logged as
            // undecodable, so the caller counts them and moves on.
            tracing::warn!(error = %e, "damaged packed row");
            let first = row.pos - (row.n as i64 - 1);
            for p in (first + e.read as i64..=row.pos).filter(|p| *p > pos) {
                if out.len() < limit as usize {
                    out.push(Logged {
                        pos: p,
                        record: None,
                    });
                }
            }
        }
        if out.len() >= limit as usize {
            break;
        }
    }
    Ok(out)
}

/// The newest position (0 when nothing was stored).
pub fn newest(conn: &Connection) -> rusqlite::Result<i64> {
    crate::store::insert::newest_pos(conn)
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
    let m = metrics.clone();
    let mut n = store
        .read(move |c| {
            crate::store::retention::replay(c, |records, replaced| {
                m.lock().apply_rollup(records, replaced)
            })
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
        crate::store::queries::insert_record(
            c,
            &crate::store::NewRecord {
                node: node.into(),
                boot_id: "b".into(),
                seq,
                unix_ns: seq,
                kind: "x",
                raw: r.encode_to_vec(),
            },
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
