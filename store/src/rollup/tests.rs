use super::*;

fn rtt(peer: &str, start: u64, load: bool, rtts: &[u64]) -> Record {
    let sum: u64 = rtts.iter().sum();
    Record {
        node: "a".into(),
        boot_id: "b".into(),
        seq: 0,
        unix_ns: start + 1_000_000_000,
        payload: Some(Payload::Rtt(RttSummary {
            peer: peer.into(),
            interface: "veth0".into(),
            window_start_unix_ns: start,
            window_ns: 1_000_000_000,
            sent: rtts.len() as u64 + 1,
            received: rtts.len() as u64,
            lost: 1,
            min_ns: rtts.iter().copied().min().unwrap_or(0),
            max_ns: rtts.iter().copied().max().unwrap_or(0),
            p50_ns: rtts.first().copied().unwrap_or(0),
            p99_ns: rtts.last().copied().unwrap_or(0),
            sum_ns: sum,
            buckets: boltwatch_proto::histogram::sparse_buckets(rtts.iter().copied()),
            under_load: load,
            ..RttSummary::default()
        })),
    }
}

fn raws(recs: &[(u64, Record)]) -> Vec<(u64, u64, Vec<u8>, Record)> {
    recs.iter()
        .map(|(seq, r)| (*seq, r.unix_ns, r.encode_to_vec(), r.clone()))
        .collect()
}

fn add(r: &mut Rollup, minute: u64, recs: &[(u64, u64, Vec<u8>, Record)]) {
    let v: Vec<Raw<'_>> = recs
        .iter()
        .map(|(seq, t, b, rec)| Raw {
            seq: *seq,
            unix_ns: *t,
            bytes: b,
            record: rec,
        })
        .collect();
    r.add(minute, &v);
}

const M: u64 = 1_700_000_040 * 1_000_000_000;

#[test]
fn rtt_windows_merge_exactly_and_keep_each_window() {
    let recs = raws(&[
        (5, rtt("b", M, false, &[80_000, 90_000])),
        (6, rtt("b", M + 1_000_000_000, true, &[200_000])),
        (
            8,
            rtt("b", M + 2_000_000_000, false, &[70_000, 75_000, 300_000]),
        ),
        (9, rtt("c", M, false, &[])),
    ]);
    let mut r = Rollup::default();
    add(&mut r, M, &recs);
    assert_eq!(r.records, 4);
    assert_eq!(r.seq_runs, vec![5, 2, 8, 2]);
    assert_eq!(r.seq_bounds(), Some((5, 9)));
    assert!(r.replaced(6) && !r.replaced(7) && r.replaced(9) && !r.replaced(10));
    let b = &r.rtt[0];
    let rest = b.rest.as_ref().unwrap();
    assert_eq!((rest.sent, rest.received, rest.lost), (7, 5, 2));
    assert_eq!((rest.min_ns, rest.max_ns), (70_000, 300_000));
    assert_eq!(rest.sum_ns, 80_000 + 90_000 + 70_000 + 75_000 + 300_000);
    let counted: u64 = rest.buckets.iter().map(|b| b.count).sum();
    assert_eq!(counted, 5);
    assert!(rest.buckets.windows(2).all(|w| w[0].index < w[1].index));
    assert_eq!((b.rest_windows, b.load_windows), (2, 1));
    assert_eq!(b.load.as_ref().unwrap().sum_ns, 200_000);
    let w: Vec<Window> = b.windows(M).collect();
    assert_eq!(w.len(), 3);
    assert_eq!(w[1].t, M + 1_000_000_000);
    assert_eq!(
        (w[2].sum_ns, w[2].received, w[2].p99_ns),
        (445_000, 3, 300_000)
    );
    // Each window's own probes and losses survive (errored seconds).
    assert_eq!((w[2].sent, w[2].lost), (4, 1));
    // A rollup written before them reads as loss-free.
    let old = RttMinute {
        sent: Vec::new(),
        lost: Vec::new(),
        ..b.clone()
    };
    let w: Vec<Window> = old.windows(M).collect();
    assert_eq!((w[2].sent, w[2].lost), (3, 0));
    assert_eq!(
        b.newest.as_ref().unwrap().window_start_unix_ns,
        M + 2_000_000_000
    );
    assert!(b.newest.as_ref().unwrap().buckets.is_empty());
    // A peer with no replies has no extremes.
    let c = r.rtt[1].rest.as_ref().unwrap();
    assert_eq!((c.received, c.min_ns, c.max_ns), (0, 0, 0));
    // Encoded, it round-trips.
    assert_eq!(Rollup::decode(r.encode_to_vec().as_slice()).unwrap(), r);
}

#[test]
fn counters_keep_the_newest_record_whole() {
    let rec = |t: u64| Record {
        node: "a".into(),
        boot_id: "b".into(),
        seq: 0,
        unix_ns: t,
        payload: None,
    };
    let recs = raws(&[(3, rec(M + 5)), (4, rec(M + 9)), (2, rec(M + 1))]);
    let mut r = Rollup::default();
    add(&mut r, M, &recs);
    assert_eq!(r.last_unix_ns, M + 9);
    assert_eq!(
        Record::decode(r.last_record.as_slice()).unwrap(),
        rec(M + 9)
    );
    assert_eq!(r.seq_runs, vec![2, 3]);
    assert_eq!(r.replay("a", "b", M), vec![rec(M + 9)]);
}

#[test]
fn replay_carries_the_merged_counts_and_the_newest_window() {
    let recs = raws(&[
        (1, rtt("b", M, false, &[80_000, 81_000])),
        (2, rtt("b", M + 1_000_000_000, false, &[90_000])),
    ]);
    let mut r = Rollup::default();
    add(&mut r, M, &recs);
    let out = r.replay("a", "b", M);
    assert_eq!(out.len(), 1);
    let Some(Payload::Rtt(s)) = &out[0].payload else {
        panic!("not rtt")
    };
    assert_eq!((s.sent, s.received, s.sum_ns), (5, 3, 251_000));
    assert_eq!(s.window_start_unix_ns, M + 1_000_000_000);
    assert_eq!((s.min_ns, s.max_ns, s.p50_ns), (90_000, 90_000, 90_000));
    assert_eq!(s.buckets.iter().map(|b| b.count).sum::<u64>(), 3);
    assert_eq!((out[0].node.as_str(), out[0].boot_id.as_str()), ("a", "b"));
}

#[test]
fn minutes_start_on_boundaries() {
    assert_eq!(minute_of(M + 59_999_999_999), M);
    assert_eq!(minute_of(M + MINUTE_NS), M + MINUTE_NS);
}
