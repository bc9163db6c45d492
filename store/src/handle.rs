//! The store's handles: [`Store`] (open, migrate, start the writer
//! thread, close), [`StoreHandle`] (the servers' cheap handle: writes go
//! to the writer as commands, reads to a small pool of read-only
//! connections on blocking threads) and [`StoreReader`] (reads of a store
//! another process writes).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use boltwatch_common::clock::now_unix_ns as now_ns;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::compact::Compacted;
use crate::db::Db;
use crate::error::StoreError;
use crate::health::{free_bytes, Damage, MIN_FREE_BYTES};
use crate::queries;
use crate::retention::Pruned;
use crate::types::{
    BatchOutcome, BootRow, HelloRow, NewBatch, RecordFilter, StoredRecord, Watermark,
};
use crate::writer::{self, Command, Reply};

/// Welcome lists at most this many boots (the schema says 64).
pub const WELCOME_BOOTS: u32 = 64;

/// A cheap, cloneable handle to the store.
#[derive(Clone)]
pub struct StoreHandle {
    tx: mpsc::Sender<Command>,
    readers: Arc<ReadPool>,
    damage: Arc<Damage>,
}

/// The store: the handle plus the writer thread, joined by [`Store::close`].
pub struct Store {
    handle: StoreHandle,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Store {
    /// Opens (creating if needed) `dir/boltwatch.db`, applies migrations and
    /// starts the writer thread.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("boltwatch.db");
        let mut conn = writer::open(&path)?;
        // A read-only directory or file opens fine and fails at the first
        // write: write now, so the collector refuses to start, naming it.
        queries::touch_health(&mut conn, now_ns()).map_err(|e| StoreError::Open {
            path: path.clone(),
            source: Box::new(e.into()),
        })?;
        let total = queries::total_records(&conn)?;
        let (tx, rx) = mpsc::channel(64);
        let writer = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer::Writer::new(conn, total).run(rx))
            .map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        Ok(Store {
            handle: StoreHandle {
                tx,
                damage: Arc::default(),
                readers: Arc::new(ReadPool {
                    path,
                    idle: Mutex::new(Vec::new()),
                }),
            },
            writer: Some(writer),
        })
    }

    /// A handle for the servers.
    pub fn handle(&self) -> StoreHandle {
        self.handle.clone()
    }

    /// Stops the writer after the commands already queued and waits for it.
    pub async fn close(mut self) {
        let _ = self.handle.tx.send(Command::Shutdown).await;
        if let Some(w) = self.writer.take() {
            let _ = tokio::task::spawn_blocking(move || w.join()).await;
        }
    }
}

impl StoreHandle {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Records a `Hello` and returns the node's watermarks for the `Welcome`.
    /// The watermark query sorts the node's boots: it runs on the read pool
    /// after the commit, so it never holds up the writer (and other nodes'
    /// acks).
    pub async fn hello(&self, row: HelloRow) -> Result<Vec<Watermark>, StoreError> {
        let node = row.node.clone();
        self.call(|r| Command::Hello(row, r)).await?;
        self.read_sql(move |c| queries::watermarks(c, &node, WELCOME_BOOTS))
            .await
    }

    /// Stores a batch in one transaction; returns after the commit.
    /// Refused once the file was found damaged: the agents keep the records
    /// in their spools until the store is repaired.
    pub async fn write_batch(
        &self,
        records: impl Into<NewBatch>,
    ) -> Result<BatchOutcome, StoreError> {
        self.damaged()?;
        let records = records.into();
        let r = self.call(|r| Command::Batch(records, r)).await;
        self.damage.watch(r)
    }

    /// One step of raw-record retention (see [`retention`]): prunes raw
    /// dense records older than `cutoff_ns` below position `below_pos`.
    pub(crate) async fn prune_step(
        &self,
        cutoff_ns: u64,
        below_pos: i64,
    ) -> Result<Pruned, StoreError> {
        self.damaged()?;
        let r = self.call(|r| Command::Prune(cutoff_ns, below_pos, r)).await;
        self.damage.watch(r)
    }

    /// One step of compaction (see [`compact`]): rewrites rows before
    /// position `below_pos` as packs.
    pub(crate) async fn compact_step(&self, below_pos: i64) -> Result<Compacted, StoreError> {
        self.damaged()?;
        let r = self.call(|r| Command::Compact(below_pos, r)).await;
        self.damage.watch(r)
    }

    fn damaged(&self) -> Result<(), StoreError> {
        match self.damage.first() {
            Some(first) => Err(StoreError::Damaged {
                path: self.readers.path.clone(),
                first,
            }),
            None => Ok(()),
        }
    }

    /// Proves the store is writable: rewrites the health row in a
    /// committed transaction, and checks the data directory has at least
    /// [`MIN_FREE_BYTES`] free.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.damaged()?;
        let r = self.call(Command::Ping).await;
        self.damage.watch(r)?;
        let dir = self
            .readers
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let free = tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || free_bytes(&dir)
        })
        .await
        .map_err(|e| StoreError::Join(e.to_string()))??;
        if free < MIN_FREE_BYTES {
            return Err(StoreError::DiskFull {
                path: dir,
                free,
                needed: MIN_FREE_BYTES,
            });
        }
        Ok(())
    }

    /// Whether the writer thread answers a ping (one committed write of the
    /// health row, queued behind the batches before it), whatever the
    /// answer: a full disk or a damaged file is `/healthz`'s verdict and a
    /// restart fixes neither, a writer that answers nothing is stuck. What
    /// the systemd watchdog checks.
    pub async fn writer_answers(&self) -> bool {
        !matches!(self.call(Command::Ping).await, Err(StoreError::Closed))
    }

    /// Runs `f` on a pooled read-only connection on a blocking thread.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    {
        let r = StoreReader {
            readers: self.readers.clone(),
        }
        .read(f)
        .await;
        self.damage.watch(r)
    }

    /// [`StoreHandle::read`] of one of this crate's query functions.
    pub(crate) async fn read_sql<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.read(move |db| Ok(f(db.conn())?)).await
    }

    /// The SQLite file (soak commands open their own short-lived writer).
    pub fn path(&self) -> &Path {
        &self.readers.path
    }

    /// Every boot of every node.
    pub async fn boots(&self) -> Result<Vec<BootRow>, StoreError> {
        self.read_sql(queries::list_boots).await
    }

    /// At most `limit` boots after the key `(node, first seen, boot id)`,
    /// in that order: a page of `GET /api/v1/nodes`.
    pub async fn boots_page(
        &self,
        after: Option<(String, u64, String)>,
        limit: u32,
    ) -> Result<Vec<BootRow>, StoreError> {
        self.read_sql(move |c| {
            let key = after.as_ref().map(|(n, t, b)| (n.as_str(), *t, b.as_str()));
            queries::boots_page(c, key, limit)
        })
        .await
    }

    /// Records matching a filter, oldest first.
    pub async fn records(&self, f: RecordFilter) -> Result<Vec<StoredRecord>, StoreError> {
        self.read_sql(move |c| queries::list_records(c, &f)).await
    }
}

/// A read-only view of a store that another task or process writes (the
/// lab's status line reads the running collector's store this way): pooled
/// read-only connections, no writer thread, no migrations, nothing
/// created. Until the writer has created the file, reads fail with
/// [`StoreError::Sqlite`].
#[derive(Clone)]
pub struct StoreReader {
    readers: Arc<ReadPool>,
}

impl StoreReader {
    /// A reader of `dir/boltwatch.db`; opens connections on first use.
    pub fn new(dir: &Path) -> StoreReader {
        StoreReader {
            readers: Arc::new(ReadPool {
                path: dir.join("boltwatch.db"),
                idle: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Runs `f` on a pooled read-only connection on a blocking thread.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    {
        let pool = self.readers.clone();
        tokio::task::spawn_blocking(move || pool.with(f))
            .await
            .map_err(|e| StoreError::Join(e.to_string()))?
    }
}

/// Idle read-only connections; opened on demand, a few kept.
struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<Db>>,
}

const IDLE_READERS: usize = 4;

impl ReadPool {
    fn with<T>(&self, f: impl FnOnce(&Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let db = match pooled {
            Some(db) => db,
            None => Db::pooled_reader(&self.path)?,
        };
        let out = f(&db);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_READERS {
            idle.push(db);
        }
        out
    }
}
