//! The inventory: what hardware and software was under test, as the agents
//! reported it. Pure.
//!
//! - Per node: OS and agent version of the `Hello` of the boot that ran
//!   in the range (the newest started before its end), and its interfaces
//!   (kind, speed, generation, MTU, members).
//! - Facts that arrive as records override the `Hello`'s, newest in the
//!   range first (the same rule as `boltwatch_link_mtu_mismatch`): an
//!   interface's MTU and speed from `InterfaceCounters`, its Thunderbolt
//!   generation from a `LinkEvent`'s port.
//! - Per link (each pair of nodes once): each end is the interface the
//!   node's `Hello` names for the other as a peer; the two ends side by
//!   side, and every fact known at both ends that differs (MTU, speed,
//!   generation) flagged, an MTU difference also in words.

use std::collections::BTreeMap;

use boltwatch_exposition::cabling::{bridge_cycles, NodeCabling};
use boltwatch_proto::v1::{Hello, InterfaceCounters, LinkEvent};
use serde::Serialize;

/// One interface as the report lists it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Interface {
    /// Name.
    pub name: String,
    /// Kind (`thunderbolt-bridge`, `ethernet`, ...).
    pub kind: String,
    /// Link speed, Gbps (None: unknown).
    pub speed_gbps: Option<f64>,
    /// Thunderbolt generation (empty: unknown).
    pub generation: String,
    /// MTU, bytes (None: unknown).
    pub mtu: Option<u32>,
    /// Bridge members.
    pub members: Vec<String>,
}

/// One node.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Node {
    /// Node.
    pub node: String,
    /// Operating system.
    pub os: String,
    /// Agent version.
    pub agent_version: String,
    /// Its interfaces.
    pub interfaces: Vec<Interface>,
}

/// One link's two ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkEnds {
    /// One node (the first by name).
    pub node: String,
    /// The other.
    pub peer: String,
    /// `node`'s interface towards `peer`.
    pub node_end: Option<Interface>,
    /// `peer`'s interface towards `node`.
    pub peer_end: Option<Interface>,
    /// What differs: `mtu`, `speed`, `generation`.
    pub mismatches: Vec<&'static str>,
    /// The findings in words.
    pub findings: Vec<String>,
}

/// The whole inventory.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Inventory {
    /// Each node.
    pub nodes: Vec<Node>,
    /// Each link.
    pub links: Vec<LinkEnds>,
    /// Bridges cabled into a loop through other bridges, as "node bridge"
    /// (the rule of `boltwatch_bridge_cycle`), and the finding in words.
    pub bridge_loops: Vec<String>,
    /// The bridge loop in words, when there is one.
    pub cabling_findings: Vec<String>,
}

/// Hellos and in-range facts, per node.
#[derive(Debug, Default)]
pub(super) struct InventoryAcc {
    /// node -> (agent start, Hello) of the boot chosen so far.
    hellos: BTreeMap<String, (u64, Hello)>,
    /// (node, interface) -> (time, MTU, speed) of the newest counters.
    counters: BTreeMap<(String, String), (u64, u32, u64)>,
    /// (node, interface) -> (time, generation) of the newest port report.
    generations: BTreeMap<(String, String), (u64, String)>,
}

impl InventoryAcc {
    /// A stored `Hello` of `node`, its agent started at `started`: kept
    /// when it is the newest started before `to` (or the first seen).
    pub fn hello(&mut self, node: &str, started: u64, h: &Hello, to: u64) {
        let better = match self.hellos.get(node) {
            None => true,
            Some((t, _)) => started < to && (started > *t || *t >= to),
        };
        if better {
            self.hellos.insert(node.to_string(), (started, h.clone()));
        }
    }

    /// An `InterfaceCounters` reading.
    pub fn counters(&mut self, node: &str, c: &InterfaceCounters, t: u64) {
        let e = self
            .counters
            .entry((node.to_string(), c.interface.clone()))
            .or_insert((0, 0, 0));
        if t >= e.0 {
            *e = (
                t,
                if c.mtu > 0 { c.mtu } else { e.1 },
                if c.speed_bits_per_second > 0 {
                    c.speed_bits_per_second
                } else {
                    e.2
                },
            );
        }
    }

    /// A `LinkEvent` (its Thunderbolt port's generation, when it has one).
    pub fn link_event(&mut self, node: &str, e: &LinkEvent, t: u64) {
        let Some(g) = e.thunderbolt.as_ref().filter(|p| !p.generation.is_empty()) else {
            return;
        };
        let v = self
            .generations
            .entry((node.to_string(), e.interface.clone()))
            .or_insert((0, String::new()));
        if t >= v.0 {
            *v = (t, g.generation.clone());
        }
    }

    /// `node`'s interface `name`, the `Hello`'s facts overridden by newer
    /// ones from records.
    fn interface(&self, node: &str, i: &boltwatch_proto::v1::Interface) -> Interface {
        let key = (node.to_string(), i.name.clone());
        let (mtu, speed) = self.counters.get(&key).map_or((0, 0), |c| (c.1, c.2));
        let pick = |rec: u64, hello: u64| if rec > 0 { rec } else { hello };
        let speed = pick(speed, i.speed_bits_per_second);
        let mtu = pick(u64::from(mtu), u64::from(i.mtu)) as u32;
        Interface {
            name: i.name.clone(),
            kind: i.kind.clone(),
            speed_gbps: (speed > 0).then(|| speed as f64 / 1e9),
            generation: self
                .generations
                .get(&key)
                .map_or(i.generation.clone(), |g| g.1.clone()),
            mtu: (mtu > 0).then_some(mtu),
            members: i.members.clone(),
        }
    }

    /// `node`'s end towards `peer`.
    fn end(&self, node: &str, peer: &str) -> Option<Interface> {
        let h = &self.hellos.get(node)?.1;
        let name = &h.peers.iter().find(|p| p.name == peer)?.interface;
        let i = h.interfaces.iter().find(|i| &i.name == name);
        Some(match i {
            Some(i) => self.interface(node, i),
            None => Interface {
                name: name.clone(),
                ..Default::default()
            },
        })
    }

    /// The inventory of `nodes` and the links between `pairs`.
    pub fn finish(&self, nodes: &[String], pairs: &[(String, String)]) -> Inventory {
        let nodes = nodes
            .iter()
            .map(|n| match self.hellos.get(n) {
                Some((_, h)) => Node {
                    node: n.clone(),
                    os: h.os.clone(),
                    agent_version: h.agent_version.clone(),
                    interfaces: h.interfaces.iter().map(|i| self.interface(n, i)).collect(),
                },
                None => Node {
                    node: n.clone(),
                    ..Default::default()
                },
            })
            .collect();
        let links = pairs
            .iter()
            .map(|(a, b)| compare(a, b, self.end(a, b), self.end(b, a)))
            .collect();
        let bridge_loops = self.bridge_loops();
        let cabling_findings = if bridge_loops.is_empty() {
            Vec::new()
        } else {
            vec![format!(
                "bridge loop in the cabling: {} forward between cables that close a loop; one broadcast circulates for ever (no spanning tree on Thunderbolt Bridge): disable the bridge on one node of the loop or unplug one cable",
                bridge_loops.join(", ")
            )]
        };
        Inventory {
            nodes,
            links,
            bridge_loops,
            cabling_findings,
        }
    }

    /// The bridges on a loop of cables, by the exposition's rule, from the
    /// chosen `Hello`s.
    fn bridge_loops(&self) -> Vec<String> {
        let cabling = self
            .hellos
            .iter()
            .map(|(n, (_, h))| {
                (
                    n.clone(),
                    NodeCabling::from_hello(&h.hostname, &h.interfaces),
                )
            })
            .collect();
        bridge_cycles(&cabling)
            .into_iter()
            .map(|(n, b)| format!("{n} {b}"))
            .collect()
    }
}

/// The two ends of `a` -- `b` side by side, with what differs.
fn compare(a: &str, b: &str, x: Option<Interface>, y: Option<Interface>) -> LinkEnds {
    let mut l = LinkEnds {
        node: a.to_string(),
        peer: b.to_string(),
        ..Default::default()
    };
    if let (Some(x), Some(y)) = (&x, &y) {
        if let (Some(m), Some(n)) = (x.mtu, y.mtu) {
            if m != n {
                l.mismatches.push("mtu");
                let (big, small) = if m > n {
                    ((a, x, m), (b, y, n))
                } else {
                    ((b, y, n), (a, x, m))
                };
                l.findings.push(format!(
                    "MTU mismatch: {}'s {} has MTU {} and {}'s {} has MTU {}; frames larger than {} bytes from {} are dropped at {} (or fragmented), so large transfers stall or crawl while small probes pass",
                    big.0, big.1.name, big.2, small.0, small.1.name, small.2, small.2, big.0, small.0
                ));
            }
        }
        if let (Some(s), Some(t)) = (x.speed_gbps, y.speed_gbps) {
            if s != t {
                l.mismatches.push("speed");
                l.findings.push(format!(
                    "speed mismatch: {a}'s {} runs at {s} Gbps, {b}'s {} at {t} Gbps",
                    x.name, y.name
                ));
            }
        }
        if !x.generation.is_empty() && !y.generation.is_empty() && x.generation != y.generation {
            l.mismatches.push("generation");
            l.findings.push(format!(
                "generation mismatch: {a}'s {} reports {}, {b}'s {} reports {}",
                x.name, x.generation, y.name, y.generation
            ));
        }
    }
    l.node_end = x;
    l.peer_end = y;
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{Interface as If, Peer, ThunderboltPort};

    fn hello(peer: &str, mtu: u32) -> Hello {
        Hello {
            os: "macOS 15.1".into(),
            agent_version: "0.4.0".into(),
            interfaces: vec![If {
                name: "bridge0".into(),
                kind: "thunderbolt-bridge".into(),
                speed_bits_per_second: 40_000_000_000,
                generation: "Thunderbolt 4".into(),
                members: vec!["en2".into()],
                mtu,
                ..Default::default()
            }],
            peers: vec![Peer {
                name: peer.into(),
                interface: "bridge0".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn ends_side_by_side_with_mismatches_in_words() {
        let mut a = InventoryAcc::default();
        a.hello("a", 5, &hello("b", 1500), 100);
        // A newer boot before the range's end replaces it; one after does not.
        a.hello("a", 10, &hello("b", 9000), 100);
        a.hello("a", 200, &hello("b", 1234), 100);
        a.hello("b", 7, &hello("a", 9000), 100);
        // b's counters say 1500 now, and its port says Thunderbolt 5.
        let c = InterfaceCounters {
            interface: "bridge0".into(),
            mtu: 1500,
            ..Default::default()
        };
        a.counters("b", &c, 50);
        let e = LinkEvent {
            interface: "bridge0".into(),
            thunderbolt: Some(ThunderboltPort {
                generation: "Thunderbolt 5".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        a.link_event("b", &e, 60);
        let inv = a.finish(
            &["a".into(), "b".into(), "c".into()],
            &[("a".into(), "b".into())],
        );
        assert_eq!(inv.nodes[0].os, "macOS 15.1");
        assert_eq!(inv.nodes[0].interfaces[0].mtu, Some(9000));
        assert_eq!(inv.nodes[0].interfaces[0].speed_gbps, Some(40.0));
        assert_eq!(
            inv.nodes[2],
            Node {
                node: "c".into(),
                ..Default::default()
            }
        );
        let l = &inv.links[0];
        assert_eq!(l.node_end.as_ref().unwrap().mtu, Some(9000));
        assert_eq!(l.peer_end.as_ref().unwrap().mtu, Some(1500));
        assert_eq!(l.mismatches, ["mtu", "generation"]);
        assert!(
            l.findings[0].starts_with(
                "MTU mismatch: a's bridge0 has MTU 9000 and b's bridge0 has MTU 1500; frames larger than 1500 bytes from a are dropped at b"
            ),
            "{:?}",
            l.findings
        );
        // No Hello for c: nothing to compare, nothing flagged.
        let none = a.finish(&[], &[("a".into(), "c".into())]);
        assert_eq!(
            (
                none.links[0].peer_end.clone(),
                none.links[0].mismatches.len()
            ),
            (None, 0)
        );
    }

    /// Two nodes joined by two cables, each bridging both ports: the
    /// inventory names both bridges and says what to do; with one node's
    /// ports apart it says nothing.
    #[test]
    fn a_loop_in_the_cabling_is_a_finding() {
        let node = |other: &str, bridged: bool| {
            let port = |name: &str| If {
                name: name.into(),
                kind: "thunderbolt".into(),
                remote_name: other.into(),
                ..Default::default()
            };
            let mut interfaces = vec![port("en1"), port("en2")];
            if bridged {
                interfaces.push(If {
                    name: "bridge0".into(),
                    members: vec!["en1".into(), "en2".into()],
                    ..Default::default()
                });
            }
            Hello {
                interfaces,
                ..Default::default()
            }
        };
        let mut a = InventoryAcc::default();
        a.hello("a", 1, &node("b", true), 100);
        a.hello("b", 1, &node("a", true), 100);
        let inv = a.finish(&[], &[]);
        assert_eq!(inv.bridge_loops, ["a bridge0", "b bridge0"]);
        assert!(inv.cabling_findings[0]
            .starts_with("bridge loop in the cabling: a bridge0, b bridge0 forward"));

        a.hello("b", 2, &node("a", false), 100);
        let inv = a.finish(&[], &[]);
        assert!(inv.bridge_loops.is_empty() && inv.cabling_findings.is_empty());
    }
}
