//! The record layout of schema version 5 (a store sized for a 72-hour
//! soak), the migration from version 4, and version 7's packed rows.
//!
//! Version 4 kept each record as one row keyed by (node, boot_id, seq) with
//! both strings repeated in every row, in its two secondary indexes and in
//! `record_log` (four copies), and the encoded `Record` whole, which repeats
//! them a fifth time. Version 5:
//!
//! - `boot_keys` interns (node, boot_id) as a small integer, and keeps the
//!   boot's *head*: the canonical encoding of `Record` fields 1 and 2
//!   (node, boot_id), which starts every record an agent sends.
//! - `kinds` interns payload kind names.
//! - `stored` has one row per record: `pos` (the rowid, arrival order, so
//!   it *is* the remote_write log position: no separate log table), the
//!   boot and kind ids, seq, time, and the record's bytes after the boot's
//!   head (`whole = 0`), or the whole record (`whole = 1`, verbatim).
//!   Reassembly is `head || body`. Earlier builds kept every record that
//!   did not start with its head (another encoder's field order) whole,
//!   so every record read back byte for byte; now such a record is
//!   stored with its node and boot id fields cut out wherever they were
//!   ([`super::canon`]), so it reads back as bytes that decode to the
//!   same record (prost-equal), unknown fields included, and only a
//!   record whose fields contradict its boot is kept whole. Rows of
//!   either form read the same way: the layout did not change.
//! - Indexes: (boot, seq) unique (dedupe, watermarks), (unix_ns) (reports,
//!   the API's time-ordered pages), and (kind, unix_ns) for the sparse
//!   kinds only (outages, link events, thermals...: a few percent of the
//!   rows; RTT summaries and counters, the bulk, are found by time). All
//!   integers: a few bytes per entry.
//! - `records` and `record_log` stayed as views with the old columns until
//!   version 7, whose packed rows (several records a row, see
//!   [`super::pack`]) SQL cannot see into: it drops them, and the store's
//!   readers expand rows in Rust.
//!
//! Positions are rowids that only grow (records are never deleted), so a
//! remote_write position stays valid across the migration, which copies
//! `record_log.pos` into `stored.pos`.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{params, Connection, Transaction};

use super::ordered::{Ordered, Timed};

/// Tables of version 5 (indexes come after the bulk copy of a migration).
const TABLES: &str = "
    CREATE TABLE boot_keys (
        id      INTEGER PRIMARY KEY,
        node    TEXT    NOT NULL,
        boot_id TEXT    NOT NULL,
        head    BLOB,
        UNIQUE (node, boot_id)
    );
    CREATE TABLE kinds (
        id   INTEGER PRIMARY KEY,
        name TEXT    NOT NULL UNIQUE
    );
    CREATE TABLE stored (
        pos     INTEGER PRIMARY KEY,
        boot    INTEGER NOT NULL,
        seq     INTEGER NOT NULL,
        unix_ns INTEGER NOT NULL,
        kind    INTEGER NOT NULL,
        whole   INTEGER NOT NULL,
        body    BLOB    NOT NULL
    );";

/// Kinds recorded every second per link or node (most rows), interned
/// first with fixed ids 1 and 2, so the (kind, time) index can leave them
/// out: a scan of one of them follows the time index instead.
const DENSE_KINDS: [&str; 2] = ["rtt", "counters"];

/// The first id of a sparse kind: kinds from here on are in the partial
/// (kind, time) index. Queries must repeat its condition, `kind >= 3`, as
/// written, for SQLite to use it.
pub const SPARSE_KINDS_FROM: i64 = 3;

const INDEXES: &str = "
    CREATE UNIQUE INDEX stored_key ON stored (boot, seq);
    CREATE INDEX stored_by_time ON stored (unix_ns);
    CREATE INDEX stored_by_kind ON stored (kind, unix_ns) WHERE kind >= 3;";

/// The version 4 names as views. `record_log` reads the boot's names
/// through scalar subqueries so that `max(pos)` over it stays a single-table
/// query SQLite answers from the rowid b-tree's last entry.
const VIEWS: &str = "
    CREATE VIEW records (node, boot_id, seq, unix_ns, kind, record) AS
        SELECT b.node, b.boot_id, s.seq, s.unix_ns, k.name,
               CASE s.whole WHEN 0 THEN CAST(b.head || s.body AS BLOB) ELSE s.body END
        FROM stored s JOIN boot_keys b ON b.id = s.boot JOIN kinds k ON k.id = s.kind;
    CREATE VIEW record_log (pos, node, boot_id, seq) AS
        SELECT s.pos,
               (SELECT node FROM boot_keys WHERE id = s.boot),
               (SELECT boot_id FROM boot_keys WHERE id = s.boot),
               s.seq
        FROM stored s;
    CREATE TRIGGER records_insert INSTEAD OF INSERT ON records BEGIN
        INSERT INTO boot_keys (node, boot_id) SELECT NEW.node, NEW.boot_id
            WHERE NOT EXISTS (SELECT 1 FROM boot_keys WHERE node = NEW.node AND boot_id = NEW.boot_id);
        INSERT INTO kinds (name) SELECT NEW.kind
            WHERE NOT EXISTS (SELECT 1 FROM kinds WHERE name = NEW.kind);
        INSERT INTO stored (boot, seq, unix_ns, kind, whole, body) VALUES (
            (SELECT id FROM boot_keys WHERE node = NEW.node AND boot_id = NEW.boot_id),
            NEW.seq, NEW.unix_ns,
            (SELECT id FROM kinds WHERE name = NEW.kind),
            1, NEW.record);
    END;";

/// The canonical encoding of `Record { node, boot_id }` (fields 1 and 2,
/// length-delimited; an empty string is omitted, as prost does).
pub fn head(node: &str, boot_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(node.len() + boot_id.len() + 4);
    for (tag, s) in [(0x0a_u8, node), (0x12, boot_id)] {
        if s.is_empty() {
            continue;
        }
        out.push(tag);
        let mut n = s.len() as u64;
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// The stored record's bytes from a row's `whole` and body: the inverse
/// of [`super::canon::split`] (the same record, decoded).
pub fn join(whole: bool, head: &[u8], body: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if !whole {
        out.extend_from_slice(head);
    }
    out.extend_from_slice(body);
}

/// A boot's interned id and head.
#[derive(Debug, Clone)]
pub struct BootKey {
    /// `boot_keys.id`.
    pub id: i64,
    /// [`head`] of its node and boot id.
    pub head: Arc<[u8]>,
}

/// Interned boot and kind ids, cached. The writer keeps one across batches
/// and clears it when a transaction fails (a rolled-back insert would
/// leave a cached id that names nothing).
#[derive(Debug, Default)]
pub struct Keys {
    /// The last boot asked for: a batch is normally one boot's records.
    last: Option<(String, String, BootKey)>,
    boots: HashMap<String, HashMap<String, BootKey>>,
    kinds: HashMap<String, i64>,
}

/// Most boots [`Keys`] caches: a fleet's live boots many times over, and
/// at about 150 bytes each a bound of a few hundred kilobytes.
pub const MAX_CACHED_BOOTS: usize = 4096;

impl Keys {
    /// Forgets every cached id.
    pub fn clear(&mut self) {
        self.last = None;
        self.boots.clear();
        self.kinds.clear();
    }

    /// The id and head of (node, boot_id), interning it if new.
    pub fn boot(
        &mut self,
        conn: &Connection,
        node: &str,
        boot_id: &str,
    ) -> rusqlite::Result<BootKey> {
        if let Some((n, b, k)) = &self.last {
            if n == node && b == boot_id {
                return Ok(k.clone());
            }
        }
        let key = self.lookup(conn, node, boot_id)?;
        self.last = Some((node.to_string(), boot_id.to_string(), key.clone()));
        Ok(key)
    }

    fn lookup(
        &mut self,
        conn: &Connection,
        node: &str,
        boot_id: &str,
    ) -> rusqlite::Result<BootKey> {
        if let Some(k) = self.boots.get(node).and_then(|m| m.get(boot_id)) {
            return Ok(k.clone());
        }
        let head = head(node, boot_id);
        // A row the `records` view's trigger created has no head yet.
        conn.prepare_cached(
            "INSERT INTO boot_keys (node, boot_id, head) VALUES (?1, ?2, ?3)
             ON CONFLICT (node, boot_id) DO UPDATE SET head = excluded.head WHERE head IS NULL",
        )?
        .execute(params![node, boot_id, head])?;
        let id = conn
            .prepare_cached("SELECT id FROM boot_keys WHERE node = ?1 AND boot_id = ?2")?
            .query_row(params![node, boot_id], |r| r.get(0))?;
        let key = BootKey {
            id,
            head: head.into(),
        };
        // Every agent restart is a new boot: without a bound the cache
        // would grow by one entry per restart for the collector's life.
        // Past the bound it starts over; the table still has every id.
        // Counted only here, on a miss: once per boot, not per batch.
        if self.cached_boots() >= MAX_CACHED_BOOTS {
            self.boots.clear();
        }
        self.boots
            .entry(node.to_string())
            .or_default()
            .insert(boot_id.to_string(), key.clone());
        Ok(key)
    }

    /// Boots in the cache.
    fn cached_boots(&self) -> usize {
        self.boots.values().map(HashMap::len).sum()
    }

    /// The id of payload kind `name`, interning it if new.
    pub fn kind(&mut self, conn: &Connection, name: &str) -> rusqlite::Result<i64> {
        if let Some(id) = self.kinds.get(name) {
            return Ok(*id);
        }
        conn.prepare_cached("INSERT OR IGNORE INTO kinds (name) VALUES (?1)")?
            .execute([name])?;
        let id = conn
            .prepare_cached("SELECT id FROM kinds WHERE name = ?1")?
            .query_row([name], |r| r.get(0))?;
        self.kinds.insert(name.to_string(), id);
        Ok(id)
    }
}

/// One record for [`insert_into`] (migration 5's copy): its key, time,
/// kind id and encoded bytes.
struct Row<'a> {
    /// `stored.pos`, or `None` for the next one.
    pub pos: Option<i64>,
    /// The boot.
    pub boot: &'a BootKey,
    /// Sequence number.
    pub seq: u64,
    /// Agent time.
    pub unix_ns: u64,
    /// `kinds.id`.
    pub kind: i64,
    /// The encoded `Record`.
    pub raw: &'a [u8],
}

/// The statement of [`insert_into`], for version 5's layout (before
/// packed rows).
const INSERT: &str = "INSERT OR IGNORE INTO stored (pos, boot, seq, unix_ns, kind, whole, body)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// Stores a record through `stmt` (a prepared [`INSERT`]) unless (boot,
/// seq) is already stored; whether it was new.
fn insert_into(stmt: &mut rusqlite::Statement<'_>, r: &Row<'_>) -> rusqlite::Result<bool> {
    // A version 4 store's records move over byte for byte, as they were.
    let body = super::canon::after_head(r.raw, &r.boot.head);
    let (whole, body) = (body.is_none(), body.unwrap_or(r.raw));
    let n = stmt.execute(params![
        r.pos,
        r.boot.id,
        r.seq as i64,
        r.unix_ns as i64,
        r.kind,
        whole,
        body
    ])?;
    Ok(n == 1)
}

/// A `stored` row's columns `pos, seq, unix_ns, whole, n, body`, read
/// from `r` at column `at` onward (every reader selects them in this
/// order), for [`super::pack::each`].
pub fn packed_row<'r>(
    r: &'r rusqlite::Row<'_>,
    at: usize,
) -> rusqlite::Result<super::pack::Row<'r>> {
    Ok(super::pack::Row {
        pos: r.get(at)?,
        seq: r.get::<_, i64>(at + 1)? as u64,
        unix_ns: r.get::<_, i64>(at + 2)? as u64,
        whole: r.get(at + 3)?,
        n: r.get::<_, i64>(at + 4)? as u64,
        body: r.get_ref(at + 5)?.as_blob()?,
    })
}

/// The records of a stored row whose boot's head is `head`, each with its
/// whole encoded bytes. A damaged pack gives the records before the
/// damage and a warning.
pub fn each_whole(
    row: &super::pack::Row<'_>,
    head: &[u8],
    mut f: impl FnMut(super::pack::Item<'_>, Vec<u8>),
) {
    let done = super::pack::each(row, |i| {
        let mut raw = Vec::new();
        join(i.whole, head, i.body, &mut raw);
        f(i, raw)
    });
    if let Err(e) = done {
        tracing::warn!(error = %e, "skipped the rest of a damaged packed row");
    }
}

/// The records of `rows` (ordered by the time in column `time_at`, each
/// row's earliest), which `expand` holds in an [`Ordered`], handed to
/// `each` in order until it returns false.
pub fn in_time_order<T: Timed>(
    mut rows: rusqlite::Rows<'_>,
    time_at: usize,
    mut expand: impl FnMut(&rusqlite::Row<'_>, &mut Ordered<T>) -> rusqlite::Result<()>,
    mut each: impl FnMut(T) -> bool,
) -> rusqlite::Result<()> {
    let mut held = Ordered::default();
    while let Some(r) = rows.next()? {
        if !held.release_before(r.get::<_, i64>(time_at)? as u64, &mut each) {
            return Ok(());
        }
        expand(r, &mut held)?;
    }
    held.finish(&mut each);
    Ok(())
}

/// A boot's (node, boot_id, head).
pub type BootName = (String, String, Vec<u8>);

/// Every boot's [`BootName`] by id, for scans that resolve ids themselves
/// instead of joining per row.
pub fn boot_names(conn: &Connection) -> rusqlite::Result<HashMap<i64, BootName>> {
    let mut stmt =
        conn.prepare_cached("SELECT id, node, boot_id, coalesce(head, x'') FROM boot_keys")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))?;
    rows.collect()
}

/// Migration 4 -> 5: copies every record into `stored` in `record_log`
/// order (keeping its position), then any record the log lacks, then
/// drops the version 4 tables and puts the views in their place.
pub(super) fn migrate_v5(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(TABLES)?;
    let mut keys = Keys::default();
    // Dense kinds first (ids 1, 2), then every kind this build names.
    let known = boltwatch_proto::kind::KINDS.iter();
    for name in DENSE_KINDS
        .iter()
        .chain(known.filter(|k| !DENSE_KINDS.contains(k)))
    {
        keys.kind(tx, name)?;
    }
    debug_assert_eq!(keys.kind(tx, DENSE_KINDS[1])?, SPARSE_KINDS_FROM - 1);
    let mut copy = |sql: &str, with_pos: bool| -> rusqlite::Result<()> {
        let mut stmt = tx.prepare(sql)?;
        let mut ins = tx.prepare_cached(INSERT)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let boot = keys.boot(tx, r.get_ref(1)?.as_str()?, r.get_ref(2)?.as_str()?)?;
            let kind = keys.kind(tx, r.get_ref(5)?.as_str()?)?;
            insert_into(
                &mut ins,
                &Row {
                    pos: if with_pos { Some(r.get(0)?) } else { None },
                    boot: &boot,
                    seq: r.get::<_, i64>(3)? as u64,
                    unix_ns: r.get::<_, i64>(4)? as u64,
                    kind,
                    raw: r.get_ref(6)?.as_blob()?,
                },
            )?;
        }
        Ok(())
    };
    copy(
        "SELECT l.pos, r.node, r.boot_id, r.seq, r.unix_ns, r.kind, r.record
         FROM record_log l JOIN records r
           ON r.node = l.node AND r.boot_id = l.boot_id AND r.seq = l.seq
         ORDER BY l.pos",
        true,
    )?;
    let count = |sql: &str| tx.query_row(sql, [], |r| r.get::<_, i64>(0));
    if count("SELECT count(*) FROM stored")? < count("SELECT count(*) FROM records")? {
        // Not logged (none should be): appended after the logged ones; the
        // unique key below skips those already copied.
        tx.execute_batch("CREATE UNIQUE INDEX stored_key ON stored (boot, seq);")?;
        copy(
            "SELECT 0, node, boot_id, seq, unix_ns, kind, record FROM records
             ORDER BY unix_ns, node, boot_id, seq",
            false,
        )?;
        tx.execute_batch("DROP INDEX stored_key;")?;
    }
    tx.execute_batch(INDEXES)?;
    tx.execute_batch(
        "DROP TRIGGER record_log_append;
         DROP TABLE record_log;
         DROP TABLE records;",
    )?;
    tx.execute_batch(VIEWS)
}

/// Migration 6 -> 7: packed rows. `stored` gains `n`, the records a row
/// holds (1 for every row written before); `seq_runs` takes over the
/// duplicate check from the (boot, seq) index, filled from every stored
/// record and every record a rollup replaced; the version 4 views go,
/// since SQL cannot see inside a pack (the store's readers expand rows in
/// Rust: [`super::pack`]).
pub(super) fn migrate_v7(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE stored ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
         DROP VIEW records;
         DROP VIEW record_log;",
    )?;
    tx.execute_batch(super::seqs::TABLE)?;
    let mut by_boot: HashMap<i64, Vec<u64>> = HashMap::new();
    {
        let mut stmt = tx.prepare("SELECT boot, seq FROM stored ORDER BY boot, seq")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            by_boot
                .entry(r.get(0)?)
                .or_default()
                .push(r.get::<_, i64>(1)? as u64);
        }
        let mut stmt = tx.prepare("SELECT boot, body FROM rollups")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            if let Ok(rollup) =
                <super::rollup::Rollup as prost::Message>::decode(r.get_ref(1)?.as_blob()?)
            {
                by_boot.entry(r.get(0)?).or_default().extend(rollup.seqs());
            }
        }
    }
    let mut insert = tx.prepare("INSERT INTO seq_runs (boot, lo, hi) VALUES (?1, ?2, ?3)")?;
    for (boot, mut seqs) in by_boot {
        seqs.sort_unstable();
        seqs.dedup();
        for (lo, hi) in super::seqs::runs(seqs) {
            insert.execute(params![boot, lo as i64, hi as i64])?;
        }
    }
    // The duplicate check's old indexes: the (boot, seq) key and the
    // rollups' highest seq (which found a pruned record's rollup).
    tx.execute_batch("DROP INDEX stored_key; DROP INDEX rollups_by_seq;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::Record;
    use prost::Message;

    #[test]
    fn head_is_prost_s_encoding_of_node_and_boot() {
        let long = "n".repeat(300);
        for (node, boot) in [
            ("mini-a", "0123abcd"),
            ("", "b"),
            (long.as_str(), "b"),
            ("a", ""),
        ] {
            let r = Record {
                node: node.into(),
                boot_id: boot.into(),
                ..Default::default()
            };
            assert_eq!(head(node, boot), r.encode_to_vec(), "{node}/{boot}");
        }
    }

    #[test]
    fn the_boot_cache_is_bounded_and_ids_survive_its_reset() {
        let conn = crate::schema::memory();
        let mut keys = Keys::default();
        let first = keys.boot(&conn, "n0", "boot-0").unwrap().id;
        for i in 1..=MAX_CACHED_BOOTS + 10 {
            keys.boot(&conn, "n0", &format!("boot-{i}")).unwrap();
            assert!(
                keys.cached_boots() <= MAX_CACHED_BOOTS,
                "{}",
                keys.cached_boots()
            );
        }
        assert!(
            keys.cached_boots() < MAX_CACHED_BOOTS,
            "the cache started over"
        );
        // Forgotten by the cache, not by the table: the same id again.
        assert_eq!(keys.boot(&conn, "n0", "boot-0").unwrap().id, first);
    }
}
