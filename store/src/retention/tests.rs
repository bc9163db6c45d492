use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{RttSummary, ThermalReading};

use super::*;
use crate::layout::Keys;
use crate::types::encoded;
use crate::{queries, schema, NewBatch, NewRecord};

/// 2026-11-30T00:00:00Z, a minute boundary.
const M: u64 = 1_795_996_800_000_000_000;
const S: u64 = 1_000_000_000;

use schema::memory as store;

/// Record `seq` of boot (a, b1) at `M + (seq - 1) s`: RTT windows, except
/// every 30th, which is a thermal reading (a sparse kind).
fn put(c: &Connection, seq: u64) {
    put_at(c, seq, M + (seq - 1) * S, seq.is_multiple_of(30));
}

fn put_at(c: &Connection, seq: u64, unix_ns: u64, thermal: bool) {
    let (kind, payload) = if thermal {
        ("thermal", Payload::Thermal(ThermalReading::default()))
    } else {
        (
            "rtt",
            Payload::Rtt(RttSummary {
                peer: "b".into(),
                window_ns: S,
                sent: 10,
                received: 10,
                sum_ns: 800_000,
                ..RttSummary::default()
            }),
        )
    };
    let r = Record {
        node: "a".into(),
        boot_id: "b1".into(),
        seq,
        unix_ns,
        payload: Some(payload),
    };
    assert!(queries::insert_record(c, &encoded(&r, kind)).unwrap());
}

fn step(c: &mut Connection, cutoff: u64, below: i64) -> Pruned {
    let tx = c.transaction().unwrap();
    let p = prune_step(&tx, cutoff, below).unwrap();
    tx.commit().unwrap();
    p
}

fn left(c: &Connection) -> Vec<u64> {
    let mut s = c.prepare("SELECT seq FROM stored ORDER BY seq").unwrap();
    s.query_map([], |r| r.get::<_, i64>(0).map(|v| v as u64))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

#[test]
fn a_remote_write_hold_keeps_its_whole_minute_and_what_follows() {
    let mut c = store();
    for seq in 1..=180 {
        put(&c, seq);
    }
    // Position 90 (seq 90, in the second minute) is not delivered yet.
    let p = step(&mut c, M + 10 * MINUTE_NS, 90);
    assert_eq!(p.until_ns, M + MINUTE_NS);
    assert!(p.done);
    // The first minute's 58 RTT records went; its 2 thermals stayed.
    assert_eq!((p.records, p.rollups), (58, 1));
    let kept = left(&c);
    assert_eq!(kept[..2], [30, 60]);
    assert_eq!(kept[2..], (61..=180).collect::<Vec<_>>()[..]);

    // Delivered: the rest goes, but not past the cutoff's minute.
    let p = step(&mut c, M + 2 * MINUTE_NS + 30 * S, i64::MAX);
    assert_eq!(
        (p.records, p.until_ns, p.done),
        (58, M + 2 * MINUTE_NS, true)
    );
    let kept = left(&c);
    assert_eq!(kept[..4], [30, 60, 90, 120]);
    assert_eq!(kept[4..], (121..=180).collect::<Vec<_>>()[..]);
    assert_eq!(pruned_until(&c).unwrap(), M + 2 * MINUTE_NS);
}

#[test]
fn steps_are_bounded_and_resume_at_the_mark() {
    let mut c = store();
    for seq in 1..=(25 * 60) {
        put(&c, seq);
    }
    let cutoff = M + 30 * MINUTE_NS;
    let first = step(&mut c, cutoff, i64::MAX);
    assert_eq!((first.until_ns, first.done), (M + STEP_NS, false));
    assert_eq!(first.rollups, 10);
    let second = step(&mut c, cutoff, i64::MAX);
    assert_eq!(second.until_ns, M + 2 * STEP_NS);
    let third = step(&mut c, cutoff, i64::MAX);
    // Records end at minute 25: the mark jumps to the cutoff.
    assert_eq!(
        (third.until_ns, third.done, third.rollups),
        (cutoff, true, 5)
    );
    let rtt = 25 * 60 - 25 * 2;
    assert_eq!(first.records + second.records + third.records, rtt);
    assert_eq!(left(&c).len(), 50);
    // Nothing left: a step is a no-op.
    let again = step(&mut c, cutoff, i64::MAX);
    assert_eq!(
        (again.records, again.until_ns, again.done),
        (0, cutoff, true)
    );
}

fn rollup_of_first_minute(c: &Connection) -> Rollup {
    let body: Vec<u8> = c
        .query_row(
            "SELECT body FROM rollups WHERE minute = ?1",
            [M as i64],
            |r| r.get(0),
        )
        .unwrap();
    Rollup::decode(body.as_slice()).unwrap()
}

#[test]
fn a_late_record_behind_the_mark_is_folded_into_its_rollup_at_the_next_step() {
    let mut c = store();
    for seq in (1..=60).filter(|s| *s != 7) {
        put(&c, seq);
    }
    step(&mut c, M + MINUTE_NS, i64::MAX);
    // Seq 7 arrives late, behind the mark (a spool replayed after an
    // outage longer than raw retention): raw until the next step.
    put(&c, 7);
    let r = rollup_of_first_minute(&c);
    assert_eq!(r.records, 57);
    assert!(!r.replaced(7) && r.replaced(6) && r.replaced(8));
    assert_eq!(left(&c), [7, 30, 60]);
    // Not before remote_write has delivered it (position 60).
    let held = step(&mut c, M + MINUTE_NS, 60);
    assert_eq!(held.records, 0);
    assert_eq!(left(&c), [7, 30, 60]);
    // Then the next step folds it in, whatever the cutoff.
    let p = step(&mut c, M + MINUTE_NS, i64::MAX);
    assert_eq!((p.records, p.rollups, p.until_ns), (1, 1, M + MINUTE_NS));
    let r = rollup_of_first_minute(&c);
    assert_eq!(r.records, 58);
    assert!(r.replaced(7));
    assert_eq!(left(&c), [30, 60]);
    assert_eq!(status(&c).unwrap(), (M + MINUTE_NS, 58));
    // Its position is never handed out again.
    put(&c, 61);
    let newest: i64 = c
        .query_row("SELECT max(pos) FROM stored", [], |r| r.get(0))
        .unwrap();
    assert_eq!(newest, 61);
}

#[test]
fn late_rows_are_looked_for_in_bounded_steps() {
    let mut c = store();
    put(&c, 1);
    step(&mut c, M + 10 * MINUTE_NS, i64::MAX);
    // More late RTT records than one step takes, one row each.
    let late = STEP_RECORDS as u64 + 10;
    for seq in 2..=late + 1 {
        put_at(&c, seq, M + (seq % 600) * S, false);
    }
    let first = step(&mut c, M + 10 * MINUTE_NS, i64::MAX);
    assert!(!first.done);
    assert_eq!(first.records, STEP_RECORDS as u64);
    let second = step(&mut c, M + 10 * MINUTE_NS, i64::MAX);
    assert!(second.done);
    assert_eq!(first.records + second.records, late);
    assert!(left(&c).is_empty());
}

#[test]
fn a_minute_over_the_row_bound_is_pruned_over_two_steps() {
    let mut c = store();
    let n = STEP_RECORDS as u64 + 10_000;
    let tx = c.transaction().unwrap();
    for seq in 1..=n {
        put_at(&tx, seq, M + seq * 900_000, false);
    }
    tx.commit().unwrap();
    let cutoff = M + 10 * MINUTE_NS;
    let first = step(&mut c, cutoff, i64::MAX);
    assert_eq!(
        (first.records, first.until_ns, first.done),
        (STEP_RECORDS as u64, M, false)
    );
    let second = step(&mut c, cutoff, i64::MAX);
    assert_eq!((second.records, second.done), (10_000, true));
    let (records, runs): (i64, Vec<u8>) = c
        .query_row("SELECT records, body FROM rollups", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(records as u64, n);
    assert_eq!(Rollup::decode(runs.as_slice()).unwrap().seq_runs, [1, n]);
    assert!(left(&c).is_empty());
}

/// Records as large as a node may send: a step stops at its byte bound,
/// in the middle of the minute, and the next merges the rest.
#[test]
fn a_minute_over_the_byte_bound_is_pruned_over_two_steps() {
    let mut c = store();
    for seq in 1..=200u64 {
        let r = Record {
            node: "a".into(),
            boot_id: "b1".into(),
            seq,
            unix_ns: M + seq * 100_000_000,
            payload: Some(Payload::Rtt(RttSummary {
                peer: "p".repeat(100 << 10),
                window_ns: S,
                ..RttSummary::default()
            })),
        };
        assert!(queries::insert_record(&c, &encoded(&r, "rtt")).unwrap());
    }
    let cutoff = M + 10 * MINUTE_NS;
    let first = step(&mut c, cutoff, i64::MAX);
    assert!(!first.done && first.records < 200, "{first:?}");
    assert!(first.records as usize * (100 << 10) <= 2 * STEP_BYTES);
    let second = step(&mut c, cutoff, i64::MAX);
    assert_eq!((first.records + second.records, second.done), (200, true));
    let records: i64 = c
        .query_row("SELECT records FROM rollups", [], |r| r.get(0))
        .unwrap();
    assert_eq!(records, 200);
    assert!(left(&c).is_empty());
}

#[test]
fn a_step_over_the_row_bound_stops_at_a_whole_minute() {
    let mut c = store();
    // 30 000 records in each of two minutes: the bound falls in the second.
    let tx = c.transaction().unwrap();
    for seq in 1..=60_000u64 {
        put_at(&tx, seq, M + (seq - 1) * 2_000_000, false);
    }
    tx.commit().unwrap();
    let first = step(&mut c, M + 10 * MINUTE_NS, i64::MAX);
    assert_eq!(
        (first.records, first.until_ns, first.done),
        (30_000, M + MINUTE_NS, false)
    );
    assert_eq!(left(&c).first(), Some(&30_001));
    let second = step(&mut c, M + 10 * MINUTE_NS, i64::MAX);
    assert_eq!((second.records, second.done), (30_000, true));
}

#[test]
fn a_replay_of_a_pruned_record_is_a_duplicate_even_above_the_stored_max() {
    let mut c = store();
    // Only dense records: after pruning the boot has no stored row, so
    // only the pruned seqs tell a replay from a new record.
    for seq in 1..=60 {
        put_at(&c, seq, M + (seq - 1) * S, false);
    }
    step(&mut c, M + MINUTE_NS, i64::MAX);
    assert!(left(&c).is_empty());
    let replay = |seqs: std::ops::RangeInclusive<u64>| -> NewBatch {
        let v: Vec<NewRecord> = seqs
            .map(|seq| NewRecord {
                node: "a".into(),
                boot_id: "b1".into(),
                seq,
                unix_ns: M + (seq - 1) * S,
                kind: "rtt",
                raw: vec![1, 2, 3],
            })
            .collect();
        v.into()
    };
    let tx = c.transaction().unwrap();
    let mut keys = Keys::default();
    // 58..=62: three pruned, two new.
    let batch = replay(58..=62);
    let mut inserted = Vec::new();
    let added = crate::insert::insert_batch(&tx, &mut keys, &batch, &mut inserted).unwrap();
    assert_eq!(inserted, [false, false, false, true, true]);
    assert_eq!(added[0].added, 2);
    tx.commit().unwrap();
    assert_eq!(left(&c), [61, 62]);
}

#[test]
fn a_store_before_version_6_scans_no_rollups() {
    let c = store();
    c.execute_batch("DROP TABLE rollups").unwrap();
    let mut n = 0;
    scan(&c, 0, u64::MAX, |_| n += 1).unwrap();
    assert_eq!(n, 0);
}

/// Positions are what remote write resumes from: one an endpoint was given
/// must never name another record. Pruning the newest rows (a store idle
/// for longer than raw retention) must not let new rows take their
/// positions, or an endpoint at the old newest would skip the new records.
#[test]
fn pruning_the_newest_rows_does_not_hand_their_positions_out_again() {
    let mut c = store();
    for seq in 1..=29 {
        put(&c, seq);
    }
    let newest = crate::insert::newest_pos(&c).unwrap();
    assert_eq!(newest, 29);
    // Everything delivered and older than the cutoff: every row goes.
    let p = step(&mut c, M + 10 * MINUTE_NS, i64::MAX);
    assert_eq!(p.records, 29);
    assert!(left(&c).is_empty());
    assert_eq!(crate::insert::newest_pos(&c).unwrap(), newest);
    // The agent comes back: its records follow the pruned ones.
    put_at(&c, 30, M + 20 * MINUTE_NS, false);
    let after = crate::log::read_after(&c, newest, 10).unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].pos, newest + 1);
}
