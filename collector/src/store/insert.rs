//! The ingest path's inserts: a batch's records into `stored` as packed
//! rows (see [`super::pack`]), with as few statements as the dedupe
//! guarantee allows.

use rusqlite::{params, Connection};

use super::layout::{self, BootKey, Keys};
use super::rollup::minute_of;
use super::{pack, seqs, BatchRecord, NewBatch};

/// Per boot of a [`NewBatch`] (same order as its `boots`): how many of its
/// records were newly stored and the highest seq among those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootAdded {
    /// Records newly stored.
    pub added: u64,
    /// Highest seq newly stored (0 when none).
    pub max_seq: u64,
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
        let new = if r.seq > above[r.boot] {
            packer.add(conn, r, kind)?;
            true
        } else {
            packer.flush(conn)?;
            let boot = &boots[r.boot];
            let new = !seqs::contains(conn, boot.id, r.seq)?;
            if new {
                packer.single(conn, r, kind)?;
                seqs::add(conn, boot.id, r.seq, r.seq)?;
            }
            new
        };
        if new {
            let a = &mut added[r.boot];
            a.added += 1;
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

    /// Adds a new record whose seq is above every one its boot stored.
    fn add(&mut self, conn: &Connection, r: &'a BatchRecord, kind: i64) -> rusqlite::Result<()> {
        let boot = &self.boots[r.boot];
        self.seqs[r.boot].push(conn, boot.id, r.seq)?;
        let (whole, body) = layout::split(&r.raw, &boot.head);
        if whole {
            // Another encoder's field order: kept verbatim, on its own.
            return self.single(conn, r, kind);
        }
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
        Ok(())
    }

    /// Stores one record as a row of its own, at the next position.
    fn single(&mut self, conn: &Connection, r: &BatchRecord, kind: i64) -> rusqlite::Result<()> {
        let boot = &self.boots[r.boot];
        let (whole, body) = layout::split(&r.raw, &boot.head);
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
        .insert(conn)
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
    let (seq, unix_ns, body) = match entries {
        [e] => (e.seq, e.unix_ns, e.body),
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
mod tests {
    use super::*;
    use crate::store::{queries, schema, NewRecord, RecordFilter};

    use schema::memory as db;

    use crate::store::types::sample_record as rec;

    /// Every stored record (of the few hundred a test writes), by time.
    fn everything(c: &Connection) -> Vec<crate::store::StoredRecord> {
        let all = RecordFilter {
            limit: 1_000,
            ..Default::default()
        };
        queries::list_records(c, &all).unwrap()
    }

    /// Every row of a two-column query.
    fn two_columns(c: &Connection, sql: &str) -> Vec<(i64, i64)> {
        c.prepare(sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    fn insert(
        c: &Connection,
        keys: &mut Keys,
        recs: Vec<NewRecord>,
    ) -> (Vec<bool>, Vec<BootAdded>) {
        let mut inserted = Vec::new();
        let added = insert_batch(c, keys, &recs.into(), &mut inserted).unwrap();
        (inserted, added)
    }

    #[test]
    fn runs_and_replays_are_stored_once_in_arrival_order() {
        let c = db();
        let mut keys = Keys::default();
        // 700 records of two boots interleaved, each kept whole (no head):
        // single rows in arrival order.
        let first: Vec<NewRecord> = (1..=350)
            .flat_map(|s| [rec("b1", s), rec("b2", s)])
            .collect();
        let (inserted, added) = insert(&c, &mut keys, first);
        assert!(inserted.iter().all(|n| *n));
        assert_eq!(
            added,
            [BootAdded {
                added: 350,
                max_seq: 350
            }; 2]
        );
        // A replay overlapping the stored ones, a repeat within the batch,
        // a seq below the batch's previous one that is not stored yet, and
        // new ones after the replay.
        let mut again = vec![
            rec("b1", 349),
            rec("b1", 350),
            rec("b1", 352),
            rec("b1", 352),
        ];
        again.extend([rec("b1", 351), rec("b2", 1), rec("b1", 353), rec("b1", 354)]);
        let (inserted, added) = insert(&c, &mut keys, again);
        assert_eq!(
            inserted,
            [false, false, true, false, true, false, true, true]
        );
        assert_eq!(
            added,
            [
                BootAdded {
                    added: 4,
                    max_seq: 354
                },
                BootAdded::default()
            ]
        );
        let all = everything(&c);
        assert_eq!(all.len(), 704);
        for r in &all {
            assert_eq!(r.raw, r.seq.to_le_bytes(), "{r:?}");
            assert_eq!(r.kind, rec("x", r.seq).kind);
        }
        // Arrival order is the rowid order (remote_write's log).
        let order = two_columns(&c, "SELECT boot, seq FROM stored ORDER BY pos");
        assert_eq!(order[..4], [(1, 1), (2, 1), (1, 2), (2, 2)]);
        assert_eq!(order[700..], [(1, 352), (1, 351), (1, 353), (1, 354)]);
    }

    /// A record of node "a" as an agent encodes it (starting with its
    /// boot's head), so it can be packed.
    fn headed(boot: &str, seq: u64, unix_ns: u64, kind: &'static str) -> NewRecord {
        let mut raw = layout::head("a", boot);
        raw.extend_from_slice(&seq.to_le_bytes());
        NewRecord {
            node: "a".into(),
            boot_id: boot.into(),
            seq,
            unix_ns,
            kind,
            raw,
        }
    }

    #[test]
    fn live_records_pack_per_boot_kind_and_minute_and_read_back_whole() {
        use crate::store::rollup::MINUTE_NS;
        let c = db();
        let mut keys = Keys::default();
        // Two minutes of one boot: RTT and counters interleaved, plus one
        // lone thermal record.
        let mut sent = Vec::new();
        for s in 1..=120u64 {
            let kind = if s % 2 == 0 { "rtt" } else { "counters" };
            sent.push(headed("b1", s, s * MINUTE_NS / 60, kind));
        }
        sent.push(headed("b1", 121, 2 * MINUTE_NS + 5, "thermal"));
        let (inserted, added) = insert(&c, &mut keys, sent.clone());
        assert!(inserted.iter().all(|n| *n));
        assert_eq!(added[0].added, 121);
        // Rows: counters and RTT packs of minutes 0 and 1 (seq 1-59 and
        // 60-119), seq 120 alone in minute 2, and the thermal record.
        let rows: Vec<(i64, i64, i64)> = c
            .prepare("SELECT pos, seq, n FROM stored ORDER BY pos")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(rows.iter().map(|r| r.2).sum::<i64>(), 121);
        assert_eq!(rows.last().unwrap().0, 121, "positions are dense");
        assert_eq!(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            [30, 29, 30, 30, 1, 1],
            "{rows:?}"
        );
        // Every record reads back whole, in time order, and from the log
        // at its own position.
        let all = everything(&c);
        let got: Vec<(u64, Vec<u8>)> = all.iter().map(|r| (r.seq, r.raw.clone())).collect();
        let want: Vec<(u64, Vec<u8>)> = sent.iter().map(|r| (r.seq, r.raw.clone())).collect();
        assert_eq!(got, want);
        let log = crate::remote_write::log::read_after(&c, 50, 1_000).unwrap();
        assert_eq!(log.len(), 71);
        assert!(log.windows(2).all(|w| w[1].pos == w[0].pos + 1));
        // Replays of packed records are duplicates; a hole is not.
        let again = vec![
            headed("b1", 1, 1, "counters"),
            headed("b1", 64, 64, "rtt"),
            headed("b1", 200, 200, "rtt"),
            headed("b1", 150, 150, "rtt"),
            headed("b1", 150, 150, "rtt"),
        ];
        let (inserted, _) = insert(&c, &mut keys, again);
        assert_eq!(inserted, [false, false, true, true, false]);
        assert_eq!(crate::store::seqs::highest(&c, 1).unwrap(), 200);
    }

    #[test]
    fn a_batch_over_many_minutes_keeps_few_packs_open_and_loses_nothing() {
        use crate::store::rollup::MINUTE_NS;
        let c = db();
        // Two records a minute over 3 * MAX_OPEN minutes, each minute's
        // pair split by every other minute's.
        let minutes = 3 * MAX_OPEN as u64;
        let sent: Vec<NewRecord> = (0..2 * minutes)
            .map(|i| headed("b1", i + 1, (i % minutes) * MINUTE_NS, "rtt"))
            .collect();
        let (inserted, _) = insert(&c, &mut Keys::default(), sent.clone());
        assert!(inserted.iter().all(|n| *n));
        let rows: i64 = c
            .query_row("SELECT count(*) FROM stored", [], |r| r.get(0))
            .unwrap();
        // The pairs are further apart than the open packs reach: each
        // record is a row of its own, none lost.
        assert_eq!(rows as u64, 2 * minutes);
        let mut got: Vec<u64> = everything(&c).iter().map(|r| r.seq).collect();
        got.sort_unstable();
        assert_eq!(got, (1..=2 * minutes).collect::<Vec<_>>());
    }

    /// Records near the pack's byte bound: no pack grows past it (a pack
    /// over it would not read back), so each of these is a row or shares
    /// one with a smaller neighbour.
    #[test]
    fn large_records_never_make_a_pack_over_its_byte_bound() {
        let c = db();
        let sizes = [200 << 10, 200 << 10, 10, 60 << 10, 250 << 10, 5, 5];
        let sent: Vec<NewRecord> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let mut r = headed("b1", i as u64 + 1, 1_000 + i as u64, "rtt");
                r.raw.resize(r.raw.len() + len, 7);
                r
            })
            .collect();
        let (inserted, _) = insert(&c, &mut Keys::default(), sent.clone());
        assert!(inserted.iter().all(|n| *n));
        let got: Vec<Vec<u8>> = everything(&c).into_iter().map(|r| r.raw).collect();
        let want: Vec<Vec<u8>> = sent.into_iter().map(|r| r.raw).collect();
        assert!(
            got == want,
            "{} of {} records read back",
            got.len(),
            want.len()
        );
        let packs = two_columns(&c, "SELECT n, length(body) FROM stored ORDER BY pos");
        // 200 | 200 + 10 | 60 | 250 + 5 + 5 (bodies after the head).
        assert_eq!(packs.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2, 1, 3]);
    }
}
