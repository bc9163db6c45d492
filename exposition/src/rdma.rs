//! The RDMA probe of each link (`rdma_probe` records, docs/rdma.md): its
//! own families beside STAMP's, so RDMA latency sits next to the link's
//! UDP latency and never mixes into it, and the probe's errors by device
//! and class.
//!
//! The RTT histogram has STAMP's buckets (10 µs to 5 s): RDMA round trips
//! of a few µs land in its first bucket, so the exact figures are the
//! newest window's median gauge and the histogram's `_sum`/`_count`.

use std::collections::BTreeMap;

use boltwatch_proto::rdma::class_label;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{RdmaErrorClass, RdmaProbe, Record};

use crate::domain::{Domain, Subjects};
use crate::family::{families, labels::NODE_PEER, At, Exposition, Newest};
use crate::histogram::RttHistogram;

/// The payload kinds [`RdmaMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["rdma_probe"];

families! {
    RTT_SECONDS = Histogram("boltwatch_rdma_rtt_seconds", "seconds", NODE_PEER, "RDMA SEND ping-pong round-trip time to the peer (64 B and 4 KiB frames on the link's UC queue pair).");
    P50 = Gauge("boltwatch_rdma_rtt_p50_seconds", "seconds", NODE_PEER, "Median RDMA round-trip time of the newest probe window.");
    SENT = Counter("boltwatch_rdma_probe_sent_total", "", NODE_PEER, "RDMA pings sent to the peer.");
    RECEIVED = Counter("boltwatch_rdma_probe_received_total", "", NODE_PEER, "RDMA pings whose pong came back with the right sequence and CRC in time.");
    LOST = Counter("boltwatch_rdma_probe_lost_total", "", NODE_PEER, "RDMA pings with no pong within the pong timeout, whatever their send completion said.");
    SEND_BANDWIDTH = Gauge("boltwatch_rdma_send_bandwidth_bytes_per_second", "bytes_per_second", NODE_PEER, "Send bandwidth of the newest RDMA burst (rdma.burst_interval): bytes the peer counted with a good CRC over the time from its first grant to its tally.");
    ERRORS = Counter("boltwatch_rdma_errors_total", "", &["node", "device", "class"], "RDMA probe errors by class: port_down, pd_alloc, rtr_bridge_on (errno 22), rtr_gid_unreachable (errno 60), rtr_stale (errno 16), completion_status, crc_mismatch, sequence_gap, watchdog_timeout (the port is wedged).");
}

#[derive(Debug, Default, Clone)]
struct Link {
    rtt: RttHistogram,
    /// sent, received, lost.
    probes: [u64; 3],
    p50: Newest<f64>,
    send_bandwidth: Newest<f64>,
}

/// State behind the RDMA families.
#[derive(Debug, Default, Clone)]
pub struct RdmaMetrics {
    links: BTreeMap<(String, String), Link>,
    errors: BTreeMap<(String, String, &'static str), u64>,
}

impl RdmaMetrics {
    fn add(&mut self, r: &Record, p: &RdmaProbe) {
        if let Some(s) = &p.rtt {
            let l = self
                .links
                .entry((r.node.clone(), s.peer.clone()))
                .or_default();
            l.rtt.add(&s.buckets, s.sum_ns, s.received);
            for (t, n) in l.probes.iter_mut().zip([s.sent, s.received, s.lost]) {
                *t += n;
            }
            if s.received > 0 {
                l.p50.update(At::of(r), s.p50_ns as f64 / 1e9);
            }
            // A burst with no tally confirmed nothing: 0, not skipped.
            if p.burst_sent_bytes > 0 {
                let secs = p.burst_ns as f64 / 1e9;
                let bps = if secs > 0.0 {
                    p.burst_confirmed_bytes as f64 / secs
                } else {
                    0.0
                };
                l.send_bandwidth.update(At::of(r), bps);
            }
        }
        for e in &p.errors {
            let class = RdmaErrorClass::try_from(e.class).ok().and_then(class_label);
            // A class this build does not know is dropped, not guessed.
            if let Some(class) = class {
                *self
                    .errors
                    .entry((r.node.clone(), p.device.clone(), class))
                    .or_default() += e.count;
            }
        }
    }
}

impl Domain for RdmaMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        if let Some(Payload::RdmaProbe(p)) = &r.payload {
            self.add(r, p);
        }
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let links = || {
            self.links
                .iter()
                .map(|((n, p), l)| ([n.as_str(), p.as_str()], l))
        };
        e.histograms(&RTT_SECONDS, links().map(|(k, l)| (k, l.rtt.buckets())));
        e.family(&P50, links().filter_map(|(k, l)| Some((k, *l.p50.get()?))));
        for (i, f) in [SENT, RECEIVED, LOST].iter().enumerate() {
            e.family(f, links().map(|(k, l)| (k, l.probes[i])));
        }
        e.family(
            &SEND_BANDWIDTH,
            links().filter_map(|(k, l)| Some((k, *l.send_bandwidth.get()?))),
        );
        e.family(
            &ERRORS,
            self.errors
                .iter()
                .map(|((n, d, c), v)| ([n.as_str(), d.as_str(), *c], *v)),
        );
    }

    fn forget(&mut self, node: &str) {
        for ((n, _), l) in self.links.iter_mut() {
            if n == node {
                l.p50 = Newest::default();
                l.send_bandwidth = Newest::default();
            }
        }
    }
}
