//! The node's agent as it describes itself: what it runs and the health
//! counters it reports in `agent_stats` records. Whether it is connected
//! (`boltwatch_agent_up`) is the collector's own business (its stream
//! state), as are duplicates.
//!
//! The agent's counters are cumulative per agent boot, so the exported
//! totals are the sum over boots of each boot's newest (highest seq)
//! reading. The spool is the agent's only queue, so
//! `boltwatch_agent_dropped_records_total` also counts spool overflow; it
//! is the only family for it.

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{AgentStats, Record};

use crate::domain::{Domain, Subjects};
use crate::family::{families, labels, Exposition};

/// The payload kinds [`AgentMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["agent_stats"];

families! {
    INFO = Gauge("boltwatch_agent_info", "", &["node", "version", "os"], "Agent version and OS of the node's latest agent boot (no boot id: one series per node across restarts).");
    MALFORMED = Counter("boltwatch_agent_malformed_packets_total", "", labels::NODE, "STAMP packets the agent dropped as malformed, summed over its boots.");
    DROPPED = Counter("boltwatch_agent_dropped_records_total", "", labels::NODE, "Records the agent dropped (queue or spool full), summed over its boots.");
    CLOCK_STEPS = Counter("boltwatch_agent_clock_steps_total", "", labels::NODE, "Wall-clock steps the agent saw (its correction moved faster than NTP slews), summed over its boots; durations and RTTs stay exact through them.");
    SPOOL_BYTES = Gauge("boltwatch_agent_spool_bytes", "bytes", labels::NODE, "Bytes of the agent's spool on disk (acknowledged records included until their segment file goes), as of its newest agent_stats reading.");
    SPOOL_OLDEST = Gauge("boltwatch_agent_spool_oldest_record_timestamp_seconds", "seconds", labels::NODE, "When the oldest record the collector has not acknowledged was made (unix seconds, up to 10 s early); the reading's own time when nothing waits, so time() minus it is the backlog's age.");
    STAMP_REFUSED = Counter("boltwatch_agent_stamp_refused_total", "", &["node", "reason"], "STAMP packets the agent's reflector refused to answer (reflected: already a reflection, a loop; own_address: from its own socket; rate_limited: over the per-source budget), summed over its boots.");
}

/// What a node's agent runs: its latest `Hello` (collector), itself (agent).
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
    clock_steps: u64,
    /// Reflector refusals, in [`REFUSAL_REASONS`] order.
    refused: [u64; 3],
}

/// The `reason` label values of [`STAMP_REFUSED`].
const REFUSAL_REASONS: [&str; 3] = ["reflected", "own_address", "rate_limited"];

/// The spool as the newest `agent_stats` reading (by its time) tells it:
/// the spool outlives boots, so only the latest word counts.
#[derive(Debug, Clone, Copy, Default)]
struct Spool {
    unix_ns: u64,
    bytes: u64,
    oldest_unix_ns: u64,
}

impl Spool {
    /// What the reading `s` made at `unix_ns` says.
    fn of(s: &AgentStats, unix_ns: u64) -> Spool {
        Spool {
            unix_ns,
            bytes: s.spool_bytes,
            // Nothing waiting: the backlog's age is 0 at the reading.
            oldest_unix_ns: match s.spool_oldest_unacked_unix_ns {
                0 => unix_ns,
                t => t.min(unix_ns),
            },
        }
    }

    fn oldest_seconds(&self) -> f64 {
        self.oldest_unix_ns as f64 / 1e9
    }
}

#[derive(Debug, Default, Clone)]
struct AgentState {
    info: Option<AgentInfo>,
    /// Per boot id.
    stats: BTreeMap<String, BootStats>,
    spool: Option<Spool>,
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

    /// The node's series exist from now on; `info` replaces what was known
    /// unless it is `None`.
    pub fn on_node(&mut self, node: &str, info: Option<AgentInfo>) {
        let a = self.agent(node);
        if info.is_some() {
            a.info = info;
        }
    }
}

impl Domain for AgentMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        let Some(Payload::AgentStats(s)) = &r.payload else {
            return;
        };
        let a = self.agent(&r.node);
        if a.spool.is_none_or(|p| r.unix_ns >= p.unix_ns) {
            a.spool = Some(Spool::of(s, r.unix_ns));
        }
        let e = a.stats.entry(r.boot_id.clone()).or_default();
        if r.seq >= e.seq {
            *e = BootStats {
                seq: r.seq,
                malformed: s.malformed_packets,
                dropped: s.dropped_records,
                clock_steps: s.clock_steps,
                refused: [
                    s.stamp_refused_reflected,
                    s.stamp_refused_own_address,
                    s.stamp_refused_rate_limited,
                ],
            };
        }
    }

    fn forget(&mut self, node: &str) {
        // Like every gauge of a node gone for good; the counters stay.
        if let Some(a) = self.agents.get_mut(node) {
            a.spool = None;
        }
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let a = &self.agents;
        e.family(
            &INFO,
            a.iter().filter_map(|(n, s)| {
                let i = s.info.as_ref()?;
                Some(([n.as_str(), &i.version, &i.os], 1u64))
            }),
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
            &CLOCK_STEPS,
            a.iter()
                .map(|(n, s)| ([n.as_str()], s.total(|b| b.clock_steps))),
        );
        let spool = || a.iter().filter_map(|(n, s)| Some((n.as_str(), s.spool?)));
        e.family(&SPOOL_BYTES, spool().map(|(n, p)| ([n], p.bytes)));
        e.family(
            &SPOOL_OLDEST,
            spool().map(|(n, p)| ([n], p.oldest_seconds())),
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
