//! The agents themselves: whether each node's agent is connected, what it
//! runs, and the health counters it reports in `agent_stats` records.
//!
//! The agent's counters are cumulative per agent boot, so the exported
//! totals are the sum over boots of each boot's newest (highest seq)
//! reading. The spool is the agent's only queue, so
//! `boltwatch_agent_dropped_records_total` also counts spool overflow; it
//! is the only family for it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::Record;

use super::family::{families, labels, Exposition};
use super::{Domain, Subjects};

families! {
    UP = Gauge("boltwatch_agent_up", "", labels::NODE, "1 while the node's agent has a stream open to the collector.");
    INFO = Gauge("boltwatch_agent_info", "", &["node", "version", "os"], "Agent version and OS of the node's latest agent boot (no boot id: one series per node across restarts).");
    DUPLICATES = Counter("boltwatch_records_duplicate_total", "", labels::NODE, "Records received that were already stored.");
    MALFORMED = Counter("boltwatch_agent_malformed_packets_total", "", labels::NODE, "STAMP packets the agent dropped as malformed, summed over its boots.");
    DROPPED = Counter("boltwatch_agent_dropped_records_total", "", labels::NODE, "Records the agent dropped (queue or spool full), summed over its boots.");
    STAMP_REFUSED = Counter("boltwatch_agent_stamp_refused_total", "", &["node", "reason"], "STAMP packets the agent's reflector refused to answer (reflected: already a reflection, a loop; own_address: from its own socket; rate_limited: over the per-source budget), summed over its boots.");
}

/// What a node's latest `Hello` said about its agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// Agent version.
    pub version: String,
    /// OS and version.
    pub os: String,
    /// The agent boot.
    pub boot_id: String,
}

/// The newest `agent_stats` reading of one agent boot.
#[derive(Debug, Clone, Copy, Default)]
struct BootStats {
    seq: u64,
    malformed: u64,
    dropped: u64,
    /// Reflector refusals, in [`REFUSAL_REASONS`] order.
    refused: [u64; 3],
}

/// The `reason` label values of [`STAMP_REFUSED`].
const REFUSAL_REASONS: [&str; 3] = ["reflected", "own_address", "rate_limited"];

#[derive(Debug, Default, Clone)]
struct AgentState {
    open_streams: usize,
    info: Option<AgentInfo>,
    duplicates: u64,
    /// Per boot id.
    stats: BTreeMap<String, BootStats>,
    /// When a sweep first saw the node without a stream.
    down_since: Option<Instant>,
    /// Its gauges were forgotten in this disconnection.
    stale: bool,
}

impl AgentState {
    fn total(&self, f: fn(&BootStats) -> u64) -> u64 {
        self.stats.values().map(f).sum()
    }
}

/// State behind the agent families.
#[derive(Debug, Default, Clone)]
pub struct AgentMetrics {
    agents: BTreeMap<String, AgentState>,
}

impl AgentMetrics {
    fn agent(&mut self, node: &str) -> &mut AgentState {
        self.agents.entry(node.to_string()).or_default()
    }

    /// A node known from the store: keeps `info` unless a Hello said more.
    pub fn on_known_node(&mut self, node: &str, info: Option<AgentInfo>) {
        let a = self.agent(node);
        if a.info.is_none() {
            a.info = info;
        }
    }

    /// A stream opened with a valid Hello.
    pub fn on_hello(&mut self, node: &str, info: AgentInfo) {
        let a = self.agent(node);
        a.open_streams += 1;
        a.info = Some(info);
    }

    /// A stream that had sent a valid Hello closed.
    pub fn on_stream_closed(&mut self, node: &str) {
        if let Some(a) = self.agents.get_mut(node) {
            a.open_streams = a.open_streams.saturating_sub(1);
        }
    }

    /// Whether the node has an open stream.
    pub fn connected(&self, node: &str) -> bool {
        self.agents.get(node).is_some_and(|a| a.open_streams > 0)
    }

    /// The nodes whose agent has been without a stream for `grace` as of
    /// `now` and were not reported yet in this disconnection. The grace
    /// counts from the first sweep that saw the node disconnected.
    pub fn newly_stale(&mut self, now: Instant, grace: Duration) -> Vec<String> {
        let mut out = Vec::new();
        for (node, a) in &mut self.agents {
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
        self.agent(node).duplicates += n;
    }
}

impl Domain for AgentMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        let Some(Payload::AgentStats(s)) = &r.payload else {
            return;
        };
        let e = self
            .agent(&r.node)
            .stats
            .entry(r.boot_id.clone())
            .or_default();
        if r.seq >= e.seq {
            *e = BootStats {
                seq: r.seq,
                malformed: s.malformed_packets,
                dropped: s.dropped_records,
                refused: [
                    s.stamp_refused_reflected,
                    s.stamp_refused_own_address,
                    s.stamp_refused_rate_limited,
                ],
            };
        }
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let a = &self.agents;
        e.family(
            &UP,
            a.iter().map(|(n, s)| ([n.as_str()], s.open_streams > 0)),
        );
        e.family(
            &INFO,
            a.iter().filter_map(|(n, s)| {
                let i = s.info.as_ref()?;
                Some(([n.as_str(), &i.version, &i.os], 1u64))
            }),
        );
        e.family(
            &DUPLICATES,
            a.iter().map(|(n, s)| ([n.as_str()], s.duplicates)),
        );
        e.family(
            &MALFORMED,
            a.iter()
                .map(|(n, s)| ([n.as_str()], s.total(|b| b.malformed))),
        );
        e.family(
            &DROPPED,
            a.iter()
                .map(|(n, s)| ([n.as_str()], s.total(|b| b.dropped))),
        );
        e.family(
            &STAMP_REFUSED,
            a.iter().flat_map(|(n, s)| {
                REFUSAL_REASONS.iter().enumerate().map(move |(i, reason)| {
                    let total: u64 = s.stats.values().map(|b| b.refused[i]).sum();
                    ([n.as_str(), *reason], total)
                })
            }),
        );
    }
}
