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
}

/// (node, peer, device).
type Key = (String, String, String);
/// The merged windows and the errors by class label.
type Acc = (RttSummary, BTreeMap<String, u64>);

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
        let (merged, errors) = self.links.entry(key).or_default();
        // Counted errors saturate like the merged figures: a forged count
        // must not stop a report.
        if let Some(s) = &p.rtt {
            boltwatch_proto::merge::rtt(merged, s);
        }
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
            .map(|((node, peer, device), (s, errors))| {
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
                    errors,
                }
            })
            .collect()
    }
}
