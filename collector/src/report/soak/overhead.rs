//! Probe overhead: what the soak itself cost the cluster it judged. Pure.
//!
//! - Per node, the agent's CPU (the growth of `AgentStats.cpu_seconds`
//!   within each boot over the time it spans, all boots together) and its
//!   resident memory (mean and highest).
//! - Per directed link, the bytes its probes put on the cable (each probe
//!   [`PROBE_WIRE_BYTES`] there and as many back) and the bytes its
//!   bandwidth tests moved, each as a share of what the link carries over
//!   the range at the speed its node's end reported.
//! - Whether the soak disturbed the workload: bandwidth tests that ran
//!   inside a workload mark, an agent above [`CPU_NOTICE_PERCENT`] of a
//!   core, or a link whose soak traffic took over [`LINK_NOTICE_PERCENT`]
//!   of its capacity; the report says which in one sentence.

use std::collections::BTreeMap;

use boltwatch_proto::v1::AgentStats;
use serde::Serialize;

/// A STAMP probe on the wire: the 44-octet packet, UDP (8), IPv4 (20) and
/// Ethernet (14) headers.
pub const PROBE_WIRE_BYTES: u64 = 44 + 8 + 20 + 14;
/// An agent busier than this (percent of one core) is named.
pub const CPU_NOTICE_PERCENT: f64 = 5.0;
/// Soak traffic above this share of a link's capacity is named.
pub const LINK_NOTICE_PERCENT: f64 = 1.0;

/// One node's agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Agent {
    /// Node.
    pub node: String,
    /// `AgentStats` readings in range.
    pub readings: u64,
    /// Mean CPU, percent of one core.
    pub cpu_percent: Option<f64>,
    /// Mean resident memory, bytes.
    pub rss_mean_bytes: Option<f64>,
    /// Highest resident memory, bytes.
    pub rss_max_bytes: Option<u64>,
}

/// One directed link's soak traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkLoad {
    /// Measuring (and sending) node.
    pub node: String,
    /// Peer.
    pub peer: String,
    /// The node's end's speed, Gbps (None: unknown).
    pub speed_gbps: Option<f64>,
    /// Probes sent.
    pub probes: u64,
    /// Bytes the probes put on the cable, both ways.
    pub probe_bytes: u64,
    /// The same, percent of the link's capacity over the range.
    pub probe_share_percent: Option<f64>,
    /// Bandwidth tests moving data node -> peer.
    pub tests: u64,
    /// Bytes they moved.
    pub test_bytes: u64,
    /// Seconds they ran.
    pub test_seconds: f64,
    /// Their bytes, percent of the link's capacity over the range.
    pub test_share_percent: Option<f64>,
}

/// The soak's cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Overhead {
    /// Each agent.
    pub agents: Vec<Agent>,
    /// Each directed link.
    pub links: Vec<LinkLoad>,
    /// Bandwidth tests that ran inside a workload mark.
    pub tests_during_marks: u64,
    /// Whether the soak disturbed the workload it judged.
    pub disturbed: bool,
    /// The report's sentence.
    pub sentence: String,
}

/// One boot's CPU readings: (first time, first CPU s, last time, last CPU s).
type Span = (u64, f64, u64, f64);

/// Agent statistics and test traffic as they arrive.
#[derive(Debug, Default)]
pub(super) struct OverheadAcc {
    /// (node, boot) -> CPU span.
    cpu: BTreeMap<(String, String), Span>,
    /// node -> (readings, RSS sum, RSS max).
    rss: BTreeMap<String, (u64, f64, u64)>,
    /// (from, to) -> (tests, bytes, ns).
    tests: BTreeMap<(String, String), (u64, u64, u64)>,
    /// Tests inside a workload mark.
    during_marks: u64,
}

impl OverheadAcc {
    /// An `AgentStats` of `node`'s `boot` at `t`.
    pub fn stats(&mut self, node: &str, boot: &str, s: &AgentStats, t: u64) {
        let c = s.cpu_seconds;
        let e = self
            .cpu
            .entry((node.to_string(), boot.to_string()))
            .or_insert((t, c, t, c));
        if t < e.0 {
            (e.0, e.1) = (t, c);
        }
        if t >= e.2 {
            (e.2, e.3) = (t, c);
        }
        let r = self.rss.entry(node.to_string()).or_default();
        if s.resident_bytes > 0 {
            r.0 += 1;
            r.1 += s.resident_bytes as f64;
            r.2 = r.2.max(s.resident_bytes);
        }
    }

    /// A bandwidth test moving `bytes` from -> to over `[start, start + ns)`;
    /// `in_mark` when it overlapped a workload mark.
    pub fn test(&mut self, from: &str, to: &str, bytes: u64, ns: u64, in_mark: bool) {
        let e = self.tests.entry((from.into(), to.into())).or_default();
        e.0 += 1;
        e.1 += bytes;
        e.2 += ns;
        self.during_marks += u64::from(in_mark);
    }

    /// The agents of `nodes`.
    fn agents(&self, nodes: &[String]) -> Vec<Agent> {
        nodes
            .iter()
            .map(|n| {
                let (mut cpu, mut ns) = (0.0, 0u64);
                for (_, s) in self.cpu.iter().filter(|(k, _)| &k.0 == n) {
                    cpu += (s.3 - s.1).max(0.0);
                    ns += s.2 - s.0;
                }
                let rss = self.rss.get(n).filter(|r| r.0 > 0);
                Agent {
                    node: n.clone(),
                    readings: self.rss.get(n).map_or(0, |r| r.0),
                    cpu_percent: (ns > 0).then(|| 100.0 * cpu / (ns as f64 / 1e9)),
                    rss_mean_bytes: rss.map(|r| r.1 / r.0 as f64),
                    rss_max_bytes: rss.map(|r| r.2),
                }
            })
            .collect()
    }

    /// The overhead over a range of `range_ns`, for `links` as
    /// (node, peer, probes sent, the node's end's speed in bits/s).
    pub fn finish(
        &self,
        nodes: &[String],
        links: &[(String, String, u64, Option<u64>)],
        range_ns: u64,
    ) -> Overhead {
        let capacity = |bps: Option<u64>| {
            bps.filter(|b| *b > 0 && range_ns > 0)
                .map(|b| b as f64 / 8.0 * range_ns as f64 / 1e9)
        };
        let links: Vec<LinkLoad> = links
            .iter()
            .map(|(node, peer, probes, bps)| {
                let (tests, test_bytes, ns) = self
                    .tests
                    .get(&(node.clone(), peer.clone()))
                    .copied()
                    .unwrap_or_default();
                let probe_bytes = probes * PROBE_WIRE_BYTES * 2;
                let cap = capacity(*bps);
                LinkLoad {
                    node: node.clone(),
                    peer: peer.clone(),
                    speed_gbps: bps.map(|b| b as f64 / 1e9),
                    probes: *probes,
                    probe_bytes,
                    probe_share_percent: cap.map(|c| 100.0 * probe_bytes as f64 / c),
                    tests,
                    test_bytes,
                    test_seconds: ns as f64 / 1e9,
                    test_share_percent: cap.map(|c| 100.0 * test_bytes as f64 / c),
                }
            })
            .collect();
        let agents = self.agents(nodes);
        let (disturbed, sentence) = judge(&agents, &links, self.during_marks);
        Overhead {
            agents,
            links,
            tests_during_marks: self.during_marks,
            disturbed,
            sentence,
        }
    }
}

/// Whether and how the soak disturbed its workload, in words.
fn judge(agents: &[Agent], links: &[LinkLoad], during_marks: u64) -> (bool, String) {
    let mut why = Vec::new();
    if during_marks > 0 {
        why.push(format!(
            "{during_marks} bandwidth tests ran while a workload mark was open, loading the links the workload used"
        ));
    }
    for a in agents {
        if let Some(c) = a.cpu_percent.filter(|c| *c > CPU_NOTICE_PERCENT) {
            why.push(format!("the agent on {} used {c:.1} % of a core", a.node));
        }
    }
    let busy: Vec<(f64, &LinkLoad)> = links
        .iter()
        .map(|l| {
            let share = l.probe_share_percent.unwrap_or(0.0) + l.test_share_percent.unwrap_or(0.0);
            (share, l)
        })
        .filter(|(share, _)| *share > LINK_NOTICE_PERCENT)
        .collect();
    if let Some((most, l)) = busy.iter().max_by(|a, b| a.0.total_cmp(&b.0)) {
        why.push(format!(
            "probes and tests took over {LINK_NOTICE_PERCENT} % of the capacity of {} links (most: {most:.2} % of {} -> {})",
            busy.len(),
            l.node,
            l.peer
        ));
    }
    if why.is_empty() {
        return (
            false,
            format!(
                "The soak stayed out of the workload's way: no bandwidth test inside a workload mark, agents below {CPU_NOTICE_PERCENT} % of a core, soak traffic below {LINK_NOTICE_PERCENT} % of each link."
            ),
        );
    }
    (
        true,
        format!(
            "The soak disturbed the workload it judged: {}.",
            why.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn stats(cpu: f64, rss: u64) -> AgentStats {
        AgentStats {
            cpu_seconds: cpu,
            resident_bytes: rss,
            ..Default::default()
        }
    }

    #[test]
    fn cpu_per_boot_rss_and_link_shares() {
        let mut a = OverheadAcc::default();
        // Boot 1: 3 CPU s over 100 s; boot 2 (a restart): 1 CPU s over 100 s.
        a.stats("a", "b1", &stats(10.0, 20 << 20), 0);
        a.stats("a", "b1", &stats(13.0, 30 << 20), 100 * S);
        a.stats("a", "b2", &stats(0.5, 10 << 20), 200 * S);
        a.stats("a", "b2", &stats(1.5, 20 << 20), 300 * S);
        a.test("a", "b", 5_000_000_000, 10 * S, true);
        let links = vec![
            ("a".to_string(), "b".to_string(), 1000, Some(40_000_000_000)),
            ("b".to_string(), "a".to_string(), 10, None),
        ];
        let o = a.finish(&["a".into(), "b".into()], &links, 1000 * S);
        let ag = &o.agents[0];
        assert_eq!(ag.cpu_percent, Some(2.0));
        assert_eq!(ag.rss_max_bytes, Some(30 << 20));
        assert_eq!(ag.rss_mean_bytes, Some((20u64 << 20) as f64));
        assert_eq!(o.agents[1].cpu_percent, None);
        let l = &o.links[0];
        assert_eq!(l.probe_bytes, 1000 * 86 * 2);
        // 40 Gbps for 1000 s carries 5e12 bytes.
        assert_eq!(l.test_share_percent, Some(0.1));
        assert!((l.probe_share_percent.unwrap() - 100.0 * 172_000.0 / 5e12).abs() < 1e-15);
        assert_eq!(o.links[1].probe_share_percent, None);
        assert!(o.disturbed);
        assert_eq!(
            o.sentence,
            "The soak disturbed the workload it judged: 1 bandwidth tests ran while a workload mark was open, loading the links the workload used."
        );
        let quiet = OverheadAcc::default().finish(&[], &links, 1000 * S);
        assert!(!quiet.disturbed && quiet.sentence.starts_with("The soak stayed"));
    }
}
