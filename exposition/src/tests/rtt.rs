//! RTT histograms, window gauges and probe counters.

use super::*;
use crate::family::fmt_f64;
use crate::histogram::{classic_slot, rtt_bounds, RTT_RANGE_SECONDS};
use boltwatch_proto::histogram::indexes_spanning;

#[test]
fn bounds_are_the_schema3_bounds_over_10us_to_5s() {
    let b = rtt_bounds();
    assert!(b[0] <= 10e-6 && b[1] > 10e-6);
    assert!(*b.last().unwrap() >= 5.0 && b[b.len() - 2] < 5.0);
    assert_eq!(b.len(), 153);
    for w in b.windows(2) {
        assert!(w[1] / w[0] < 1.1);
    }
    // Bounds print in a form that parses back to the exact same float.
    for v in b {
        assert_eq!(fmt_f64(*v).parse::<f64>().unwrap(), *v);
    }
}

#[test]
fn agent_buckets_map_to_first_bound_at_or_above() {
    let r = indexes_spanning(RTT_RANGE_SECONDS.0, RTT_RANGE_SECONDS.1);
    let n = (r.end() - r.start() + 1) as usize;
    assert_eq!(classic_slot(*r.start() - 20), 0);
    assert_eq!(classic_slot(*r.start()), 0);
    assert_eq!(classic_slot(*r.start() + 1), 1);
    assert_eq!(classic_slot(*r.end()), n - 1);
    assert_eq!(classic_slot(*r.end() + 1), n);
}

#[test]
fn histogram_buckets_are_cumulative_with_exact_sum_and_count() {
    let mut m = Metrics::new();
    // 1 us (below range), 80 us twice, 100 us, 10 s (above range).
    let rtts = [1_000, 80_000, 80_000, 100_000, 10_000_000_000];
    m.apply_record(&rec("a", "b1", 1, 10, window("b", 10, &rtts, 2, false)));
    let text = m.render();
    let series =
        |le: &str| format!("boltwatch_rtt_seconds_bucket{{node=\"a\",peer=\"b\",le=\"{le}\"}}");
    let mut prev = 0u64;
    let mut by_bound = Vec::new();
    for b in rtt_bounds() {
        let v: u64 = sample(&text, &series(&fmt_f64(*b)))
            .unwrap()
            .parse()
            .unwrap();
        assert!(v >= prev, "not cumulative at {b}");
        prev = v;
        by_bound.push((*b, v));
    }
    // Below-range sample counts in the first bucket; 10 s only in +Inf.
    assert_eq!(by_bound[0].1, 1);
    let at = |secs: f64| by_bound.iter().find(|(b, _)| *b >= secs).unwrap().1;
    assert_eq!(at(80e-6), 3);
    assert_eq!(at(100e-6), 4);
    assert_eq!(by_bound.last().unwrap().1, 4);
    let ab = "{node=\"a\",peer=\"b\"}";
    let expect = [
        (series("+Inf"), "5"),
        (format!("boltwatch_rtt_seconds_count{ab}"), "5"),
        (format!("boltwatch_rtt_seconds_sum{ab}"), "10.000261"),
        (format!("boltwatch_probe_lost_total{ab}"), "2"),
        (format!("boltwatch_probe_sent_total{ab}"), "7"),
        // Not under load: the under-load series exists, empty.
        (format!("boltwatch_rtt_under_load_seconds_count{ab}"), "0"),
    ];
    for (series, want) in expect {
        assert_eq!(sample(&text, &series).as_deref(), Some(want), "{series}");
    }
}

#[test]
fn windows_add_up_and_gauges_keep_the_newest_window() {
    let mut m = Metrics::new();
    m.apply_record(&rec(
        "a",
        "b1",
        2,
        20,
        window("b", 2_000, &[50_000], 0, false),
    ));
    // An older window replayed late adds to the counters but not the gauges.
    m.apply_record(&rec(
        "a",
        "b1",
        1,
        10,
        window("b", 1_000, &[90_000], 1, false),
    ));
    let ab = "{node=\"a\",peer=\"b\"}";
    let received = format!("boltwatch_probe_received_total{ab}");
    assert_eq!(value(&m, &received).as_deref(), Some("2"));
    let max = format!("boltwatch_rtt_max_seconds{ab}");
    assert_eq!(value(&m, &max).as_deref(), Some("0.00005"));
    // A window with no replies has no RTT to show.
    m.apply_record(&rec("a", "b1", 3, 30, window("b", 3_000, &[], 5, false)));
    let p50 = format!("boltwatch_rtt_p50_seconds{ab}");
    assert_eq!(value(&m, &p50).as_deref(), Some("NaN"));
}

#[test]
fn only_windows_under_load_enter_the_under_load_histogram() {
    let mut m = Metrics::new();
    m.apply_record(&rec(
        "a",
        "b",
        1,
        1,
        window("p", 1, &[50_000; 10], 0, false),
    ));
    let ap = "{node=\"a\",peer=\"p\"}";
    let count = format!("boltwatch_rtt_under_load_seconds_count{ap}");
    assert_eq!(value(&m, &count).as_deref(), Some("0"));
    m.apply_record(&rec("a", "b", 2, 2, window("p", 2, &[50_000; 7], 0, true)));
    assert_eq!(value(&m, &count).as_deref(), Some("7"));
    let inf = "boltwatch_rtt_under_load_seconds_bucket{node=\"a\",peer=\"p\",le=\"+Inf\"}";
    assert_eq!(value(&m, inf).as_deref(), Some("7"));
    let all = format!("boltwatch_rtt_seconds_count{ap}");
    assert_eq!(value(&m, &all).as_deref(), Some("17"));
}
