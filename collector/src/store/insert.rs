//! The ingest path's inserts: a batch's records into `stored`, with as few
//! statements per record as the dedupe guarantee allows.

use rusqlite::Connection;

use super::layout::{self, Keys};
use super::{retention, NewBatch};

/// Per boot of a [`NewBatch`] (same order as its `boots`): how many of its
/// records were newly stored and the highest seq among those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootAdded {
    /// Records newly stored.
    pub added: u64,
    /// Highest seq newly stored (0 when none).
    pub max_seq: u64,
}

/// Rows per multi-row INSERT, largest first: a run of new records goes in
/// statements of these sizes (one prepared statement each, cached).
const RUN_SIZES: [usize; 5] = [256, 64, 16, 4, 1];

/// Inserts a batch in order with ids cached in `keys`, pushing onto
/// `inserted` whether each record was new; returns what each boot gained.
///
/// A record whose seq is above every seq of its boot already stored (the
/// store's own maximum, read once per boot in this transaction) and above
/// those before it in the batch cannot be a duplicate: runs of such
/// records, what an agent streaming live always sends, are stored with
/// multi-row INSERTs, a few hundred rows per statement. Any other record
/// (a replay after a lost ack, a repeated seq) goes alone through INSERT
/// OR IGNORE, which says whether it was new, unless a rollup replaced it
/// (raw retention pruned it): then it is a duplicate as it was before its
/// row went. Arrival order (the rowid, the remote_write log) is kept.
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
    // The highest seq each boot has had pruned: records at or below it
    // may be replays of what a rollup now holds.
    let pruned = boots
        .iter()
        .map(|b| retention::pruned_seq(conn, b.id))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut above = boots
        .iter()
        .zip(&pruned)
        .map(|(b, p)| Ok(stored_max_seq(conn, b.id)?.max(*p)))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut added = vec![BootAdded::default(); boots.len()];
    // The batch's kinds, looked up once each (a handful per batch).
    let mut kinds: Vec<(&'static str, i64)> = Vec::new();
    let mut run: Vec<layout::Row<'_>> = Vec::with_capacity(RUN_SIZES[0]);
    let mut single = conn.prepare_cached(layout::INSERT)?;
    for r in &batch.records {
        let kind = match kinds.iter().find(|(k, _)| *k == r.kind) {
            Some((_, id)) => *id,
            None => {
                let id = keys.kind(conn, r.kind)?;
                kinds.push((r.kind, id));
                id
            }
        };
        let row = layout::Row {
            pos: None,
            boot: &boots[r.boot],
            seq: r.seq,
            unix_ns: r.unix_ns,
            kind,
            raw: &r.raw,
        };
        let new = if r.seq > above[r.boot] {
            run.push(row);
            if run.len() == RUN_SIZES[0] {
                insert_run(conn, &mut run)?;
            }
            true
        } else {
            insert_run(conn, &mut run)?;
            let pruned_replay =
                r.seq <= pruned[r.boot] && retention::replaced(conn, boots[r.boot].id, r.seq)?;
            !pruned_replay && layout::insert_into(&mut single, &row)?
        };
        if new {
            let a = &mut added[r.boot];
            a.added += 1;
            a.max_seq = a.max_seq.max(r.seq);
            above[r.boot] = above[r.boot].max(r.seq);
        }
        inserted.push(new);
    }
    insert_run(conn, &mut run)?;
    Ok(added)
}

/// Stores `run` (records known to be new) with multi-row INSERTs and
/// empties it.
fn insert_run(conn: &Connection, run: &mut Vec<layout::Row<'_>>) -> rusqlite::Result<()> {
    let mut rest = &run[..];
    for n in RUN_SIZES {
        if rest.len() < n {
            continue;
        }
        let mut stmt = conn.prepare_cached(&layout::insert_rows(n))?;
        while rest.len() >= n {
            let (now, later) = rest.split_at(n);
            layout::insert_rows_into(&mut stmt, now)?;
            rest = later;
        }
    }
    run.clear();
    Ok(())
}

/// The highest seq stored for boot key `boot` (0 when none): one seek in
/// the (boot, seq) index.
fn stored_max_seq(conn: &Connection, boot: i64) -> rusqlite::Result<u64> {
    let v: Option<i64> = conn
        .prepare_cached("SELECT max(seq) FROM stored WHERE boot = ?1")?
        .query_row([boot], |r| r.get(0))?;
    Ok(v.unwrap_or(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{queries, schema, NewRecord, RecordFilter};

    use schema::memory as db;

    use crate::store::types::sample_record as rec;

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
        // 700 records: runs of every statement size, two boots interleaved.
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
        let all = queries::list_records(
            &c,
            &RecordFilter {
                limit: 1_000,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(all.len(), 704);
        for r in &all {
            assert_eq!(r.raw, r.seq.to_le_bytes(), "{r:?}");
            assert_eq!(r.kind, rec("x", r.seq).kind);
        }
        // Arrival order is the rowid order (remote_write's log).
        let order: Vec<(i64, i64)> = c
            .prepare("SELECT boot, seq FROM stored ORDER BY pos")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(order[..4], [(1, 1), (2, 1), (1, 2), (2, 2)]);
        assert_eq!(order[700..], [(1, 352), (1, 351), (1, 353), (1, 354)]);
    }

    #[test]
    fn the_highest_stored_seq_is_one_index_seek() {
        let c = db();
        let plan: String = c
            .query_row(
                "EXPLAIN QUERY PLAN SELECT max(seq) FROM stored WHERE boot = 1",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("stored_key"), "{plan}");
        assert_eq!(stored_max_seq(&c, 1).unwrap(), 0);
    }
}
