//! The writer thread: the only writing connection, fed by the command
//! channel. Batches that queue up while a commit runs (several agents
//! streaming at once) are stored in one transaction, so one WAL fsync
//! covers them all; each is still answered only after that commit.

use std::path::Path;
use std::time::Instant;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use boltwatch_common::clock::now_unix_ns as now_ns;

use crate::compact::Compacted;
use crate::error::StoreError;
use crate::health::quick_check;
use crate::retention::Pruned;
use crate::types::{BatchOutcome, HelloRow, NewBatch, Watermark};
use crate::{compact, insert, layout, queries, retention, schema};

/// A command's answer.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

pub(crate) enum Command {
    Hello(HelloRow, Reply<()>),
    Batch(NewBatch, Reply<BatchOutcome>),
    Ping(Reply<()>),
    /// One step of raw-record retention: (cutoff, first position not
    /// delivered to every remote_write endpoint).
    Prune(u64, i64, Reply<Pruned>),
    /// One step of compaction: the first position it leaves alone.
    Compact(i64, Reply<Compacted>),
    Shutdown,
}

/// SQLite page cache of the writer, in KiB (as a negative cache_size).
/// 2 MiB (SQLite's default size, made explicit): a grouped transaction
/// dirties a few MiB, and with 256 KiB SQLite spilled pages to the WAL in
/// mid-transaction and read some back, about 6% more collector CPU per
/// record in `bench/store.sh`.
const WRITER_CACHE_KIB: i64 = -2048;
/// Prepared statements the writer keeps.
const WRITER_STATEMENTS: usize = 32;

pub(crate) fn open(path: &Path) -> Result<Connection, StoreError> {
    let opened = open_unchecked(path).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    // Damage reported as such, not as "cannot open" (its own message
    // names the path).
    match quick_check(&opened, path) {
        Err(e @ StoreError::Corrupt { .. }) => Err(e),
        Err(e) => Err(StoreError::Open {
            path: path.to_path_buf(),
            source: Box::new(e),
        }),
        Ok(()) => Ok(opened),
    }
}

fn open_unchecked(path: &Path) -> Result<Connection, StoreError> {
    let mut conn = Connection::open(path)?;
    writer_settings(&conn)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    schema::migrate(&mut conn)?;
    Ok(conn)
}

/// The writing connection's settings (the store benches measure the same
/// connection the collector writes with, through [`testing`]).
pub(crate) fn writer_settings(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: an Ack promises the batch is durable, NORMAL could lose the last
    // transactions on power loss in WAL mode.
    conn.pragma_update(None, "synchronous", "FULL")?;
    // An explicit page-cache bound (KiB when negative): the collector's
    // memory over a 72-hour soak must plateau, not follow the database. The
    // cache grows to this bound in the first minutes of ingest and stays
    // there (an earlier soak saw RSS +10% in 10 minutes with 2 MiB and
    // settled on 256 KiB; 2 MiB costs those 1.75 MiB once, for less CPU
    // per record).
    conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
    // Room for every statement the writer repeats (inserts, sequence
    // runs, boot counters, retention), so none is compiled again per batch.
    conn.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
    Ok(())
}

/// A group stops taking queued batches at this many records (a bound on
/// one transaction's size and on the wait of its first batch).
const GROUP_RECORDS: usize = 32_768;

pub(super) struct Writer {
    conn: Connection,
    total: u64,
    /// Interned boot and kind ids, kept across batches.
    keys: layout::Keys,
}

impl Writer {
    pub(super) fn new(conn: Connection, total: u64) -> Writer {
        Writer {
            conn,
            total,
            keys: layout::Keys::default(),
        }
    }

    pub(super) fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut next = None;
        loop {
            let Some(cmd) = next.take().or_else(|| rx.blocking_recv()) else {
                break;
            };
            match cmd {
                Command::Hello(row, reply) => {
                    let _ = reply.send(self.hello(&row));
                }
                Command::Batch(records, reply) => {
                    let mut group = vec![(records, reply)];
                    let mut n = group[0].0.len();
                    while n < GROUP_RECORDS {
                        match rx.try_recv() {
                            Ok(Command::Batch(r, reply)) => {
                                n += r.len();
                                group.push((r, reply));
                            }
                            Ok(other) => {
                                next = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.group(group);
                }
                Command::Ping(reply) => {
                    let _ = reply.send(self.ping());
                }
                Command::Prune(cutoff, below_pos, reply) => {
                    let _ = reply.send(self.prune(cutoff, below_pos));
                }
                Command::Compact(below_pos, reply) => {
                    let _ = reply.send(self.step(|tx| compact::compact_step(tx, below_pos)));
                }
                Command::Shutdown => break,
            }
        }
        // Fold the WAL into the database file, so a stopped collector
        // leaves one self-contained file (for backups and copies).
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);") {
            tracing::warn!(error = %e, "WAL checkpoint at shutdown failed");
        }
        tracing::debug!("store writer stopped");
    }

    fn hello(&mut self, row: &HelloRow) -> Result<(), StoreError> {
        queries::upsert_hello(&self.conn, row, now_ns())?;
        Ok(())
    }

    fn ping(&mut self) -> Result<(), StoreError> {
        queries::touch_health(&mut self.conn, now_ns())?;
        Ok(())
    }

    fn prune(&mut self, cutoff: u64, below_pos: i64) -> Result<retention::Pruned, StoreError> {
        self.step(|tx| retention::prune_step(tx, cutoff, below_pos))
    }

    /// One maintenance step in its own immediate transaction.
    fn step<T>(
        &mut self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let done = f(&tx)?;
        tx.commit()?;
        Ok(done)
    }

    /// Stores a group in one transaction and answers each batch. If that
    /// fails, each batch is tried alone, so one bad batch fails by itself
    /// as it would have without the grouping.
    fn group(&mut self, group: Vec<(NewBatch, Reply<BatchOutcome>)>) {
        let batches: Vec<&NewBatch> = group.iter().map(|(b, _)| b).collect();
        let outcomes = match self.batches(&batches) {
            Ok(o) => o.into_iter().map(Ok).collect(),
            Err(e) => {
                // Ids interned by the rolled-back transaction are gone.
                self.keys.clear();
                if batches.len() == 1 {
                    vec![Err(e)]
                } else {
                    let mut alone = Vec::with_capacity(batches.len());
                    for b in &batches {
                        let r = self.batches(&[*b]).map(|mut o| o.remove(0));
                        if r.is_err() {
                            self.keys.clear();
                        }
                        alone.push(r);
                    }
                    alone
                }
            }
        };
        for ((_, reply), outcome) in group.into_iter().zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }

    fn batches(&mut self, batches: &[&NewBatch]) -> Result<Vec<BatchOutcome>, StoreError> {
        let start = Instant::now();
        let now = now_ns();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Per batch: whether each record was new, and per boot what it
        // gained.
        let mut each = Vec::with_capacity(batches.len());
        for batch in batches {
            let mut inserted = Vec::with_capacity(batch.len());
            let added = insert::insert_batch(&tx, &mut self.keys, batch, &mut inserted)?;
            for ((node, boot), a) in batch.boots.iter().zip(&added) {
                queries::add_boot_records(&tx, node, boot, now, a.added, a.max_seq)?;
            }
            each.push((inserted, added));
        }
        // Watermarks after every batch of the group: what the commit makes
        // durable.
        let mut outcomes = Vec::with_capacity(batches.len());
        for (batch, (inserted, boots)) in batches.iter().zip(each) {
            let mut watermarks = Vec::with_capacity(boots.len());
            for (node, boot) in &batch.boots {
                watermarks.push(Watermark {
                    boot_id: boot.to_string(),
                    highest_seq: queries::boot_highest_seq(&tx, node, boot)?,
                });
            }
            let added: u64 = boots.iter().map(|b| b.added).sum();
            let verbatim = boots.iter().map(|b| b.verbatim).sum();
            outcomes.push((
                batch.len() as u64 - added,
                inserted,
                watermarks,
                added,
                verbatim,
            ));
        }
        tx.commit()?;
        let commit_seconds = start.elapsed().as_secs_f64();
        let mut out = Vec::with_capacity(outcomes.len());
        for (duplicates, inserted, watermarks, added, verbatim) in outcomes {
            self.total += added;
            out.push(BatchOutcome {
                duplicates,
                inserted,
                watermarks,
                commit_seconds,
                total_records: 0,
                verbatim,
            });
        }
        for o in &mut out {
            o.total_records = self.total;
        }
        Ok(out)
    }
}
