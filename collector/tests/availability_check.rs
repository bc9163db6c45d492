//! An independent check of the report's availability figures, with its
//! own generator (not the soak simulator's): two nodes, random losses and
//! random outages (some overlapping, one begun before the range, starting
//! and ending mid-second), windows stamped when they close as a real agent
//! does, and a range that starts seven minutes past a quarter hour. The
//! expected UAS, ES, SES, availability, budget, worst quarter hour, time
//! above threshold and completeness are computed here from the
//! definitions, and the real `report` binary's JSON must equal them.

mod cli;
mod common;

use std::collections::BTreeMap;

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Outage, OutageCause, Record, RttSummary};
use cli::collector_cli_ok;
use common::{Agent, Collector};
use serde_json::Value;

const S: u64 = 1_000_000_000;
/// 2026-11-30T05:07:07Z: 427 s past a quarter hour.
const FROM: u64 = (1_796_000_400 + 427) * S;
const LEN: u64 = 2700;
const TO: u64 = FROM + LEN * S;
const SENT: u64 = 10;

/// xorshift64*, seeded: this file's own random numbers.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// One window as generated: start, lost, replies.
struct Made {
    t: u64,
    lost: u64,
    rtts: Vec<u64>,
}

/// What the report must say of one link.
#[derive(Debug, Default, PartialEq)]
struct Want {
    uas: u64,
    es: u64,
    ses: u64,
    above: u64,
    /// quarter start -> (UAS, SES, ES, p99 ns).
    quarters: BTreeMap<u64, (u64, u64, u64, u64)>,
    /// window starts that were good (available, answered, p99 in SLO).
    good: Vec<u64>,
}

fn outages(rng: &mut Rng, first: bool) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = (0..4)
        .map(|_| {
            let s = FROM + rng.below(LEN - 120) * S + S / 2;
            (s, s + (1 + rng.below(60)) * S + S / 4)
        })
        .collect();
    if first {
        v.push((FROM - 10 * S, FROM + 2 * S + S / 2));
    }
    v
}

fn windows(rng: &mut Rng, out: &[(u64, u64)]) -> Vec<Made> {
    (0..LEN + 6)
        .map(|k| {
            let t = FROM - 3 * S + k * S;
            let down = out.iter().any(|(s, e)| *s < t + S && t < *e);
            let lost = if down {
                5 + rng.below(6)
            } else if rng.below(100) < 3 {
                1 + rng.below(SENT)
            } else {
                0
            };
            let rtts = (0..SENT - lost)
                .map(|_| {
                    let spike = rng.below(200) == 0;
                    50_000 + rng.below(if spike { 900_000 } else { 100_000 })
                })
                .collect();
            Made { t, lost, rtts }
        })
        .collect()
}

/// The definitions, applied to one link's windows.
fn want(made: &[Made], out: &[(u64, u64)]) -> Want {
    let mut w = Want::default();
    for m in made.iter().filter(|m| (FROM..TO).contains(&m.t)) {
        let unavailable = out.iter().any(|(s, e)| *s < m.t + S && m.t < *e);
        let p99 = m.rtts.iter().copied().max().unwrap_or(0);
        let (u, e, s) = match unavailable {
            true => (1, 0, 0),
            false => (0, u64::from(m.lost > 0), u64::from(10 * m.lost >= 3 * SENT)),
        };
        w.uas += u;
        w.es += e;
        w.ses += s;
        w.above += u64::from(p99 > 250_000);
        let q = w.quarters.entry(m.t / (900 * S) * (900 * S)).or_default();
        *q = (q.0 + u, q.1 + s, q.2 + e, q.3.max(p99));
        if !unavailable && !m.rtts.is_empty() && p99 <= 250_000 {
            w.good.push(m.t);
        }
    }
    w
}

fn summary(peer: &str, m: &Made) -> Payload {
    let mut r = m.rtts.clone();
    r.sort_unstable();
    Payload::Rtt(RttSummary {
        peer: peer.into(),
        interface: "lo".into(),
        window_start_unix_ns: m.t,
        window_ns: S,
        sent: SENT,
        received: r.len() as u64,
        lost: m.lost,
        min_ns: r.first().copied().unwrap_or(0),
        max_ns: r.last().copied().unwrap_or(0),
        p50_ns: r.get(r.len() / 2).copied().unwrap_or(0),
        p99_ns: r.last().copied().unwrap_or(0),
        sum_ns: r.iter().sum(),
        buckets: sparse_buckets(r.iter().copied()),
        ..Default::default()
    })
}

/// Node `node`'s records, in time order: each window stamped 3 ms after it
/// closes, each outage's start and end.
fn records(node: &str, peer: &str, made: &[Made], out: &[(u64, u64)]) -> Vec<Record> {
    let mut timed: Vec<(u64, Payload)> = made
        .iter()
        .map(|m| (m.t + S + 3_000_000, summary(peer, m)))
        .collect();
    for (id, (s, e)) in out.iter().enumerate() {
        let o = |end: Option<u64>| {
            Payload::Outage(Outage {
                peer: peer.into(),
                interface: "lo".into(),
                cause: OutageCause::ProbeLoss as i32,
                start_unix_ns: *s,
                end_unix_ns: end,
                outage_id: id as u64 + 1,
                ..Default::default()
            })
        };
        timed.push((*s, o(None)));
        timed.push((*e, o(Some(*e))));
    }
    timed.sort_by_key(|(t, _)| *t);
    timed
        .into_iter()
        .enumerate()
        .map(|(i, (t, p))| Record {
            node: node.into(),
            boot_id: format!("{node}-1"),
            seq: i as u64 + 1,
            unix_ns: t,
            payload: Some(p),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_from_the_definitions_with_an_own_generator() {
    let (dir, c) = Collector::temp_with(|cfg| cfg.max_records_per_second = 10_000_000).await;
    let mut rng = Rng(0x5EED_0022);
    let mut wants = BTreeMap::new();
    for (node, peer) in [("x", "y"), ("y", "x")] {
        let out = outages(&mut rng, node == "x");
        let made = windows(&mut rng, &out);
        wants.insert(format!("{node} -> {peer}"), want(&made, &out));
        let mut a = Agent::open(c.grpc, common::hello(node, &format!("{node}-1")))
            .await
            .unwrap();
        a.next().await.unwrap();
        for batch in records(node, peer, &made, &out).chunks(2000) {
            a.send(batch.to_vec()).await.unwrap();
        }
    }
    let (from, to) = ((FROM / S).to_string(), (TO / S).to_string());
    let json = collector_cli_ok(
        &["report", "--from", &from, "--to", &to, "--format", "json"],
        dir.path(),
    );
    let r: Value = serde_json::from_str(&json).unwrap();
    let mut uas_all = 0;
    for l in r["links"].as_array().unwrap() {
        let name = format!(
            "{} -> {}",
            l["node"].as_str().unwrap(),
            l["peer"].as_str().unwrap()
        );
        let w = &wants[&name];
        let a = &l["availability"];
        let f = |k: &str| a[k].as_f64().unwrap();
        assert_eq!(
            (f("uas_seconds"), f("es_seconds"), f("ses_seconds")),
            (w.uas as f64, w.es as f64, w.ses as f64),
            "{name}"
        );
        assert!(
            w.uas > 0 && w.ses > 0 && w.es > w.ses,
            "{name}: {w:?} tests nothing"
        );
        let avail = 100.0 * (1.0 - w.uas as f64 / LEN as f64);
        assert!((f("availability_percent") - avail).abs() < 1e-9, "{name}");
        let budget = w.uas as f64 / (1e-4 * LEN as f64) * 100.0;
        assert!(
            (f("budget_consumed_percent") - budget).abs() < 1e-6 * budget,
            "{name}"
        );
        uas_all += w.uas;
        // The worst quarter hour by sorting, worst first, earliest first.
        let mut bins: Vec<_> = w.quarters.iter().collect();
        bins.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let (start, (u, s, e, p99)) = bins[0];
        let q = &l["worst_quarter"];
        assert_eq!(q["start_unix_ns"].as_u64(), Some(*start), "{name}");
        assert_eq!(
            (
                q["uas_seconds"].as_f64(),
                q["ses_seconds"].as_f64(),
                q["es_seconds"].as_f64()
            ),
            (Some(*u as f64), Some(*s as f64), Some(*e as f64)),
            "{name}"
        );
        assert_eq!(q["p99_ms"].as_f64(), Some(*p99 as f64 / 1e6), "{name}");
        assert_eq!(
            l["above_threshold"]["rtt_p99_seconds"].as_f64(),
            Some(w.above as f64),
            "{name}"
        );
        // Every window of the range is stored, the last ones included.
        assert_eq!(l["coverage"]["stored"].as_u64(), Some(LEN), "{name}");
        assert_eq!(l["coverage"]["expected"].as_u64(), Some(LEN), "{name}");
        assert_eq!(
            l["coverage"]["gaps"].as_array().map(Vec::len),
            Some(0),
            "{name}"
        );
    }
    assert_eq!(
        r["overall"]["availability"]["uas_seconds"].as_f64(),
        Some(uas_all as f64)
    );
    assert_eq!(r["completeness"]["percent"].as_f64(), Some(100.0));
    let both: Vec<u64> = wants["x -> y"]
        .good
        .iter()
        .filter(|t| wants["y -> x"].good.contains(t))
        .copied()
        .collect();
    assert_eq!(
        r["fleet"]["all_good_seconds"].as_f64(),
        Some(both.len() as f64)
    );
    c.stop().await;
}
