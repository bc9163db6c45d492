//! [`Db`]: one connection to the store file and everything a reader (or a
//! command's small write) may ask of it, by name. The pooled readers of
//! [`crate::StoreHandle::read`], the `soak`, `report` and `prune`
//! commands, the soak routes' writes and remote write's position updates
//! all go through it, so no caller holds SQL or a bare connection.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::StoreError;
use crate::log::Logged;
use crate::queries::RecordKey;
use crate::retention::Pruned;
use crate::scan::Scanned;
use crate::schema::Pages;
use crate::soaks::{MarkRow, SoakRow, SoakUsage};
use crate::types::{BootRow, HelloRow, RecordFilter, StoredRecord};
use crate::{log, queries, retention, scan, schema, soaks};

/// How long a command's write waits for the collector's writer (whose
/// transactions are short batches).
const BUSY: std::time::Duration = std::time::Duration::from_secs(10);

/// How long the connections the collector itself opens (its pooled
/// readers, remote write's position updates) wait for the writer.
const SERVE_BUSY: std::time::Duration = std::time::Duration::from_secs(5);

/// Page cache of each pooled reader, in KiB (as a negative cache_size).
const READER_CACHE_KIB: i64 = -512;

/// One connection to `boltwatch.db`.
pub struct Db {
    conn: Connection,
}

impl Db {
    /// Opens the store read-only (a report never writes; safe beside
    /// `serve`). Refuses a missing file instead of creating it.
    pub fn open_reader(path: &Path) -> Result<Db, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(BUSY)?;
        Ok(Db { conn })
    }

    /// Opens `path` for a command's writes (soaks, marks, positions,
    /// `prune`), creating and migrating it when needed as `serve` would.
    /// WAL lets it run beside a running `serve`; the busy timeout waits
    /// out the collector's short batch transactions.
    pub fn open_writer(path: &Path) -> Result<Db, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(BUSY)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&mut conn)?;
        Ok(Db { conn })
    }

    /// A read-write connection to the store a running `serve` opened and
    /// migrated (remote write's position updates, one per delivered
    /// batch): nothing created, no migration check, no journal settings
    /// (WAL is the file's, set by the writer).
    pub fn open_existing(path: &Path) -> Result<Db, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(SERVE_BUSY)?;
        Ok(Db { conn })
    }

    /// A pooled reader's connection: no mutex (one thread at a time), a
    /// bounded page cache.
    pub(crate) fn pooled_reader(path: &Path) -> Result<Db, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(SERVE_BUSY)?;
        conn.pragma_update(None, "cache_size", READER_CACHE_KIB)?;
        Ok(Db { conn })
    }

    /// Runs `f` with every read it makes on this connection in one read
    /// transaction: one snapshot of the file, whatever the writer commits
    /// meanwhile (a remote_write restore reads the rollups and the log
    /// this way, so pruning or compaction between two reads cannot move a
    /// record past it).
    pub fn in_one_read<T>(
        &self,
        f: impl FnOnce(&Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let snapshot = self.conn.unchecked_transaction()?;
        let out = f(self);
        // Nothing was written: ending it either way is the same.
        drop(snapshot);
        out
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    // Records.

    /// Records matching `f` (its `limit` included) that sort after `after`,
    /// oldest first, handed to `each` one at a time until it returns
    /// false: a page never holds more than it keeps.
    pub fn each_record(
        &self,
        f: &RecordFilter,
        after: Option<RecordKey<'_>>,
        each: impl FnMut(StoredRecord) -> bool,
    ) -> Result<(), StoreError> {
        Ok(queries::each_record(&self.conn, f, after, each)?)
    }

    /// Records matching `f`, oldest first.
    pub fn records(&self, f: &RecordFilter) -> Result<Vec<StoredRecord>, StoreError> {
        Ok(queries::list_records(&self.conn, f)?)
    }

    /// Every record of payload `kind` (of `node`, if given), oldest first,
    /// one at a time: for views that must see all of a kind, such as
    /// outages whose start and end records are joined.
    pub fn each_record_of_kind(
        &self,
        node: Option<&str>,
        kind: &str,
        each: impl FnMut(StoredRecord),
    ) -> Result<(), StoreError> {
        Ok(queries::each_record_of_kind(&self.conn, node, kind, each)?)
    }

    /// Records stored, in all.
    pub fn total_records(&self) -> Result<u64, StoreError> {
        Ok(queries::total_records(&self.conn)?)
    }

    /// Every boot of every node.
    pub fn boots(&self) -> Result<Vec<BootRow>, StoreError> {
        Ok(queries::list_boots(&self.conn)?)
    }

    /// Every boot's stored `Hello` (see [`queries::hellos`]).
    pub fn hellos(&self) -> Result<Vec<HelloRow>, StoreError> {
        Ok(queries::hellos(&self.conn)?)
    }

    /// The report's scan of `[from_ns, to_ns)`: raw records in time order,
    /// then rollups (see [`scan::scan`]).
    pub fn scan(
        &self,
        from_ns: u64,
        to_ns: u64,
        f: impl FnMut(Scanned<'_>),
    ) -> Result<(), StoreError> {
        Ok(scan::scan(&self.conn, from_ns, to_ns, f)?)
    }

    // The arrival-order log.

    /// Up to `limit` records after position `pos`, in store order.
    pub fn log_after(&self, pos: i64, limit: u32) -> Result<Vec<Logged>, StoreError> {
        Ok(log::read_after(&self.conn, pos, limit)?)
    }

    /// The newest position (0 when nothing was stored).
    pub fn log_newest(&self) -> Result<i64, StoreError> {
        Ok(log::newest(&self.conn)?)
    }

    /// The last position `endpoint` delivered (0: none yet).
    pub fn log_position(&self, endpoint: &str) -> Result<i64, StoreError> {
        Ok(log::position(&self.conn, endpoint)?)
    }

    /// Records that `endpoint` delivered everything up to `pos`.
    pub fn save_position(&self, endpoint: &str, pos: i64, now_ns: u64) -> Result<(), StoreError> {
        Ok(log::save_position(&self.conn, endpoint, pos, now_ns)?)
    }

    /// The first position not yet delivered to every endpoint in
    /// `endpoints` (`None`: every endpoint with a position), with the
    /// endpoint that holds it; `i64::MAX` without endpoints.
    pub fn delivered_below(
        &self,
        endpoints: Option<&[String]>,
    ) -> Result<(i64, Option<String>), StoreError> {
        Ok(log::delivered_below(&self.conn, endpoints)?)
    }

    // Retention.

    /// The pruning mark and how many raw records rollups hold.
    pub fn retention_status(&self) -> Result<(u64, u64), StoreError> {
        Ok(retention::status(&self.conn)?)
    }

    /// Calls `f` with the records that stand for every stored rollup in a
    /// replay of the store, oldest minute first, with the number of raw
    /// records each rollup's records stand for; returns the total. On this
    /// connection, so a caller reads the raw log in the same read
    /// transaction.
    pub fn replay_rollups(
        &self,
        f: impl FnMut(&[boltwatch_proto::v1::Record], u64),
    ) -> Result<u64, StoreError> {
        Ok(retention::task::replay(&self.conn, f)?)
    }

    /// Prunes every raw dense record before `cutoff_ns` (the `prune`
    /// command), in steps of one transaction; returns the total and the
    /// remote_write endpoint that held pruning back, if one did.
    pub fn prune_before(
        &mut self,
        cutoff_ns: u64,
        endpoints: Option<&[String]>,
    ) -> Result<(Pruned, Option<String>), StoreError> {
        Ok(retention::task::prune_before(
            &mut self.conn,
            cutoff_ns,
            endpoints,
        )?)
    }

    /// Gives the freed pages back to the file system.
    pub fn vacuum(&self) -> Result<(), StoreError> {
        Ok(self.conn.execute_batch("VACUUM")?)
    }

    /// The file's pages: size, total and free.
    pub fn pages(&self) -> Result<Pages, StoreError> {
        Ok(schema::pages(&self.conn)?)
    }

    // Soaks: rows only; the rules are the soak domain's.

    /// Inserts a soak; false when the name is taken.
    pub fn insert_soak(&self, s: &SoakRow, now_ns: u64) -> Result<bool, StoreError> {
        Ok(soaks::insert(&self.conn, s, now_ns)?)
    }

    /// Sets a soak's end.
    pub fn set_soak_end(&self, name: &str, end_ns: u64) -> Result<(), StoreError> {
        Ok(soaks::set_end(&self.conn, name, end_ns)?)
    }

    /// Deletes a soak and its marks; false when there was none.
    pub fn delete_soak(&self, name: &str) -> Result<bool, StoreError> {
        let tx = self.conn.unchecked_transaction()?;
        let gone = soaks::delete(&tx, name)?;
        tx.commit()?;
        Ok(gone)
    }

    /// One soak, if stored.
    pub fn soak(&self, name: &str) -> Result<Option<SoakRow>, StoreError> {
        Ok(soaks::get(&self.conn, name)?)
    }

    /// Every soak, newest start first.
    pub fn soaks(&self) -> Result<Vec<SoakRow>, StoreError> {
        Ok(soaks::list(&self.conn)?)
    }

    /// Adds a mark to a soak.
    pub fn insert_mark(&self, soak: &str, m: &MarkRow) -> Result<(), StoreError> {
        Ok(soaks::insert_mark(&self.conn, soak, m)?)
    }

    /// What the stored soaks and marks take at `now_ns`, and the free
    /// space beside the store file.
    pub fn soak_usage(&self, now_ns: u64) -> Result<SoakUsage, StoreError> {
        let mut u = soaks::usage(&self.conn, now_ns)?;
        let dir = self
            .conn
            .path()
            .filter(|p| !p.is_empty())
            .and_then(|p| Path::new(p).parent().map(Path::to_path_buf));
        if let Some(dir) = dir {
            u.free_bytes = Some(crate::health::free_bytes(&dir)?);
        }
        Ok(u)
    }

    /// How many marks a soak has.
    pub fn mark_count(&self, soak: &str) -> Result<u64, StoreError> {
        Ok(soaks::mark_count(&self.conn, soak)?)
    }

    /// A soak's marks, oldest first.
    pub fn marks(&self, soak: &str) -> Result<Vec<MarkRow>, StoreError> {
        Ok(soaks::marks(&self.conn, soak)?)
    }
}
