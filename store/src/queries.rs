//! Typed query functions: the only SQL text outside the migrations. Each
//! takes a connection (or transaction) and plain values, so the writer thread
//! and the read pool share them and tests can run them on an in-memory
//! database.
//!
//! Integers cross into SQLite as `i64`; ingest validation keeps sequence
//! numbers and timestamps at or below `i64::MAX`, so the casts are lossless.

use std::cmp::Ordering;

use rusqlite::{params, Connection, OptionalExtension};

use super::layout;
use super::ordered::{Ordered, Timed};
use super::rollup::minute_of;
use crate::types::{BootRow, HelloRow, RecordFilter, StoredRecord, Watermark};

/// The columns [`expand`] reads, from `stored s` joined with its boot `b`
/// and kind `k`. Every such query orders by `s.unix_ns` (the time index),
/// which [`in_order`] relies on.
macro_rules! record_select {
    ($($rest:literal),*) => {
        concat!(
            "SELECT b.node, b.boot_id, k.name, coalesce(b.head, x''),
                    s.pos, s.seq, s.unix_ns, s.whole, s.n, s.body
             FROM stored s JOIN boot_keys b ON b.id = s.boot JOIN kinds k ON k.id = s.kind ",
            $($rest),*
        )
    };
}

/// Inserts one record unless (node, boot_id, seq) is already stored.
/// Returns whether it was new. The writer interns ids through its own
/// [`Keys`] cache; this looks them up each time.
#[cfg(test)]
pub fn insert_record(conn: &Connection, r: &crate::types::NewRecord) -> rusqlite::Result<bool> {
    let batch: crate::types::NewBatch = vec![r.clone()].into();
    let mut inserted = Vec::with_capacity(1);
    super::insert::insert_batch(conn, &mut layout::Keys::default(), &batch, &mut inserted)?;
    Ok(inserted[0])
}

/// Adds `added` new records with highest sequence `max_seq` to a boot's
/// counters, creating the boot row if this is the first sight of it.
pub fn add_boot_records(
    conn: &Connection,
    node: &str,
    boot_id: &str,
    now_ns: u64,
    added: u64,
    max_seq: u64,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO boots (node, boot_id, first_seen_unix_ns, last_seen_unix_ns, records, highest_seq)
         VALUES (?1, ?2, ?3, ?3, ?4, ?5)
         ON CONFLICT (node, boot_id) DO UPDATE SET
             last_seen_unix_ns = excluded.last_seen_unix_ns,
             records = records + excluded.records,
             highest_seq = max(highest_seq, excluded.highest_seq)",
    )?;
    stmt.execute(params![
        node,
        boot_id,
        now_ns as i64,
        added as i64,
        max_seq as i64
    ])?;
    Ok(())
}

/// The highest stored sequence number of a boot (0 when none).
pub fn boot_highest_seq(conn: &Connection, node: &str, boot_id: &str) -> rusqlite::Result<u64> {
    let mut stmt =
        conn.prepare_cached("SELECT highest_seq FROM boots WHERE node = ?1 AND boot_id = ?2")?;
    let v: Option<i64> = stmt
        .query_row(params![node, boot_id], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(0) as u64)
}

/// Records a `Hello`: creates or refreshes the boot row with the agent's
/// description.
pub fn upsert_hello(conn: &Connection, h: &HelloRow, now_ns: u64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO boots (node, boot_id, first_seen_unix_ns, last_seen_unix_ns,
                            agent_version, os, hostname, started_unix_ns, hello)
         VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (node, boot_id) DO UPDATE SET
             last_seen_unix_ns = excluded.last_seen_unix_ns,
             agent_version = excluded.agent_version,
             os = excluded.os,
             hostname = excluded.hostname,
             started_unix_ns = excluded.started_unix_ns,
             hello = excluded.hello",
        params![
            h.node,
            h.boot_id,
            now_ns as i64,
            h.agent_version,
            h.os,
            h.hostname,
            h.started_unix_ns as i64,
            h.hello
        ],
    )?;
    Ok(())
}

/// Every boot's `Hello` as stored (boots seen only through records have
/// none), by node and the agent's start: what a report's inventory reads.
pub fn hellos(conn: &Connection) -> rusqlite::Result<Vec<HelloRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, boot_id, coalesce(agent_version, ''), coalesce(os, ''),
                coalesce(hostname, ''), coalesce(started_unix_ns, 0), hello
         FROM boots WHERE hello IS NOT NULL
         ORDER BY node, coalesce(started_unix_ns, 0), first_seen_unix_ns",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(HelloRow {
            node: r.get(0)?,
            boot_id: r.get(1)?,
            agent_version: r.get(2)?,
            os: r.get(3)?,
            hostname: r.get(4)?,
            started_unix_ns: r.get::<_, i64>(5)? as u64,
            hello: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// Watermarks of a node's boots that hold records, most recent boot first
/// (by the agent's start time, else first sight), at most `limit`.
pub fn watermarks(conn: &Connection, node: &str, limit: u32) -> rusqlite::Result<Vec<Watermark>> {
    let mut stmt = conn.prepare_cached(
        "SELECT boot_id, highest_seq FROM boots
         WHERE node = ?1 AND records > 0
         ORDER BY coalesce(nullif(started_unix_ns, 0), first_seen_unix_ns) DESC, rowid DESC
         LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![node, limit], |r| {
        Ok(Watermark {
            boot_id: r.get(0)?,
            highest_seq: r.get::<_, i64>(1)? as u64,
        })
    })?;
    rows.collect()
}

/// Rewrites the health row in its own committed transaction: the
/// `/healthz` proof that a write reaches the file.
pub fn touch_health(conn: &mut Connection, now_ns: u64) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT INTO health (id, checked_unix_ns) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET checked_unix_ns = excluded.checked_unix_ns",
        params![now_ns as i64],
    )?;
    tx.commit()
}

/// Number of records in the store (from the boot counters, not a scan).
pub fn total_records(conn: &Connection) -> rusqlite::Result<u64> {
    let v: i64 = conn.query_row("SELECT coalesce(sum(records), 0) FROM boots", [], |r| {
        r.get(0)
    })?;
    Ok(v as u64)
}

/// Every boot of every node, ordered by node then first sight.
pub fn list_boots(conn: &Connection) -> rusqlite::Result<Vec<BootRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {BOOT_COLUMNS} FROM boots ORDER BY node, first_seen_unix_ns, rowid"
    ))?;
    let rows = stmt.query_map([], boot_row)?;
    rows.collect()
}

/// A page of boots in the order (node, first sight, boot id): at most
/// `limit` after the key `after`. SQLite sorts within its bounded cache,
/// so a page costs memory by its size, not by every boot stored.
pub fn boots_page(
    conn: &Connection,
    after: Option<(&str, u64, &str)>,
    limit: u32,
) -> rusqlite::Result<Vec<BootRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {BOOT_COLUMNS} FROM boots
         WHERE ?1 IS NULL OR (node, first_seen_unix_ns, boot_id) > (?1, ?2, ?3)
         ORDER BY node, first_seen_unix_ns, boot_id LIMIT ?4"
    ))?;
    let (node, seen, boot) = match after {
        Some((n, t, b)) => (Some(n), t.min(i64::MAX as u64) as i64, b),
        None => (None, 0, ""),
    };
    let rows = stmt.query_map(params![node, seen, boot, limit], boot_row)?;
    rows.collect()
}

const BOOT_COLUMNS: &str = "node, boot_id, first_seen_unix_ns, last_seen_unix_ns, records, \
    highest_seq, coalesce(agent_version, ''), coalesce(os, ''), coalesce(started_unix_ns, 0)";

fn boot_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BootRow> {
    Ok(BootRow {
        node: r.get(0)?,
        boot_id: r.get(1)?,
        first_seen_unix_ns: r.get::<_, i64>(2)? as u64,
        last_seen_unix_ns: r.get::<_, i64>(3)? as u64,
        records: r.get::<_, i64>(4)? as u64,
        highest_seq: r.get::<_, i64>(5)? as u64,
        agent_version: r.get(6)?,
        os: r.get(7)?,
        started_unix_ns: r.get::<_, i64>(8)? as u64,
    })
}

/// Records matching `f`, oldest first.
pub fn list_records(conn: &Connection, f: &RecordFilter) -> rusqlite::Result<Vec<StoredRecord>> {
    let mut out = Vec::new();
    each_record(conn, f, None, |r| {
        out.push(r);
        true
    })?;
    Ok(out)
}

/// The sort key of a record, `(unix_ns, node, boot_id, seq)`.
pub type RecordKey<'a> = (u64, &'a str, &'a str, u64);

/// A record in the readers' order, its [`RecordKey`].
struct Keyed(StoredRecord);

impl Keyed {
    fn key(&self) -> RecordKey<'_> {
        let r = &self.0;
        (r.unix_ns, &r.node, &r.boot_id, r.seq)
    }
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Keyed {}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl Timed for Keyed {
    fn unix_ns(&self) -> u64 {
        self.0.unix_ns
    }
}

/// Records matching `f` (its `limit` included) that sort after `after`,
/// oldest first, handed to `each` one at a time until it returns false: a
/// page never holds more rows in memory than it keeps (and about a minute
/// of records, see [`in_order`]).
pub fn each_record(
    conn: &Connection,
    f: &RecordFilter,
    after: Option<RecordKey<'_>>,
    mut each: impl FnMut(StoredRecord) -> bool,
) -> rusqlite::Result<()> {
    if f.limit == 0 {
        return Ok(());
    }
    // A packed row starts at its earliest record and ends within that
    // minute: rows from the first minute of the range hold every match.
    let mut stmt = conn.prepare_cached(record_select!(
        "WHERE (?1 IS NULL OR b.node = ?1)
               AND (?2 IS NULL OR k.name = ?2)
               AND s.unix_ns >= ?3
             ORDER BY s.unix_ns"
    ))?;
    let since = f.since_unix_ns.max(after.map_or(0, |a| a.0));
    let rows = stmt.query(params![f.node, f.kind, minute_of(since) as i64])?;
    let keep = |r: &StoredRecord| {
        r.unix_ns >= f.since_unix_ns
            && after.is_none_or(|a| (r.unix_ns, r.node.as_str(), r.boot_id.as_str(), r.seq) > a)
    };
    let mut n = 0;
    in_order(rows, keep, |r| {
        n += 1;
        each(r) && n < f.limit
    })
}

/// [`records_of_kind`] one row at a time, without collecting them.
pub fn each_record_of_kind(
    conn: &Connection,
    node: Option<&str>,
    kind: &str,
    mut each: impl FnMut(StoredRecord),
) -> rusqlite::Result<()> {
    let Some((sql, id)) = kind_scan(conn, kind)? else {
        return Ok(());
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query(params![node, id])?;
    in_order(
        rows,
        |_| true,
        |r| {
            each(r);
            true
        },
    )
}

/// The SQL of a scan by kind and the kind's id (`None`: no record
/// of that kind was ever stored). A sparse kind follows the partial
/// (kind, time) index, whose condition the query must repeat to use it;
/// a dense one (RTT, counters: most rows) the time index.
pub(super) fn kind_scan(
    conn: &Connection,
    kind: &str,
) -> rusqlite::Result<Option<(&'static str, i64)>> {
    let id: Option<i64> = conn
        .prepare_cached("SELECT id FROM kinds WHERE name = ?1")?
        .query_row([kind], |r| r.get(0))
        .optional()?;
    let Some(id) = id else { return Ok(None) };
    let sql = if id >= layout::SPARSE_KINDS_FROM {
        record_select!(
            // `>= 3`: layout::SPARSE_KINDS_FROM, spelled as in the index.
            "WHERE s.kind = ?2 AND s.kind >= 3
               AND (?1 IS NULL OR b.node = ?1)
             ORDER BY s.unix_ns"
        )
    } else {
        record_select!(
            "WHERE s.kind = ?2 AND (?1 IS NULL OR b.node = ?1)
             ORDER BY s.unix_ns"
        )
    };
    Ok(Some((sql, id)))
}

/// The records of `rows` (a [`record_select!`] ordered by `s.unix_ns`)
/// that `keep` accepts, in [`RecordKey`] order, handed to `each` until it
/// returns false.
fn in_order(
    rows: rusqlite::Rows<'_>,
    keep: impl Fn(&StoredRecord) -> bool,
    mut each: impl FnMut(StoredRecord) -> bool,
) -> rusqlite::Result<()> {
    let expand = |r: &rusqlite::Row<'_>, held: &mut Ordered<Keyed>| {
        let node: String = r.get(0)?;
        let boot_id: String = r.get(1)?;
        let kind: String = r.get(2)?;
        let head = r.get_ref(3)?.as_blob()?;
        layout::each_whole(&layout::packed_row(r, 4)?, head, |i, raw| {
            let rec = StoredRecord {
                node: node.clone(),
                boot_id: boot_id.clone(),
                seq: i.seq,
                unix_ns: i.unix_ns,
                kind: kind.clone(),
                raw,
            };
            if keep(&rec) {
                held.push(Keyed(rec));
            }
        });
        Ok(())
    };
    layout::in_time_order(rows, 6, expand, |k| each(k.0))
}

/// Every record of payload `kind` (of `node`, if given), oldest first; for
/// views that must see all of a kind, such as outages whose start and end
/// records are joined.
#[cfg(test)]
pub fn records_of_kind(
    conn: &Connection,
    node: Option<&str>,
    kind: &str,
) -> rusqlite::Result<Vec<StoredRecord>> {
    let mut out = Vec::new();
    each_record_of_kind(conn, node, kind, |r| out.push(r))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::schema::memory as db;

    use super::super::types::sample_record as rec;

    #[test]
    fn insert_is_idempotent() {
        let c = db();
        assert!(insert_record(&c, &rec("b1", 1)).unwrap());
        assert!(!insert_record(&c, &rec("b1", 1)).unwrap());
        assert!(insert_record(&c, &rec("b2", 1)).unwrap());
    }

    #[test]
    fn boot_counters_accumulate_and_keep_the_highest_seq() {
        let c = db();
        add_boot_records(&c, "a", "b1", 10, 2, 2).unwrap();
        add_boot_records(&c, "a", "b1", 20, 1, 5).unwrap();
        add_boot_records(&c, "a", "b1", 30, 0, 3).unwrap();
        assert_eq!(boot_highest_seq(&c, "a", "b1").unwrap(), 5);
        assert_eq!(boot_highest_seq(&c, "a", "nope").unwrap(), 0);
        let boots = list_boots(&c).unwrap();
        assert_eq!(boots.len(), 1);
        assert_eq!(boots[0].records, 3);
        assert_eq!(boots[0].first_seen_unix_ns, 10);
        assert_eq!(boots[0].last_seen_unix_ns, 30);
        assert_eq!(total_records(&c).unwrap(), 3);
    }

    #[test]
    fn watermarks_newest_boot_first_and_only_with_records() {
        let c = db();
        let hello = |boot: &str, started| HelloRow {
            node: "a".into(),
            boot_id: boot.into(),
            agent_version: "0.1.0".into(),
            os: "linux".into(),
            hostname: "h".into(),
            started_unix_ns: started,
            hello: vec![],
        };
        upsert_hello(&c, &hello("old", 100), 1).unwrap();
        upsert_hello(&c, &hello("new", 200), 2).unwrap();
        upsert_hello(&c, &hello("empty", 300), 3).unwrap();
        add_boot_records(&c, "a", "old", 4, 1, 7).unwrap();
        add_boot_records(&c, "a", "new", 5, 1, 3).unwrap();
        let w = watermarks(&c, "a", 64).unwrap();
        let ids: Vec<_> = w.iter().map(|w| w.boot_id.as_str()).collect();
        assert_eq!(ids, ["new", "old"]);
        assert_eq!(w[1].highest_seq, 7);
        assert_eq!(watermarks(&c, "a", 1).unwrap().len(), 1);
        // Every stored Hello, by the agent's start; a boot known only from
        // records has none.
        add_boot_records(&c, "b", "records-only", 1, 1, 1).unwrap();
        let h = hellos(&c).unwrap();
        let ids: Vec<_> = h.iter().map(|h| h.boot_id.as_str()).collect();
        assert_eq!(ids, ["old", "new", "empty"]);
        assert_eq!(h[1], hello("new", 200));
    }

    #[test]
    fn record_filter_by_node_kind_since_and_limit() {
        let c = db();
        for s in 1..=5 {
            insert_record(&c, &rec("b1", s)).unwrap();
        }
        let mut other = rec("b1", 9);
        other.node = "z".into();
        other.kind = "counters";
        insert_record(&c, &other).unwrap();
        let f = |node: Option<&str>, kind: Option<&str>, since, limit| RecordFilter {
            node: node.map(Into::into),
            kind: kind.map(Into::into),
            since_unix_ns: since,
            limit,
        };
        assert_eq!(list_records(&c, &f(None, None, 0, 100)).unwrap().len(), 6);
        assert_eq!(
            list_records(&c, &f(Some("a"), None, 0, 100)).unwrap().len(),
            5
        );
        assert_eq!(
            list_records(&c, &f(None, Some("counters"), 0, 100))
                .unwrap()
                .len(),
            1
        );
        let since = list_records(&c, &f(Some("a"), None, 1_004, 100)).unwrap();
        assert_eq!(since.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5]);
        assert_eq!(list_records(&c, &f(None, None, 0, 2)).unwrap().len(), 2);
    }

    #[test]
    fn each_record_resumes_after_a_key_and_stops_when_told() {
        let c = db();
        for s in 1..=5 {
            insert_record(&c, &rec("b1", s)).unwrap();
        }
        let f = RecordFilter {
            limit: 100,
            ..Default::default()
        };
        let mut seen = Vec::new();
        each_record(&c, &f, Some((1_002, "a", "b1", 2)), |r| {
            seen.push(r.seq);
            seen.len() < 2
        })
        .unwrap();
        assert_eq!(seen, [3, 4]);
    }

    #[test]
    fn records_of_kind_ignore_time_and_limit() {
        let c = db();
        for s in 1..=3 {
            let mut r = rec("b1", s);
            r.kind = "outage";
            insert_record(&c, &r).unwrap();
        }
        insert_record(&c, &rec("b1", 6)).unwrap();
        let mut z = rec("b1", 8);
        z.node = "z".into();
        z.kind = "outage";
        insert_record(&c, &z).unwrap();
        assert_eq!(records_of_kind(&c, None, "outage").unwrap().len(), 4);
        let a = records_of_kind(&c, Some("a"), "outage").unwrap();
        assert_eq!(a.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert!(records_of_kind(&c, Some("a"), "path").unwrap().is_empty());
    }
}
