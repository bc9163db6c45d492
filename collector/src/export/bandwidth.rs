//! Bandwidth tests (`bandwidth` records, one per direction of a test): the
//! last successful result per direction and protocol, and test, failure
//! and retransmit counters per link. Every probed link has its counters at
//! 0 before its first test.
//!
//! A test yields a record per direction; it is counted once, by its start
//! time, among the last [`SEEN_TESTS`] of its link, and as failed when
//! either direction failed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol, Record};

use super::family::{families, labels::NODE_PEER, Exposition, Family};
use super::{Domain, NodePeer, Subjects};

/// Test start times remembered per link to count a test once although it
/// yields a record per direction.
pub const SEEN_TESTS: usize = 64;

families! {
    LAST_RESULT = Gauge("boltwatch_bandwidth_bits_per_second", "bits_per_second", &["node", "peer", "direction", "protocol"], "Throughput of the last successful bandwidth test, counted at the receiver.");
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

/// State behind the bandwidth families.
#[derive(Debug, Default, Clone)]
pub struct BandwidthMetrics {
    /// (node, peer, direction, protocol) -> (test start, bits/s).
    last: BTreeMap<ResultKey, (u64, f64)>,
    tests: BTreeMap<NodePeer, TestCounts>,
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
        if failed {
            return;
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
                .map(|((n, p, d, proto), (_, bps))| ([n.as_str(), p, d, proto], *bps)),
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

    fn families(&self) -> &'static [Family] {
        FAMILIES
    }
}
