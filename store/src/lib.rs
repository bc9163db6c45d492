//! boltwatch-store: the collector's durable store, SQLite in WAL mode
//! with `synchronous = FULL`, so a committed batch survives a power cut
//! before it is acknowledged. This crate owns every table, every SQL
//! statement, the row layout (packs, sequence runs, rollups), compaction,
//! retention and the migrations; nothing else in the workspace names a
//! table or a column.
//!
//! # The door
//! - [`Store`] opens (and migrates) `DIR/boltwatch.db`, starts the one
//!   writer thread and closes it; [`StoreHandle`] is the servers' cheap
//!   handle: [`StoreHandle::write_batch`], [`StoreHandle::hello`] (the
//!   watermarks of a `Welcome`), health ([`StoreHandle::ping`],
//!   [`StoreHandle::writer_answers`]), the upkeep steps, and
//!   [`StoreHandle::read`], which runs a read on a pooled connection.
//! - [`Db`] is one connection's read and small-write face, whatever holds
//!   it (the pool, a command, a report): records by filter and by kind,
//!   boots, **the arrival-order log** ([`Db::log_after`],
//!   [`Db::log_newest`], endpoint positions, [`Db::delivered_below`]),
//!   **the record scan** of reports ([`Db::scan`], raw records and
//!   rollups behind one [`Scanned`] type), soak and mark rows (stored
//!   here; their rules live in the soak domain), retention on demand and
//!   the rollup replay of a restart.
//! - [`run_retention`] and [`run_compaction`]: the minutely upkeep tasks.
//! - [`StoreReader`]: a read-only view of a store another process writes.
//!
//! # Inside (private)
//! One writer thread owns the only writing connection and takes commands
//! from a bounded channel; each `RecordBatch` is one transaction. Reads
//! use a small pool of read-only connections on blocking threads, which
//! WAL lets run beside the writer. The schema and its migrations are in
//! `schema`, the health checks (free space, `quick_check` at start, damage
//! found while running) in `health`. Rows are packs of records (`pack`,
//! `layout`, written by `insert`, with sequence runs in `seqs`); the
//! writer also runs the minutely upkeep (`upkeep`): raw retention
//! (`retention`, per-minute `rollup`s) and compaction of live rows into
//! packs (`compact`).

mod canon;
mod compact;
mod db;
mod error;
mod handle;
mod health;
mod insert;
mod layout;
mod log;
mod ordered;
mod pack;
mod queries;
mod retention;
mod rollup;
mod scan;
mod schema;
mod seqs;
mod soaks;
#[cfg(feature = "testing")]
pub mod testing;
mod types;
mod upkeep;
mod writer;

pub use compact::task::run as run_compaction;
pub use compact::Compacted;
pub use db::Db;
pub use error::StoreError;
pub use handle::{Store, StoreHandle, StoreReader, WELCOME_BOOTS};
pub use health::{free_bytes, MIN_FREE_BYTES};
pub use log::{Logged, CHUNK as LOG_CHUNK};
pub use pack::MAX_RECORD_BYTES;
pub use queries::RecordKey;
pub use retention::task::run as run_retention;
pub use retention::Pruned;
pub use rollup::MINUTE_NS;
pub use scan::{Minute, MinuteLink, Scanned, Window};
pub use schema::Pages;
pub use soaks::{MarkRow, SoakRow, SoakUsage};
pub use upkeep::EVERY as UPKEEP_EVERY;

pub use types::{
    BatchOutcome, BatchRecord, BootRow, HelloRow, NewBatch, NewRecord, RecordFilter, StoredRecord,
    Watermark,
};

#[cfg(test)]
mod encoders;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
