//! RDMA probe windows (`rdma_probe` records) per link: their own transport
//! in the report, beside and never inside the STAMP RTT figures or the
//! verdict (docs/rdma.md). Pure.

use std::collections::BTreeMap;

use boltwatch_proto::rdma::class_label;
use boltwatch_proto::v1::{RdmaErrorClass, RdmaProbe, RttSummary};
use serde::Serialize;

/// One link's RDMA probing over the range.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RdmaLink {
    /// Probing node.
    pub node: String,
    /// Probed peer.
    pub peer: String,
    /// The verbs device.
    pub device: String,
    /// Pings sent, pongs received, pings lost.
    pub sent: u64,
    /// See `sent`.
    pub received: u64,
    /// See `sent`.
    pub lost: u64,
    /// Exact round-trip extremes and mean over the range, µs (0 without a pong).
    pub min_us: f64,
    /// See `min_us`.
    pub mean_us: f64,
    /// See `min_us`.
    pub max_us: f64,
    /// Errors by class label.
    pub errors: BTreeMap<String, u64>,
    /// Send-bandwidth bursts that ended in the range (`rdma.burst_interval`).
    pub bursts: u64,
    /// Bytes the peer confirmed over the bursts' time, Gbit/s (`None`
    /// without a burst): only confirmed bytes count, completions do not
    /// mean delivery.
    pub burst_mean_gbps: Option<f64>,
    /// The slowest burst, Gbit/s; 0 for one that nothing confirmed.
    pub burst_worst_gbps: Option<f64>,
    /// Bytes posted in bursts that the peer never confirmed.
    pub burst_unconfirmed_bytes: u64,
}

/// (node, peer, device).
type Key = (String, String, String);

/// One link's windows merged.
#[derive(Debug, Default)]
struct Acc {
    rtt: RttSummary,
    errors: BTreeMap<String, u64>,
    bursts: u64,
    confirmed_bytes: u64,
    burst_ns: u64,
    worst_gbps: Option<f64>,
    unconfirmed_bytes: u64,
}

impl Acc {
    /// A window's burst, if one ended in it. Saturating, like the rest: a
    /// forged figure must not stop a report.
    fn burst(&mut self, p: &RdmaProbe) {
        if p.burst_sent_bytes == 0 {
            return;
        }
        self.bursts += 1;
        let confirmed = p.burst_confirmed_bytes.min(p.burst_sent_bytes);
        self.unconfirmed_bytes = self
            .unconfirmed_bytes
            .saturating_add(p.burst_sent_bytes - confirmed);
        let gbps = gbps(confirmed, p.burst_ns);
        self.worst_gbps = Some(self.worst_gbps.map_or(gbps, |w| w.min(gbps)));
        if p.burst_ns > 0 {
            self.confirmed_bytes = self.confirmed_bytes.saturating_add(confirmed);
            self.burst_ns = self.burst_ns.saturating_add(p.burst_ns);
        }
    }
}

/// `bytes` in `ns`, Gbit/s; 0 when no time was measured (nothing confirmed).
fn gbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / ns as f64
    }
}

/// The links' windows as they come.
#[derive(Debug, Default)]
pub struct RdmaAcc {
    links: BTreeMap<Key, Acc>,
}

impl RdmaAcc {
    /// One window of `node`'s.
    pub fn add(&mut self, node: &str, p: &RdmaProbe) {
        let peer = p.rtt.as_ref().map_or("", |s| s.peer.as_str());
        let key = (node.to_string(), peer.to_string(), p.device.clone());
        let acc = self.links.entry(key).or_default();
        // Counted errors saturate like the merged figures: a forged count
        // must not stop a report.
        if let Some(s) = &p.rtt {
            boltwatch_proto::merge::rtt(&mut acc.rtt, s);
        }
        acc.burst(p);
        let errors = &mut acc.errors;
        for e in &p.errors {
            let class = RdmaErrorClass::try_from(e.class).ok().and_then(class_label);
            let label = class.map_or_else(|| e.class.to_string(), str::to_string);
            let n = errors.entry(label).or_default();
            *n = n.saturating_add(e.count);
        }
    }

    /// The links, in (node, peer, device) order.
    pub fn finish(self) -> Vec<RdmaLink> {
        self.links
            .into_iter()
            .map(|((node, peer, device), acc)| {
                let s = &acc.rtt;
                let us = |ns: u64| {
                    if s.received == 0 {
                        0.0
                    } else {
                        ns as f64 / 1e3
                    }
                };
                RdmaLink {
                    node,
                    peer,
                    device,
                    sent: s.sent,
                    received: s.received,
                    lost: s.lost,
                    min_us: us(s.min_ns),
                    mean_us: us(s.sum_ns.checked_div(s.received).unwrap_or(0)),
                    max_us: us(s.max_ns),
                    bursts: acc.bursts,
                    burst_mean_gbps: (acc.bursts > 0)
                        .then(|| gbps(acc.confirmed_bytes, acc.burst_ns)),
                    burst_worst_gbps: acc.worst_gbps,
                    burst_unconfirmed_bytes: acc.unconfirmed_bytes,
                    errors: acc.errors,
                }
            })
            .collect()
    }
}
