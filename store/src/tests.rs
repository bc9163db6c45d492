//! The store through its handle: batches, dedupe, reopening, damage, and
//! the migration of a version-4 file.

use super::*;
use rusqlite::Connection;

fn rec(seq: u64) -> NewRecord {
    NewRecord {
        node: "a".into(),
        boot_id: "b1".into(),
        seq,
        unix_ns: seq,
        kind: "rtt",
        raw: vec![1, 2, 3],
    }
}

#[tokio::test]
async fn damage_found_while_running_fails_health_and_refuses_batches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let h = store.handle();
    for k in 0..20u64 {
        let batch: Vec<NewRecord> = (1..=200)
            .map(|s| NewRecord {
                raw: vec![7; 200],
                ..rec(k * 200 + s)
            })
            .collect();
        h.write_batch(batch).await.unwrap();
    }
    let path = dir.path().join("boltwatch.db");
    let side = Connection::open(&path).unwrap();
    side.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(side);
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    assert!(bytes.len() > 32 * page, "{} bytes", bytes.len());
    let mid = bytes.len() / 2 / page * page;
    for (i, b) in bytes[mid..mid + 4 * page].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151) ^ 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    // A reader (a fresh connection) walks the records and trips on it.
    let read = h
        .records(RecordFilter {
            limit: 10_000,
            ..Default::default()
        })
        .await;
    assert!(read.is_err(), "a damaged b-tree must fail the scan");
    let e = h.ping().await.unwrap_err().to_string();
    assert!(e.contains("damaged") && e.contains("boltwatch.db"), "{e}");
    let e = h.write_batch(vec![rec(99_999)]).await.unwrap_err();
    assert!(matches!(e, StoreError::Damaged { .. }), "{e}");
    store.close().await;
}

#[tokio::test]
async fn batch_commits_dedups_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let h = store.handle();
    let out = h.write_batch(vec![rec(1), rec(2), rec(2)]).await.unwrap();
    assert_eq!(out.inserted, [true, true, false]);
    assert_eq!(out.duplicates, 1);
    assert_eq!(out.total_records, 2);
    assert_eq!(
        out.watermarks,
        [Watermark {
            boot_id: "b1".into(),
            highest_seq: 2
        }]
    );
    h.ping().await.unwrap();
    let boots = h.boots().await.unwrap();
    assert_eq!((boots[0].records, boots[0].gaps()), (2, 0));
    store.close().await;
    assert!(matches!(h.ping().await, Err(StoreError::Closed)));

    let store = Store::open(dir.path()).unwrap();
    let h = store.handle();
    let out = h.write_batch(vec![rec(5)]).await.unwrap();
    assert_eq!(out.total_records, 3);
    assert_eq!(out.watermarks[0].highest_seq, 5);
    assert_eq!(h.boots().await.unwrap()[0].gaps(), 2);
    let recs = h
        .records(RecordFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].raw, vec![1, 2, 3]);
    store.close().await;
}

/// Record bytes for the migration test: canonical prost encodings with a
/// few payload kinds, one with an unknown payload field (a newer agent's
/// kind), and one whose fields come in another order (not canonical).
fn v4_record(node: &str, boot: &str, seq: u64) -> (u64, &'static str, Vec<u8>) {
    use boltwatch_proto::v1::record::Payload;
    use boltwatch_proto::v1::{Outage, Record, RttSummary, ThermalReading};
    use prost::Message;
    let t = 1_795_996_800_000_000_000 + seq * 1_000_000_000 + (node.len() as u64);
    let (kind, payload) = match seq % 5 {
        0 => (
            "outage",
            Some(Payload::Outage(Outage {
                peer: "mini-z".into(),
                start_unix_ns: t,
                ..Default::default()
            })),
        ),
        1 => ("thermal", Some(Payload::Thermal(ThermalReading::default()))),
        _ => (
            "rtt",
            Some(Payload::Rtt(RttSummary {
                peer: "mini-z".into(),
                sent: 10,
                received: 10,
                sum_ns: seq * 700_000,
                ..Default::default()
            })),
        ),
    };
    let r = Record {
        node: node.into(),
        boot_id: boot.into(),
        seq,
        unix_ns: t,
        payload,
    };
    let mut raw = r.encode_to_vec();
    if seq % 7 == 3 {
        // Field 111, length-delimited: a payload kind this build lacks.
        raw = Record { payload: None, ..r }.encode_to_vec();
        raw.extend_from_slice(&[0xfa, 0x06, 0x03, 0x08, 0x96, 0x01]);
        return (t, "unknown", raw);
    }
    if seq % 11 == 4 {
        // seq before node and boot_id: valid protobuf, not canonical.
        let mut tail = Record { seq: 0, ..r }.encode_to_vec();
        raw = vec![0x18, seq as u8];
        raw.append(&mut tail);
    }
    (t, kind, raw)
}

#[tokio::test]
async fn a_version_4_store_migrates_with_every_record_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("boltwatch.db");
    let c = Connection::open(&path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    for sql in &schema::MIGRATIONS[..4] {
        c.execute_batch(sql).unwrap();
    }
    c.pragma_update(None, "user_version", 4).unwrap();
    let boots = [
        ("mini-a", "0123456789abcdef0123456789abcdef"),
        ("mini-b", "b2"),
        ("mini-a", "b3"),
    ];
    let mut want = Vec::new();
    // Interleaved across boots, newest seq first for one of them, so the
    // log order is neither time nor key order.
    for k in 1..=120u64 {
        for (i, (node, boot)) in boots.iter().enumerate() {
            let seq = if i == 1 { 121 - k } else { k };
            let (t, kind, raw) = v4_record(node, boot, seq);
            c.execute(
                "INSERT OR IGNORE INTO records (node, boot_id, seq, unix_ns, kind, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![node, boot, seq as i64, t as i64, kind, raw],
            )
            .unwrap();
            want.push((
                node.to_string(),
                boot.to_string(),
                seq,
                t,
                kind.to_string(),
                raw,
            ));
        }
    }
    for (node, boot) in boots {
        queries::add_boot_records(&c, node, boot, 5, 120, 120).unwrap();
    }
    c.execute(
        "INSERT INTO remote_write_positions (endpoint, pos, updated_unix_ns) VALUES ('http://vm', 200, 1)",
        [],
    )
    .unwrap();
    let log_sql = "SELECT pos, node, boot_id, seq FROM record_log ORDER BY pos";
    let log = |c: &Connection| -> rusqlite::Result<Vec<(i64, String, String, i64)>> {
        let mut stmt = c.prepare(log_sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        rows.collect()
    };
    let log_before = log(&c).unwrap();
    assert_eq!(log_before.len(), 360);
    drop(c);

    let store = Store::open(dir.path()).unwrap();
    let h = store.handle();
    let version: i64 = h
        .read_sql(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
        .await
        .unwrap();
    assert_eq!(version, schema::VERSION);
    // The rewrite's leftovers went back to the file system.
    let free: i64 = h
        .read_sql(|c| c.query_row("PRAGMA freelist_count", [], |r| r.get(0)))
        .await
        .unwrap();
    assert_eq!(free, 0, "the upgrade left free pages in the file");
    // Every record, byte for byte, through the API's query...
    let mut got: Vec<_> = h
        .records(RecordFilter {
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.node, r.boot_id, r.seq, r.unix_ns, r.kind, r.raw))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // ...and in the report's scan.
    let mut scanned = h
        .read_sql(|c| {
            let mut v = Vec::new();
            crate::scan::scan(c, 0, i64::MAX as u64, |s| {
                if let crate::Scanned::Record {
                    node,
                    boot_id,
                    seq,
                    unix_ns,
                    raw,
                } = s
                {
                    v.push((
                        node.to_string(),
                        boot_id.to_string(),
                        seq,
                        unix_ns,
                        raw.to_vec(),
                    ))
                }
            })?;
            Ok(v)
        })
        .await
        .unwrap();
    scanned.sort();
    let mut want_scan: Vec<_> = want
        .iter()
        .map(|w| (w.0.clone(), w.1.clone(), w.2, w.3, w.5.clone()))
        .collect();
    // Nothing is before 0, so no outage is listed twice.
    want_scan.sort();
    assert_eq!(scanned, want_scan);
    // The remote_write log keeps its positions; the endpoint's too.
    let log_after: Vec<(i64, String, String, i64)> = h
        .read_sql(|c| crate::log::read_after(c, 0, 1_000))
        .await
        .unwrap()
        .into_iter()
        .map(|l| {
            let r = l.record.expect("a migrated record decodes");
            (l.pos, r.node, r.boot_id, r.seq as i64)
        })
        .collect();
    assert_eq!(log_after, log_before);
    let saved = h
        .read_sql(|c| crate::log::position(c, "http://vm"))
        .await
        .unwrap();
    assert_eq!(saved, 200);
    // Boot counters and dedupe carry on: a stored seq is a duplicate, a
    // new one is logged after every migrated record.
    let boots_after = h.boots().await.unwrap();
    assert_eq!(boots_after.iter().map(|b| b.records).sum::<u64>(), 360);
    let (t, kind, raw) = v4_record("mini-b", "b2", 7);
    let (t2, kind2, raw2) = v4_record("mini-b", "b2", 121);
    let out = h
        .write_batch(vec![
            NewRecord {
                node: "mini-b".into(),
                boot_id: "b2".into(),
                seq: 7,
                unix_ns: t,
                kind,
                raw,
            },
            NewRecord {
                node: "mini-b".into(),
                boot_id: "b2".into(),
                seq: 121,
                unix_ns: t2,
                kind: kind2,
                raw: raw2.clone(),
            },
        ])
        .await
        .unwrap();
    assert_eq!(out.inserted, [false, true]);
    assert_eq!(out.total_records, 361);
    let last = log_before.last().unwrap().0;
    let after = h
        .read_sql(move |c| crate::log::read_after(c, last, 10))
        .await
        .unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].pos, last + 1);
    store.close().await;
}

/// Batches of several boots sent at once are stored in shared
/// transactions; each answer still describes its own batch.
#[tokio::test]
async fn concurrent_batches_are_grouped_and_answered_each() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let h = store.handle();
    let mut tasks = Vec::new();
    for b in 0..6u64 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move {
            let boot = format!("boot-{b}");
            let mut last_total = 0;
            for k in 0..15u64 {
                // Each batch repeats the previous batch's last seq.
                let first = (k * 10).max(1);
                let batch: Vec<NewRecord> = (first..=k * 10 + 10)
                    .map(|s| NewRecord {
                        boot_id: boot.clone(),
                        ..rec(s)
                    })
                    .collect();
                let out = h.write_batch(batch).await.unwrap();
                let dup = u64::from(k > 0);
                assert_eq!(out.duplicates, dup);
                assert_eq!(out.inserted.first(), Some(&(k == 0)));
                assert_eq!(
                    out.watermarks,
                    [Watermark {
                        boot_id: boot.clone(),
                        highest_seq: k * 10 + 10
                    }]
                );
                assert!(out.total_records > last_total);
                last_total = out.total_records;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let boots = h.boots().await.unwrap();
    assert_eq!(boots.len(), 6);
    assert!(boots.iter().all(|b| b.records == 150 && b.gaps() == 0));
    let n = h.read_sql(queries::total_records).await.unwrap();
    assert_eq!(n, 900);
    store.close().await;
}

#[test]
fn sparse_kinds_follow_the_partial_index_dense_ones_the_time_index() {
    let c = schema::memory();
    let plan = |kind: &str| {
        let (sql, id) = queries::kind_scan(&c, kind).unwrap().unwrap();
        let mut p = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows: Vec<String> = p
            .query_map(rusqlite::params![None::<String>, id], |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        (id, rows.join("; "))
    };
    let (id, outage) = plan("outage");
    assert!(id >= layout::SPARSE_KINDS_FROM);
    assert!(outage.contains("stored_by_kind"), "{outage}");
    let (id, rtt) = plan("rtt");
    assert_eq!(id, 1);
    assert!(!rtt.contains("stored_by_kind"), "{rtt}");
    assert!(queries::kind_scan(&c, "no_such_kind").unwrap().is_none());
}
