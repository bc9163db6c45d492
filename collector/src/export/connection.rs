//! The agents' streams, as only the collector sees them: whether each
//! node's agent has a stream open (`boltwatch_agent_up`), since when it has
//! none (the staleness rule of [`super::Metrics::sweep`]), and the records
//! it sent that were already stored. What the agent says about itself
//! (info, its own counters) is the shared [`boltwatch_exposition::agent`] domain's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::Record;

use boltwatch_exposition::family::{families, labels, Exposition};
use boltwatch_exposition::{Domain, Subjects};

families! {
    UP = Gauge("boltwatch_agent_up", "", labels::NODE, "1 while the node's agent has a stream open to the collector.");
    DUPLICATES = Counter("boltwatch_records_duplicate_total", "", labels::NODE, "Records received that were already stored.");
}

#[derive(Debug, Default, Clone)]
struct Stream {
    open_streams: usize,
    duplicates: u64,
    /// When a sweep first saw the node without a stream.
    down_since: Option<Instant>,
    /// Its gauges were forgotten in this disconnection.
    stale: bool,
}

/// State behind the stream families.
#[derive(Debug, Default, Clone)]
pub struct ConnectionMetrics {
    nodes: BTreeMap<String, Stream>,
}

impl ConnectionMetrics {
    fn node(&mut self, node: &str) -> &mut Stream {
        self.nodes.entry(node.to_string()).or_default()
    }

    /// A node known from the store or from its records: its series exist.
    pub fn on_known_node(&mut self, node: &str) {
        self.node(node);
    }

    /// A record of the node: an agent that reports itself has its series
    /// (as a node known from the store does).
    pub fn on_record(&mut self, r: &Record) {
        if let Some(Payload::AgentStats(_)) = &r.payload {
            self.node(&r.node);
        }
    }

    /// A stream opened with a valid Hello.
    pub fn on_hello(&mut self, node: &str) {
        self.node(node).open_streams += 1;
    }

    /// A stream that had sent a valid Hello closed.
    pub fn on_stream_closed(&mut self, node: &str) {
        if let Some(a) = self.nodes.get_mut(node) {
            a.open_streams = a.open_streams.saturating_sub(1);
        }
    }

    /// Every node known from the store, its records or a Hello.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// Whether the node has an open stream.
    pub fn connected(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|a| a.open_streams > 0)
    }

    /// The nodes whose agent has been without a stream for `grace` as of
    /// `now` and were not reported yet in this disconnection. The grace
    /// counts from the first sweep that saw the node disconnected.
    pub fn newly_stale(&mut self, now: Instant, grace: Duration) -> Vec<String> {
        let mut out = Vec::new();
        for (node, a) in &mut self.nodes {
            if a.open_streams > 0 {
                a.down_since = None;
                a.stale = false;
                continue;
            }
            let since = *a.down_since.get_or_insert(now);
            if !a.stale && now.saturating_duration_since(since) >= grace {
                a.stale = true;
                out.push(node.clone());
            }
        }
        out
    }

    /// Records of the node's batch that were already stored.
    pub fn on_duplicates(&mut self, node: &str, n: u64) {
        self.node(node).duplicates += n;
    }
}

impl Domain for ConnectionMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let a = &self.nodes;
        e.family(
            &UP,
            a.iter().map(|(n, s)| ([n.as_str()], s.open_streams > 0)),
        );
        e.family(
            &DUPLICATES,
            a.iter().map(|(n, s)| ([n.as_str()], s.duplicates)),
        );
    }
}
