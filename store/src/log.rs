//! The arrival-order log: every record in store order (the order records
//! reached the store, one dense position each), the newest position, and
//! how far each remote_write endpoint has delivered. What remote write
//! reads and the upkeep bounds itself by.
//!
//! Positions are written by the sender's own short-lived connection (as the
//! soak commands do): one small UPSERT per delivered batch, which WAL mode
//! lets run beside the ingest writer.

use std::collections::BTreeMap;

use boltwatch_proto::v1::Record;
use prost::Message;
use rusqlite::{params, Connection, OptionalExtension};

use crate::{layout, pack};

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
/// the positions up to its own (see [`crate::pack`]), so the rows
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
    crate::insert::newest_pos(conn)
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

/// The first position not yet delivered to every endpoint in `endpoints`
/// (`None`: every endpoint the store has a position for, configured or
/// not), with the endpoint that holds it; `i64::MAX` without endpoints.
pub fn delivered_below(
    conn: &Connection,
    endpoints: Option<&[String]>,
) -> rusqlite::Result<(i64, Option<String>)> {
    let mut stmt = conn.prepare_cached("SELECT endpoint, pos FROM remote_write_positions")?;
    let known: BTreeMap<String, i64> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut below = (i64::MAX, None);
    let names: Vec<&String> = match endpoints {
        Some(e) => e.iter().collect(),
        None => known.keys().collect(),
    };
    for name in names {
        // An endpoint with no position yet has delivered nothing.
        let next = known.get(name).copied().unwrap_or(0) + 1;
        if next < below.0 {
            below = (next, Some(name.clone()));
        }
    }
    Ok(below)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    fn insert(c: &Connection, node: &str, seq: u64) {
        let r = Record {
            node: node.into(),
            boot_id: "b".into(),
            seq,
            unix_ns: seq,
            payload: None,
        };
        crate::queries::insert_record(
            c,
            &crate::NewRecord {
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
