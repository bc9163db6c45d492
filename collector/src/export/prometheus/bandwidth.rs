//! Bandwidth and throughput metrics: the last test result per direction,
//! test, failure and retransmit counters, passive interface throughput
//! computed here from consecutive counter records, and the RTT histogram of
//! windows a bandwidth test overlapped (`boltwatch_rtt_under_load_seconds`;
//! RTT at rest is `boltwatch_rtt_seconds` minus it, bucket by bucket).
//!
//! Pure, like the rest of [`super`]: records in, text out.
//!
//! Passive throughput: a rate needs two readings of an interface, so the
//! gauge appears with the second record. Kernel counters are 64-bit and do
//! not wrap in practice (80 Gbit/s takes 58 years), so a smaller value is a
//! reset (interface re-created, driver reloaded): the new value counts from
//! zero, as Prometheus' `rate()` assumes. A record not newer than the last
//! one seen for its interface (a replayed spool, a reordered batch) is
//! ignored, so the rate is always over forward time.

use std::collections::{BTreeMap, VecDeque};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol, Record, RttSummary};

use super::{classic_slot, fmt_f64, header, rtt_bounds, rtt_indexes, sample};

/// Test start times remembered per link to count a test once although it
/// yields a record per direction.
const SEEN_TESTS: usize = 64;

/// Receive and transmit rates from successive 64-bit byte counters.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CounterRate {
    last: Option<(u64, [u64; 2])>,
    rate: Option<[f64; 2]>,
}

impl CounterRate {
    /// A reading of `[receive_bytes, transmit_bytes]` taken at `unix_ns`.
    /// Returns false (and changes nothing) when it is not newer than the
    /// last reading.
    pub fn update(&mut self, unix_ns: u64, bytes: [u64; 2]) -> bool {
        let Some((t0, b0)) = self.last else {
            self.last = Some((unix_ns, bytes));
            return true;
        };
        if unix_ns <= t0 {
            return false;
        }
        let secs = (unix_ns - t0) as f64 / 1e9;
        let rate = |new: u64, old: u64| {
            // Smaller means reset: the counter restarted from zero.
            let delta = if new >= old { new - old } else { new };
            delta as f64 * 8.0 / secs
        };
        self.rate = Some([rate(bytes[0], b0[0]), rate(bytes[1], b0[1])]);
        self.last = Some((unix_ns, bytes));
        true
    }

    /// `[receive, transmit]` bits per second between the last two readings.
    pub fn bits_per_second(&self) -> Option<[f64; 2]> {
        self.rate
    }
}

#[derive(Debug, Default)]
struct TestCounts {
    tests: u64,
    failures: u64,
    retransmits: u64,
    seen: VecDeque<(u64, bool)>,
}

#[derive(Debug, Default)]
struct Histogram {
    buckets: Vec<u64>,
    sum_ns: u128,
    count: u64,
}

/// The state behind this module's metrics.
#[derive(Debug, Default)]
pub(super) struct BandwidthMetrics {
    /// (node, peer, direction, protocol) -> (test start, bits/s).
    last: BTreeMap<(String, String, &'static str, &'static str), (u64, f64)>,
    tests: BTreeMap<(String, String), TestCounts>,
    throughput: BTreeMap<(String, String), CounterRate>,
    under_load: BTreeMap<(String, String), Histogram>,
}

fn direction_label(d: i32) -> &'static str {
    match Direction::try_from(d) {
        Ok(Direction::Upload) => "upload",
        Ok(Direction::Download) => "download",
        _ => "unspecified",
    }
}

fn protocol_label(p: i32) -> &'static str {
    match Protocol::try_from(p) {
        Ok(Protocol::Tcp) => "tcp",
        Ok(Protocol::Udp) => "udp",
        _ => "unspecified",
    }
}

impl BandwidthMetrics {
    /// A newly stored record.
    pub(super) fn apply(&mut self, r: &Record) {
        match &r.payload {
            Some(Payload::Bandwidth(b)) => self.apply_result(&r.node, b),
            Some(Payload::Counters(c)) => {
                self.throughput
                    .entry((r.node.clone(), c.interface.clone()))
                    .or_default()
                    .update(r.unix_ns, [c.receive_bytes, c.transmit_bytes]);
            }
            Some(Payload::Rtt(s)) => self.apply_rtt(&r.node, s),
            _ => {}
        }
    }

    fn apply_rtt(&mut self, node: &str, s: &RttSummary) {
        let key = (node.to_string(), s.peer.clone());
        // A probed peer's bandwidth counters exist at 0 from the start.
        self.tests.entry(key.clone()).or_default();
        let h = self.under_load.entry(key).or_insert_with(|| Histogram {
            buckets: vec![0; rtt_indexes().count() + 1],
            ..Default::default()
        });
        if !s.under_load {
            return;
        }
        for b in &s.buckets {
            h.buckets[classic_slot(b.index)] += b.count;
        }
        h.sum_ns += u128::from(s.sum_ns);
        h.count += s.buckets.iter().map(|b| b.count).sum::<u64>();
    }

    fn apply_result(&mut self, node: &str, b: &BandwidthResult) {
        let failed = !b.error.is_empty();
        let t = self
            .tests
            .entry((node.to_string(), b.peer.clone()))
            .or_default();
        t.retransmits += b.retransmits;
        match t
            .seen
            .iter_mut()
            .find(|(start, _)| *start == b.start_unix_ns)
        {
            // The other direction of a test already counted.
            Some((_, was_failed)) => {
                if failed && !*was_failed {
                    *was_failed = true;
                    t.failures += 1;
                }
            }
            None => {
                if t.seen.len() == SEEN_TESTS {
                    t.seen.pop_front();
                }
                t.seen.push_back((b.start_unix_ns, failed));
                t.tests += 1;
                t.failures += u64::from(failed);
            }
        }
        if failed {
            return;
        }
        let slot = self
            .last
            .entry((
                node.to_string(),
                b.peer.clone(),
                direction_label(b.direction),
                protocol_label(b.protocol),
            ))
            .or_insert((b.start_unix_ns, b.bits_per_second));
        if b.start_unix_ns >= slot.0 {
            *slot = (b.start_unix_ns, b.bits_per_second);
        }
    }

    /// Renders this module's metrics.
    pub(super) fn render(&self, o: &mut String) {
        header(
            o,
            "boltwatch_bandwidth_bits_per_second",
            "Throughput of the last successful bandwidth test, counted at the receiver.",
            "gauge",
        );
        for ((node, peer, dir, proto), (_, bps)) in &self.last {
            let labels = [
                ("node", node.as_str()),
                ("peer", peer),
                ("direction", dir),
                ("protocol", proto),
            ];
            sample(
                o,
                "boltwatch_bandwidth_bits_per_second",
                &labels,
                fmt_f64(*bps),
            );
        }
        type Counter = (&'static str, &'static str, fn(&TestCounts) -> u64);
        let counters: [Counter; 3] = [
            (
                "boltwatch_bandwidth_tests_total",
                "Bandwidth tests run against the peer, successful or not.",
                |t| t.tests,
            ),
            (
                "boltwatch_bandwidth_test_failures_total",
                "Bandwidth tests against the peer that failed.",
                |t| t.failures,
            ),
            (
                "boltwatch_bandwidth_retransmits_total",
                "TCP segments retransmitted during bandwidth tests, both directions.",
                |t| t.retransmits,
            ),
        ];
        for (name, help, get) in counters {
            header(o, name, help, "counter");
            for ((node, peer), t) in &self.tests {
                sample(
                    o,
                    name,
                    &[("node", node), ("peer", peer)],
                    get(t).to_string(),
                );
            }
        }
        header(
            o,
            "boltwatch_interface_throughput_bits_per_second",
            "Interface throughput between the last two counter readings.",
            "gauge",
        );
        for ((node, iface), r) in &self.throughput {
            if let Some(rates) = r.bits_per_second() {
                for (dir, v) in ["receive", "transmit"].iter().zip(rates) {
                    sample(
                        o,
                        "boltwatch_interface_throughput_bits_per_second",
                        &[("node", node), ("interface", iface), ("direction", dir)],
                        fmt_f64(v),
                    );
                }
            }
        }
        self.render_under_load(o);
    }

    fn render_under_load(&self, o: &mut String) {
        const NAME: &str = "boltwatch_rtt_under_load_seconds";
        header(
            o,
            NAME,
            "STAMP round-trip time of probe windows a bandwidth test overlapped.",
            "histogram",
        );
        let bounds: Vec<String> = rtt_bounds().into_iter().map(fmt_f64).collect();
        for ((node, peer), h) in &self.under_load {
            let mut cum = 0u64;
            for (le, n) in bounds.iter().zip(&h.buckets) {
                cum += n;
                sample(
                    o,
                    "boltwatch_rtt_under_load_seconds_bucket",
                    &[("node", node), ("peer", peer), ("le", le)],
                    cum.to_string(),
                );
            }
            sample(
                o,
                "boltwatch_rtt_under_load_seconds_bucket",
                &[("node", node), ("peer", peer), ("le", "+Inf")],
                h.count.to_string(),
            );
            sample(
                o,
                "boltwatch_rtt_under_load_seconds_sum",
                &[("node", node), ("peer", peer)],
                fmt_f64(h.sum_ns as f64 / 1e9),
            );
            sample(
                o,
                "boltwatch_rtt_under_load_seconds_count",
                &[("node", node), ("peer", peer)],
                h.count.to_string(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{HistogramBucket, InterfaceCounters};

    const S: u64 = 1_000_000_000;

    #[test]
    fn rate_needs_two_readings_and_counts_bits() {
        let mut r = CounterRate::default();
        assert!(r.update(10 * S, [1_000, 0]));
        assert_eq!(r.bits_per_second(), None);
        // 1 GB received and 0.5 GB sent in 2 s.
        assert!(r.update(12 * S, [1_000 + 1_000_000_000, 500_000_000]));
        assert_eq!(r.bits_per_second(), Some([4e9, 2e9]));
    }

    #[test]
    fn full_64_bit_range_without_overflow() {
        let mut r = CounterRate::default();
        let big = u64::MAX - 10_000_000_000;
        r.update(S, [big, big]);
        r.update(2 * S, [big + 10_000_000_000, big]);
        assert_eq!(r.bits_per_second(), Some([80e9, 0.0]));
    }

    #[test]
    fn smaller_value_is_a_reset_not_a_wrap() {
        let mut r = CounterRate::default();
        r.update(S, [5_000_000, 7_000_000]);
        // The interface was re-created: counters restart near zero.
        r.update(2 * S, [1_000, 7_000_125]);
        assert_eq!(r.bits_per_second(), Some([8_000.0, 1_000.0]));
    }

    #[test]
    fn replayed_and_out_of_order_readings_are_ignored() {
        let mut r = CounterRate::default();
        r.update(10 * S, [0, 0]);
        r.update(11 * S, [125, 0]);
        let before = r.clone();
        assert!(!r.update(11 * S, [999_999, 0]), "same time: replay");
        assert!(!r.update(5 * S, [0, 0]), "older");
        assert_eq!(r, before);
        r.update(12 * S, [250, 0]);
        assert_eq!(r.bits_per_second(), Some([1_000.0, 0.0]));
    }

    fn rec(node: &str, unix_ns: u64, p: Payload) -> Record {
        Record {
            node: node.into(),
            boot_id: "b".into(),
            seq: 1,
            unix_ns,
            payload: Some(p),
        }
    }

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
        let mut m = BandwidthMetrics::default();
        m.apply(&rec("a", 1, result(100, Direction::Upload, 10e9, "", 3)));
        m.apply(&rec("a", 1, result(100, Direction::Download, 9e9, "", 2)));
        m.apply(&rec(
            "a",
            2,
            result(200, Direction::Upload, 0.0, "refused", 0),
        ));
        // An older test replayed late does not replace the newer figure.
        m.apply(&rec("a", 0, result(50, Direction::Upload, 1e9, "", 0)));
        let t = &m.tests[&("a".to_string(), "p".to_string())];
        assert_eq!((t.tests, t.failures, t.retransmits), (3, 1, 5));
        let key = ("a".to_string(), "p".to_string(), "upload", "tcp");
        assert_eq!(m.last[&key], (100, 10e9));
        let mut o = String::new();
        m.render(&mut o);
        assert!(o.contains("boltwatch_bandwidth_bits_per_second{node=\"a\",peer=\"p\",direction=\"download\",protocol=\"tcp\"} 9000000000\n"), "{o}");
        assert!(o.contains("boltwatch_bandwidth_tests_total{node=\"a\",peer=\"p\"} 3\n"));
        assert!(o.contains("boltwatch_bandwidth_test_failures_total{node=\"a\",peer=\"p\"} 1\n"));
        assert!(o.contains("boltwatch_bandwidth_retransmits_total{node=\"a\",peer=\"p\"} 5\n"));
    }

    #[test]
    fn only_windows_under_load_enter_the_under_load_histogram() {
        let mut m = BandwidthMetrics::default();
        let w = |under_load, n| {
            Payload::Rtt(RttSummary {
                peer: "p".into(),
                received: n,
                sum_ns: n * 50_000,
                buckets: vec![HistogramBucket {
                    index: -114,
                    count: n,
                }],
                under_load,
                ..Default::default()
            })
        };
        m.apply(&rec("a", 1, w(false, 10)));
        let mut o = String::new();
        m.render(&mut o);
        assert!(
            o.contains("boltwatch_rtt_under_load_seconds_count{node=\"a\",peer=\"p\"} 0\n"),
            "{o}"
        );
        assert!(
            o.contains("boltwatch_bandwidth_tests_total{node=\"a\",peer=\"p\"} 0\n"),
            "{o}"
        );
        m.apply(&rec("a", 2, w(true, 7)));
        let mut o = String::new();
        m.render(&mut o);
        assert!(
            o.contains("boltwatch_rtt_under_load_seconds_count{node=\"a\",peer=\"p\"} 7\n"),
            "{o}"
        );
        assert!(o.contains(
            "boltwatch_rtt_under_load_seconds_bucket{node=\"a\",peer=\"p\",le=\"+Inf\"} 7\n"
        ));
    }

    #[test]
    fn throughput_rendered_per_direction_from_the_second_reading() {
        let mut m = BandwidthMetrics::default();
        let c = |rx, tx| {
            Payload::Counters(InterfaceCounters {
                interface: "tb1".into(),
                receive_bytes: rx,
                transmit_bytes: tx,
                ..Default::default()
            })
        };
        m.apply(&rec("a", S, c(0, 0)));
        let mut o = String::new();
        m.render(&mut o);
        assert!(!o.contains("boltwatch_interface_throughput_bits_per_second{"));
        m.apply(&rec("a", 2 * S, c(1_250_000_000, 125)));
        let mut o = String::new();
        m.render(&mut o);
        assert!(o.contains("boltwatch_interface_throughput_bits_per_second{node=\"a\",interface=\"tb1\",direction=\"receive\"} 10000000000\n"), "{o}");
        assert!(o.contains("boltwatch_interface_throughput_bits_per_second{node=\"a\",interface=\"tb1\",direction=\"transmit\"} 1000\n"), "{o}");
    }
}
