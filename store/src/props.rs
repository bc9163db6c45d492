//! Property test of the store's promise, whatever batches arrive: every
//! record is kept exactly once (a repeat, in the same batch or a later
//! one, is a duplicate; anything else is new), and reads back byte for
//! byte, in time order through the API's query and in store order at
//! dense positions through the remote_write log. Batches mix boots,
//! kinds, minutes, replays, holes and records another encoder wrote, so
//! packed rows, single rows and the sequence runs all meet.
//!
//! Fixed seed and committed regressions, as every property test here
//! (`boltwatch_common::testing`).

use std::collections::BTreeMap;

use crate::encoders::{arb_encoding, arb_record, reencode, Encoding};
use crate::layout::{self, Keys};
use crate::log;
use crate::pack;
use crate::rollup::MINUTE_NS;
use crate::{compact, insert, queries, schema, NewBatch, NewRecord, RecordFilter};
use boltwatch_common::testing::proptest_config;
use boltwatch_proto::v1::Record;
use proptest::prelude::*;
use prost::Message;
use rusqlite::Connection;

const BOOTS: [&str; 2] = ["b1", "b2"];
const KINDS: [&str; 3] = ["rtt", "counters", "thermal"];

/// One record of a boot: its time follows its seq (40 a minute), and every
/// eleventh is encoded without the boot's head first (kept whole, never
/// packed).
fn record(boot: usize, seq: u64, kind: usize) -> NewRecord {
    let mut raw = if seq.is_multiple_of(11) {
        Vec::new()
    } else {
        layout::head("n", BOOTS[boot])
    };
    raw.extend_from_slice(&seq.to_le_bytes());
    raw.push(kind as u8);
    NewRecord {
        node: "n".into(),
        boot_id: BOOTS[boot].into(),
        seq,
        unix_ns: seq / 40 * MINUTE_NS + seq % 40 * 1_000_000_000,
        kind: KINDS[kind],
        raw,
    }
}

/// Every stored record as (position, boot id, seq, stored bytes), in
/// position order, read from the rows themselves.
fn items(c: &Connection) -> Vec<(i64, i64, u64, Vec<u8>)> {
    let mut stmt = c
        .prepare("SELECT boot, pos, seq, unix_ns, whole, n, body FROM stored ORDER BY pos")
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let boot: i64 = r.get(0).unwrap();
        let row = layout::packed_row(r, 1).unwrap();
        pack::each(&row, |i| out.push((i.pos, boot, i.seq, i.body.to_vec()))).unwrap();
    }
    out
}

/// Mostly the next seq, as a live agent numbers them.
fn step() -> impl Strategy<Value = u64> {
    prop_oneof![16 => Just(1u64), 1 => Just(0u64), 1 => Just(2u64)]
}

proptest! {
    #![proptest_config(proptest_config(48))]

    /// Each drawn record is (boot, step, replay, kind): a boot's next seq
    /// is its last plus `step` (0 repeats it, 2 leaves a hole), or with
    /// `replay` set an earlier one, as an agent resending after a lost ack.
    #[test]
    fn every_record_is_kept_once_and_reads_back_whole(
        batches in prop::collection::vec(
            prop::collection::vec((0..2usize, step(), prop::option::weighted(0.05, 1..400u64), 0..3usize), 1..300),
            1..6,
        ),
        delivered in 0..2000i64,
    ) {
        let mut c = Connection::open_in_memory().unwrap();
        schema::migrate(&mut c).unwrap();
        let mut keys = Keys::default();
        let mut last = [0u64; 2];
        // The first record of each (boot, seq): what the store must keep.
        let mut kept: BTreeMap<(usize, u64), NewRecord> = BTreeMap::new();
        for batch in &batches {
            let drawn: Vec<(usize, u64, usize)> = batch
                .iter()
                .map(|&(b, step, replay, k)| {
                    let seq = replay.unwrap_or_else(|| {
                        last[b] = (last[b] + step).max(1);
                        last[b]
                    });
                    (b, seq, k)
                })
                .collect();
            let recs: Vec<NewRecord> = drawn.iter().map(|&(b, s, k)| record(b, s, k)).collect();
            let nb: NewBatch = recs.clone().into();
            let mut inserted = Vec::new();
            insert::insert_batch(&c, &mut keys, &nb, &mut inserted).unwrap();
            for ((&(b, s, _), r), new) in drawn.iter().zip(recs).zip(inserted) {
                prop_assert_eq!(new, !kept.contains_key(&(b, s)), "boot {} seq {}", b, s);
                kept.entry((b, s)).or_insert(r);
            }
        }
        let all = queries::list_records(&c, &RecordFilter { limit: 100_000, ..Default::default() }).unwrap();
        let key = |r: &NewRecord| (r.unix_ns, r.boot_id.clone(), r.seq);
        let mut want: Vec<_> = kept.values().map(|r| (key(r), r.kind.to_string(), r.raw.clone())).collect();
        want.sort();
        let got: Vec<_> = all
            .iter()
            .map(|r| ((r.unix_ns, r.boot_id.clone(), r.seq), r.kind.clone(), r.raw.clone()))
            .collect();
        // In time order as read, and the same records.
        prop_assert_eq!(got, want);
        let logged = log::read_after(&c, 0, 100_000).unwrap();
        let positions: Vec<i64> = logged.iter().map(|l| l.pos).collect();
        prop_assert_eq!(positions, (1..=kept.len() as i64).collect::<Vec<_>>());
        prop_assert_eq!(log::newest(&c).unwrap(), kept.len() as i64);

        // Compaction up to what an endpoint delivered (and what arrived
        // before the last round, which the task passes the same way):
        // the same records by time, the same dense positions, and every
        // position after the endpoint's naming the record it named before.
        let before = items(&c);
        loop {
            let tx = c.transaction().unwrap();
            let s = compact::compact_step(&tx, delivered + 1).unwrap();
            tx.commit().unwrap();
            prop_assert!(s.mark <= delivered.max(0));
            if s.done {
                break;
            }
        }
        let again = queries::list_records(&c, &RecordFilter { limit: 100_000, ..Default::default() }).unwrap();
        prop_assert_eq!(&again, &all);
        let logged = log::read_after(&c, 0, 100_000).unwrap();
        let positions: Vec<i64> = logged.iter().map(|l| l.pos).collect();
        prop_assert_eq!(positions, (1..=kept.len() as i64).collect::<Vec<_>>());
        let now = items(&c);
        let after = |l: &[(i64, i64, u64, Vec<u8>)]| l.iter().filter(|i| i.0 > delivered).cloned().collect::<Vec<_>>();
        prop_assert_eq!(after(&now), after(&before));
    }
}

/// Records as encoders other than prost write them (see
/// [`crate::encoders`]), numbered per boot as an agent does: one boot
/// whose node is named, one whose node is empty. Each with whether the
/// store must keep it whole.
fn from_encoders(drawn: &[(Record, Encoding, usize)]) -> Vec<(Record, NewRecord, bool)> {
    let mut last = [0u64; 2];
    drawn
        .iter()
        .map(|(r, e, b)| {
            last[*b] += 1;
            let mut r = r.clone();
            r.node = ["mini-a", ""][*b].into();
            r.boot_id = BOOTS[*b].into();
            r.seq = last[*b];
            r.unix_ns = last[*b] / 40 * MINUTE_NS + last[*b] % 40;
            let raw = reencode(&r.encode_to_vec(), e);
            let new = NewRecord {
                node: r.node.clone(),
                boot_id: r.boot_id.clone(),
                seq: r.seq,
                unix_ns: r.unix_ns,
                kind: boltwatch_proto::record_kind(&r),
                raw,
            };
            // Kept whole: the node twice, unless right after the head.
            let whole = e.node_twice && !new.raw.starts_with(&layout::head(&r.node, &r.boot_id));
            (r, new, whole)
        })
        .collect()
}

/// Every stored record, decoded, by (boot id, seq).
fn decoded(c: &Connection) -> BTreeMap<(String, u64), Record> {
    let all = queries::list_records(
        c,
        &RecordFilter {
            limit: 100_000,
            ..Default::default()
        },
    )
    .unwrap();
    all.iter()
        .map(|s| {
            (
                (s.boot_id.clone(), s.seq),
                Record::decode(&s.raw[..]).unwrap(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(proptest_config(48))]

    /// Whatever order, defaults and unknown fields the encoder wrote,
    /// every record reads back as bytes that decode to the record sent,
    /// before and after compaction; it is packed like prost's, and only a
    /// record that repeats its node field is kept whole (and counted).
    #[test]
    fn records_of_any_encoder_read_back_as_they_decode(
        drawn in prop::collection::vec((arb_record(), arb_encoding(), 0..2usize), 1..240),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut c = Connection::open_in_memory().unwrap();
        schema::migrate(&mut c).unwrap();
        let mut keys = Keys::default();
        let recs = from_encoders(&drawn);
        let at = cut.index(recs.len() + 1);
        let mut verbatim = 0;
        for part in [&recs[..at], &recs[at..]] {
            let nb: NewBatch = part.iter().map(|r| r.1.clone()).collect::<Vec<_>>().into();
            let mut inserted = Vec::new();
            let added = insert::insert_batch(&c, &mut keys, &nb, &mut inserted).unwrap();
            prop_assert!(inserted.iter().all(|n| *n));
            verbatim += added.iter().map(|a| a.verbatim).sum::<u64>();
        }
        let twice = recs.iter().filter(|r| r.2).count() as u64;
        prop_assert_eq!(verbatim, twice);
        let whole: u64 = c.query_row("SELECT count(*) FROM stored WHERE whole = 1", [], |r| r.get(0)).unwrap();
        prop_assert_eq!(whole, twice);
        let want: BTreeMap<(String, u64), Record> =
            recs.iter().map(|r| ((r.0.boot_id.clone(), r.0.seq), r.0.clone())).collect();
        prop_assert_eq!(&decoded(&c), &want);
        // Kept whole: byte for byte.
        let all = queries::list_records(&c, &RecordFilter { limit: 100_000, ..Default::default() }).unwrap();
        for (r, new, _) in recs.iter().filter(|r| r.2) {
            let got = all.iter().find(|s| s.boot_id == r.boot_id && s.seq == r.seq).unwrap();
            prop_assert_eq!(&got.raw, &new.raw);
        }
        loop {
            let tx = c.transaction().unwrap();
            let s = compact::compact_step(&tx, i64::MAX).unwrap();
            tx.commit().unwrap();
            if s.done {
                break;
            }
        }
        prop_assert_eq!(&decoded(&c), &want);
    }
}
