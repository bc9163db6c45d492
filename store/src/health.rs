//! What `/healthz` and the start check look at: free space, SQLite's
//! `quick_check`, and damage found while running.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::Connection;

use crate::error::StoreError;

/// `/healthz` fails with less free space than this in the data directory:
/// SQLite reuses its WAL file, so a tiny write can still succeed on a full
/// disk while the next batch cannot.
pub const MIN_FREE_BYTES: u64 = 1 << 20;

/// Bytes available to the collector on `dir`'s file system.
pub fn free_bytes(dir: &Path) -> Result<u64, StoreError> {
    let st = nix::sys::statvfs::statvfs(dir).map_err(|e| StoreError::Statvfs {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    Ok((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

/// Runs SQLite's `quick_check` (pages, records, index order; O(file size),
/// run once at start) and names what is wrong.
pub(super) fn quick_check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let mut stmt = conn.prepare("PRAGMA quick_check(8)")?;
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if rows.len() == 1 && rows[0] == "ok" {
        return Ok(());
    }
    Err(StoreError::Corrupt {
        path: path.to_path_buf(),
        report: rows.join("; "),
    })
}

/// The first sign of a damaged file, seen by the writer or a reader; kept
/// until restart so `/healthz` keeps failing (a damaged file does not heal,
/// and a health write to an intact page would hide it).
#[derive(Debug, Default)]
pub(super) struct Damage(Mutex<Option<String>>);

impl Damage {
    /// Passes `r` through, remembering it if it says the file is damaged.
    pub(super) fn watch<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, msg))) = &r {
            let corrupt = matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
            );
            if corrupt {
                let mut first = self.0.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert_with(|| msg.clone().unwrap_or_else(|| e.to_string()));
            }
        }
        r
    }

    pub(super) fn first(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
