//! Doors for the collector's tests and the store benches (feature
//! `testing`), never for product code: a raw connection to peek at what a
//! run left in the file, and the writer's insert path without its thread.

use std::path::Path;

pub use rusqlite;
use rusqlite::Connection;

pub use crate::insert::BootAdded;
pub use crate::layout::Keys;
pub use crate::queries::{add_boot_records, boot_highest_seq};

/// A plain read-write connection to `DIR/boltwatch.db`.
pub fn connection(dir: &Path) -> rusqlite::Result<Connection> {
    Connection::open(dir.join("boltwatch.db"))
}

/// Opens `path` with the writer's settings and migrations, as the
/// collector's writer thread does.
pub fn writer(path: &Path) -> Result<Connection, crate::error::StoreError> {
    let mut conn = Connection::open(path)?;
    crate::writer::writer_settings(&conn)?;
    crate::schema::migrate(&mut conn)?;
    Ok(conn)
}

/// The writer's insert of one batch (see the `insert` module).
pub fn insert_batch(
    tx: &Connection,
    keys: &mut Keys,
    batch: &crate::types::NewBatch,
    inserted: &mut Vec<bool>,
) -> rusqlite::Result<Vec<crate::insert::BootAdded>> {
    crate::insert::insert_batch(tx, keys, batch, inserted)
}
