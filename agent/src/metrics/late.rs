//! `boltwatch_probe_late_total`: replies that came after their probe was
//! called late ([`crate::stamp::late`]). Only the agent knows it: the
//! records carry answered and lost probes, and a late answer is answered.
//! The STAMP senders count (one counter per peer, shared with this
//! exposition); nothing here does I/O.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use boltwatch_exposition::family::{families, labels::NODE_PEER, Exposition};

families! {
    PROBE_LATE = Counter("boltwatch_probe_late_total", "", NODE_PEER, "STAMP replies that came after their probe was called late (unanswered past the late bound, several times the link's recent p99 round trip) but within the timeout: answered and counted as received, not lost (on the agent's own /metrics).");
}

/// One late-reply counter per probed peer, of one node.
#[derive(Debug, Clone, Default)]
pub struct LateReplies {
    node: String,
    peers: Arc<Vec<(String, Arc<AtomicU64>)>>,
}

impl LateReplies {
    /// Counters at 0 for `peers` of `node`.
    pub fn new(node: &str, peers: impl IntoIterator<Item = String>) -> LateReplies {
        LateReplies {
            node: node.to_owned(),
            peers: Arc::new(peers.into_iter().map(|p| (p, Arc::default())).collect()),
        }
    }

    /// The counter of the `i`-th peer, for its sender.
    pub fn counter(&self, i: usize) -> Option<Arc<AtomicU64>> {
        self.peers.get(i).map(|(_, c)| c.clone())
    }

    /// Writes the family (every peer, from 0).
    pub fn render_into(&self, e: &mut Exposition) {
        e.family(
            &PROBE_LATE,
            self.peers.iter().map(|(peer, n)| {
                (
                    [self.node.as_str(), peer.as_str()],
                    n.load(Ordering::Relaxed),
                )
            }),
        );
    }
}
