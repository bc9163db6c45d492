//! Compaction of live rows into packs (schema version 9).
//!
//! A live agent sends each record as soon as it is spooled, so the ingest
//! path, which packs only within a batch (see [`super::insert`]), stores
//! most live records one a row: about two and a half times the bytes of a
//! pack's record, and a b-tree entry per record in each index. Compaction
//! rewrites them as packs afterwards, one bounded transaction a step,
//! following a mark over store positions.
//!
//! A step takes the rows after the mark and before `below_pos`: the caller
//! passes the lower of the first position not yet delivered to every
//! configured remote_write endpoint and the first that arrived since its
//! previous round (a minute ago), so the current minute's live rows are
//! not packed while their neighbours are still arriving. Arrival, not the
//! records' own times, decides: an agent whose clock runs ahead cannot
//! hold compaction back. A minute whose records arrive across two rounds
//! becomes two packs, at about a byte a record more than one.
//!
//! Inside the run `(mark, end]` the records are regrouped per (boot, kind,
//! minute) and laid out again at the top of the run's positions, ending
//! at `end`:
//! - no endpoint has a position inside the run, so none skips or resends
//!   a record; rows after `end` keep their positions;
//! - the newest position never drops, so no position is handed out again
//!   (see [`super::insert::newest_pos`]);
//! - within one (boot, kind), records keep their store order (within a
//!   pack, sequence order: the same for a live boot), so every series
//!   replays in the order it was stored (`/metrics` rebuild, remote write
//!   restore). Only records of different boots or kinds change places.
//!
//! Records kept whole (their node or boot id field repeated or at odds
//! with the boot, see [`super::canon`]) stay single rows. A damaged row ends the run before it and
//! is then passed over as it is, never rewritten.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::canon::Body;
use super::insert::{write_entries, NewRow};
use super::layout;
use super::pack::{self, Entry};
use super::rollup::minute_of;

/// Schema version 9: the compaction mark.
pub(super) fn migrate_v9(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE compaction (
            id  INTEGER PRIMARY KEY CHECK (id = 1),
            pos INTEGER NOT NULL
        );",
    )
}

/// The upkeep's step bounds, as this step counts them: a single row
/// counts its body, a pack the most its body can unpack to (beyond the
/// first row of a step).
const STEP_RECORDS: u64 = super::upkeep::STEP_RECORDS as u64;
const STEP_BYTES: u64 = super::upkeep::STEP_BYTES as u64;

/// What one [`compact_step`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// Rows read past the mark.
    pub rows_read: u64,
    /// Rows those became (equal to `rows_read` when nothing was rewritten).
    pub rows_written: u64,
    /// The mark after the step: positions up to it were looked at.
    pub mark: i64,
    /// Nothing more can be done now: the run reached `below_pos` or the
    /// last row.
    pub done: bool,
}

impl super::upkeep::Step for Compacted {
    fn absorb(&mut self, later: Compacted) {
        self.rows_read += later.rows_read;
        self.rows_written += later.rows_written;
        self.mark = later.mark;
        self.done = later.done;
    }

    fn done(&self) -> bool {
        self.done
    }
}

/// The mark: positions up to it were looked at (0 before the first step).
pub fn mark(conn: &Connection) -> rusqlite::Result<i64> {
    Ok(conn
        .query_row("SELECT pos FROM compaction WHERE id = 1", [], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

fn set_mark(tx: &Connection, pos: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO compaction (id, pos) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET pos = excluded.pos",
        [pos],
    )?;
    Ok(())
}

/// A record read out of the run, owned (the rows are deleted before the
/// packs are written).
struct Taken {
    seq: u64,
    unix_ns: u64,
    whole: bool,
    body: Vec<u8>,
}

/// Consecutive records of one (boot, kind) in one minute, or one whole
/// record alone.
struct Group {
    boot: i64,
    kind: i64,
    minute: u64,
    whole: bool,
    records: Vec<Taken>,
}

/// One step: the rows after the mark and before `below_pos`, at most
/// [`STEP_RECORDS`] records and [`STEP_BYTES`] bytes, rewritten as packs
/// when that at least halves their rows. Run inside an immediate
/// transaction.
pub fn compact_step(tx: &Connection, below_pos: i64) -> rusqlite::Result<Compacted> {
    let from = mark(tx)?;
    let plan = plan(tx, from, below_pos)?;
    if plan.rows == 0 || plan.rows_after * 2 > plan.rows {
        // Nothing to do, or not worth a rewrite (catch-up traffic arrives
        // packed): the mark moves on without a record decoded.
        set_mark(tx, plan.end)?;
        return Ok(Compacted {
            rows_read: plan.rows,
            rows_written: plan.rows,
            mark: plan.end,
            done: plan.done,
        });
    }
    let mut step = Compacted {
        mark: from,
        done: plan.done,
        ..Compacted::default()
    };
    let Some(mut run) = take(tx, from, plan.end, &mut step)? else {
        set_mark(tx, step.mark)?;
        return Ok(step);
    };
    let end = step.mark;
    for g in &mut run.groups {
        // Packs hold strictly increasing seqs; a live boot's records
        // arrive in that order already (a replay may not).
        g.records.sort_unstable_by_key(|t| t.seq);
    }
    let laid_out: Vec<(&Group, Vec<&[Taken]>)> =
        run.groups.iter().map(|g| (g, chunks(&g.records))).collect();
    let written: u64 = laid_out.iter().map(|(_, rows)| rows.len() as u64).sum();
    step.rows_written = step.rows_read;
    if written < step.rows_read {
        rewrite(tx, from, end, end - run.records as i64, &laid_out)?;
        step.rows_written = written;
    } // Else no fewer rows after all (a damaged row cut the run short).
    set_mark(tx, end)?;
    Ok(step)
}

/// The records of a run, grouped, and how many.
struct Run {
    groups: Vec<Group>,
    records: u64,
}

/// Reads the rows after `from` up to `end` into groups, counting them in
/// `step` (its mark: the last row read). Stops before a damaged row, or
/// passes it over when it is the first (`None`: nothing to rewrite).
fn take(
    tx: &Connection,
    from: i64,
    end: i64,
    step: &mut Compacted,
) -> rusqlite::Result<Option<Run>> {
    let mut stmt = tx.prepare_cached(
        "SELECT boot, kind, pos, seq, unix_ns, whole, n, body FROM stored
         WHERE pos > ?1 AND pos <= ?2 ORDER BY pos",
    )?;
    let mut rows = stmt.query([from, end])?;
    let mut grouper = Grouper::default();
    let mut records = 0u64;
    while let Some(r) = rows.next()? {
        let row = layout::packed_row(r, 2)?;
        let mut items = Vec::new();
        let read = pack::each(&row, |i| {
            items.push(Taken {
                seq: i.seq,
                unix_ns: i.unix_ns,
                whole: i.whole,
                body: i.body.to_vec(),
            })
        });
        if read.is_err() {
            // Left as it is: the run ends before it, or (first) it is
            // passed over.
            step.done = false;
            if step.rows_read == 0 {
                step.mark = row.pos;
                return Ok(None);
            }
            break;
        }
        let (boot, kind): (i64, i64) = (r.get(0)?, r.get(1)?);
        records += items.len() as u64;
        items.into_iter().for_each(|t| grouper.add(boot, kind, t));
        step.rows_read += 1;
        step.mark = row.pos;
    }
    Ok(Some(Run {
        groups: grouper.groups,
        records,
    }))
}

/// Cuts records into groups as they come.
#[derive(Default)]
struct Grouper {
    groups: Vec<Group>,
    /// Each (boot, kind)'s newest group.
    latest: HashMap<(i64, i64), usize>,
}

impl Grouper {
    /// A record joins its (boot, kind)'s newest group, if of its minute
    /// and packable; otherwise it starts the next one. So a (boot, kind)'s
    /// groups, laid out in the order they start, keep its records in store
    /// order (a whole record, or a clock stepping back over a minute,
    /// starts a group of its own).
    fn add(&mut self, boot: i64, kind: i64, t: Taken) {
        let minute = minute_of(t.unix_ns);
        let groups = &self.groups;
        let at = self
            .latest
            .get(&(boot, kind))
            .copied()
            .filter(|&g| !t.whole && !groups[g].whole && groups[g].minute == minute);
        let at = at.unwrap_or_else(|| {
            self.groups.push(Group {
                boot,
                kind,
                minute,
                whole: t.whole,
                records: Vec::new(),
            });
            self.latest.insert((boot, kind), self.groups.len() - 1);
            self.groups.len() - 1
        });
        self.groups[at].records.push(t);
    }
}

/// Replaces the rows after `from` up to `end` by `laid_out`, at dense
/// positions after `pos` (the run's first record's position less one).
fn rewrite(
    tx: &Connection,
    from: i64,
    end: i64,
    mut pos: i64,
    laid_out: &[(&Group, Vec<&[Taken]>)],
) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM stored WHERE pos > ?1 AND pos <= ?2")?
        .execute(params![from, end])?;
    for (g, rows) in laid_out {
        for &chunk in rows {
            pos += chunk.len() as i64;
            match chunk {
                [t] if t.whole => NewRow {
                    pos,
                    boot: g.boot,
                    seq: t.seq,
                    unix_ns: t.unix_ns,
                    kind: g.kind,
                    whole: true,
                    n: 1,
                    body: &t.body,
                }
                .insert(tx)?,
                _ => {
                    let entries: Vec<Entry<'_>> = chunk
                        .iter()
                        .map(|t| Entry {
                            seq: t.seq,
                            unix_ns: t.unix_ns,
                            body: Body::one(&t.body),
                        })
                        .collect();
                    write_entries(tx, pos, g.boot, g.kind, &entries)?;
                }
            }
        }
    }
    debug_assert_eq!(pos, end);
    Ok(())
}

/// The run a step takes, from the rows' columns alone (no body read).
struct Plan {
    /// Its last position (the mark when the run is empty).
    end: i64,
    /// Rows in it.
    rows: u64,
    /// The fewest rows its records can become: a pack per (boot, kind,
    /// minute) per [`pack::MAX_RECORDS`], a row per whole record. Every
    /// record of a row lies in the minute of the row's time.
    rows_after: u64,
    /// The run ends at `below_pos` or the last row (else: at the step's
    /// bound).
    done: bool,
}

fn plan(tx: &Connection, from: i64, below_pos: i64) -> rusqlite::Result<Plan> {
    let mut stmt = tx.prepare_cached(
        "SELECT boot, kind, pos, unix_ns, whole, n, length(body) FROM stored
         WHERE pos > ?1 AND pos < ?2 ORDER BY pos",
    )?;
    let mut rows = stmt.query([from, below_pos])?;
    let mut plan = Plan {
        end: from,
        rows: 0,
        rows_after: 0,
        done: true,
    };
    let mut groups: HashMap<(i64, i64, u64), u64> = HashMap::new();
    let (mut records, mut bytes) = (0u64, 0u64);
    while let Some(r) = rows.next()? {
        let (pos, unix_ns, n): (i64, i64, i64) = (r.get(2)?, r.get(3)?, r.get(5)?);
        let (unix_ns, n) = (unix_ns as u64, n.max(1) as u64);
        // A pack unpacks to at most about 22 times its Snappy block (a
        // copy of 64 bytes takes 3), and to no more than readers allow.
        let len = r.get::<_, i64>(6)? as u64;
        let held = if n > 1 {
            (len * 22).min(
                (pack::MAX_BYTES + pack::MAX_RECORD_BYTES) as u64 + n * pack::FRAME_OVERHEAD as u64,
            )
        } else {
            len
        };
        if records > 0 && (records + n > STEP_RECORDS || bytes + held > STEP_BYTES) {
            plan.done = false;
            break;
        }
        if r.get::<_, bool>(4)? {
            plan.rows_after += 1;
        } else {
            *groups
                .entry((r.get(0)?, r.get(1)?, minute_of(unix_ns)))
                .or_default() += n;
        }
        records += n;
        bytes += held;
        plan.rows += 1;
        plan.end = pos;
    }
    plan.rows_after += groups
        .values()
        .map(|n| n.div_ceil(pack::MAX_RECORDS as u64))
        .sum::<u64>();
    Ok(plan)
}

/// How a group's records split into rows: packs within [`pack::fits`],
/// as the ingest path cuts them.
fn chunks(records: &[Taken]) -> Vec<&[Taken]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, t) in records.iter().enumerate() {
        if !pack::fits(i - start, bytes, t.body.len()) {
            out.push(&records[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += t.body.len();
    }
    if start < records.len() {
        out.push(&records[start..]);
    }
    out
}

pub(crate) mod task;

#[cfg(test)]
mod tests;
