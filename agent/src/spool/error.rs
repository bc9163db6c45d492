//! How the spool fails: [`SpoolError`], and [`io_err`], which names the
//! file an I/O error happened on. Every part of the spool (appending,
//! recovery, reading back) reports through these.

use std::path::{Path, PathBuf};

/// Spool failures.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// A file operation failed.
    #[error("spool {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the spool directory.
    #[error("spool {0} is in use by another agent")]
    Locked(PathBuf),
    /// Records were refused (and counted as dropped): the spool cannot be
    /// written and the records waiting for it fill their memory bound.
    #[error("spool {path} cannot be written ({error}); {refused} records refused, {held} waiting in memory")]
    Refused {
        /// The segment that could not be written.
        path: PathBuf,
        /// The last write error.
        error: String,
        /// Records refused by this append.
        refused: u64,
        /// Records waiting in memory for the disk.
        held: usize,
    },
}

/// Wraps an I/O error on `path` as a [`SpoolError::Io`], for `map_err`.
pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_path_buf(),
        source,
    }
}
