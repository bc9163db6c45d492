//! Versioned schema migrations, embedded as SQL and applied in order inside
//! one transaction each; `PRAGMA user_version` records how far a database
//! has come, so an older file is upgraded in place and a newer one refused.

use rusqlite::Connection;

use crate::error::StoreError;

/// Migration `i` brings `user_version` from `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: records keyed by (node, boot, seq), kept verbatim as the encoded
    // `Record`, so payload kinds this collector does not know survive; boots
    // with the counters the gap calculation needs, maintained by the writer
    // in the same transaction as the records.
    "CREATE TABLE records (
        node     TEXT    NOT NULL,
        boot_id  TEXT    NOT NULL,
        seq      INTEGER NOT NULL,
        unix_ns  INTEGER NOT NULL,
        kind     TEXT    NOT NULL,
        record   BLOB    NOT NULL,
        PRIMARY KEY (node, boot_id, seq)
    ) WITHOUT ROWID;
    CREATE INDEX records_by_time ON records (unix_ns);
    CREATE INDEX records_by_node_kind_time ON records (node, kind, unix_ns);
    CREATE TABLE boots (
        node               TEXT    NOT NULL,
        boot_id            TEXT    NOT NULL,
        first_seen_unix_ns INTEGER NOT NULL,
        last_seen_unix_ns  INTEGER NOT NULL,
        records            INTEGER NOT NULL DEFAULT 0,
        highest_seq        INTEGER NOT NULL DEFAULT 0,
        agent_version      TEXT,
        os                 TEXT,
        hostname           TEXT,
        started_unix_ns    INTEGER,
        hello              BLOB,
        PRIMARY KEY (node, boot_id)
    );",
    // 2: soak runs and their workload marks. Nodes, SLO and
    // labels are JSON text: read whole, never queried inside.
    "CREATE TABLE soaks (
        name            TEXT    PRIMARY KEY,
        start_unix_ns   INTEGER NOT NULL,
        end_unix_ns     INTEGER,
        nodes           TEXT    NOT NULL,
        slo             TEXT    NOT NULL,
        labels          TEXT    NOT NULL,
        created_unix_ns INTEGER NOT NULL
    );
    CREATE TABLE soak_marks (
        id            INTEGER PRIMARY KEY,
        soak          TEXT    NOT NULL REFERENCES soaks (name) ON DELETE CASCADE,
        text          TEXT    NOT NULL,
        at_unix_ns    INTEGER NOT NULL,
        until_unix_ns INTEGER
    );
    CREATE INDEX soak_marks_by_soak ON soak_marks (soak, at_unix_ns);",
    // 3: one row that `/healthz` rewrites, so the health check proves a
    // write reaches the file (an empty transaction writes nothing).
    "CREATE TABLE health (
        id               INTEGER PRIMARY KEY CHECK (id = 1),
        checked_unix_ns  INTEGER NOT NULL
    );",
    // remote_write: `records` has no rowid, so a trigger logs
    // every newly stored record in arrival order (`pos`, never reused), in
    // the writer's transaction; each remote_write endpoint keeps the last
    // `pos` it delivered. Records already stored are logged by time.
    "CREATE TABLE record_log (
        pos     INTEGER PRIMARY KEY AUTOINCREMENT,
        node    TEXT    NOT NULL,
        boot_id TEXT    NOT NULL,
        seq     INTEGER NOT NULL
    );
    INSERT INTO record_log (node, boot_id, seq)
        SELECT node, boot_id, seq FROM records ORDER BY unix_ns, node, boot_id, seq;
    CREATE TRIGGER record_log_append AFTER INSERT ON records BEGIN
        INSERT INTO record_log (node, boot_id, seq) VALUES (NEW.node, NEW.boot_id, NEW.seq);
    END;
    CREATE TABLE remote_write_positions (
        endpoint        TEXT    PRIMARY KEY,
        pos             INTEGER NOT NULL,
        updated_unix_ns INTEGER NOT NULL
    );",
];

/// Migrations past the SQL-only ones: each brings `user_version` from
/// `MIGRATIONS.len() + i` to one more, with Rust where SQL alone cannot
/// (migration 5 strips each record's envelope against its boot's head;
/// 6 adds the rollups of raw-record retention; 7 packs rows and moves
/// the duplicate check to sequence runs; 8 keeps the highest pruned
/// position; 9 adds the compaction mark; 10 the late-row mark of
/// retention).
const STEPS: &[fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>] = &[
    super::layout::migrate_v5,
    super::retention::migrate_v6,
    super::layout::migrate_v7,
    super::retention::migrate_v8,
    super::compact::migrate_v9,
    super::retention::migrate_v10,
];

/// The schema version this build writes.
pub const VERSION: i64 = (MIGRATIONS.len() + STEPS.len()) as i64;

/// A fresh in-memory database at [`VERSION`], for tests of the SQL.
#[cfg(test)]
pub fn memory() -> Connection {
    let mut c = Connection::open_in_memory().expect("in-memory SQLite opens");
    migrate(&mut c).expect("migrations apply to an empty database");
    c
}

/// Brings the database up to [`VERSION`].
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > VERSION {
        return Err(StoreError::TooNew {
            found: current,
            supported: VERSION,
        });
    }
    for i in current as usize..VERSION as usize {
        let tx = conn.transaction()?;
        match MIGRATIONS.get(i) {
            Some(sql) => tx.execute_batch(sql)?,
            None => STEPS[i - MIGRATIONS.len()](&tx)?,
        }
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
        tx.commit()?;
        tracing::info!(version = i + 1, "applied store migration");
    }
    if current > 0 && current < VACUUM_AFTER_UPGRADE_FROM_BELOW {
        vacuum(conn);
    }
    Ok(())
}

/// Upgrading a file from below this version rewrote every record (version
/// 5 strips each record's envelope into a new table), so the old tables'
/// pages sit on the freelist: reused by new records eventually, but the
/// file stays at its old size, more than twice what it holds.
const VACUUM_AFTER_UPGRADE_FROM_BELOW: i64 = 5;

/// A database file's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pages {
    /// Pages in the file.
    pub total: i64,
    /// Pages on the freelist (reused by new rows, or given back by VACUUM).
    pub free: i64,
    /// Bytes a page.
    pub size: i64,
}

/// How many pages the file has, how many are free, and their size.
pub fn pages(conn: &Connection) -> rusqlite::Result<Pages> {
    let get = |pragma: &str| conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0));
    Ok(Pages {
        total: get("page_count")?,
        free: get("freelist_count")?,
        size: get("page_size")?,
    })
}

/// Gives a rewritten file's free pages back to the file system, once,
/// right after the upgrade. VACUUM copies the database, so it needs about
/// its size again in free space; when that fails (a full disk) the store
/// still works, only larger, so it is logged and not fatal.
fn vacuum(conn: &Connection) {
    let pages = |c: &Connection| pages(c).map(|p| (p.total, p.free));
    let before = pages(conn).ok();
    match conn.execute_batch("VACUUM") {
        Ok(()) => {
            let after = pages(conn).ok();
            tracing::info!(
                pages_before = before.map(|p| p.0),
                free_pages_before = before.map(|p| p.1),
                pages_after = after.map(|p| p.0),
                "vacuumed the store after the upgrade"
            );
        }
        Err(e) => tracing::warn!(
            error = %e,
            free_pages = before.map(|p| p.1),
            "could not vacuum the store after the upgrade; its free pages will be reused"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_from_empty_and_is_idempotent() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c).unwrap();
        migrate(&mut c).unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, VERSION);
        let n: i64 = c
            .query_row("SELECT count(*) FROM stored", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn refuses_newer_database() {
        let mut c = Connection::open_in_memory().unwrap();
        c.pragma_update(None, "user_version", VERSION + 1).unwrap();
        assert!(matches!(migrate(&mut c), Err(StoreError::TooNew { .. })));
    }
}
