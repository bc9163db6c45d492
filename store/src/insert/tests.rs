use super::*;
use crate::{layout, queries, schema, NewRecord, RecordFilter};

use schema::memory as db;

use crate::types::sample_record as rec;

/// Every stored record (of the few hundred a test writes), by time.
fn everything(c: &Connection) -> Vec<crate::StoredRecord> {
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

fn insert(c: &Connection, keys: &mut Keys, recs: Vec<NewRecord>) -> (Vec<bool>, Vec<BootAdded>) {
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
            max_seq: 350,
            verbatim: 350,
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
                max_seq: 354,
                verbatim: 4,
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
    use crate::rollup::MINUTE_NS;
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
    let log = crate::log::read_after(&c, 50, 1_000).unwrap();
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
    assert_eq!(crate::seqs::highest(&c, 1).unwrap(), 200);
}

#[test]
fn a_batch_over_many_minutes_keeps_few_packs_open_and_loses_nothing() {
    use crate::rollup::MINUTE_NS;
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

/// A record another encoder wrote (boot id, then node, after the rest),
/// as an earlier build stored it: whole, verbatim. It still reads back
/// byte for byte beside the same encoder's next record, which this build
/// stores after the boot's head.
#[test]
fn a_row_an_earlier_build_kept_whole_still_reads() {
    use prost::Message;
    let c = db();
    let mut keys = Keys::default();
    let reversed = |seq: u64| {
        let r = boltwatch_proto::v1::Record {
            node: "a".into(),
            boot_id: "b1".into(),
            seq,
            unix_ns: 1_000 + seq,
            payload: None,
        };
        let mut raw = vec![0x20];
        prost::encoding::encode_varint(r.unix_ns, &mut raw);
        raw.extend([0x18, seq as u8, 0x12, 2, b'b', b'1', 0x0a, 1, b'a']);
        assert_eq!(boltwatch_proto::v1::Record::decode(&raw[..]).unwrap(), r);
        raw
    };
    let boot = keys.boot(&c, "a", "b1").unwrap();
    let kind = keys.kind(&c, "unknown").unwrap();
    let old = reversed(1);
    NewRow {
        pos: 1,
        boot: boot.id,
        seq: 1,
        unix_ns: 1_001,
        kind,
        whole: true,
        n: 1,
        body: &old,
    }
    .insert(&c)
    .unwrap();
    crate::seqs::add(&c, boot.id, 1, 1).unwrap();
    let mut new = rec("b1", 2);
    new.kind = "unknown";
    new.raw = reversed(2);
    let (inserted, added) = insert(&c, &mut keys, vec![new]);
    assert_eq!((inserted, added[0].verbatim), (vec![true], 0));
    let rows = two_columns(&c, "SELECT seq, whole FROM stored ORDER BY pos");
    assert_eq!(rows, [(1, 1), (2, 0)]);
    let all = everything(&c);
    assert_eq!(all[0].raw, old);
    // The new one: head first, the same record.
    assert_eq!(
        all[1].raw,
        [&layout::head("a", "b1")[..], &reversed(2)[..5]].concat()
    );
}
