//! STAMP probing of each link (`rtt` records): the RTT histogram, the RTT
//! histogram of windows a bandwidth test overlapped (RTT at rest is the
//! first minus the second, bucket by bucket), the newest window's
//! percentiles and the probe counters.
//!
//! Windows add up whatever order they arrive in; the percentile gauges keep
//! the window with the newest start, so a window replayed late from a
//! spool does not replace a fresher one. A window with no replies has no
//! RTT to show: its gauges read NaN.

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, RttSummary};

use crate::domain::{Domain, Subjects};
use crate::family::{families, labels::NODE_PEER, At, Exposition, Family, Newest};
use crate::histogram::RttHistogram;

/// The payload kinds [`RttMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["rtt"];

families! {
    RTT_SECONDS = Histogram("boltwatch_rtt_seconds", "seconds", NODE_PEER, "STAMP round-trip time to the peer, reflector turnaround subtracted.");
    MIN = Gauge("boltwatch_rtt_min_seconds", "seconds", NODE_PEER, "Smallest RTT of the newest probe window.");
    P50 = Gauge("boltwatch_rtt_p50_seconds", "seconds", NODE_PEER, "Median RTT of the newest probe window.");
    P99 = Gauge("boltwatch_rtt_p99_seconds", "seconds", NODE_PEER, "99th percentile RTT of the newest probe window.");
    MAX = Gauge("boltwatch_rtt_max_seconds", "seconds", NODE_PEER, "Largest RTT of the newest probe window.");
    SENT = Counter("boltwatch_probe_sent_total", "", NODE_PEER, "STAMP probes sent to the peer.");
    RECEIVED = Counter("boltwatch_probe_received_total", "", NODE_PEER, "STAMP probes answered by the peer in time.");
    LOST = Counter("boltwatch_probe_lost_total", "", NODE_PEER, "STAMP probes not answered within the timeout.");
    RTT_UNDER_LOAD_SECONDS = Histogram("boltwatch_rtt_under_load_seconds", "seconds", NODE_PEER, "STAMP round-trip time of probe windows a bandwidth test overlapped.");
}

/// The newest window's min, p50, p99 and max.
const WINDOW_GAUGES: [Family; 4] = [MIN, P50, P99, MAX];
/// Probes sent, received and lost.
const PROBE_COUNTERS: [Family; 3] = [SENT, RECEIVED, LOST];

#[derive(Debug, Default, Clone)]
struct LinkRtt {
    all: RttHistogram,
    under_load: RttHistogram,
    /// sent, received, lost.
    probes: [u64; 3],
    /// min, p50, p99, max of the newest window, seconds.
    newest: Newest<[f64; 4]>,
}

/// State behind the RTT families.
#[derive(Debug, Default, Clone)]
pub struct RttMetrics {
    /// node -> peer -> link: two levels, so a window finds its link by
    /// the record's strings in a few comparisons (in (node, peer) order,
    /// as one map of pairs would iterate).
    links: BTreeMap<String, BTreeMap<String, LinkRtt>>,
}

impl RttMetrics {
    /// Every link, in (node, peer) order.
    fn links(&self) -> impl Iterator<Item = ([&str; 2], &LinkRtt)> + '_ {
        self.links.iter().flat_map(|(node, peers)| {
            peers
                .iter()
                .map(move |(peer, l)| ([node.as_str(), peer.as_str()], l))
        })
    }
}

impl LinkRtt {
    fn add(&mut self, at: At, s: &RttSummary) {
        let l = self;
        l.all.add(&s.buckets, s.sum_ns, s.received);
        if s.under_load {
            let n = s.buckets.iter().map(|b| b.count).sum();
            l.under_load.add(&s.buckets, s.sum_ns, n);
        }
        for (total, n) in l.probes.iter_mut().zip([s.sent, s.received, s.lost]) {
            *total += n;
        }
        let secs = |ns: u64| {
            if s.received == 0 {
                f64::NAN
            } else {
                ns as f64 / 1e9
            }
        };
        let window = [s.min_ns, s.p50_ns, s.p99_ns, s.max_ns].map(secs);
        l.newest.update(at, window);
    }
}

impl Domain for RttMetrics {
    fn apply(&mut self, r: &Record, subjects: &mut Subjects) {
        let Some(Payload::Rtt(s)) = &r.payload else {
            return;
        };
        let known = self.links.get_mut(r.node.as_str());
        if let Some(l) = known.and_then(|peers| peers.get_mut(s.peer.as_str())) {
            // A known link is a subject already (subjects are never
            // removed).
            l.add(At::of(r), s);
            return;
        }
        let link = (r.node.clone(), s.peer.clone());
        self.links
            .entry(link.0.clone())
            .or_default()
            .entry(link.1.clone())
            .or_default()
            .add(At::of(r), s);
        subjects.peers.insert(link.clone());
        subjects.probed.insert(link);
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        e.histograms(
            &RTT_SECONDS,
            self.links().map(|(k, l)| (k, l.all.buckets())),
        );
        for (i, f) in WINDOW_GAUGES.iter().enumerate() {
            e.family(
                f,
                self.links()
                    .filter_map(|(k, l)| Some((k, l.newest.get()?[i]))),
            );
        }
        for (i, f) in PROBE_COUNTERS.iter().enumerate() {
            e.family(f, self.links().map(|(k, l)| (k, l.probes[i])));
        }
        e.histograms(
            &RTT_UNDER_LOAD_SECONDS,
            self.links().map(|(k, l)| (k, l.under_load.buckets())),
        );
    }

    fn forget(&mut self, node: &str) {
        // The histograms and probe counters stay; the newest window goes.
        for l in self
            .links
            .get_mut(node)
            .into_iter()
            .flat_map(|p| p.values_mut())
        {
            l.newest = Newest::default();
        }
    }
}
