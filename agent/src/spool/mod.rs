//! The agent's durable spool: every record goes to an append-only log of
//! segment files under `--spool-dir` before it is sent, and leaves only when
//! the collector acknowledged it, or when the spool is over its byte cap
//! (oldest segment first, counted as dropped).
//!
//! - [`segment`]: frame layout and checksum (pure).
//! - [`ledger`]: which seqs of which boot each segment holds, and the acks
//!   (pure).
//! - this module: files. Segments are `<id>.seg`; a `lock` file held with
//!   `flock` keeps a second agent out of the same directory.
//!
//! Records are written with one `write` per drain (so a `kill -9` loses
//! nothing that was numbered) and `fsync`ed by [`Spool::sync`], which the
//! transport calls every 200 ms (so a power cut loses at most that). Sending
//! reads the segments back from disk through a cursor: the spool is never
//! held in memory, so RSS stays flat however much is spooled. Records of
//! earlier boots of this node found at startup are replayed like the
//! current boot's; the collector acknowledges per boot.

pub mod ledger;
pub mod segment;

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use boltwatch_proto::v1::Record;
use nix::fcntl::{Flock, FlockArg};
use prost::Message;
use tracing::{info, warn};

use crate::sink::Emitted;
use ledger::Ledger;

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
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_path_buf(),
        source,
    }
}

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
}

/// Where sending has got to: a segment and a byte offset in it.
struct Cursor {
    seg: u64,
    offset: u64,
    reader: Option<BufReader<File>>,
}

/// The on-disk spool of one agent process (see the module docs).
pub struct Spool {
    opts: SpoolOptions,
    node: String,
    boot_id: String,
    next_seq: u64,
    ledger: Ledger,
    active: File,
    active_id: u64,
    dirty: bool,
    dropped: u64,
    cursor: Cursor,
    buf: Vec<u8>,
    _lock: Flock<File>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("dir", &self.opts.dir)
            .field("boot_id", &self.boot_id)
            .field("next_seq", &self.next_seq)
            .field("segments", &self.ledger.len())
            .finish()
    }
}

fn seg_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.seg"))
}

/// Reads one frame from `r`. `Ok(None)` at a clean end; `Err` describes a
/// torn or corrupt frame.
fn read_frame(r: &mut impl Read) -> std::io::Result<Result<Option<Vec<u8>>, String>> {
    let mut head = [0u8; segment::HEADER];
    let mut got = 0;
    while got < head.len() {
        let n = r.read(&mut head[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    if got == 0 {
        return Ok(Ok(None));
    }
    let (len, crc) = match segment::header(&head[..got]) {
        Ok(h) => h,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let mut payload = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let n = r.read(&mut payload[filled..])?;
        if n == 0 {
            return Ok(Err(format!("truncated frame: {filled} of {len} bytes")));
        }
        filled += n;
    }
    if crc32fast::hash(&payload) != crc {
        return Ok(Err("frame checksum mismatch".into()));
    }
    Ok(Ok(Some(payload)))
}

impl Spool {
    /// Opens (or creates) the spool in `opts.dir` for a new boot: locks the
    /// directory, indexes existing segments (truncating a torn or corrupt
    /// tail with a warning) and starts a new segment.
    pub fn open(opts: SpoolOptions, node: &str, boot_id: &str) -> Result<Spool, SpoolError> {
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

        let mut ids: Vec<u64> = fs::read_dir(&dir)
            .map_err(io_err(&dir))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".seg")?.parse().ok()
            })
            .collect();
        ids.sort_unstable();
        let mut ledger = Ledger::new();
        for &id in &ids {
            let path = seg_path(&dir, id);
            ledger.open_segment(id);
            let kept = Self::index_segment(&path, &mut ledger)?;
            if kept == 0 {
                // Nothing usable: forget it rather than keep empty files.
                ledger.discard_last();
                fs::remove_file(&path).map_err(io_err(&path))?;
            }
        }
        let active_id = ids.last().map_or(1, |l| l + 1);
        let active_path = seg_path(&dir, active_id);
        let active = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&active_path)
            .map_err(io_err(&active_path))?;
        ledger.open_segment(active_id);
        if ledger.len() > 1 {
            info!(dir = %dir.display(), segments = ledger.len() - 1, records = ledger.unacked(),
                "spool holds records of earlier boots; replaying them");
        }
        let first = ledger.segments().next().map_or(active_id, |s| s.id);
        let mut spool = Spool {
            opts,
            node: node.to_string(),
            boot_id: boot_id.to_string(),
            next_seq: 1,
            ledger,
            active,
            active_id,
            dirty: false,
            dropped: 0,
            cursor: Cursor {
                seg: first,
                offset: 0,
                reader: None,
            },
            buf: Vec::new(),
            _lock: lock,
        };
        spool.enforce_cap();
        Ok(spool)
    }

    /// Indexes the frames of one segment into the ledger's last segment;
    /// truncates the file at the first bad frame. Returns the records kept.
    fn index_segment(path: &Path, ledger: &mut Ledger) -> Result<u64, SpoolError> {
        let file = File::open(path).map_err(io_err(path))?;
        let mut r = BufReader::new(file);
        let mut offset = 0u64;
        let mut kept = 0u64;
        let bad = loop {
            match read_frame(&mut r).map_err(io_err(path))? {
                Ok(None) => break None,
                Ok(Some(payload)) => match Record::decode(payload.as_slice()) {
                    Ok(rec) => {
                        let n = (segment::HEADER + payload.len()) as u64;
                        ledger.note(&rec.boot_id, rec.seq, n);
                        offset += n;
                        kept += 1;
                    }
                    Err(e) => break Some(format!("undecodable record: {e}")),
                },
                Err(why) => break Some(why),
            }
        };
        if let Some(why) = bad {
            warn!(segment = %path.display(), offset, reason = %why,
                "spool segment has a corrupt tail; truncating it");
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io_err(path))?;
            f.set_len(offset).map_err(io_err(path))?;
            f.sync_all().map_err(io_err(path))?;
        }
        Ok(kept)
    }

    /// This process's boot id.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// The seq the next appended record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Records spooled and not acknowledged (all boots).
    pub fn unacked(&self) -> u64 {
        self.ledger.unacked()
    }

    /// True when nothing awaits acknowledgement.
    pub fn is_empty(&self) -> bool {
        self.unacked() == 0
    }

    /// Records dropped because of the cap, a failed write, or a foreign
    /// node name found in the directory.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes of all segments.
    pub fn bytes(&self) -> u64 {
        self.ledger.total_bytes()
    }

    /// Highest acknowledged seq of `boot`.
    pub fn acked(&self, boot: &str) -> u64 {
        self.ledger.acked(boot)
    }

    /// Numbers and appends records with one write. A failed write (disk
    /// full) loses them; they are counted as dropped and the error returned.
    pub fn append(&mut self, batch: impl IntoIterator<Item = Emitted>) -> Result<(), SpoolError> {
        self.buf.clear();
        let mut notes = Vec::new();
        for e in batch {
            let rec = Record {
                node: self.node.clone(),
                boot_id: self.boot_id.clone(),
                seq: self.next_seq,
                unix_ns: e.unix_ns,
                payload: Some(e.payload),
            };
            self.next_seq += 1;
            let before = self.buf.len();
            segment::encode(&rec.encode_to_vec(), &mut self.buf);
            notes.push((rec.seq, (self.buf.len() - before) as u64));
        }
        if notes.is_empty() {
            return Ok(());
        }
        let path = seg_path(&self.opts.dir, self.active_id);
        if let Err(source) = self.active.write_all(&self.buf) {
            // A partial write leaves a torn frame; cut it so later frames
            // stay readable.
            let len = self.ledger.segments().last().map_or(0, |s| s.bytes);
            let _ = self.active.set_len(len);
            self.dropped += notes.len() as u64;
            // The seqs are burnt: mark them done so nothing waits for them.
            if let Some(&(last, _)) = notes.last() {
                self.ledger.ack(&self.boot_id.clone(), last);
            }
            return Err(SpoolError::Io { path, source });
        }
        let boot = self.boot_id.clone();
        for (seq, n) in notes {
            self.ledger.note(&boot, seq, n);
        }
        self.dirty = true;
        let active_bytes = self.ledger.segments().last().map_or(0, |s| s.bytes);
        if active_bytes >= self.opts.segment_bytes() {
            self.roll()?;
        }
        self.enforce_cap();
        Ok(())
    }

    fn roll(&mut self) -> Result<(), SpoolError> {
        self.sync()?;
        let id = self.active_id + 1;
        let path = seg_path(&self.opts.dir, id);
        self.active = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        self.active_id = id;
        self.ledger.open_segment(id);
        Ok(())
    }

    fn enforce_cap(&mut self) {
        while self.ledger.total_bytes() > self.opts.max_bytes {
            let Some((id, lost)) = self.ledger.drop_oldest() else {
                break;
            };
            self.dropped += lost;
            warn!(
                segment = id,
                records = lost,
                "spool over its cap; dropped the oldest segment"
            );
            self.remove_segment(id);
        }
    }

    fn remove_segment(&mut self, id: u64) {
        let path = seg_path(&self.opts.dir, id);
        if let Err(e) = fs::remove_file(&path) {
            warn!(path = %path.display(), error = %e, "removing spool segment");
        }
        if self.cursor.seg == id {
            self.cursor.reader = None;
            self.cursor.seg = id + 1;
            self.cursor.offset = 0;
        }
    }

    /// Makes everything appended so far durable (`fsync`), if anything was.
    pub fn sync(&mut self) -> Result<(), SpoolError> {
        if self.dirty {
            self.active
                .sync_data()
                .map_err(io_err(&seg_path(&self.opts.dir, self.active_id)))?;
            self.dirty = false;
        }
        Ok(())
    }

    /// The collector holds `boot`'s records up to `seq`: segments fully
    /// acknowledged are deleted.
    pub fn ack(&mut self, boot: &str, seq: u64) {
        let seq = if boot == self.boot_id {
            seq.min(self.next_seq - 1)
        } else {
            seq
        };
        self.ledger.ack(boot, seq);
        for id in self.ledger.take_acked() {
            self.remove_segment(id);
        }
    }

    /// A new stream: send again from the oldest segment (acked records are
    /// skipped as they are read).
    pub fn rewind(&mut self) {
        self.cursor = Cursor {
            seg: self
                .ledger
                .segments()
                .next()
                .map_or(self.active_id, |s| s.id),
            offset: 0,
            reader: None,
        };
    }

    /// True when some record after the cursor may still need sending.
    pub fn has_unsent(&self) -> bool {
        let active_bytes = self.ledger.segments().last().map_or(0, |s| s.bytes);
        self.cursor.seg < self.active_id || self.cursor.offset < active_bytes
    }

    /// Reads up to `max` unacknowledged records after the cursor, from disk,
    /// and moves the cursor past them.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<Record>, SpoolError> {
        let mut out = Vec::new();
        while out.len() < max {
            if self.cursor.reader.is_none() {
                // The cursor's segment, or the next one still on disk.
                let Some(id) = self
                    .ledger
                    .segments()
                    .map(|s| s.id)
                    .find(|&id| id >= self.cursor.seg)
                else {
                    break;
                };
                if id != self.cursor.seg {
                    self.cursor.seg = id;
                    self.cursor.offset = 0;
                }
                let path = seg_path(&self.opts.dir, id);
                let mut f = File::open(&path).map_err(io_err(&path))?;
                f.seek(SeekFrom::Start(self.cursor.offset))
                    .map_err(io_err(&path))?;
                self.cursor.reader = Some(BufReader::with_capacity(64 * 1024, f));
            }
            let path = seg_path(&self.opts.dir, self.cursor.seg);
            let reader = self.cursor.reader.as_mut().expect("opened above");
            match read_frame(reader).map_err(io_err(&path))? {
                Ok(Some(payload)) => {
                    self.cursor.offset += (segment::HEADER + payload.len()) as u64;
                    let Ok(rec) = Record::decode(payload.as_slice()) else {
                        continue;
                    };
                    if self.ledger.is_acked(&rec.boot_id, rec.seq) {
                        continue;
                    }
                    if rec.node != self.node {
                        // Left by an agent of another name in this
                        // directory; the collector would refuse it.
                        self.dropped += 1;
                        self.ledger.ack(&rec.boot_id, rec.seq);
                        continue;
                    }
                    out.push(rec);
                }
                Ok(None) | Err(_) => {
                    // End of what is written. The active segment may grow;
                    // an older one is finished: move on.
                    if self.cursor.seg >= self.active_id {
                        break;
                    }
                    self.cursor.reader = None;
                    self.cursor.seg += 1;
                    self.cursor.offset = 0;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
