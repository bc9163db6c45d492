//! Bandwidth tests (`bandwidth` records, one per direction of a test): the
//! last successful result per direction and protocol with when that test
//! started, the expected throughput the agent was configured with, whether
//! the last test ran under thermal throttling, and test, failure and
//! retransmit counters per link. Every probed link has its counters at 0
//! before its first test.
//!
//! Units: the schema carries bits per second (Thunderbolt speeds are quoted
//! in bits); `/metrics` exports bytes per second, Prometheus' base unit.
//! `direction` is the interfaces' vocabulary, seen from `node`: `transmit`
//! (node sends to peer, the schema's upload) and `receive` (download).
//!
//! A test yields a record per direction; it is counted once, by its start
//! time, among the last [`SEEN_TESTS`] of its link, and as failed when
//! either direction failed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol, Record};

use super::family::{families, labels::NODE_PEER, pair, Exposition, Family, Newest};
use super::{Domain, NodePeer, Subjects};

/// Test start times remembered per link to count a test once although it
/// yields a record per direction.
pub const SEEN_TESTS: usize = 64;

families! {
    LAST_RESULT = Gauge("boltwatch_bandwidth_bytes_per_second", "bytes_per_second", &["node", "peer", "direction", "protocol"], "Throughput of the last successful bandwidth test, counted at the receiver.");
    LAST_TEST = Gauge("boltwatch_bandwidth_last_test_timestamp_seconds", "seconds", NODE_PEER, "Start time (unix seconds) of the newest successful bandwidth test against the peer.");
    LAST_THROTTLED = Gauge("boltwatch_bandwidth_last_test_throttled", "", NODE_PEER, "1 when the node was thermally throttled at any point during the newest successful bandwidth test against the peer.");
    LAST_MAX_CELSIUS = Gauge("boltwatch_bandwidth_last_test_max_temperature_celsius", "celsius", NODE_PEER, "Highest temperature the node read during the newest successful bandwidth test against the peer.");
    EXPECTED = Gauge("boltwatch_bandwidth_expected_bytes_per_second", "bytes_per_second", NODE_PEER, "Throughput the node's agent is configured to expect from the link to the peer (bandwidth.expected).");
    TESTS = Counter("boltwatch_bandwidth_tests_total", "", NODE_PEER, "Bandwidth tests run against the peer, successful or not.");
    FAILURES = Counter("boltwatch_bandwidth_test_failures_total", "", NODE_PEER, "Bandwidth tests against the peer that failed.");
    RETRANSMITS = Counter("boltwatch_bandwidth_retransmits_total", "", NODE_PEER, "TCP segments retransmitted during bandwidth tests, both directions.");
}

/// Tests, failures and retransmits, in [`TestCounts::totals`] order.
const COUNTERS: [Family; 3] = [TESTS, FAILURES, RETRANSMITS];

#[derive(Debug, Default, Clone)]
struct TestCounts {
    /// tests, failures, retransmits.
    totals: [u64; 3],
    /// (start, failed) of the latest tests.
    seen: VecDeque<(u64, bool)>,
}

type ResultKey = (String, String, &'static str, &'static str);

/// What the newest successful test of a link says beyond its throughput.
#[derive(Debug, Clone, Copy, Default)]
struct LastTest {
    start_unix_ns: u64,
    /// Thermals during the test, when the agent sampled them.
    thermals: Option<(bool, f64)>,
}

/// State behind the bandwidth families.
#[derive(Debug, Default, Clone)]
pub struct BandwidthMetrics {
    /// (node, peer, direction, protocol) -> (test start, bits/s).
    last: BTreeMap<ResultKey, (u64, f64)>,
    /// The newest successful test per link.
    last_test: BTreeMap<NodePeer, LastTest>,
    /// Expected bits/s per link, newest record's.
    expected: BTreeMap<NodePeer, Newest<f64>>,
    tests: BTreeMap<NodePeer, TestCounts>,
}

fn direction_label(d: i32) -> &'static str {
    match Direction::try_from(d) {
        Ok(Direction::Upload) => "transmit",
        Ok(Direction::Download) => "receive",
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
    fn add(&mut self, node: &str, b: &BandwidthResult) {
        let failed = !b.error.is_empty();
        let t = self
            .tests
            .entry((node.to_string(), b.peer.clone()))
            .or_default();
        t.totals[2] += b.retransmits;
        match t
            .seen
            .iter_mut()
            .find(|(start, _)| *start == b.start_unix_ns)
        {
            // The other direction of a test already counted.
            Some((_, was_failed)) => {
                if failed && !*was_failed {
                    *was_failed = true;
                    t.totals[1] += 1;
                }
            }
            None => {
                if t.seen.len() == SEEN_TESTS {
                    t.seen.pop_front();
                }
                t.seen.push_back((b.start_unix_ns, failed));
                t.totals[0] += 1;
                t.totals[1] += u64::from(failed);
            }
        }
        let link = (node.to_string(), b.peer.clone());
        if b.expected_bits_per_second > 0.0 {
            self.expected
                .entry(link.clone())
                .or_default()
                .update(b.start_unix_ns, b.expected_bits_per_second);
        }
        if failed {
            return;
        }
        let last = self.last_test.entry(link).or_default();
        if b.start_unix_ns > last.start_unix_ns {
            *last = LastTest {
                start_unix_ns: b.start_unix_ns,
                thermals: None,
            };
        }
        if b.start_unix_ns == last.start_unix_ns && b.thermals_sampled {
            // Either direction's record may carry them: throttled if any
            // says so, the hottest reading of all.
            let (t, c) = last.thermals.unwrap_or((false, f64::MIN));
            last.thermals = Some((t || b.throttled_during, c.max(b.max_celsius_during)));
        }
        let key = (
            node.to_string(),
            b.peer.clone(),
            direction_label(b.direction),
            protocol_label(b.protocol),
        );
        let slot = self.last.entry(key).or_insert((b.start_unix_ns, 0.0));
        if b.start_unix_ns >= slot.0 {
            *slot = (b.start_unix_ns, b.bits_per_second);
        }
    }
}

impl Domain for BandwidthMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        if let Some(Payload::Bandwidth(b)) = &r.payload {
            self.add(&r.node, b);
        }
    }

    fn render(&self, e: &mut Exposition, subjects: &Subjects) {
        e.family(
            &LAST_RESULT,
            self.last
                .iter()
                .map(|((n, p, d, proto), (_, bps))| ([n.as_str(), p, d, proto], *bps / 8.0)),
        );
        let lt = &self.last_test;
        e.family(
            &LAST_TEST,
            lt.iter()
                .map(|(k, t)| (pair(k), t.start_unix_ns as f64 / 1e9)),
        );
        e.family(
            &LAST_THROTTLED,
            lt.iter()
                .filter_map(|(k, t)| Some((pair(k), t.thermals?.0))),
        );
        e.family(
            &LAST_MAX_CELSIUS,
            lt.iter()
                // 0: the node has no sensor (sensors read 15 C or more).
                .filter_map(|(k, t)| Some((pair(k), t.thermals?.1)).filter(|(_, c)| *c > 0.0)),
        );
        e.family(
            &EXPECTED,
            self.expected
                .iter()
                .filter_map(|(k, v)| Some((pair(k), *v.get()? / 8.0))),
        );
        let keys: BTreeSet<&NodePeer> = self.tests.keys().chain(&subjects.probed).collect();
        let zero = TestCounts::default();
        for (i, f) in COUNTERS.iter().enumerate() {
            e.family(
                f,
                keys.iter().map(|k| {
                    let t = self.tests.get(*k).unwrap_or(&zero);
                    ([k.0.as_str(), k.1.as_str()], t.totals[i])
                }),
            );
        }
    }

    fn forget(&mut self, node: &str) {
        self.last.retain(|k, _| k.0 != node);
        self.last_test.retain(|k, _| k.0 != node);
        self.expected.retain(|k, _| k.0 != node);
    }
}
