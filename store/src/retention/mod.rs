//! Raw-record retention: the I/O around [`super::rollup`].
//!
//! With `retention.raw` set, raw records of the dense kinds (RTT summaries
//! and interface counters: nearly all rows) older than that are replaced
//! by per-minute rollups, kept for as long as the store. Every other kind
//! (outages, link events, thermals, bandwidth tests, service checks, agent
//! stats, kinds this build does not know) stays raw for good: they are a
//! few percent of the rows and the report needs each one.
//!
//! Pruning runs on the writer thread, one bounded step per command, in
//! time order behind a persistent mark, so ingest is never held up for
//! long and a step is one transaction: its rollups, the deletions and the
//! mark commit together or not at all. A record a remote_write endpoint
//! has not delivered yet is never pruned: the mark stops at its minute.
//! [`task`] holds the edges that drive it: the collector's minutely task,
//! the `prune` command, the replay of rollups at startup.
//!
//! A record replayed after its minute was pruned is still in its boot's
//! sequence runs ([`super::seqs`]) and counted as a duplicate, as it
//! would have been against the raw row. A record that arrives for the
//! first time behind the mark (a spool replayed after an outage longer
//! than `retention.raw`) is found by its position: each step first looks
//! at the rows that arrived since the last look (the `late_pos` mark)
//! and folds the late dense ones into their minutes' rollups.

use std::collections::BTreeMap;

use boltwatch_proto::v1::Record;
use prost::Message;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::layout::{self, SPARSE_KINDS_FROM};
use super::pack;
use super::rollup::{minute_of, Raw, Rollup, MINUTE_NS};
use super::upkeep::{STEP_BYTES, STEP_RECORDS};

pub(crate) mod task;

/// Schema version 6: the rollups, the pruning mark, and per boot the
/// highest sequence number pruned (the duplicate check's fast path until
/// version 7 moved the check to sequence runs; no longer written).
pub(super) fn migrate_v6(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE rollups (
            boot    INTEGER NOT NULL,
            kind    INTEGER NOT NULL,
            minute  INTEGER NOT NULL,
            records INTEGER NOT NULL,
            min_seq INTEGER NOT NULL,
            max_seq INTEGER NOT NULL,
            body    BLOB    NOT NULL,
            PRIMARY KEY (boot, kind, minute)
        ) WITHOUT ROWID;
        CREATE INDEX rollups_by_time ON rollups (minute);
        CREATE INDEX rollups_by_seq ON rollups (boot, max_seq);
        CREATE TABLE retention (
            id             INTEGER PRIMARY KEY CHECK (id = 1),
            pruned_until   INTEGER NOT NULL,
            rollup_records INTEGER NOT NULL
        );
        ALTER TABLE boot_keys ADD COLUMN pruned_seq INTEGER NOT NULL DEFAULT 0;",
    )
}

/// Schema version 8: the highest position pruning has deleted, so that
/// new rows never take the positions of pruned ones (see
/// [`crate::insert::newest_pos`]).
pub(super) fn migrate_v8(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE retention ADD COLUMN pruned_pos INTEGER NOT NULL DEFAULT 0;")
}

/// Schema version 10: how far (by position) steps have looked for rows
/// that arrived behind the pruning mark.
pub(super) fn migrate_v10(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE retention ADD COLUMN late_pos INTEGER NOT NULL DEFAULT 0;")
}

/// Positions one step looks through at most for late rows (an upgraded
/// store's first steps walk all of it, a bounded stretch at a time).
const LATE_SCAN: i64 = 100_000;

/// Time one step covers at most (with the upkeep's record and byte
/// bounds, [`STEP_RECORDS`] and [`STEP_BYTES`]).
const STEP_NS: u64 = 10 * MINUTE_NS;

/// What one [`prune_step`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Raw records replaced.
    pub records: u64,
    /// Rollups written (new or merged).
    pub rollups: u64,
    /// The mark after the step: raw dense records before it are pruned.
    pub until_ns: u64,
    /// Nothing is left to prune before the cutoff (or a remote_write
    /// endpoint holds the mark back): no need for another step now.
    pub done: bool,
}

impl crate::upkeep::Step for Pruned {
    fn absorb(&mut self, later: Pruned) {
        self.records += later.records;
        self.rollups += later.rollups;
        self.until_ns = later.until_ns;
        self.done = later.done;
    }

    fn done(&self) -> bool {
        self.done
    }
}

/// A raw record being pruned: seq, unix_ns, the whole encoded record, and
/// it decoded.
type RawRecord = (u64, u64, Vec<u8>, Record);

/// A raw row being pruned: its position and records, grouped by (boot,
/// kind, minute).
type RawRow = (i64, Vec<RawRecord>);

/// Every record of `row`, reassembled and decoded; `None` when one does
/// not decode (stored by an older build's rules) or the row is damaged:
/// the row then stays raw rather than be lost.
fn decoded(row: &pack::Row<'_>, head: &[u8]) -> Option<Vec<RawRecord>> {
    let mut out = Vec::with_capacity(row.n as usize);
    let mut ok = true;
    pack::each(row, |i| {
        let mut whole = Vec::new();
        layout::join(i.whole, head, i.body, &mut whole);
        match Record::decode(whole.as_slice()) {
            Ok(rec) => out.push((i.seq, i.unix_ns, whole, rec)),
            Err(_) => ok = false,
        }
    })
    .ok()?;
    ok.then_some(out)
}

/// The pruning mark (0: nothing pruned yet).
pub fn pruned_until(conn: &Connection) -> rusqlite::Result<u64> {
    Ok(status(conn)?.0)
}

/// Prunes the dense raw records of at most [`STEP_NS`] after the mark, up
/// to `cutoff_ns` (rounded down to a minute) and below position
/// `below_pos` (the slowest remote_write endpoint's next record).
pub fn prune_step(
    tx: &Transaction<'_>,
    cutoff_ns: u64,
    below_pos: i64,
) -> rusqlite::Result<Pruned> {
    let cutoff = minute_of(cutoff_ns);
    let mark = pruned_until(tx)?;
    let late = prune_late(tx, mark, below_pos)?;
    if !late.done {
        return Ok(late);
    }
    let mut step = prune_forward(tx, cutoff, mark, below_pos)?;
    step.records += late.records;
    step.rollups += late.rollups;
    Ok(step)
}

/// Folds the dense rows that arrived behind the mark `mark` since the
/// last look, before position `below_pos`, into their minutes' rollups.
/// `done` is false when a step's bound stopped it short.
fn prune_late(tx: &Transaction<'_>, mark: u64, below_pos: i64) -> rusqlite::Result<Pruned> {
    let from: i64 = tx
        .query_row("SELECT late_pos FROM retention WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?
        .unwrap_or(0);
    let newest: i64 = tx.query_row("SELECT coalesce(max(pos), 0) FROM stored", [], |r| r.get(0))?;
    let until = newest.min(below_pos - 1).min(from + LATE_SCAN);
    let mut done = Pruned {
        until_ns: mark,
        done: true,
        ..Pruned::default()
    };
    if mark == 0 || until <= from {
        return Ok(done);
    }
    let (taken, looked) = take_late(tx, mark, from, until)?;
    done.done = looked == until;
    let highest_deleted = roll_up(tx, taken, &mut done)?;
    set_mark(tx, mark, done.records, highest_deleted)?;
    tx.execute("UPDATE retention SET late_pos = ?1 WHERE id = 1", [looked])?;
    Ok(done)
}

/// The late dense rows at positions `(from, until]` (records stamped
/// before `mark`), within a step's bounds; and the last position looked
/// at (`until` unless a bound stopped it).
fn take_late(tx: &Connection, mark: u64, from: i64, until: i64) -> rusqlite::Result<(Taken, i64)> {
    let mut stmt = tx.prepare_cached(
        "SELECT boot, kind, pos, seq, unix_ns, whole, n, body FROM stored
         WHERE pos > ?1 AND pos <= ?2 AND unix_ns < ?3 AND kind < ?4 ORDER BY pos",
    )?;
    let mut rows = stmt.query(params![from, until, mark as i64, SPARSE_KINDS_FROM])?;
    let heads = layout::boot_names(tx)?;
    let mut taken = Taken {
        groups: BTreeMap::new(),
        until: mark,
        leave_from: mark,
        blocked: false,
        limited: false,
    };
    let (mut n, mut held, mut looked) = (0usize, 0usize, until);
    while let Some(r) = rows.next()? {
        let row = layout::packed_row(r, 2)?;
        n += row.n as usize;
        if n > STEP_RECORDS || held > STEP_BYTES {
            // This row and what follows wait for the next step.
            looked = row.pos - 1;
            break;
        }
        held += hold(&mut taken, r, &row, &heads)?;
    }
    Ok((taken, looked))
}

/// Adds `row` (the current row of `r`) to its group in `taken` when its
/// records decode; returns their bytes.
fn hold(
    taken: &mut Taken,
    r: &rusqlite::Row<'_>,
    row: &pack::Row<'_>,
    heads: &std::collections::HashMap<i64, layout::BootName>,
) -> rusqlite::Result<usize> {
    let boot: i64 = r.get(0)?;
    let head = heads.get(&boot).map(|b| b.2.as_slice()).unwrap_or_default();
    let Some(records) = decoded(row, head) else {
        return Ok(0);
    };
    let bytes = records.iter().map(|r| r.2.len()).sum::<usize>();
    taken
        .groups
        .entry((boot, r.get(1)?, minute_of(row.unix_ns)))
        .or_default()
        .push((row.pos, records));
    Ok(bytes)
}

/// The forward walk: prunes the dense raw records of at most
/// [`STEP_NS`] after the mark, as [`prune_step`] says.
fn prune_forward(
    tx: &Transaction<'_>,
    cutoff: u64,
    mark: u64,
    below_pos: i64,
) -> rusqlite::Result<Pruned> {
    // Skip empty time at once: the first record at or after the mark.
    let first: Option<i64> = tx.query_row(
        "SELECT min(unix_ns) FROM stored WHERE unix_ns >= ?1",
        [mark as i64],
        |r| r.get(0),
    )?;
    let from = first.map_or(cutoff, |t| minute_of(t as u64).max(mark));
    if from >= cutoff {
        // Nothing between the mark and the cutoff: the mark moves up.
        let until_ns = cutoff.max(mark);
        set_mark(tx, until_ns, 0, 0)?;
        return Ok(Pruned {
            until_ns,
            done: true,
            ..Pruned::default()
        });
    }
    let taken = take(tx, from, cutoff.min(from + STEP_NS), below_pos)?;
    let mut done = Pruned {
        until_ns: taken.until.max(mark),
        done: taken.blocked || (!taken.limited && taken.until >= cutoff),
        ..Pruned::default()
    };
    let highest_deleted = roll_up(tx, taken, &mut done)?;
    set_mark(tx, done.until_ns, done.records, highest_deleted)?;
    Ok(done)
}

/// The dense raw rows one step takes.
struct Taken {
    /// Grouped by (boot, kind, minute).
    groups: BTreeMap<(i64, i64, u64), Vec<RawRow>>,
    /// The mark after the step.
    until: u64,
    /// Minutes from here on are left for a later step.
    leave_from: u64,
    /// A row not yet delivered everywhere ended the step.
    blocked: bool,
    /// The step's record or byte bound ended it.
    limited: bool,
}

/// Reads the dense raw rows of `[from, until)` before position
/// `below_pos`, within a step's bounds.
fn take(tx: &Connection, from: u64, until: u64, below_pos: i64) -> rusqlite::Result<Taken> {
    let mut stmt = tx.prepare_cached(
        "SELECT boot, kind, pos, seq, unix_ns, whole, n, body FROM stored
         WHERE unix_ns >= ?1 AND unix_ns < ?2 AND kind < ?3 ORDER BY unix_ns, pos",
    )?;
    let mut rows = stmt.query(params![from as i64, until as i64, SPARSE_KINDS_FROM])?;
    let heads = layout::boot_names(tx)?;
    let mut taken = Taken {
        groups: BTreeMap::new(),
        until,
        leave_from: until,
        blocked: false,
        limited: false,
    };
    let (mut n, mut held) = (0usize, 0usize);
    while let Some(r) = rows.next()? {
        let row = layout::packed_row(r, 2)?;
        let t = row.unix_ns;
        if row.pos >= below_pos {
            // Not delivered everywhere yet: stop before its minute.
            taken.until = minute_of(t);
            taken.leave_from = taken.until;
            taken.blocked = true;
            break;
        }
        n += row.n as usize;
        if n > STEP_RECORDS || held > STEP_BYTES {
            taken.limited = true;
            if minute_of(t) > from {
                // Whole minutes only; this one starts the next step.
                taken.until = minute_of(t);
                taken.leave_from = taken.until;
            } else {
                // One minute holds more than a step takes: this part
                // now, the mark stays, the next step takes the rest and
                // merges it into the same rollup.
                taken.until = from;
                taken.leave_from = from + MINUTE_NS;
            }
            break;
        }
        held += hold(&mut taken, r, &row, &heads)?;
    }
    Ok(taken)
}

/// Folds each taken minute into its rollup and deletes its raw rows,
/// counting them in `done`; returns the highest position deleted.
fn roll_up(tx: &Connection, taken: Taken, done: &mut Pruned) -> rusqlite::Result<i64> {
    let mut delete = tx.prepare_cached("DELETE FROM stored WHERE pos = ?1")?;
    let mut highest_deleted = 0;
    for ((boot, kind, minute), rows) in taken.groups {
        if minute >= taken.leave_from {
            continue;
        }
        let raws: Vec<Raw<'_>> = rows
            .iter()
            .flat_map(|(_, records)| records)
            .map(|(seq, t, bytes, record)| Raw {
                seq: *seq,
                unix_ns: *t,
                bytes,
                record,
            })
            .collect();
        let mut rollup = existing(tx, boot, kind, minute)?.unwrap_or_default();
        rollup.add(minute, &raws);
        put(tx, boot, kind, minute, &rollup)?;
        for (pos, records) in &rows {
            delete.execute([pos])?;
            highest_deleted = highest_deleted.max(*pos);
            done.records += records.len() as u64;
        }
        done.rollups += 1;
    }
    Ok(highest_deleted)
}

/// Moves the mark, counts `records` more as held in rollups and raises
/// the highest pruned position to `pos`.
fn set_mark(tx: &Connection, until_ns: u64, records: u64, pos: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO retention (id, pruned_until, rollup_records, pruned_pos) VALUES (1, ?1, ?2, ?3)
         ON CONFLICT (id) DO UPDATE SET pruned_until = excluded.pruned_until,
             rollup_records = rollup_records + excluded.rollup_records,
             pruned_pos = max(pruned_pos, excluded.pruned_pos)",
        params![until_ns as i64, records as i64, pos],
    )?;
    Ok(())
}

/// The pruning mark and how many raw records rollups hold, for the
/// `/metrics` gauges.
pub fn status(conn: &Connection) -> rusqlite::Result<(u64, u64)> {
    let v: Option<(i64, i64)> = conn
        .query_row(
            "SELECT pruned_until, rollup_records FROM retention WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(v.map_or((0, 0), |(m, n)| (m as u64, n as u64)))
}

fn existing(
    tx: &Connection,
    boot: i64,
    kind: i64,
    minute: u64,
) -> rusqlite::Result<Option<Rollup>> {
    let body: Option<Vec<u8>> = tx
        .prepare_cached("SELECT body FROM rollups WHERE boot = ?1 AND kind = ?2 AND minute = ?3")?
        .query_row(params![boot, kind, minute as i64], |r| r.get(0))
        .optional()?;
    Ok(body.and_then(|b| Rollup::decode(b.as_slice()).ok()))
}

fn put(tx: &Connection, boot: i64, kind: i64, minute: u64, r: &Rollup) -> rusqlite::Result<()> {
    let (min_seq, max_seq) = r.seq_bounds().unwrap_or_default();
    tx.prepare_cached(
        "INSERT OR REPLACE INTO rollups (boot, kind, minute, records, min_seq, max_seq, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        boot,
        kind,
        minute as i64,
        r.records as i64,
        min_seq as i64,
        max_seq as i64,
        r.encode_to_vec()
    ])?;
    Ok(())
}

/// One stored rollup as [`scan`] hands it over.
pub struct Stored<'a> {
    /// Node.
    pub node: &'a str,
    /// Agent boot.
    pub boot_id: &'a str,
    /// Start of its minute.
    pub minute: u64,
    /// The rollup.
    pub rollup: Rollup,
}

/// Calls `f` with every rollup whose minute starts in `[from_ns, to_ns)`,
/// oldest first.
pub fn scan(
    conn: &Connection,
    from_ns: u64,
    to_ns: u64,
    mut f: impl FnMut(Stored<'_>),
) -> rusqlite::Result<()> {
    // A report may read a store `serve` has not upgraded yet (a reader
    // never migrates): before version 6 there are no rollups.
    let has_rollups: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'rollups'",
        [],
        |r| r.get(0),
    )?;
    if !has_rollups {
        return Ok(());
    }
    let boots = layout::boot_names(conn)?;
    let mut stmt = conn.prepare_cached(
        "SELECT boot, minute, body FROM rollups
         WHERE minute >= ?1 AND minute < ?2 ORDER BY minute",
    )?;
    let mut rows = stmt.query(params![from_ns as i64, to_ns.min(i64::MAX as u64) as i64])?;
    while let Some(r) = rows.next()? {
        let Some((node, boot_id, _)) = boots.get(&r.get::<_, i64>(0)?) else {
            continue;
        };
        let Ok(rollup) = Rollup::decode(r.get_ref(2)?.as_blob()?) else {
            continue;
        };
        f(Stored {
            node,
            boot_id,
            minute: r.get::<_, i64>(1)? as u64,
            rollup,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
