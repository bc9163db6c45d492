//! Startup: indexing the segment files earlier boots left, keeping every
//! intact record however the files were damaged.
//!
//! Each file is read in windows through the resynchronising
//! [`Scanner`](super::segment::Scanner). What it finds decides the file's
//! fate:
//! - every frame intact: used as it is;
//! - only a torn tail (a frame cut short at the end of the newest file,
//!   what a crash mid-write leaves): truncated there, as before;
//! - anything else (a bad frame in the middle, a bad CRC at the end, an
//!   older file that ends short): renamed `<id>.damaged` and never
//!   rewritten. Its intact frames stay deliverable (the reader skips the
//!   damaged stretches) and the file goes when they are acknowledged, like
//!   any segment.
//!
//! The records lost are counted once, when the damage is found (see
//! [`LossTally`]); a `.damaged` file indexed again after a restart is not
//! counted again.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use boltwatch_proto::v1::Record;
use prost::Message;
use tracing::warn;

use super::acks::AckBook;
use super::ages::Ages;
use super::error::{io_err, SpoolError};
use super::loss::LossTally;
use super::segment::{Piece, Scanner, MIN_WINDOW};

/// Read window: two of the largest frames, so a scan moves at least one
/// whole window's worth minus one frame per read.
const WINDOW: usize = 2 * MIN_WINDOW;

/// A segment file in the spool directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SegFile {
    /// Its number.
    pub id: u64,
    /// Already moved aside as damaged.
    pub damaged: bool,
}

/// `<id>.seg`, or `<id>.damaged` for a file moved aside.
pub(super) fn seg_path(dir: &Path, f: SegFile) -> PathBuf {
    let ext = if f.damaged { "damaged" } else { "seg" };
    dir.join(format!("{:020}.{ext}", f.id))
}

/// The segment files in `dir`, in order.
pub(super) fn list(dir: &Path) -> Result<Vec<SegFile>, SpoolError> {
    let mut out: Vec<SegFile> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (id, damaged) = match name.strip_suffix(".seg") {
                Some(id) => (id, false),
                None => (name.strip_suffix(".damaged")?, true),
            };
            Some(SegFile {
                id: id.parse().ok()?,
                damaged,
            })
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// What indexing kept of one file.
#[derive(Debug)]
pub(super) struct Indexed {
    /// The file as it is now (moved aside if it was found damaged).
    pub file: SegFile,
    /// Records kept.
    pub records: u64,
    /// For a damaged file: the byte ranges `start..end` of intact records,
    /// in order; the reader reads only these.
    pub runs: Option<Vec<(u64, u64)>>,
}

/// What one file's pieces add up to.
struct Walk<'t> {
    book: &'t mut AckBook,
    ages: &'t mut Ages,
    tally: &'t mut LossTally,
    count: bool,
    records: u64,
    runs: Vec<(u64, u64)>,
    damage: Vec<(u64, u64, bool)>,
}

impl Walk<'_> {
    fn piece(&mut self, p: Piece<'_>) {
        match p {
            Piece::Frame {
                offset,
                len,
                payload,
            } => match Record::decode(payload) {
                // A record always has a boot and a seq from 1: anything
                // else passed the CRC by chance.
                Ok(r) if r.seq > 0 && !r.boot_id.is_empty() => {
                    self.book.note(&r.boot_id, r.seq, len);
                    self.ages.note(&r.boot_id, r.seq, r.unix_ns);
                    self.tally.record(&r.boot_id, r.seq);
                    self.records += 1;
                    match self.runs.last_mut() {
                        Some(run) if run.1 == offset => run.1 += len,
                        _ => self.runs.push((offset, offset + len)),
                    }
                }
                _ => self.damaged(offset, len, false),
            },
            Piece::Damaged { offset, len, torn } => self.damaged(offset, len, torn),
        }
    }

    fn damaged(&mut self, offset: u64, len: u64, torn: bool) {
        self.tally.damage(self.count);
        match self.damage.last_mut() {
            Some(d) if d.0 + d.1 == offset => {
                d.1 += len;
                d.2 = torn;
            }
            _ => self.damage.push((offset, len, torn)),
        }
    }
}

fn fill(f: &mut File, buf: &mut Vec<u8>, cap: usize, path: &Path) -> Result<bool, SpoolError> {
    while buf.len() < cap {
        let start = buf.len();
        buf.resize(cap, 0);
        let n = f.read(&mut buf[start..]).map_err(io_err(path))?;
        buf.truncate(start + n);
        if n == 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Feeds `f` to `walk` through the scanner, in windows of `cap` bytes.
fn scan_file(
    f: &mut File,
    mut cap: usize,
    path: &Path,
    walk: &mut Walk<'_>,
) -> Result<(), SpoolError> {
    let mut scanner = Scanner::new();
    let mut buf = Vec::with_capacity(cap);
    loop {
        let eof = fill(f, &mut buf, cap, path)?;
        let used = scanner.feed(&buf, eof, |p| walk.piece(p));
        if eof {
            return Ok(());
        }
        if used == 0 {
            // The file grew since its size was read (no agent writes a
            // locked spool; something else might): a full window always
            // makes progress.
            cap = WINDOW;
        }
        buf.drain(..used);
    }
}

/// Indexes `file` into the book's last segment (the caller opened it);
/// `newest` says it is the last file, the only one that may have a torn
/// tail.
pub(super) fn index(
    dir: &Path,
    file: SegFile,
    newest: bool,
    book: &mut AckBook,
    ages: &mut Ages,
    tally: &mut LossTally,
) -> Result<Indexed, SpoolError> {
    let path = seg_path(dir, file);
    let mut f = File::open(&path).map_err(io_err(&path))?;
    let size = f.metadata().map_err(io_err(&path))?.len();
    // The whole file plus one byte (to see its end) when it fits a window.
    let cap = usize::try_from(size).map_or(WINDOW, |s| (s + 1).min(WINDOW));
    let mut walk = Walk {
        book,
        ages,
        tally,
        count: !file.damaged,
        records: 0,
        runs: Vec::new(),
        damage: Vec::new(),
    };
    scan_file(&mut f, cap, &path, &mut walk)?;
    drop(f);
    let (records, runs, damage) = (walk.records, walk.runs, walk.damage);

    if let [(at, len, true)] = damage[..] {
        if newest && !file.damaged {
            warn!(segment = %path.display(), offset = at, bytes = len,
                "spool segment ends with a torn frame; truncating it");
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io_err(&path))?;
            f.set_len(at).map_err(io_err(&path))?;
            f.sync_all().map_err(io_err(&path))?;
            return Ok(Indexed {
                file,
                records,
                runs: None,
            });
        }
    }
    if damage.is_empty() {
        return Ok(Indexed {
            file,
            records,
            runs: None,
        });
    }
    // On disk, so the cap counts them until the file goes.
    let bad: u64 = damage.iter().map(|d| d.1).sum();
    book.add_bytes(bad);
    let mut now = file;
    if !file.damaged {
        now.damaged = true;
        let aside = seg_path(dir, now);
        fs::rename(&path, &aside).map_err(io_err(&aside))?;
        warn!(segment = %aside.display(), damaged_stretches = damage.len(), damaged_bytes = bad,
            records_kept = records, "spool segment damaged; moved aside, its intact records are kept");
    }
    Ok(Indexed {
        file: now,
        records,
        runs: Some(runs),
    })
}
