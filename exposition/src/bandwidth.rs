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
//!
//! Thermal blame names the end: `boltwatch_bandwidth_last_test_throttled`
//! has `end="local"` (the node that ran the test, as its agent sampled
//! itself during the test; from the node's own thermal records when it did
//! not) and `end="peer"` (the peer, from the peer's own thermal records).
//! The peer's verdict is a join made at render time of the peer's readings
//! against the test's start..end window, so readings that arrive after the
//! test's records (a spool replayed late) still count. For that this
//! domain also reads `thermal` records, keeping the newest
//! [`THROTTLE_READINGS`] of each node ([`ThrottleHistory`]); it exports no
//! thermal series of its own. A reading covers the interval since the
//! node's previous one, so the window is judged by the readings after its
//! start up to the first at or after its end: throttled as soon as one of
//! them says so, not throttled once that last one has arrived saying no,
//! unknown before: then the test before's verdict stands (no series when
//! that is unknown too).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use boltwatch_proto::throttle::reading_throttled;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol, Record};

use crate::domain::{Domain, NodePeer, Subjects};
use crate::family::{families, labels::NODE_PEER, pair, At, Exposition, Family, Newest};
use crate::key;

/// Test start times remembered per link to count a test once although it
/// yields a record per direction.
pub const SEEN_TESTS: usize = 64;

/// Thermal readings kept per node for the join (an hour at a 1 s thermal
/// interval, 6 at the default 5 s).
pub const THROTTLE_READINGS: usize = 4096;

/// Label values of `end`: which end of the link was throttled.
const ENDS: [&str; 2] = ["local", "peer"];

/// The payload kinds [`BandwidthMetrics`]'s `apply` reads: its own, and
/// `thermal`, read only to judge each test by its peer's throttling.
pub const KINDS: &[&str] = &["bandwidth", "thermal"];

families! {
    LAST_RESULT = Gauge("boltwatch_bandwidth_bytes_per_second", "bytes_per_second", &["node", "peer", "direction", "protocol"], "Throughput of the last successful bandwidth test, counted at the receiver.");
    LAST_TEST = Gauge("boltwatch_bandwidth_last_test_timestamp_seconds", "seconds", NODE_PEER, "Start time (unix seconds) of the newest successful bandwidth test against the peer.");
    LAST_THROTTLED = Gauge("boltwatch_bandwidth_last_test_throttled", "", &["node", "peer", "end"], "1 when that end of the link (end=local: the node, end=peer: the peer) was thermally throttled at any point during the newest successful bandwidth test of the node against the peer.");
    LAST_MAX_CELSIUS = Gauge("boltwatch_bandwidth_last_test_max_temperature_celsius", "celsius", NODE_PEER, "Highest temperature the node read during the newest successful bandwidth test against the peer.");
    LAST_MAX_PRESSURE = Gauge("boltwatch_bandwidth_last_test_max_pressure_level", "", NODE_PEER, "Highest thermal pressure level the node read during the newest successful bandwidth test against the peer (macOS 0 nominal .. 4 sleeping; Linux 0, or 1 while throttled).");
    EXPECTED = Gauge("boltwatch_bandwidth_expected_bytes_per_second", "bytes_per_second", NODE_PEER, "Throughput the node's agent expects from the link to the peer (bandwidth.expected, or bandwidth.expected_share of the link's negotiated speed).");
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
    /// Start plus the longest duration of its records.
    end_unix_ns: u64,
    /// Thermals during the test, when the agent sampled them.
    thermals: Option<TestThermals>,
    /// The window of the test before, whose joined verdict stands while
    /// this one's is not known yet (the readings closing its window have
    /// not arrived), so the series do not blink out at every test.
    previous: Option<(u64, u64)>,
}

/// The local end's thermals during a test, over both directions' records.
#[derive(Debug, Clone, Copy)]
struct TestThermals {
    throttled: bool,
    max_celsius: f64,
    max_pressure_level: u32,
}

impl TestThermals {
    /// Either direction's record may carry them: throttled if any says
    /// so, the hottest and highest of all.
    fn merge(seen: Option<TestThermals>, b: &BandwidthResult) -> TestThermals {
        let t = seen.unwrap_or(TestThermals {
            throttled: false,
            max_celsius: f64::MIN,
            max_pressure_level: 0,
        });
        TestThermals {
            throttled: t.throttled || b.throttled_during,
            max_celsius: t.max_celsius.max(b.max_celsius_during),
            max_pressure_level: t.max_pressure_level.max(b.max_pressure_level_during),
        }
    }
}

/// A node's newest thermal readings: when each was taken and whether the
/// interval ending then was throttled (pure, bounded).
#[derive(Debug, Default, Clone)]
pub struct ThrottleHistory {
    readings: BTreeMap<u64, bool>,
    /// The newest reading dropped for room: windows starting before it
    /// are no longer known.
    dropped: u64,
}

impl ThrottleHistory {
    /// A reading at `unix_ns`; when full, the oldest goes (a reading older
    /// than all kept is dropped instead).
    pub fn add(&mut self, unix_ns: u64, throttled: bool) {
        if self.readings.len() >= THROTTLE_READINGS && !self.readings.contains_key(&unix_ns) {
            match self.readings.first_key_value() {
                Some((&oldest, _)) if unix_ns > oldest => {
                    self.readings.pop_first();
                    self.dropped = oldest;
                }
                _ => {
                    self.dropped = self.dropped.max(unix_ns);
                    return;
                }
            }
        }
        self.readings.insert(unix_ns, throttled);
    }

    /// Whether the node was throttled at any point of `start..=end`:
    /// `Some(true)` once a reading whose interval overlaps the window says
    /// so, `Some(false)` once the first reading at or after `end` has
    /// arrived and none did, `None` until then (and for windows older than
    /// the readings kept).
    pub fn during(&self, start: u64, end: u64) -> Option<bool> {
        if start < self.dropped {
            return None;
        }
        for (&at, &throttled) in self.readings.range(start.saturating_add(1)..) {
            if throttled {
                return Some(true);
            }
            if at >= end {
                return Some(false);
            }
        }
        None
    }
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
    /// Every node's newest thermal readings, for the join.
    throttle: BTreeMap<String, ThrottleHistory>,
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
    fn add(&mut self, r: &Record, b: &BandwidthResult) {
        let node = r.node.as_str();
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
                .update(At::of(r), b.expected_bits_per_second);
        }
        if failed {
            return;
        }
        let last = self.last_test.entry(link).or_default();
        if b.start_unix_ns > last.start_unix_ns {
            *last = LastTest {
                start_unix_ns: b.start_unix_ns,
                end_unix_ns: b.start_unix_ns,
                thermals: None,
                previous: (last.start_unix_ns > 0)
                    .then_some((last.start_unix_ns, last.end_unix_ns)),
            };
        }
        if b.start_unix_ns == last.start_unix_ns {
            let end = b.start_unix_ns.saturating_add(b.duration_ns);
            last.end_unix_ns = last.end_unix_ns.max(end);
        }
        if b.start_unix_ns == last.start_unix_ns && b.thermals_sampled {
            last.thermals = Some(TestThermals::merge(last.thermals, b));
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

impl BandwidthMetrics {
    /// Whether the node (local) and the peer were throttled during the
    /// link's newest test, where known.
    fn ends_throttled(&self, (node, peer): &NodePeer, t: &LastTest) -> [Option<bool>; 2] {
        let joined = |n: &str| {
            let h = self.throttle.get(n)?;
            h.during(t.start_unix_ns, t.end_unix_ns).or_else(|| {
                let (start, end) = t.previous?;
                h.during(start, end)
            })
        };
        let local = t.thermals.map(|x| x.throttled);
        [local.or_else(|| joined(node)), joined(peer)]
    }
}

impl Domain for BandwidthMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        match &r.payload {
            Some(Payload::Bandwidth(b)) => self.add(r, b),
            Some(Payload::Thermal(t)) => {
                if let Some(th) = &t.throttle {
                    let make = || r.node.clone();
                    key::with(&mut self.throttle, r.node.as_str(), make, |t| {
                        t.add(r.unix_ns, reading_throttled(th))
                    });
                }
            }
            _ => {}
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
            lt.iter().flat_map(|(k, t)| {
                let [local, peer] = self.ends_throttled(k, t);
                let [n, p] = pair(k);
                [(local, ENDS[0]), (peer, ENDS[1])]
                    .into_iter()
                    .filter_map(move |(v, end)| Some(([n, p, end], v?)))
            }),
        );
        e.family(
            &LAST_MAX_CELSIUS,
            lt.iter()
                // 0: the node has no sensor (sensors read 15 C or more).
                .filter_map(|(k, t)| {
                    Some((pair(k), t.thermals?.max_celsius)).filter(|(_, c)| *c > 0.0)
                }),
        );
        e.family(
            &LAST_MAX_PRESSURE,
            lt.iter()
                .filter_map(|(k, t)| Some((pair(k), t.thermals?.max_pressure_level))),
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
