//! The ingest path's inserts: a batch's records into `stored` as packed
//! rows (see [`super::pack`]), with as few statements as the dedupe
//! guarantee allows.

use rusqlite::{params, Connection};

use super::canon;
use super::layout::{BootKey, Keys};
use super::rollup::minute_of;
use crate::types::{BatchRecord, NewBatch};
use crate::{pack, seqs};

/// Per boot of a [`NewBatch`] (same order as its `boots`): how many of its
/// records were newly stored and the highest seq among those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootAdded {
    /// Records newly stored.
    pub added: u64,
    /// Highest seq newly stored (0 when none).
    pub max_seq: u64,
    /// Of those, records kept whole (see [`canon`]): their node or boot id
    /// field occurs twice or does not match the boot.
    pub verbatim: u64,
}

/// The statement that stores one row at an explicit position.
const INSERT_ROW: &str = "INSERT INTO stored (pos, boot, seq, unix_ns, kind, whole, n, body)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// The position of the newest record ever stored (0 when none): the next
/// row takes positions after it. Raw retention may have deleted the
/// newest rows (a store idle for longer than the retention window), so
/// this is the larger of the stored maximum and the highest position
/// pruned: a position remote write was given never names another record.
pub fn newest_pos(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "SELECT max(coalesce((SELECT max(pos) FROM stored), 0),
                    coalesce((SELECT pruned_pos FROM retention WHERE id = 1), 0))",
    )?
    .query_row([], |r| r.get(0))
}

/// Inserts a batch with ids cached in `keys`, pushing onto `inserted`
/// whether each record was new; returns what each boot gained.
///
/// A record whose seq is above every seq its boot has stored (one seek in
/// `seq_runs` per boot and batch) and above those before it in the batch
/// cannot be a duplicate: such records, what an agent streaming live
/// always sends, are gathered into packs per (boot, kind, minute) and
/// written a pack per statement. Any other record (a replay after a lost
/// ack, a repeated seq) is checked against `seq_runs` on its own, after
/// the packs gathered so far are written (so positions keep arrival order
/// between the two), and stored as a row of its own when new. A record
/// raw retention replaced with a rollup is still in `seq_runs`: its replay
/// is a duplicate.
pub fn insert_batch(
    conn: &Connection,
    keys: &mut Keys,
    batch: &NewBatch,
    inserted: &mut Vec<bool>,
) -> rusqlite::Result<Vec<BootAdded>> {
    let boots = batch
        .boots
        .iter()
        .map(|(node, boot)| keys.boot(conn, node, boot))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut above = boots
        .iter()
        .map(|b| seqs::highest(conn, b.id))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut added = vec![BootAdded::default(); boots.len()];
    // The batch's kinds, looked up once each (a handful per batch).
    let mut kinds: Vec<(&'static str, i64)> = Vec::new();
    let mut packer = Packer::new(newest_pos(conn)?, &boots);
    for r in &batch.records {
        let kind = match kinds.iter().find(|(k, _)| *k == r.kind) {
            Some((_, id)) => *id,
            None => {
                let id = keys.kind(conn, r.kind)?;
                kinds.push((r.kind, id));
                id
            }
        };
        // For a new record, whether it was kept whole.
        let whole = if r.seq > above[r.boot] {
            Some(packer.add(conn, r, kind)?)
        } else {
            packer.maybe_again(conn, r, kind)?
        };
        let new = whole.is_some();
        if let Some(whole) = whole {
            let a = &mut added[r.boot];
            a.added += 1;
            a.verbatim += u64::from(whole);
            a.max_seq = a.max_seq.max(r.seq);
            above[r.boot] = above[r.boot].max(r.seq);
        }
        inserted.push(new);
    }
    packer.flush(conn)?;
    Ok(added)
}

/// New records gathered into packs, and each boot's new sequence numbers,
/// until written.
struct Packer<'a> {
    /// The newest position taken.
    pos: i64,
    boots: &'a [BootKey],
    /// Open packs in order of their first record, at most [`MAX_OPEN`].
    open: Vec<Open<'a>>,
    seqs: Vec<seqs::Pending>,
}

/// Packs open at once at most: a record finds its pack by a scan from
/// the newest (records come in time order, so it is among the last few),
/// and a batch spread over many minutes cannot make that scan long or
/// hold many packs.
const MAX_OPEN: usize = 64;

/// A pack being gathered.
struct Open<'a> {
    boot: usize,
    kind: i64,
    minute: u64,
    entries: Vec<pack::Entry<'a>>,
    bytes: usize,
}

impl<'a> Packer<'a> {
    fn new(pos: i64, boots: &'a [BootKey]) -> Packer<'a> {
        Packer {
            pos,
            boots,
            open: Vec::new(),
            seqs: vec![seqs::Pending::default(); boots.len()],
        }
    }

    /// Adds a new record whose seq is above every one its boot stored;
    /// whether it was kept whole.
    fn add(&mut self, conn: &Connection, r: &'a BatchRecord, kind: i64) -> rusqlite::Result<bool> {
        let boot = &self.boots[r.boot];
        self.seqs[r.boot].push(conn, boot.id, r.seq)?;
        let Some(body) = canon::split(&r.raw, &boot.head) else {
            // Kept verbatim, on its own.
            return self.single(conn, r, kind);
        };
        let minute = minute_of(r.unix_ns);
        let found = self
            .open
            .iter()
            .rposition(|o| o.minute == minute && o.kind == kind && o.boot == r.boot);
        let at = match found {
            Some(at) => at,
            None => {
                if self.open.len() == MAX_OPEN {
                    self.write_open(conn)?;
                }
                self.open.push(Open {
                    boot: r.boot,
                    kind,
                    minute,
                    entries: Vec::new(),
                    bytes: 0,
                });
                self.open.len() - 1
            }
        };
        let open = &mut self.open[at];
        if !pack::fits(open.entries.len(), open.bytes, body.len()) {
            // Full: written now; the pack starts again with this record.
            let full = std::mem::take(&mut open.entries);
            open.bytes = 0;
            self.write(conn, r.boot, kind, &full)?;
        }
        let open = &mut self.open[at];
        open.entries.push(pack::Entry {
            seq: r.seq,
            unix_ns: r.unix_ns,
            body,
        });
        open.bytes += body.len();
        Ok(false)
    }

    /// A record that may be stored already (see [`insert_batch`]): stored
    /// as a row of its own when new, after the packs gathered so far;
    /// `None` when a duplicate, else whether it was kept whole.
    fn maybe_again(
        &mut self,
        conn: &Connection,
        r: &BatchRecord,
        kind: i64,
    ) -> rusqlite::Result<Option<bool>> {
        self.flush(conn)?;
        let boot = self.boots[r.boot].id;
        if seqs::contains(conn, boot, r.seq)? {
            return Ok(None);
        }
        let whole = self.single(conn, r, kind)?;
        seqs::add(conn, boot, r.seq, r.seq)?;
        Ok(Some(whole))
    }

    /// Stores one record as a row of its own, at the next position;
    /// whether it was kept whole.
    fn single(&mut self, conn: &Connection, r: &BatchRecord, kind: i64) -> rusqlite::Result<bool> {
        let boot = &self.boots[r.boot];
        let mut buf = Vec::new();
        let (whole, body) = canon::row(&r.raw, &boot.head, &mut buf);
        self.pos += 1;
        NewRow {
            pos: self.pos,
            boot: boot.id,
            seq: r.seq,
            unix_ns: r.unix_ns,
            kind,
            whole,
            n: 1,
            body,
        }
        .insert(conn)?;
        Ok(whole)
    }

    /// Writes one pack's entries (a single entry as a plain row).
    fn write(
        &mut self,
        conn: &Connection,
        boot: usize,
        kind: i64,
        entries: &[pack::Entry<'_>],
    ) -> rusqlite::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.pos += entries.len() as i64;
        write_entries(conn, self.pos, self.boots[boot].id, kind, entries)
    }

    /// Writes every open pack, in order of first record, and closes them.
    fn write_open(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        for open in std::mem::take(&mut self.open) {
            self.write(conn, open.boot, open.kind, &open.entries)?;
        }
        Ok(())
    }

    /// Writes every open pack and every boot's pending run of sequence
    /// numbers.
    fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.write_open(conn)?;
        for (p, b) in self.seqs.iter_mut().zip(self.boots) {
            p.flush(conn, b.id)?;
        }
        Ok(())
    }
}

/// Writes `entries` (at least one, seqs strictly increasing, all after
/// their boot's head) as one row at `pos`: a pack, or a plain row for a
/// single entry. The row's records hold `pos - entries.len() + 1 ..= pos`.
pub(super) fn write_entries(
    conn: &Connection,
    pos: i64,
    boot: i64,
    kind: i64,
    entries: &[pack::Entry<'_>],
) -> rusqlite::Result<()> {
    let packed;
    let mut buf = Vec::new();
    let (seq, unix_ns, body) = match entries {
        [e] => (e.seq, e.unix_ns, e.body.contiguous(&mut buf)),
        _ => {
            packed = pack::encode(entries);
            (packed.0, packed.1, packed.2.as_slice())
        }
    };
    NewRow {
        pos,
        boot,
        seq,
        unix_ns,
        kind,
        whole: false,
        n: entries.len() as u64,
        body,
    }
    .insert(conn)
}

/// One row of `stored`.
pub(super) struct NewRow<'b> {
    pub(super) pos: i64,
    pub(super) boot: i64,
    /// The first (or only) record's seq.
    pub(super) seq: u64,
    /// The earliest (or only) record's time.
    pub(super) unix_ns: u64,
    pub(super) kind: i64,
    pub(super) whole: bool,
    pub(super) n: u64,
    pub(super) body: &'b [u8],
}

impl NewRow<'_> {
    pub(super) fn insert(&self, conn: &Connection) -> rusqlite::Result<()> {
        conn.prepare_cached(INSERT_ROW)?.execute(params![
            self.pos,
            self.boot,
            self.seq as i64,
            self.unix_ns as i64,
            self.kind,
            self.whole,
            self.n as i64,
            self.body
        ])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
