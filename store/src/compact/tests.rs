use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{InterfaceCounters, Record, RttSummary};

use super::*;
use crate::compact::task::run;
use crate::log;
use crate::types::encoded;
use crate::{insert, layout, queries, schema, NewRecord, RecordFilter, StoredRecord};

/// 2026-11-30T00:00:00Z, a minute boundary.
const M: u64 = 1_795_996_800_000_000_000;
const S: u64 = 1_000_000_000;
const BOOTS: [&str; 2] = ["b1", "b2"];

/// Record `seq` of `boot`, one a second from `M` (minute k holds seqs
/// 60k+1 ..= 60k+60): RTT windows at odd seqs, counters at even ones.
fn rec(boot: &str, seq: u64) -> NewRecord {
    let (kind, payload) = if seq % 2 == 1 {
        (
            "rtt",
            Payload::Rtt(RttSummary {
                peer: "p".into(),
                sent: seq,
                ..RttSummary::default()
            }),
        )
    } else {
        (
            "counters",
            Payload::Counters(InterfaceCounters {
                interface: "en1".into(),
                receive_bytes: seq,
                ..InterfaceCounters::default()
            }),
        )
    };
    let r = Record {
        node: "n".into(),
        boot_id: boot.into(),
        seq,
        unix_ns: M + (seq - 1) * S,
        payload: Some(payload),
    };
    encoded(&r, kind)
}

/// What live agents leave: both boots interleaved, a record a batch.
fn live(c: &Connection, seqs: std::ops::RangeInclusive<u64>) {
    for seq in seqs {
        for b in BOOTS {
            assert!(queries::insert_record(c, &rec(b, seq)).unwrap());
        }
    }
}

fn rows(c: &Connection) -> i64 {
    c.query_row("SELECT count(*) FROM stored", [], |r| r.get(0))
        .unwrap()
}

fn by_time(c: &Connection) -> Vec<StoredRecord> {
    let all = RecordFilter {
        limit: 100_000,
        ..Default::default()
    };
    queries::list_records(c, &all).unwrap()
}

/// Every record with its position, in store order.
fn by_pos(c: &Connection) -> Vec<(i64, Record)> {
    log::read_after(c, 0, 100_000)
        .unwrap()
        .into_iter()
        .map(|l| (l.pos, l.record.expect("every record decodes")))
        .collect()
}

fn step(c: &mut Connection, below: i64) -> Compacted {
    let tx = c.transaction().unwrap();
    let s = compact_step(&tx, below).unwrap();
    tx.commit().unwrap();
    s
}

#[test]
fn arrived_rows_become_a_pack_per_boot_kind_and_minute() {
    let mut c = schema::memory();
    live(&c, 1..=150);
    assert_eq!(rows(&c), 300);
    let (times, positions) = (by_time(&c), by_pos(&c));
    // Minutes 0 and 1 arrived before the last round; minute 2 since.
    let s = step(&mut c, 241);
    // Two minutes of two boots' two kinds.
    assert_eq!(
        (s.rows_read, s.rows_written, s.mark, s.done),
        (240, 8, 240, true)
    );
    assert_eq!(rows(&c), 8 + 60);
    // The same records, read by time or by position; the newest position
    // and every position after the run are as they were.
    assert_eq!(by_time(&c), times);
    let after = by_pos(&c);
    assert_eq!(after.len(), positions.len());
    assert_eq!(after[240..], positions[240..]);
    assert_eq!(insert::newest_pos(&c).unwrap(), 300);
    // Positions stay dense, and each (boot, kind) replays in seq order.
    let dense: Vec<i64> = after.iter().map(|(p, _)| *p).collect();
    assert_eq!(dense, (1..=300).collect::<Vec<_>>());
    let mut last: HashMap<(String, bool), u64> = HashMap::new();
    for (_, r) in &after {
        let key = (r.boot_id.clone(), r.seq % 2 == 1);
        let prev = last.insert(key, r.seq).unwrap_or(0);
        assert!(r.seq > prev, "{} seq {} after {prev}", r.boot_id, r.seq);
    }
    // Nothing more until the next round.
    let again = step(&mut c, 241);
    assert_eq!((again.rows_read, again.mark, again.done), (0, 240, true));
    // New records keep coming after the newest position.
    live(&c, 151..=151);
    assert_eq!(by_pos(&c).last().unwrap().0, 302);
}

#[test]
fn rows_not_delivered_everywhere_stay_where_they_are() {
    let mut c = schema::memory();
    live(&c, 1..=120);
    let before = by_pos(&c);
    // An endpoint has delivered up to position 100.
    let s = step(&mut c, 101);
    assert_eq!((s.mark, s.done), (100, true));
    let after = by_pos(&c);
    assert_eq!(after[100..], before[100..]);
    let fresh = schema::memory();
    live(&fresh, 1..=120);
    assert_eq!(by_time(&c), by_time(&fresh));
    // Delivered further: the rest of those minutes follows.
    let s = step(&mut c, i64::MAX);
    assert_eq!((s.rows_read, s.mark, s.done), (140, 240, true));
    assert_eq!(by_pos(&c).len(), 240);
}

#[test]
fn catch_up_packs_are_left_as_they_are() {
    let mut c = schema::memory();
    let batch: Vec<NewRecord> = (1..=120).map(|s| rec("b1", s)).collect();
    let mut inserted = Vec::new();
    let mut keys = layout::Keys::default();
    insert::insert_batch(&c, &mut keys, &batch.into(), &mut inserted).unwrap();
    let n = rows(&c);
    let positions = by_pos(&c);
    let s = step(&mut c, i64::MAX);
    assert_eq!((s.rows_read, s.rows_written), (n as u64, n as u64));
    assert_eq!(by_pos(&c), positions);
}

#[test]
fn a_damaged_row_ends_a_run_and_is_passed_over_untouched() {
    let mut c = schema::memory();
    // Singles at 1..=40, two packs of b1 (RTT at 41..=45, counters at
    // 46..=50), singles at 51..=70.
    live(&c, 1..=20);
    let batch: Vec<NewRecord> = (21..=30).map(|s| rec("b1", s)).collect();
    let mut inserted = Vec::new();
    insert::insert_batch(
        &c,
        &mut layout::Keys::default(),
        &batch.into(),
        &mut inserted,
    )
    .unwrap();
    live(&c, 31..=40);
    assert_eq!(rows(&c), 62);
    c.execute("UPDATE stored SET body = x'0102' WHERE pos = 45", [])
        .unwrap();
    // What readers see: everything but the damaged pack's five records.
    let readable = by_time(&c);
    assert_eq!(readable.len(), 65);
    let s = step(&mut c, i64::MAX);
    assert_eq!((s.rows_read, s.mark, s.done), (40, 40, false));
    let s = step(&mut c, i64::MAX);
    assert_eq!((s.rows_read, s.mark, s.done), (0, 45, false));
    let s = step(&mut c, i64::MAX);
    assert_eq!((s.rows_read, s.mark, s.done), (21, 70, true));
    let damaged: (i64, Vec<u8>) = c
        .query_row("SELECT n, body FROM stored WHERE pos = 45", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(damaged, (5, vec![1, 2]));
    assert_eq!(by_time(&c), readable);
    assert_eq!(insert::newest_pos(&c).unwrap(), 70);
}

/// A whole record (one that repeats its node field) between packable ones
/// of its boot and kind keeps its place: the run becomes pack, record,
/// pack, so the series replays in store order.
#[test]
fn a_whole_record_keeps_its_place_among_its_series() {
    let mut c = schema::memory();
    for seq in 1..=9u64 {
        let mut r = rec("b1", seq * 2 - 1);
        if seq == 5 {
            // boot_id (field 2) before node (field 1), twice: the same
            // record, but its head cannot be cut out.
            let rest = r.raw.split_off(layout::head("n", "b1").len());
            let node = [&[0x0a, 1][..], b"n"].concat();
            r.raw = [&[0x12, 2][..], b"b1", &node, &node, &rest].concat();
        }
        assert!(queries::insert_record(&c, &r).unwrap());
    }
    let s = step(&mut c, i64::MAX);
    assert_eq!((s.rows_read, s.rows_written), (9, 3));
    let seqs: Vec<u64> = log::read_after(&c, 0, 100)
        .unwrap()
        .iter()
        .map(|l| l.record.as_ref().map_or(0, |r| r.seq))
        .collect();
    assert_eq!(seqs, [1, 3, 5, 7, 9, 11, 13, 15, 17]);
}

/// (rows, records) in a store the task runs on.
async fn stored(h: &crate::StoreHandle) -> (i64, i64) {
    h.read_sql(|c| {
        c.query_row(
            "SELECT count(*), coalesce(sum(n), 0) FROM stored",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_task_compacts_what_arrived_before_each_round() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::Store::open(dir.path()).unwrap();
    let h = store.handle();
    let live_batch =
        |from: u64| -> Vec<NewRecord> { (from..from + 60).map(|s| rec("b1", s)).collect() };
    for r in live_batch(1) {
        h.write_batch(vec![r]).await.unwrap();
    }
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let every = std::time::Duration::from_millis(50);
    let task = tokio::spawn(run(h.clone(), Vec::new(), every, stop.clone()));
    // Rows stored before the start count as arrived: one pack per kind.
    let until = |done: fn((i64, i64)) -> bool| {
        let h = h.clone();
        async move {
            for _ in 0..400 {
                if done(stored(&h).await) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            panic!("store stayed at {:?}", stored(&h).await);
        }
    };
    until(|s| s == (2, 60)).await;
    // Rows that arrive later are taken a round after they arrived: the
    // mark reaches the newest position. (How they pack depends on how the
    // 50 ms rounds cut them, so only that none is lost is asserted.)
    for r in live_batch(61) {
        h.write_batch(vec![r]).await.unwrap();
    }
    for _ in 0..400 {
        let (m, newest) = h
            .read_sql(|c| Ok((mark(c)?, insert::newest_pos(c)?)))
            .await
            .unwrap();
        if m == newest {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let (rows, records) = stored(&h).await;
    assert_eq!(records, 120);
    assert!(rows <= 2 + 60, "{rows} rows");
    assert_eq!(h.read_sql(mark).await.unwrap(), 120);
    // A configured endpoint that has delivered nothing holds every row.
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    let (rows, _) = stored(&h).await;
    for r in live_batch(121) {
        h.write_batch(vec![r]).await.unwrap();
    }
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let held = tokio::spawn(run(
        h.clone(),
        vec!["http://vm/api/v1/write".into()],
        every,
        stop,
    ));
    tokio::time::sleep(every * 6).await;
    assert_eq!(stored(&h).await, (rows + 60, 180));
    held.abort();
    store.close().await;
}

#[test]
fn a_step_reads_a_bounded_number_of_records() {
    let mut c = schema::memory();
    let per_boot = STEP_RECORDS / 2 + 30;
    let tx = c.transaction().unwrap();
    for seq in 1..=per_boot {
        for b in BOOTS {
            queries::insert_record(&tx, &rec(b, seq)).unwrap();
        }
    }
    tx.commit().unwrap();
    let first = step(&mut c, i64::MAX);
    assert_eq!((first.rows_read, first.done), (STEP_RECORDS, false));
    let second = step(&mut c, i64::MAX);
    assert_eq!((second.rows_read, second.done), (60, true));
    assert_eq!(by_pos(&c).len() as u64, 2 * per_boot);
}

#[test]
fn a_step_holds_a_bounded_number_of_bytes() {
    let mut c = schema::memory();
    // 200 records of 100 KiB each: 20 MiB, over one step's bound.
    for seq in 1..=200u64 {
        let r = Record {
            node: "n".into(),
            boot_id: "b1".into(),
            seq,
            unix_ns: M + seq * S,
            payload: Some(Payload::Rtt(RttSummary {
                peer: "p".repeat(100 << 10),
                ..RttSummary::default()
            })),
        };
        assert!(queries::insert_record(&c, &encoded(&r, "rtt")).unwrap());
    }
    let before = by_time(&c);
    let first = step(&mut c, i64::MAX);
    assert!(!first.done && first.rows_read * 100 * 1024 <= STEP_BYTES);
    let mut total = first.rows_read;
    loop {
        let s = step(&mut c, i64::MAX);
        total += s.rows_read;
        if s.done {
            break;
        }
    }
    assert_eq!(total, 200);
    // Packs of at most 256 KiB: two of these records each, and an odd one
    // left at the end of each of the two steps.
    assert!((100..=102).contains(&rows(&c)), "{} rows", rows(&c));
    let after = by_time(&c);
    let seqs = |v: &[StoredRecord]| v.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&after), seqs(&before));
    assert!(after == before, "the records' bytes changed");
}
