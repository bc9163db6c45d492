//! MTU of links (`path` and `counters` records, and the peers and
//! interfaces of each `Hello`): the path MTU each agent measured in band
//! towards each peer, and whether the link's two ends disagree.
//!
//! Decisions, so the numbers can be read without the code:
//! - `boltwatch_path_mtu_bytes{node,peer}` is the newest non-zero
//!   `PathCheck.path_mtu` (0 is "no discovery finished": no sample).
//! - An end of a link is the MTU of the interface a node's `Hello` names
//!   towards the peer (`Hello.peers[].interface`): the newest
//!   `InterfaceCounters.mtu` of that interface, else the `Hello`'s
//!   `interfaces[].mtu` (0 is unknown). The counters come every
//!   `counters_interval`, so an MTU changed on a running node counts within
//!   seconds, without waiting for the agent's next stream. `boltwatch_link_mtu_mismatch
//!   {node,peer}` is 1 when both ends are known and differ, or when a path
//!   MTU measured either way is below the larger known end (a path below
//!   either end's MTU: something between them, or the narrower end, drops
//!   what the wider end sends), else 0. With one end known (the agent's
//!   own `/metrics`, or a peer with no agent) only the path rule applies.
//!   It has a sample only where there is something to compare: both ends,
//!   or one end and a path MTU. Both directions of a link get the same
//!   verdict, since one end at 9000 and the other at 1500 hurts both ways
//!   (16 Gb/s one way, 5 Gb/s the other on real Thunderbolt clusters).

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Interface, Peer, Record};

use crate::domain::{Domain, NodePeer, Subjects};
use crate::family::{families, labels, pair, At, Exposition, Newest};
use crate::key;

type NodeIf = (String, String);

/// The payload kinds [`MtuMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["path", "counters"];

families! {
    PATH_MTU = Gauge("boltwatch_path_mtu_bytes", "bytes", labels::NODE_PEER, "Path MTU towards the peer: the largest packet (IP header included) that reached its reflector and came back whole with don't-fragment set, from the agent's newest in-band discovery.");
    MISMATCH = Gauge("boltwatch_link_mtu_mismatch", "", labels::NODE_PEER, "1 when the MTUs of the link's two ends differ (each agent's interface towards the other) or a path MTU either way is below either end's MTU, else 0.");
}

/// Whether a link's MTUs disagree: `ends` are the MTUs of the node's and
/// the peer's interface towards each other, `paths` the path MTUs measured
/// from each end (`None` or 0: unknown). `None` when nothing can be
/// compared.
pub fn mismatch(ends: [Option<u32>; 2], paths: [Option<u32>; 2]) -> Option<bool> {
    let known = |v: Option<u32>| v.filter(|&m| m > 0);
    let ends: Vec<u32> = ends.into_iter().filter_map(known).collect();
    let paths: Vec<u32> = paths.into_iter().filter_map(known).collect();
    let widest = *ends.iter().max()?;
    if ends.len() < 2 && paths.is_empty() {
        return None;
    }
    let ends_differ = ends.iter().any(|&e| e != widest);
    let path_narrower = paths.iter().any(|&p| p < widest);
    Some(ends_differ || path_narrower)
}

/// What is known of an interface's MTU.
#[derive(Debug, Default, Clone)]
struct IfMtu {
    /// From the newest `Hello` (0 unknown).
    hello: u32,
    /// From the newest counters reading that knew it; wins over the
    /// `Hello`, which has no time of its own.
    counters: Newest<u32>,
}

impl IfMtu {
    fn get(&self) -> Option<u32> {
        let m = self.counters.get().copied().unwrap_or(self.hello);
        (m > 0).then_some(m)
    }
}

/// State behind the MTU families.
#[derive(Debug, Default, Clone)]
pub struct MtuMetrics {
    /// The node's interface towards the peer, from its `Hello`.
    towards: BTreeMap<NodePeer, String>,
    /// MTU of a node's interfaces.
    mtus: BTreeMap<NodeIf, IfMtu>,
    /// Newest path MTU from the node towards the peer (0 unknown).
    paths: BTreeMap<NodePeer, Newest<u32>>,
}

impl MtuMetrics {
    /// A node's `Hello`: the MTU of the interface towards each peer it
    /// names replaces what an earlier `Hello` said.
    pub fn on_hello(&mut self, node: &str, peers: &[Peer], interfaces: &[Interface]) {
        self.towards.retain(|(n, _), _| n != node);
        for p in peers {
            let key = (node.to_owned(), p.name.clone());
            self.towards.insert(key, p.interface.clone());
        }
        for i in interfaces.iter().filter(|i| i.mtu > 0) {
            let make = || (node.to_owned(), i.name.clone());
            key::with(&mut self.mtus, key::pair(&(node, &i.name)), make, |m| {
                m.hello = i.mtu;
            });
        }
    }

    fn path(&self, node: &str, peer: &str) -> Option<u32> {
        let key = (node.to_owned(), peer.to_owned());
        self.paths.get(&key)?.get().copied()
    }

    fn end(&self, node: &str, peer: &str) -> Option<u32> {
        let iface = self.towards.get(&(node.to_owned(), peer.to_owned()))?;
        let key = (node.to_owned(), iface.clone());
        self.mtus.get(&key)?.get()
    }

    /// The verdict of the link seen from `node` towards `peer`.
    fn verdict(&self, node: &str, peer: &str) -> Option<bool> {
        let ends = [self.end(node, peer), self.end(peer, node)];
        let paths = [self.path(node, peer), self.path(peer, node)];
        mismatch(ends, paths)
    }
}

impl Domain for MtuMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        match &r.payload {
            Some(Payload::Path(p)) => {
                // The link domain names the pair a subject (its path series).
                let key = (r.node.clone(), p.peer.clone());
                self.paths
                    .entry(key)
                    .or_default()
                    .update(At::of(r), p.path_mtu);
            }
            // Only interfaces a Hello named (as some peer's) are kept: the
            // counters of others are no end of a link.
            Some(Payload::Counters(c)) if c.mtu > 0 => {
                let names = (r.node.as_str(), c.interface.as_str());
                if let Some(m) = self.mtus.get_mut(key::pair(&names)) {
                    m.counters.update(At::of(r), c.mtu);
                }
            }
            _ => {}
        }
    }

    fn render(&self, e: &mut Exposition, subjects: &Subjects) {
        e.family(
            &PATH_MTU,
            self.paths
                .iter()
                .filter_map(|(k, v)| Some((pair(k), *v.get().filter(|&&m| m > 0)?))),
        );
        // The links the records named (within the collector's series
        // budget), not every peer a Hello lists.
        e.family(
            &MISMATCH,
            subjects.peers.iter().filter_map(|(n, p)| {
                let bad = self.verdict(n, p)?;
                Some(([n.as_str(), p.as_str()], u64::from(bad)))
            }),
        );
    }

    fn forget(&mut self, node: &str) {
        self.towards.retain(|(n, _), _| n != node);
        self.mtus.retain(|(n, _), _| n != node);
        self.paths.retain(|(n, _), _| n != node);
    }
}
