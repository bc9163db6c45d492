//! Bandwidth test results and counters.

use super::*;
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol};

fn result(start: u64, dir: Direction, bps: f64, error: &str, retx: u64) -> Payload {
    Payload::Bandwidth(BandwidthResult {
        peer: "p".into(),
        direction: dir as i32,
        protocol: Protocol::Tcp as i32,
        start_unix_ns: start,
        bits_per_second: bps,
        retransmits: retx,
        error: error.into(),
        ..Default::default()
    })
}

#[test]
fn tests_counted_once_per_test_and_last_result_kept() {
    let mut m = Metrics::new();
    let records = [
        result(100, Direction::Upload, 10e9, "", 3),
        result(100, Direction::Download, 9e9, "", 2),
        result(200, Direction::Upload, 0.0, "refused", 0),
        // An older test replayed late does not replace the newer figure.
        result(50, Direction::Upload, 1e9, "", 0),
    ];
    for (seq, p) in (1..).zip(records) {
        m.apply_record(&rec("a", "b", seq, seq, p));
    }
    let text = m.render();
    let last = |dir: &str| {
        let labels = format!("{{node=\"a\",peer=\"p\",direction=\"{dir}\",protocol=\"tcp\"}}");
        sample(
            &text,
            &format!("boltwatch_bandwidth_bytes_per_second{labels}"),
        )
    };
    assert_eq!(last("transmit").as_deref(), Some("1250000000"));
    assert_eq!(last("receive").as_deref(), Some("1125000000"));
    let at = "boltwatch_bandwidth_last_test_timestamp_seconds{node=\"a\",peer=\"p\"}";
    assert_eq!(sample(&text, at).as_deref(), Some("0.0000001"));
    for (name, want) in [
        ("boltwatch_bandwidth_tests_total", "3"),
        ("boltwatch_bandwidth_test_failures_total", "1"),
        ("boltwatch_bandwidth_retransmits_total", "5"),
    ] {
        let series = format!("{name}{{node=\"a\",peer=\"p\"}}");
        assert_eq!(sample(&text, &series).as_deref(), Some(want), "{series}");
    }
}

#[test]
fn probed_links_have_test_counters_at_zero() {
    let mut m = Metrics::new();
    m.apply_record(&rec("a", "b", 1, 1, window("p", 1, &[50_000], 0, false)));
    let tests = "boltwatch_bandwidth_tests_total{node=\"a\",peer=\"p\"}";
    assert_eq!(value(&m, tests).as_deref(), Some("0"));
}

#[test]
fn expected_and_thermals_of_the_newest_test() {
    let mut m = Metrics::new();
    // Record `seq` of node a: a test of the link to p started at `start`,
    // with what the thermals said during it, if they were sampled.
    let test = |seq: u64, start: u64, dir: Direction, throttled: Option<(bool, f64)>| {
        let Payload::Bandwidth(mut b) = result(start, dir, 30e9, "", 0) else {
            unreachable!()
        };
        b.expected_bits_per_second = 40e9;
        if let Some((t, c)) = throttled {
            b.thermals_sampled = true;
            b.throttled_during = t;
            b.max_celsius_during = c;
        }
        rec("a", "b", seq, seq, Payload::Bandwidth(b))
    };
    let ap = "{node=\"a\",peer=\"p\"}";
    let throttled = format!("boltwatch_bandwidth_last_test_throttled{ap}");
    let hottest = format!("boltwatch_bandwidth_last_test_max_temperature_celsius{ap}");
    let expected = format!("boltwatch_bandwidth_expected_bytes_per_second{ap}");
    m.apply_record(&test(1, 2_000_000_000, Direction::Upload, None));
    assert_eq!(value(&m, &expected).as_deref(), Some("5000000000"));
    assert_eq!(value(&m, &throttled), None, "not sampled, no series");
    // Either direction's record of one test: throttled if any says so.
    let t = 3_000_000_000;
    m.apply_record(&test(2, t, Direction::Upload, Some((true, 80.0))));
    m.apply_record(&test(3, t, Direction::Download, Some((false, 70.0))));
    assert_eq!(value(&m, &throttled).as_deref(), Some("1"));
    assert_eq!(value(&m, &hottest).as_deref(), Some("80"));
    // A newer cool test replaces the verdict; a late old one does not.
    m.apply_record(&test(4, 4 * t, Direction::Upload, Some((false, 50.0))));
    m.apply_record(&test(5, t, Direction::Upload, Some((true, 99.0))));
    assert_eq!(value(&m, &throttled).as_deref(), Some("0"));
    assert_eq!(value(&m, &hottest).as_deref(), Some("50"));
    let at = format!("boltwatch_bandwidth_last_test_timestamp_seconds{ap}");
    assert_eq!(value(&m, &at).as_deref(), Some("12"));
}
