//! Unit tests of the report math on hand-built records.

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    AgentStats, BandwidthResult, Direction, InterfaceCounters, Outage, OutageCause, RttSummary,
    ServiceCheck, TemperatureSensor, ThermalReading, Throttle,
};

use super::*;
use crate::soak::Slo;

const S: u64 = 1_000_000_000;

fn scope(nodes: &[&str]) -> Scope {
    Scope {
        name: "t".into(),
        from_unix_ns: 1000 * S,
        to_unix_ns: 1010 * S,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        slo: Slo::default(),
        marks: vec![],
    }
}

fn rtt(peer: &str, t: u64, rtts: &[u64], load: bool) -> Payload {
    Payload::Rtt(RttSummary {
        peer: peer.into(),
        window_start_unix_ns: t,
        window_ns: S,
        sent: rtts.len() as u64,
        received: rtts.len() as u64,
        min_ns: *rtts.iter().min().unwrap(),
        max_ns: *rtts.iter().max().unwrap(),
        sum_ns: rtts.iter().sum(),
        p50_ns: rtts[rtts.len() / 2],
        p99_ns: *rtts.iter().max().unwrap(),
        buckets: sparse_buckets(rtts.iter().copied()),
        under_load: load,
        ..Default::default()
    })
}

fn thermal(c: f64, throttled: bool) -> Payload {
    Payload::Thermal(ThermalReading {
        sensors: vec![TemperatureSensor {
            name: "case".into(),
            celsius: c,
            ..Default::default()
        }],
        throttle: Some(Throttle {
            throttled,
            ..Default::default()
        }),
    })
}

fn bw(peer: &str, t: u64, gbps: f64, dir: Direction) -> Payload {
    Payload::Bandwidth(BandwidthResult {
        peer: peer.into(),
        direction: dir as i32,
        start_unix_ns: t,
        bits_per_second: gbps * 1e9,
        error: if gbps > 0.0 {
            String::new()
        } else {
            "refused".into()
        },
        ..Default::default()
    })
}

fn outage(peer: &str, id: u64, start: u64, end: Option<u64>) -> Payload {
    Payload::Outage(Outage {
        peer: peer.into(),
        cause: OutageCause::ProbeLoss as i32,
        start_unix_ns: start,
        end_unix_ns: end,
        outage_id: id,
        ..Default::default()
    })
}

/// A 10-second soak of a and b with every kind of event.
fn report() -> Report {
    let mut b = Builder::new(scope(&["a", "b"]));
    let mut seqs = std::collections::BTreeMap::<String, u64>::new();
    let mut add = |b: &mut Builder, node: &str, t: u64, p: Payload| {
        let seq = seqs.entry(node.to_string()).or_default();
        *seq += 1;
        b.add(node, "boot", *seq, t, Some(&p));
    };
    for i in 0..10 {
        let t = (1000 + i) * S;
        // a -> b: 80 us at rest, 160 us under load at second 5; window 7
        // is missing.
        if i != 7 {
            let load = i == 5;
            add(
                &mut b,
                "a",
                t,
                rtt("b", t, &[if load { 160_000 } else { 80_000 }; 10], load),
            );
        }
        add(&mut b, "b", t, rtt("a", t, &[90_000; 10], false));
        // b throttled from second 4 to 6.
        add(
            &mut b,
            "b",
            t,
            thermal(40.0 + i as f64, (4..6).contains(&i)),
        );
        add(&mut b, "a", t, thermal(35.0, false));
        add(
            &mut b,
            "a",
            t,
            Payload::Service(ServiceCheck {
                peer: "b".into(),
                service: "ssh".into(),
                up: i != 3,
                ..Default::default()
            }),
        );
    }
    add(
        &mut b,
        "a",
        1002 * S,
        bw("b", 1002 * S, 70.0, Direction::Upload),
    );
    add(
        &mut b,
        "b",
        1004 * S,
        bw("a", 1004 * S, 60.0, Direction::Download),
    );
    add(
        &mut b,
        "a",
        1008 * S,
        bw("b", 1008 * S, 0.0, Direction::Upload),
    );
    // An outage that began before the range and one still open.
    // (Recorded by an earlier boot of a, whose other records fall before
    // the range.)
    b.add("a", "old", 1, 999 * S, Some(&outage("b", 1, 990 * S, None)));
    b.add(
        "a",
        "old",
        2,
        1001 * S,
        Some(&outage("b", 1, 990 * S, Some(1001 * S))),
    );
    add(&mut b, "b", 1009 * S, outage("a", 2, 1009 * S, None));
    add(
        &mut b,
        "a",
        1009 * S,
        Payload::AgentStats(AgentStats {
            dropped_records: 3,
            ..Default::default()
        }),
    );
    // Another boot with a hole in its sequence numbers.
    b.add("b", "boot2", 5, 1001 * S, None);
    b.add("b", "boot2", 8, 1001 * S, None);
    // A node outside the soak is ignored, and so are probes of it.
    b.add("z", "boot", 1, 1001 * S, Some(&thermal(99.0, true)));
    b.add(
        "a",
        "boot3",
        1,
        1001 * S,
        Some(&rtt("z", 1001 * S, &[900_000], false)),
    );
    b.finish()
}

/// The report's line for the link `node` -> `peer`.
fn link<'r>(r: &'r Report, node: &str, peer: &str) -> &'r Link {
    r.links
        .iter()
        .find(|l| l.node == node && l.peer == peer)
        .unwrap()
}

#[test]
fn rtt_rest_load_and_percentiles() {
    let r = report();
    let ab = link(&r, "a", "b");
    assert_eq!((ab.rtt_rest.windows, ab.rtt_load.windows), (8, 1));
    assert_eq!(ab.rtt.probes, 90);
    assert_eq!(ab.rtt.worst_ms, Some(0.16));
    assert!((ab.rtt.mean_ms.unwrap() - (80.0 * 0.08 + 10.0 * 0.16) / 90.0).abs() < 1e-12);
    assert_eq!(ab.rtt_rest.p99_ms, Some(0.08));
    assert_eq!(r.overall.rtt.probes, 190, "probes of z are not the soak's");
    assert_eq!(r.links.len(), 2);
    assert_eq!(r.headline.rtt_worst_ms, Some(0.16));
}

#[test]
fn bandwidth_is_per_direction_of_data() {
    let r = report();
    let ab = link(&r, "a", "b");
    // b's download from a moved data a -> b.
    assert_eq!((ab.bandwidth.tests, ab.bandwidth.failed), (3, 1));
    assert_eq!(ab.bandwidth.mean_gbps, Some(65.0));
    assert_eq!(
        (ab.bandwidth.worst_gbps, ab.bandwidth.best_gbps),
        (Some(60.0), Some(70.0))
    );
    assert_eq!(r.headline.bandwidth_worst_gbps, Some(60.0));
}

#[test]
fn outages_are_clipped_and_open_ones_run_to_the_end() {
    let r = report();
    let i = &r.overall.interruptions;
    assert_eq!(i.count, 2);
    assert_eq!(i.total_down_seconds, 2.0);
    assert_eq!(i.longest_seconds, 1.0);
    assert!(i.outages.iter().any(|o| o.open && o.node == "b"));
    assert_eq!(r.headline.interruptions_worst_link, 1);
}

#[test]
fn throttling_services_and_correlation() {
    let r = report();
    let b = r.thermal.iter().find(|t| t.node == "b").unwrap();
    assert_eq!(b.throttle_episodes, 1);
    assert_eq!(b.throttled_seconds, 2.0);
    assert_eq!((b.mean_celsius, b.worst_celsius), (Some(44.5), Some(49.0)));
    assert_eq!(r.thermal.len(), 2, "node z is not in the soak");
    // Nothing throttled is +0 (an empty f64 sum would print "-0").
    let a = r.thermal.iter().find(|t| t.node == "a").unwrap();
    assert!(a.throttled_seconds == 0.0 && a.throttled_seconds.is_sign_positive());
    let c = &r.correlation;
    assert_eq!((c.throttled.tests, c.throttled.mean_gbps), (1, Some(60.0)));
    assert_eq!((c.normal.tests, c.normal.mean_gbps), (1, Some(70.0)));
    assert_eq!(c.bandwidth_difference_gbps, Some(-10.0));
    assert!(
        c.sentence.contains("60.0 Gbps over 1 tests"),
        "{}",
        c.sentence
    );
    // Windows at 4 and 5 on both links are during throttling.
    assert_eq!(c.throttled.rtt_windows, 4);
    let at4 = c
        .tests
        .iter()
        .find(|t| t.start_unix_ns == 1004 * S)
        .unwrap();
    assert_eq!(at4.celsius, Some(35.0), "temperature of the sender, a");
    let ssh = &r.services[0];
    assert_eq!((ssh.checks, ssh.up), (10, 9));
    assert_eq!(r.headline.availability_worst_percent, Some(90.0));
}

#[test]
fn completeness_counts_windows_holes_and_drops() {
    let r = report();
    let c = &r.completeness;
    assert_eq!((c.expected_windows, c.stored_windows), (20, 19));
    assert_eq!(c.gaps, 1);
    assert_eq!(c.percent, Some(95.0));
    assert_eq!(c.sequence_holes, 2);
    assert_eq!(c.spool_drops, 3);
    let ab = r.links.iter().find(|l| l.node == "a").unwrap();
    assert_eq!(
        ab.coverage.gaps,
        [Gap {
            start_unix_ns: 1007 * S,
            end_unix_ns: 1008 * S,
            missing: 1
        }]
    );
}

#[test]
fn verdict_lines_pass_and_fail_with_values() {
    let r = report();
    let by = |k: &str| r.verdict.lines.iter().find(|l| l.key == k).unwrap().clone();
    assert_eq!(by("rtt_worst").pass, Some(true));
    assert_eq!(by("interruptions").pass, Some(false));
    assert_eq!(by("availability").measured, Some(90.0));
    assert_eq!(by("bandwidth_mean").pass, None);
    assert_eq!(by("completeness").pass, Some(false));
    assert!(!r.verdict.pass);
}

#[test]
fn empty_range_fails_for_lack_of_data() {
    let r = Builder::new(scope(&[])).finish();
    assert!(!r.verdict.pass);
    assert_eq!(r.verdict.lines[0].measured, None);
}

#[test]
fn downsampling_keeps_a_single_spike() {
    let mut p: Vec<(u64, f64)> = (0..100_000).map(|i| (i, 0.08)).collect();
    p[54_321].1 = 200.0;
    let d = chart_downsample(&p);
    assert!(d.len() <= 2 * 100);
    assert!(d.contains(&(54_321, 200.0)));
    assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
}

fn chart_downsample(p: &[(u64, f64)]) -> Vec<(u64, f64)> {
    super::chart::downsample(p, 0, 100_000, 100)
}

#[test]
fn a_links_kept_windows_follow_the_range_not_the_records() {
    // A 10-second range; an agent sends 5000 windows of one link: 4000
    // repeats of real starts and 1000 of starts a millisecond apart.
    let mut b = Builder::new(scope(&["a", "b"]));
    let mut seq = 0;
    for i in 0..5000u64 {
        seq += 1;
        let t = if i < 4000 {
            1000 * S + i % 10 * S
        } else {
            1000 * S + i * 1_000_000
        };
        b.add("a", "b1", seq, t + 1, Some(&rtt("b", t, &[80_000], false)));
    }
    let cap = b.window_cap();
    let link = &b.links[&("a".to_string(), "b".to_string())];
    assert!(
        link.windows.len() <= 2 * cap,
        "{} windows kept",
        link.windows.len()
    );
    // Every probe still counts.
    assert_eq!(link.rest.merged.sent, 5000);
    let r = b.finish();
    let ab = &r.links[0];
    assert_eq!(ab.rtt_rest.probes, 5000);
}

#[test]
fn a_nodes_kept_sparse_records_follow_the_range_not_the_records() {
    // 20,000 thermal readings and service checks in a 10-second range.
    let mut b = Builder::new(scope(&["a", "b"]));
    for i in 0..20_000u64 {
        let t = 1000 * S + i * 400_000;
        b.add("a", "b1", 2 * i + 1, t, Some(&thermal(40.0, false)));
        let check = Payload::Service(ServiceCheck {
            peer: "b".into(),
            service: format!("svc-{i}"),
            up: true,
            ..Default::default()
        });
        b.add("a", "b1", 2 * i + 2, t, Some(&check));
    }
    // Each kind within its own budget.
    let budget = 2 * b.window_cap() + 1024;
    let readings = b.thermal["a"].readings.len();
    assert!(readings <= budget, "{readings} readings kept");
    assert!(
        b.services.len() <= budget,
        "{} checks kept",
        b.services.len()
    );
    // Every record still counts for completeness.
    assert_eq!(b.records, 40_000);

    // A reading with more sensors than a node keeps: the hottest still
    // counts, the names stop at the bound.
    let mut many = Builder::new(scope(&["a"]));
    let sensors = (0..3000)
        .map(|i| TemperatureSensor {
            name: format!("s{i}"),
            celsius: i as f64 / 100.0,
            ..Default::default()
        })
        .collect();
    let reading = Payload::Thermal(ThermalReading {
        sensors,
        throttle: None,
    });
    many.add("a", "b1", 1, 1000 * S, Some(&reading));
    assert_eq!(many.thermal["a"].sensors.len(), super::thermal::MAX_SENSORS);
    assert_eq!(many.thermal["a"].readings[0].1, Some(29.99));
}

#[test]
fn a_nodes_outages_keep_their_own_budget_after_a_flood_of_other_records() {
    // Counters, readings and checks far over any budget, then one outage
    // at the end of the range: a budget shared by every kind dropped it
    // (the 60-minute chaos soak lost its last 3 minutes of outages).
    let mut b = Builder::new(scope(&["a", "b"]));
    let mut seq = 0;
    for i in 0..5_000u64 {
        let t = 1000 * S + i * 1_000_000;
        let counters = Payload::Counters(InterfaceCounters {
            interface: "tb1".into(),
            ..Default::default()
        });
        let check = Payload::Service(ServiceCheck {
            peer: "b".into(),
            service: "ssh".into(),
            up: true,
            ..Default::default()
        });
        for p in [counters, thermal(40.0, false), check] {
            seq += 1;
            b.add("a", "b1", seq, t, Some(&p));
        }
    }
    let (start, end) = (1008 * S, 1009 * S);
    b.add(
        "a",
        "b1",
        seq + 1,
        start,
        Some(&outage("b", 7, start, None)),
    );
    b.add(
        "a",
        "b1",
        seq + 2,
        end,
        Some(&outage("b", 7, start, Some(end))),
    );
    let r = b.finish();
    let ab = link(&r, "a", "b");
    assert_eq!(ab.interruptions.count, 1, "{:?}", ab.interruptions);
    assert_eq!(ab.interruptions.outages[0].start_unix_ns, start);
    assert_eq!(r.completeness.records, 15_002);
}

#[test]
fn windows_belong_to_the_range_by_their_start() {
    // Records stamped when their window closes: the last window of the
    // range is stamped at its end, the window before the range inside it.
    let mut b = Builder::new(scope(&["a", "b"]));
    for (seq, start) in (999..1010).enumerate() {
        let p = rtt("b", start * S, &[80_000; 10], false);
        b.add(
            "a",
            "boot",
            seq as u64 + 1,
            (start + 1) * S + 2_000_000,
            Some(&p),
        );
    }
    let (from, to) = b.scan_range();
    assert_eq!((from, to), (1000 * S, 1010 * S + build::CLOSE_MARGIN_NS));
    let r = b.finish();
    let ab = link(&r, "a", "b");
    assert_eq!((ab.coverage.expected, ab.coverage.stored), (10, 10));
    assert!(ab.coverage.gaps.is_empty(), "{:?}", ab.coverage.gaps);
    assert_eq!(ab.rtt.windows, 10);
    // b -> a sent nothing: the completeness is a's windows over both.
    assert_eq!(r.completeness.stored_windows, 10);
}

#[test]
fn availability_budget_and_worst_quarter_of_the_hand_built_report() {
    let r = report();
    // a -> b: the outage that began before the range covers window 1000;
    // b -> a: the one still open covers window 1009.
    let ab = link(&r, "a", "b");
    let a = &ab.availability;
    assert_eq!(
        (a.uas_seconds, a.es_seconds, a.ses_seconds),
        (1.0, 0.0, 0.0)
    );
    assert!((a.availability_percent.unwrap() - 90.0).abs() < 1e-9);
    // 10 s at 99.99 %: a budget of 1 ms, spent 1000 times over.
    assert!((a.budget_consumed_percent.unwrap() - 100_000.0).abs() < 1e-3);
    assert_eq!((a.outages, a.longest_outage_seconds), (1, 1.0));
    assert_eq!(link(&r, "b", "a").availability.uas_seconds, 1.0);
    assert_eq!(r.overall.availability.uas_seconds, 2.0);
    let line = r
        .verdict
        .lines
        .iter()
        .find(|l| l.key == "error_budget")
        .unwrap();
    assert_eq!(line.pass, Some(false));
    // Its worst quarter hour starts at 900 s (UTC-aligned) and names the
    // outage, b's throttling and the three tests between a and b.
    let q = ab.worst_quarter.as_ref().unwrap();
    assert_eq!((q.start_unix_ns, q.uas_seconds), (900 * S, 1.0));
    assert_eq!(q.p99_ms, Some(0.16));
    assert_eq!(q.events.len(), 3, "{:?}", q.events);
    assert!(q.events[0].starts_with("outage a -> b (probe_loss)"));
    assert!(q.events[1].starts_with("b throttled"));
    assert_eq!(
        q.events[2],
        "3 bandwidth test(s), 1 failed, lowest 60.0 Gbps"
    );
    // One hour row, its figures those of the whole range.
    assert_eq!(ab.hourly.len(), 1);
    assert_eq!(ab.hourly[0].probes, ab.rtt.probes);
    assert_eq!(ab.hourly[0].uas_seconds, 1.0);
    // Both links lost a second: neither is ahead on UAS or SES, so the
    // higher p99 (a -> b under load) ranks first.
    assert_eq!(r.fleet.links[0].name, "a -> b");
    // Window 7 of a -> b is missing and windows 1000 and 1009 are
    // unavailable: 7 of 10 seconds had every link good.
    assert_eq!(r.fleet.all_good_seconds, 7.0);
}

#[test]
fn rdma_windows_are_their_own_transport_outside_rtt_and_verdict() {
    use boltwatch_proto::v1::{RdmaErrorClass, RdmaErrorCount, RdmaProbe};
    let rdma = |t: u64, rtts: &[u64], lost: u64| {
        let Payload::Rtt(mut s) = rtt("b", t, rtts, false) else {
            unreachable!()
        };
        s.sent += lost;
        s.lost = lost;
        Payload::RdmaProbe(RdmaProbe {
            rtt: Some(s),
            device: "rdma_en2".into(),
            errors: vec![RdmaErrorCount {
                class: RdmaErrorClass::CrcMismatch as i32,
                count: 1,
            }],
            ..RdmaProbe::default()
        })
    };
    let mut b = Builder::new(scope(&["a", "b"]));
    b.add(
        "a",
        "boot",
        1,
        1000 * S,
        Some(&rtt("b", 1000 * S, &[80_000; 10], false)),
    );
    b.add(
        "a",
        "boot",
        2,
        1001 * S,
        Some(&rdma(1001 * S, &[9_000, 11_000], 1)),
    );
    // Two bursts: 10 MB confirmed in 2 ms (40 Gbit/s), then 4 MB posted
    // and 2 MB confirmed in 1 ms (16 Gbit/s).
    let burst = |t: u64, sent: u64, confirmed: u64, ns: u64| {
        let Payload::RdmaProbe(mut p) = rdma(t, &[10_000], 0) else {
            unreachable!()
        };
        p.errors.clear();
        (p.burst_sent_bytes, p.burst_confirmed_bytes, p.burst_ns) = (sent, confirmed, ns);
        Payload::RdmaProbe(p)
    };
    b.add(
        "a",
        "boot",
        3,
        1002 * S,
        Some(&burst(1002 * S, 10_000_000, 10_000_000, 2_000_000)),
    );
    b.add(
        "a",
        "boot",
        5,
        1004 * S,
        Some(&burst(1004 * S, 4_000_000, 2_000_000, 1_000_000)),
    );
    // A peer outside the soak's nodes is not the soak's.
    let Payload::RdmaProbe(mut z) = rdma(1003 * S, &[5_000], 0) else {
        unreachable!()
    };
    z.rtt.as_mut().unwrap().peer = "z".into();
    b.add("a", "boot", 4, 1003 * S, Some(&Payload::RdmaProbe(z)));
    let r = b.finish();

    let ab = link(&r, "a", "b");
    assert_eq!(ab.rtt.probes, 10, "RDMA pings are not STAMP probes");
    assert_eq!(ab.rtt.worst_ms, Some(0.08));
    assert_eq!(r.rdma.len(), 1, "{:?}", r.rdma);
    let l = &r.rdma[0];
    assert_eq!((l.node.as_str(), l.peer.as_str()), ("a", "b"));
    assert_eq!((l.sent, l.received, l.lost), (5, 4, 1));
    assert_eq!((l.min_us, l.mean_us, l.max_us), (9.0, 10.0, 11.0));
    assert_eq!(l.errors.get("crc_mismatch"), Some(&1));
    // 12 MB confirmed over 3 ms: 32 Gbit/s; the slower burst 16.
    assert_eq!(l.bursts, 2);
    assert_eq!(
        (l.burst_mean_gbps, l.burst_worst_gbps),
        (Some(32.0), Some(16.0))
    );
    assert_eq!(l.burst_unconfirmed_bytes, 2_000_000);
    let sections = crate::report::render::sections(&r);
    let s = sections
        .iter()
        .find(|s| s.title.starts_with("RDMA"))
        .expect("an RDMA section");
    assert_eq!(
        s.rows,
        [[
            "a -> b",
            "rdma_en2",
            "5",
            "1",
            "9.0",
            "10.0",
            "11.0",
            "2",
            "32.0 / 16.0 (2000000 B unconfirmed)",
            "crc_mismatch 1"
        ]]
    );
    assert!(!r.verdict.lines.iter().any(|v| v.key.contains("rdma")));
    // Without RDMA windows: no section and no `rdma` key in the JSON.
    let plain = report();
    assert!(!crate::report::render::sections(&plain)
        .iter()
        .any(|s| s.title.starts_with("RDMA")));
    assert!(serde_json::to_value(&plain).unwrap().get("rdma").is_none());
}
