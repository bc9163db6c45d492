//! Why a store operation failed.

use std::path::PathBuf;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database file could not be opened, migrated or written at
    /// start (read-only directory, not a database).
    #[error("opening the store {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// Why.
        source: Box<StoreError>,
    },
    /// `PRAGMA quick_check` found damage.
    #[error("the store {path} is damaged (PRAGMA quick_check: {report}); restore it from a backup or move it aside")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// The first problems SQLite reported.
        report: String,
    },
    /// The file system of the data directory is (nearly) full.
    #[error("{path}: only {free} bytes free (at least {needed} needed)")]
    DiskFull {
        /// The data directory.
        path: PathBuf,
        /// Bytes available.
        free: u64,
        /// The floor.
        needed: u64,
    },
    /// An earlier read or write found the file damaged.
    #[error("the store {path} was found damaged while running ({first}); restart to run PRAGMA quick_check")]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// The first error that showed it.
        first: String,
    },
    /// The data directory could not be examined.
    #[error("statvfs {path}: {source}")]
    Statvfs {
        /// The data directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The data directory could not be created.
    #[error("creating {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The database was written by a newer collector.
    #[error("database schema version {found} is newer than this collector's {supported}")]
    TooNew {
        /// Version found in the file.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// A reader was pointed at a store that does not exist.
    #[error("no store at {}", .0.display())]
    Missing(PathBuf),
    /// The writer thread has stopped.
    #[error("store writer is closed")]
    Closed,
    /// A blocking read task failed.
    #[error("read task failed: {0}")]
    Join(String),
}
