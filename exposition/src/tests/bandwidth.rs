//! Bandwidth test results and counters.

use super::*;
use crate::bandwidth::ThrottleHistory;
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol, ThermalReading, Throttle};

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
    let test = |seq: u64, start: u64, dir: Direction, throttled: Option<(bool, f64, u32)>| {
        let Payload::Bandwidth(mut b) = result(start, dir, 30e9, "", 0) else {
            unreachable!()
        };
        b.expected_bits_per_second = 40e9;
        if let Some((t, c, pressure)) = throttled {
            b.thermals_sampled = true;
            b.throttled_during = t;
            b.max_celsius_during = c;
            b.max_pressure_level_during = pressure;
        }
        rec("a", "b", seq, seq, Payload::Bandwidth(b))
    };
    let ap = "{node=\"a\",peer=\"p\"}";
    let throttled = "boltwatch_bandwidth_last_test_throttled{node=\"a\",peer=\"p\",end=\"local\"}";
    let hottest = format!("boltwatch_bandwidth_last_test_max_temperature_celsius{ap}");
    let pressure = format!("boltwatch_bandwidth_last_test_max_pressure_level{ap}");
    let expected = format!("boltwatch_bandwidth_expected_bytes_per_second{ap}");
    m.apply_record(&test(1, 2_000_000_000, Direction::Upload, None));
    assert_eq!(value(&m, &expected).as_deref(), Some("5000000000"));
    assert_eq!(value(&m, throttled), None, "not sampled, no series");
    // Either direction's record of one test: throttled if any says so.
    let t = 3_000_000_000;
    m.apply_record(&test(2, t, Direction::Upload, Some((true, 80.0, 1))));
    m.apply_record(&test(3, t, Direction::Download, Some((false, 70.0, 2))));
    assert_eq!(value(&m, throttled).as_deref(), Some("1"));
    assert_eq!(value(&m, &hottest).as_deref(), Some("80"));
    assert_eq!(value(&m, &pressure).as_deref(), Some("2"));
    // A newer cool test replaces the verdict; a late old one does not.
    m.apply_record(&test(4, 4 * t, Direction::Upload, Some((false, 50.0, 0))));
    m.apply_record(&test(5, t, Direction::Upload, Some((true, 99.0, 4))));
    assert_eq!(value(&m, throttled).as_deref(), Some("0"));
    assert_eq!(value(&m, &hottest).as_deref(), Some("50"));
    assert_eq!(value(&m, &pressure).as_deref(), Some("0"));
    let at = format!("boltwatch_bandwidth_last_test_timestamp_seconds{ap}");
    assert_eq!(value(&m, &at).as_deref(), Some("12"));
}

#[test]
fn history_judges_the_window_by_the_readings_that_cover_it() {
    let mut h = ThrottleHistory::default();
    assert_eq!(h.during(10, 20), None, "nothing read");
    for (at, throttled) in [(5, true), (10, false), (15, false)] {
        h.add(at, throttled);
    }
    // The reading at 5 covers time before the window; 10 ends at its start.
    assert_eq!(
        h.during(10, 20),
        None,
        "the window's end is not covered yet"
    );
    h.add(22, false);
    assert_eq!(h.during(10, 20), Some(false));
    // A throttled interval ending after the window began overlaps it.
    h.add(12, true);
    assert_eq!(h.during(10, 20), Some(true));
    assert_eq!(h.during(22, 30), None);
    // Throttled in the interval that closes the window: it counts.
    let mut h = ThrottleHistory::default();
    h.add(10, false);
    h.add(25, true);
    assert_eq!(h.during(10, 20), Some(true));
}

#[test]
fn history_is_bounded_and_keeps_the_newest() {
    let mut h = ThrottleHistory::default();
    let n = crate::bandwidth::THROTTLE_READINGS as u64;
    for at in 1..=n + 10 {
        h.add(at * 10, at == 3);
    }
    // The oldest went: the throttled reading at 30 is gone.
    assert_eq!(h.during(0, 40), None);
    assert_eq!(h.during(200, 210), Some(false));
    // Older than everything kept: dropped, not kept in place of the newest.
    h.add(5, true);
    assert_eq!(h.during(0, 40), None);
    assert_eq!(h.during(n * 10, (n + 10) * 10), Some(false));
}

/// A thermal record of `node` at `at` seconds.
fn reading(node: &str, seq: u64, at: u64, in_episode: bool) -> Record {
    let p = Payload::Thermal(ThermalReading {
        sensors: Vec::new(),
        throttle: Some(Throttle {
            level_known: true,
            in_episode,
            ..Default::default()
        }),
    });
    rec(node, "boot", seq, at * 1_000_000_000, p)
}

/// A successful test of node `a` against `p` from `start` for `secs` s.
fn test_of_a(seq: u64, start: u64, secs: u64, sampled: Option<bool>) -> Record {
    let Payload::Bandwidth(mut b) = result(start * 1_000_000_000, Direction::Upload, 1e9, "", 0)
    else {
        unreachable!()
    };
    b.duration_ns = secs * 1_000_000_000;
    if let Some(t) = sampled {
        b.thermals_sampled = true;
        b.throttled_during = t;
    }
    rec("a", "boot", seq, b.start_unix_ns, Payload::Bandwidth(b))
}

fn ends(m: &Metrics) -> (Option<String>, Option<String>) {
    let s = |end: &str| {
        let series = format!(
            "boltwatch_bandwidth_last_test_throttled{{node=\"a\",peer=\"p\",end=\"{end}\"}}"
        );
        value(m, &series)
    };
    (s("local"), s("peer"))
}

#[test]
fn the_peer_end_is_joined_from_its_own_readings_even_when_they_arrive_late() {
    let mut m = Metrics::new();
    m.apply_record(&test_of_a(1, 100, 10, Some(false)));
    assert_eq!(ends(&m), (Some("0".into()), None), "p has said nothing");
    // p's readings around the test arrive later (its spool replayed).
    for (seq, at, throttled) in [(1, 95, false), (2, 100, false), (3, 105, true)] {
        m.apply_record(&reading("p", seq, at, throttled));
    }
    assert_eq!(ends(&m), (Some("0".into()), Some("1".into())));
    // A newer test while p is cool: not blamed, once p's readings cover it.
    m.apply_record(&test_of_a(2, 200, 10, Some(false)));
    m.apply_record(&reading("p", 4, 205, false));
    assert_eq!(
        ends(&m).1.as_deref(),
        Some("1"),
        "the window's end is not covered yet: the test before's verdict stands"
    );
    m.apply_record(&reading("p", 5, 211, false));
    assert_eq!(ends(&m), (Some("0".into()), Some("0".into())));
    // Throttling after the test blames nothing.
    m.apply_record(&reading("p", 6, 216, true));
    assert_eq!(ends(&m), (Some("0".into()), Some("0".into())));
}

#[test]
fn the_local_end_falls_back_to_the_nodes_own_readings() {
    let mut m = Metrics::new();
    m.apply_record(&reading("a", 1, 99, false));
    m.apply_record(&reading("a", 2, 104, true));
    m.apply_record(&reading("a", 3, 111, false));
    m.apply_record(&test_of_a(4, 100, 10, None));
    assert_eq!(ends(&m), (Some("1".into()), None));
    // The agent's own sampling, when present, is the verdict.
    m.apply_record(&test_of_a(5, 100, 10, Some(false)));
    assert_eq!(ends(&m).0.as_deref(), Some("0"));
}
