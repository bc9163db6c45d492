//! The agent's durable spool: every record goes to an append-only log of
//! segment files under `--spool-dir` before it is sent, and leaves only when
//! the collector acknowledged it, or when the spool is over its byte cap
//! (oldest segment first, counted as dropped).
//!
//! - [`segment`]: frame layout, checksum and the resynchronising scanner
//!   (pure); `span_crc`: the CRC of any stretch in constant time, which
//!   keeps the scanner's resync linear (pure).
//! - [`acks`]: the ack book, which seqs of which boot each segment holds
//!   and what the collector acknowledged (pure).
//! - [`ages`]: when the oldest unacknowledged record was made (pure).
//! - [`held`]: records numbered but not yet written (pure).
//! - [`loss`]: how many records a damaged stretch cost (pure).
//! - `tap`: what sees each record as it is numbered (the agent's
//!   `/metrics`).
//! - `error`: [`SpoolError`], shared by every part; `cursor`: where
//!   sending has got to, moved by appending and by reading back.
//! - `recover`: indexing earlier boots' files at startup; `reader`: sending
//!   reads the files back; this module: appending. Segments are `<id>.seg`
//!   (`<id>.damaged` once found damaged); a `lock` file held with `flock`
//!   keeps a second agent out of the same directory.
//!
//! Records are written with one `write` per drain (so a `kill -9` loses
//! nothing that was numbered) and `fsync`ed by [`Spool::sync`], which the
//! transport calls every 200 ms (so a power cut loses at most that). A
//! write that fails (filesystem full) loses nothing: the records wait in
//! memory, bounded, and go to disk when space returns (see [`held`]).
//! Sending reads the segments back from disk through a cursor: the spool
//! is never held in memory, so RSS stays flat however much is spooled.
//! Records of earlier boots of this node found at startup are replayed
//! like the current boot's; the collector acknowledges per boot.

pub mod acks;
pub mod ages;
mod cursor;
mod error;
pub mod held;
pub mod loss;
mod reader;
mod recover;
pub mod segment;
mod span_crc;
mod tap;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use boltwatch_proto::v1::Record;
use nix::fcntl::{Flock, FlockArg};
use prost::Message;
use tracing::{info, warn};

use crate::sink::Emitted;
use acks::AckBook;
use ages::Ages;
use cursor::Cursor;
use error::io_err;
pub use error::SpoolError;
use held::Held;
use loss::LossTally;
use recover::SegFile;
pub use tap::Tap;

/// Spool settings.
#[derive(Debug, Clone)]
pub struct SpoolOptions {
    /// Directory of the segment files (created if missing).
    pub dir: PathBuf,
    /// Cap on the bytes of all segments; beyond it the oldest go.
    pub max_bytes: u64,
}

impl SpoolOptions {
    /// Segment size: a sixteenth of the cap, within 64 KiB..64 MiB, so the
    /// cap is kept to within one segment and acks free space soon.
    pub fn segment_bytes(&self) -> u64 {
        (self.max_bytes / 16).clamp(64 * 1024, 64 * 1024 * 1024)
    }

    /// Bytes of records kept in memory while the spool cannot be written:
    /// one segment's worth, at most 4 MiB (hours of probing).
    pub fn held_bytes(&self) -> usize {
        self.segment_bytes().min(4 * 1024 * 1024) as usize
    }
}

/// The on-disk spool of one agent process (see the module docs).
pub struct Spool {
    opts: SpoolOptions,
    node: String,
    boot_id: String,
    next_seq: u64,
    book: AckBook,
    ages: Ages,
    /// Segments moved aside as damaged: their intact byte ranges.
    damaged: BTreeMap<u64, Vec<(u64, u64)>>,
    active: File,
    active_id: u64,
    dirty: bool,
    dropped: u64,
    held: Held,
    /// The write error outstanding, if the last write failed.
    failing: Option<String>,
    /// A failed write may have left part of a frame after the last whole
    /// one: cut it before writing again.
    cut_tail: bool,
    cursor: Cursor,
    tap: Option<Tap>,
    _lock: Flock<File>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("dir", &self.opts.dir)
            .field("boot_id", &self.boot_id)
            .field("next_seq", &self.next_seq)
            .field("segments", &self.book.len())
            .field("held", &self.held.len())
            .finish()
    }
}

/// A spool directory this process holds the lock of, not yet recovered
/// ([`Spool::lock`]).
#[derive(Debug)]
pub struct Locked {
    opts: SpoolOptions,
    lock: Flock<File>,
}

impl Spool {
    /// Opens (or creates) the spool in `opts.dir` for a new boot:
    /// [`Spool::lock`], then [`Locked::recover`].
    pub fn open(opts: SpoolOptions, node: &str, boot_id: &str) -> Result<Spool, SpoolError> {
        Spool::lock(opts)?.recover(node, boot_id)
    }

    /// Creates `opts.dir` if need be and takes its lock: quick, so a
    /// second agent on the same directory (or one it cannot write) fails
    /// at once, while the recovery, as long as the files are large, can
    /// wait until the probes run.
    pub fn lock(opts: SpoolOptions) -> Result<Locked, SpoolError> {
        let dir = opts.dir.clone();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let lock_path = dir.join("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock)
            .map_err(|_| SpoolError::Locked(dir.clone()))?;
        Ok(Locked { opts, lock })
    }
}

impl Locked {
    /// The spool for a new boot: indexes the segments earlier boots left
    /// (truncating a torn tail, moving a damaged file aside, counting what
    /// was lost) and starts a new segment. Linear in the bytes on disk,
    /// damaged or not.
    pub fn recover(self, node: &str, boot_id: &str) -> Result<Spool, SpoolError> {
        let Locked { opts, lock } = self;
        let dir = opts.dir.clone();
        let files = recover::list(&dir)?;
        let mut book = AckBook::new();
        let mut ages = Ages::new();
        let mut tally = LossTally::new();
        let mut damaged = BTreeMap::new();
        for (i, &file) in files.iter().enumerate() {
            book.open_segment(file.id);
            let found = recover::index(
                &dir,
                file,
                i + 1 == files.len(),
                &mut book,
                &mut ages,
                &mut tally,
            )?;
            if found.records == 0 {
                // Nothing deliverable: forget it rather than keep the file.
                book.discard_last();
                let path = recover::seg_path(&dir, found.file);
                fs::remove_file(&path).map_err(io_err(&path))?;
            } else if let Some(runs) = found.runs {
                damaged.insert(file.id, runs);
            }
        }
        let lost = tally.lost();
        if lost > 0 {
            warn!(dir = %dir.display(), records = lost, "records lost to spool damage; counted as dropped");
        }
        let active_id = files.last().map_or(1, |l| l.id + 1);
        let active_path = recover::seg_path(
            &dir,
            SegFile {
                id: active_id,
                damaged: false,
            },
        );
        let active = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&active_path)
            .map_err(io_err(&active_path))?;
        book.open_segment(active_id);
        if book.len() > 1 {
            info!(dir = %dir.display(), segments = book.len() - 1, records = book.unacked(),
                "spool holds records of earlier boots; replaying them");
        }
        let first = book.segments().next().map_or(active_id, |s| s.id);
        let held = Held::new(opts.held_bytes());
        let mut spool = Spool {
            opts,
            node: node.to_string(),
            boot_id: boot_id.to_string(),
            next_seq: 1,
            book,
            ages,
            damaged,
            active,
            active_id,
            dirty: false,
            dropped: lost,
            held,
            failing: None,
            cut_tail: false,
            cursor: Cursor::at(first),
            tap: None,
            _lock: lock,
        };
        spool.enforce_cap();
        Ok(spool)
    }
}

impl Spool {
    /// Calls `tap` with every record numbered from now on.
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// This process's boot id.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// Boots other than this one whose records segments still hold: the
    /// Hello announces them, the collector accepts no other old boot.
    pub fn older_boots(&self) -> Vec<String> {
        let mut b = self.book.boots();
        b.retain(|id| *id != self.boot_id);
        b
    }

    /// The seq the next appended record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Records spooled and not acknowledged (all boots), including those
    /// waiting in memory for the disk.
    pub fn unacked(&self) -> u64 {
        self.book.unacked() + self.held.len() as u64
    }

    /// Records numbered but waiting in memory because the spool could not
    /// be written.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// True when nothing awaits acknowledgement.
    pub fn is_empty(&self) -> bool {
        self.unacked() == 0
    }

    /// Records dropped because of the cap, the spool being unwritable with
    /// its memory bound full, damage found on disk, or a foreign node name
    /// found in the directory.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes of all segments.
    pub fn bytes(&self) -> u64 {
        self.book.total_bytes()
    }

    /// When the oldest record not acknowledged was made, unix ns (at most
    /// [`ages::GRAIN_NS`] earlier than the truth); `None` when nothing
    /// waits. Records held in memory count: they wait too.
    pub fn oldest_unacked_unix_ns(&self) -> Option<u64> {
        self.ages.oldest_unix_ns(|b| self.book.acked(b))
    }

    /// Highest acknowledged seq of `boot`.
    pub fn acked(&self, boot: &str) -> u64 {
        self.book.acked(boot)
    }

    /// Numbers records and writes them with one write (after any records
    /// an earlier failed write left waiting). A failed write keeps them in
    /// memory for the next try ([`Spool::sync`] or the next append);
    /// records beyond that memory's bound are refused, counted as dropped,
    /// and reported as [`SpoolError::Refused`].
    pub fn append(&mut self, batch: impl IntoIterator<Item = Emitted>) -> Result<(), SpoolError> {
        // Records left by a failed write go first; if they still cannot,
        // the new ones join them within the bound.
        let backlog = !self.flush();
        let mut refused = 0u64;
        for e in batch {
            if backlog && !self.held.has_room() {
                // Not numbered: the seqs on disk stay contiguous.
                refused += 1;
                continue;
            }
            let rec = Record {
                node: self.node.clone(),
                boot_id: self.boot_id.clone(),
                seq: self.next_seq,
                unix_ns: e.unix_ns,
                payload: Some(e.payload),
            };
            self.next_seq += 1;
            self.ages.note(&rec.boot_id, rec.seq, rec.unix_ns);
            if let Some(tap) = &self.tap {
                tap.call(&rec);
            }
            self.held
                .push(rec.seq, |buf| segment::encode(&rec.encode_to_vec(), buf));
        }
        if !self.flush() {
            // Give back the numbers of the newest beyond the bound.
            let gone = self.held.trim_to_cap();
            self.next_seq -= gone;
            refused += gone;
        }
        if refused == 0 {
            return Ok(());
        }
        self.dropped += refused;
        Err(SpoolError::Refused {
            path: self.path_of(self.active_id),
            error: self.failing.clone().unwrap_or_default(),
            refused,
            held: self.held.len(),
        })
    }

    /// Writes the held records. False when the write failed: they stay
    /// held, and the active segment ends after its last whole frame.
    fn flush(&mut self) -> bool {
        if self.held.is_empty() {
            return true;
        }
        let path = self.path_of(self.active_id);
        let written = self.cut_partial_tail().and_then(|()| {
            let r = self.active.write_all(self.held.bytes());
            // A partial write leaves a torn frame: cut it now (or before
            // the next write) so later frames stay readable.
            self.cut_tail = r.is_err();
            r
        });
        if let Err(e) = written {
            let _ = self.cut_partial_tail();
            if self.failing.is_none() {
                warn!(path = %path.display(), error = %e, held = self.held.len(),
                    "spool write failed; keeping the records in memory until it succeeds");
            }
            self.failing = Some(e.to_string());
            return false;
        }
        if self.failing.take().is_some() {
            info!(path = %path.display(), records = self.held.len(),
                "spool writable again; records kept in memory are written");
        }
        let boot = self.boot_id.clone();
        for (seq, n) in self.held.written() {
            self.book.note(&boot, seq, n);
        }
        self.dirty = true;
        let active_bytes = self.book.segments().last().map_or(0, |s| s.bytes);
        if active_bytes >= self.opts.segment_bytes() {
            if let Err(e) = self.roll() {
                // Keep writing to the current segment; try again next time.
                warn!(error = %e, "starting a new spool segment failed");
            }
        }
        self.enforce_cap();
        true
    }

    /// Cuts the active segment back to its last whole frame, if a failed
    /// write left more.
    fn cut_partial_tail(&mut self) -> std::io::Result<()> {
        if self.cut_tail {
            let len = self.book.segments().last().map_or(0, |s| s.bytes);
            self.active.set_len(len)?;
            self.cut_tail = false;
        }
        Ok(())
    }

    fn roll(&mut self) -> Result<(), SpoolError> {
        self.sync_active()?;
        let id = self.active_id + 1;
        let path = recover::seg_path(&self.opts.dir, SegFile { id, damaged: false });
        self.active = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        self.active_id = id;
        self.book.open_segment(id);
        Ok(())
    }

    fn enforce_cap(&mut self) {
        while self.book.total_bytes() > self.opts.max_bytes {
            let Some((id, lost)) = self.book.drop_oldest() else {
                break;
            };
            self.dropped += lost;
            warn!(
                segment = id,
                records = lost,
                "spool over its cap; dropped the oldest segment"
            );
            self.remove_segment(id);
            // The lost records count as acknowledged: they wait no more.
            self.ages.prune(|b| self.book.acked(b));
        }
    }

    fn remove_segment(&mut self, id: u64) {
        let path = self.path_of(id);
        if let Err(e) = fs::remove_file(&path) {
            warn!(path = %path.display(), error = %e, "removing spool segment");
        }
        self.damaged.remove(&id);
        if self.cursor.seg == id {
            self.cursor = Cursor::at(id + 1);
        }
    }

    /// Writes records waiting for the disk, if any (the transport calls
    /// this every 200 ms, so space coming back is noticed soon), then
    /// makes everything written durable (`fsync`). A write that fails again
    /// is not an error here: the records stay held, and [`Spool::append`]
    /// reports refusals.
    pub fn sync(&mut self) -> Result<(), SpoolError> {
        self.flush();
        self.sync_active()
    }

    fn sync_active(&mut self) -> Result<(), SpoolError> {
        if self.dirty {
            self.active
                .sync_data()
                .map_err(io_err(&self.path_of(self.active_id)))?;
            self.dirty = false;
        }
        Ok(())
    }

    /// The collector holds `boot`'s records up to `seq`: segments fully
    /// acknowledged are deleted.
    pub fn ack(&mut self, boot: &str, seq: u64) {
        let seq = if boot == self.boot_id {
            // Held records are numbered but the collector cannot have
            // them: never past what was written.
            let written = self.next_seq - 1 - self.held.len() as u64;
            seq.min(written)
        } else {
            seq
        };
        self.book.ack(boot, seq);
        self.ages.prune(|b| self.book.acked(b));
        for id in self.book.take_acked() {
            self.remove_segment(id);
        }
    }

    /// A new stream: send again from the oldest segment (acked records are
    /// skipped as they are read).
    pub fn rewind(&mut self) {
        self.cursor = Cursor::at(self.book.segments().next().map_or(self.active_id, |s| s.id));
    }

    /// True when some record after the cursor may still need sending.
    pub fn has_unsent(&self) -> bool {
        let active_bytes = self.book.segments().last().map_or(0, |s| s.bytes);
        self.cursor.seg < self.active_id || self.cursor.offset < active_bytes
    }

    /// The file of segment `id`.
    fn path_of(&self, id: u64) -> std::path::PathBuf {
        recover::seg_path(
            &self.opts.dir,
            SegFile {
                id,
                damaged: self.damaged.contains_key(&id),
            },
        )
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if !self.held.is_empty() {
            self.flush();
        }
        if !self.held.is_empty() {
            warn!(
                records = self.held.len(),
                first_seq = self.next_seq - self.held.len() as u64,
                "spool still cannot be written; records kept in memory are lost"
            );
        }
    }
}

#[cfg(test)]
mod tests;
