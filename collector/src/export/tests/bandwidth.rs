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
            &format!("boltwatch_bandwidth_bits_per_second{labels}"),
        )
    };
    assert_eq!(last("upload").as_deref(), Some("10000000000"));
    assert_eq!(last("download").as_deref(), Some("9000000000"));
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
