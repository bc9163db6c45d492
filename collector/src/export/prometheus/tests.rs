//! Unit tests of the metric state and the exposition rendering.

use super::*;
use boltwatch_proto::histogram::bucket_index;
use boltwatch_proto::v1::{AgentStats, HistogramBucket, TemperatureSensor, ThermalReading};

fn record(node: &str, boot: &str, seq: u64, unix_ns: u64, payload: Payload) -> Record {
    Record {
        node: node.into(),
        boot_id: boot.into(),
        seq,
        unix_ns,
        payload: Some(payload),
    }
}

fn rtt(peer: &str, window: u64, rtts_ns: &[u64], lost: u64) -> Payload {
    let mut buckets: BTreeMap<i32, u64> = BTreeMap::new();
    for r in rtts_ns {
        *buckets.entry(bucket_index(*r)).or_default() += 1;
    }
    let mut sorted = rtts_ns.to_vec();
    sorted.sort();
    Payload::Rtt(RttSummary {
        peer: peer.into(),
        window_start_unix_ns: window,
        sent: rtts_ns.len() as u64 + lost,
        received: rtts_ns.len() as u64,
        lost,
        min_ns: sorted.first().copied().unwrap_or(0),
        max_ns: sorted.last().copied().unwrap_or(0),
        p50_ns: sorted.get(sorted.len() / 2).copied().unwrap_or(0),
        p99_ns: sorted.last().copied().unwrap_or(0),
        sum_ns: rtts_ns.iter().sum(),
        buckets: buckets
            .into_iter()
            .map(|(index, count)| HistogramBucket { index, count })
            .collect(),
        ..Default::default()
    })
}

/// The value of the sample line starting with `prefix ` (full series name
/// with labels).
fn value(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')
            .map(str::to_string)
    })
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape_label("x\ny"), "x\\ny");
    assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    let mut m = MetricsState::new();
    m.on_hello("we\"ird\\node\n", "0.1.0", "linux", "b1");
    let text = m.render();
    assert!(
        text.contains("boltwatch_agent_up{node=\"we\\\"ird\\\\node\\n\"} 1\n"),
        "{text}"
    );
}

#[test]
fn bounds_are_the_schema3_bounds_over_10us_to_5ms() {
    let b = rtt_bounds();
    assert!(b[0] <= 10e-6 && b[1] > 10e-6);
    assert!(*b.last().unwrap() >= 5e-3 && b[b.len() - 2] < 5e-3);
    for w in b.windows(2) {
        assert!(w[1] / w[0] < 1.1);
    }
    // Bounds print in a form that parses back to the exact same float.
    for v in &b {
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
    let mut m = MetricsState::new();
    // 1 us (below range), 80 us twice, 100 us, 1 s (above range).
    let rtts = [1_000, 80_000, 80_000, 100_000, 1_000_000_000];
    m.apply_record(&record("a", "b1", 1, 10, rtt("b", 10, &rtts, 2)));
    let text = m.render();
    let bounds = rtt_bounds();
    let series =
        |le: &str| format!("boltwatch_rtt_seconds_bucket{{node=\"a\",peer=\"b\",le=\"{le}\"}}");
    let mut prev = 0u64;
    let mut expected_by_bound = Vec::new();
    for b in &bounds {
        let v: u64 = value(&text, &series(&fmt_f64(*b)))
            .unwrap()
            .parse()
            .unwrap();
        assert!(v >= prev, "not cumulative at {b}");
        prev = v;
        expected_by_bound.push((*b, v));
    }
    // Below-range sample counts in the first bucket; 1 s only in +Inf.
    assert_eq!(expected_by_bound[0].1, 1);
    let at = |secs: f64| {
        expected_by_bound
            .iter()
            .find(|(b, _)| *b >= secs)
            .map(|(_, v)| *v)
            .unwrap()
    };
    assert_eq!(at(80e-6), 3);
    assert_eq!(at(100e-6), 4);
    assert_eq!(expected_by_bound.last().unwrap().1, 4);
    assert_eq!(value(&text, &series("+Inf")).unwrap(), "5");
    assert_eq!(
        value(&text, "boltwatch_rtt_seconds_count{node=\"a\",peer=\"b\"}").unwrap(),
        "5"
    );
    let sum: f64 = value(&text, "boltwatch_rtt_seconds_sum{node=\"a\",peer=\"b\"}")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(sum, 1_000_261_000f64 / 1e9);
    assert_eq!(
        value(&text, "boltwatch_probe_lost_total{node=\"a\",peer=\"b\"}").unwrap(),
        "2"
    );
    assert_eq!(
        value(&text, "boltwatch_probe_sent_total{node=\"a\",peer=\"b\"}").unwrap(),
        "7"
    );
}

#[test]
fn windows_add_up_and_gauges_keep_the_newest_window() {
    let mut m = MetricsState::new();
    m.apply_record(&record("a", "b1", 2, 20, rtt("b", 2_000, &[50_000], 0)));
    // An older window replayed late adds to the counters but not the gauges.
    m.apply_record(&record("a", "b1", 1, 10, rtt("b", 1_000, &[90_000], 1)));
    let text = m.render();
    assert_eq!(
        value(
            &text,
            "boltwatch_probe_received_total{node=\"a\",peer=\"b\"}"
        )
        .unwrap(),
        "2"
    );
    assert_eq!(
        value(&text, "boltwatch_rtt_max_seconds{node=\"a\",peer=\"b\"}").unwrap(),
        "0.00005"
    );
    // A window with no replies has no RTT to show.
    m.apply_record(&record("a", "b1", 3, 30, rtt("b", 3_000, &[], 5)));
    assert_eq!(
        value(
            &m.render(),
            "boltwatch_rtt_p50_seconds{node=\"a\",peer=\"b\"}"
        )
        .unwrap(),
        "NaN"
    );
}

#[test]
fn agent_stats_sum_the_last_value_of_each_boot() {
    let mut m = MetricsState::new();
    let stats = |malformed, dropped| {
        Payload::AgentStats(AgentStats {
            malformed_packets: malformed,
            dropped_records: dropped,
            ..Default::default()
        })
    };
    m.apply_record(&record("a", "boot1", 1, 1, stats(3, 1)));
    m.apply_record(&record("a", "boot1", 5, 5, stats(7, 2)));
    // Replayed older record of boot1 must not lower it.
    m.apply_record(&record("a", "boot1", 3, 3, stats(5, 1)));
    m.apply_record(&record("a", "boot2", 1, 9, stats(4, 0)));
    let text = m.render();
    assert_eq!(
        value(&text, "boltwatch_agent_malformed_packets_total{node=\"a\"}").unwrap(),
        "11"
    );
    assert_eq!(
        value(&text, "boltwatch_agent_dropped_records_total{node=\"a\"}").unwrap(),
        "2"
    );
}

#[test]
fn agent_up_stays_as_zero_after_close_and_info_tracks_latest_boot() {
    let mut m = MetricsState::new();
    m.on_hello("a", "0.1.0", "linux 6.1", "b1");
    m.on_stream_closed("a");
    m.on_hello("a", "0.1.1", "linux 6.1", "b2");
    assert!(m.connected("a"));
    m.on_stream_closed("a");
    assert!(!m.connected("a"));
    let text = m.render();
    assert_eq!(value(&text, "boltwatch_agent_up{node=\"a\"}").unwrap(), "0");
    assert!(text.contains(
        "boltwatch_agent_info{node=\"a\",version=\"0.1.1\",os=\"linux 6.1\",boot_id=\"b2\"} 1\n"
    ));
    assert!(!text.contains("boot_id=\"b1\""));
}

#[test]
fn newest_temperature_and_carrier_win() {
    let mut m = MetricsState::new();
    let thermal = |c| {
        Payload::Thermal(ThermalReading {
            sensors: vec![TemperatureSensor {
                name: "cpu".into(),
                celsius: c,
                ..Default::default()
            }],
            throttle: None,
        })
    };
    m.apply_record(&record("a", "b", 2, 200, thermal(55.5)));
    m.apply_record(&record("a", "b", 1, 100, thermal(40.0)));
    let counters = |carrier| {
        Payload::Counters(InterfaceCounters {
            interface: "en2".into(),
            receive_bytes: 1234,
            carrier,
            carrier_known: true,
            ..Default::default()
        })
    };
    m.apply_record(&record("a", "b", 3, 300, counters(true)));
    m.apply_record(&record(
        "a",
        "b",
        4,
        400,
        Payload::LinkEvent(boltwatch_proto::v1::LinkEvent {
            interface: "en2".into(),
            carrier: false,
            ..Default::default()
        }),
    ));
    let text = m.render();
    assert_eq!(
        value(
            &text,
            "boltwatch_temperature_celsius{node=\"a\",sensor=\"cpu\"}"
        )
        .unwrap(),
        "55.5"
    );
    assert_eq!(
        value(
            &text,
            "boltwatch_interface_carrier{node=\"a\",interface=\"en2\"}"
        )
        .unwrap(),
        "0"
    );
    assert_eq!(
        value(
            &text,
            "boltwatch_interface_receive_bytes_total{node=\"a\",interface=\"en2\"}"
        )
        .unwrap(),
        "1234"
    );
    assert_eq!(
        value(
            &text,
            "boltwatch_records_received_total{node=\"a\",kind=\"thermal\"}"
        )
        .unwrap(),
        "2"
    );
}

#[test]
fn every_family_has_help_and_type_once() {
    let mut m = MetricsState::new();
    m.on_commit("a", 1, 10, 0.002);
    let text = m.render();
    let mut helps = std::collections::BTreeSet::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(helps.insert(name.to_string()), "HELP twice for {name}");
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "no TYPE for {name}"
            );
        }
    }
    // Foundation + link-truth families, plus 6 bandwidth ones (prometheus/bandwidth.rs).
    assert_eq!(helps.len(), 43 + 6, "every family is always declared");
    assert_eq!(
        value(
            &text,
            "boltwatch_store_commit_seconds_bucket{le=\"0.0025\"}"
        )
        .unwrap(),
        "1"
    );
    assert_eq!(
        value(&text, "boltwatch_store_commit_seconds_bucket{le=\"0.001\"}").unwrap(),
        "0"
    );
    assert_eq!(
        value(&text, "boltwatch_records_duplicate_total{node=\"a\"}").unwrap(),
        "1"
    );
    assert_eq!(
        value(&text, "boltwatch_ingest_errors_total{kind=\"no_hello\"}").unwrap(),
        "0"
    );
}
