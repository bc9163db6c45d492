//! Cables and bridges (the interfaces of each `Hello`): whether a node's
//! bridge lies on a loop of Thunderbolt cables through bridges, which
//! forwards a broadcast round and round for ever (Thunderbolt Bridge on a
//! ring of Macs; Apple's TN3205 says to turn it off). The agents' own
//! `boltwatch_bridge_loop_suspected` sees a storm once it runs; this sees
//! the loop in the cabling, before it storms.
//!
//! Decisions, so the numbers can be read without the code:
//! - A cable is a Thunderbolt port whose `Hello` names the far end: by
//!   UUID (`remote_uid`, matched against the ports' `local_uid` of the
//!   other nodes), else by name (`remote_name` against a node's name or
//!   host name, case and a `.local`/domain suffix ignored). A port whose
//!   far end matches no node, or more than one, is no cable.
//! - Each node's ports in one bridge are one vertex (the bridge forwards
//!   between them); a port in no bridge is a vertex of its own. A cable
//!   between two nodes is an edge between the vertices of its two ends.
//!   Two nodes with several cables between them pair their ports in name
//!   order (a `Hello` cannot say which port meets which): a loop made of
//!   the two bridges is found whatever the pairing. A cable whose far node
//!   sent no `Hello` ends in a vertex of its own (its bridging unknown).
//! - A bridge is on a loop when one of its cables is: the cable's two ends
//!   are still joined with that cable removed. `boltwatch_bridge_cycle
//!   {node,interface}` is 1 for such a bridge, 0 for a bridge with a cable
//!   on no loop; a bridge with no cable has no sample.
//! - What one node's `Hello` holds is bounded: at most [`MAX_PORTS`]
//!   cabled ports and [`MAX_BRIDGES`] bridges are kept (a stranger with a
//!   token cannot grow the graph or the exposition without bound).

use std::collections::{BTreeMap, BTreeSet};

use boltwatch_proto::v1::Interface;
use petgraph::unionfind::UnionFind;

use crate::domain::{Domain, Subjects};
use crate::family::{families, labels, Exposition};

/// Cabled ports kept per node.
pub const MAX_PORTS: usize = 64;
/// Bridges kept per node.
pub const MAX_BRIDGES: usize = 16;

/// Read from `Hello`s, not from records.
pub const KINDS: &[&str] = &[];

families! {
    CYCLE = Gauge("boltwatch_bridge_cycle", "", labels::NODE_INTERFACE, "1 when the bridge's member ports are cabled into a loop through other nodes' bridges (a broadcast storm without STP), 0 when its cables form no loop; from the agents' Hellos.");
}

/// The far end of one port's cable, as the node's `Hello` names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FarEnd {
    /// The far host's name (empty: unknown).
    pub remote_name: String,
    /// The far host's UUID (empty: unknown).
    pub remote_uid: String,
    /// This port's own domain UUID, the far host's `remote_uid`.
    pub local_uid: String,
}

/// What one node's `Hello` says of its cabling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCabling {
    /// The host name the OS reports (another name the node answers to).
    pub hostname: String,
    /// Each bridge and its member ports.
    pub bridges: BTreeMap<String, Vec<String>>,
    /// Each port that names a far end.
    pub ports: BTreeMap<String, FarEnd>,
}

impl NodeCabling {
    /// From a `Hello`'s host name and interfaces, bounded.
    pub fn from_hello(hostname: &str, interfaces: &[Interface]) -> NodeCabling {
        let bridges = interfaces
            .iter()
            .filter(|i| !i.members.is_empty())
            .take(MAX_BRIDGES)
            .map(|i| (i.name.clone(), i.members.clone()))
            .collect();
        let ports = interfaces
            .iter()
            .filter(|i| !i.remote_uid.is_empty() || !i.remote_name.is_empty())
            .take(MAX_PORTS)
            .map(|i| {
                let far = FarEnd {
                    remote_name: i.remote_name.clone(),
                    remote_uid: i.remote_uid.clone(),
                    local_uid: i.local_uid.clone(),
                };
                (i.name.clone(), far)
            })
            .collect();
        NodeCabling {
            hostname: hostname.to_owned(),
            bridges,
            ports,
        }
    }

    /// The bridge `port` is a member of, if any.
    fn bridge_of(&self, port: &str) -> Option<&str> {
        self.bridges
            .iter()
            .find(|(_, members)| members.iter().any(|m| m == port))
            .map(|(b, _)| b.as_str())
    }
}

/// A name compared loosely: lower case, without trailing dots, a
/// `.local` suffix or any domain (`Mini-1.local` and `mini-1` match).
fn fold(name: &str) -> String {
    let n = name.trim_end_matches('.').to_ascii_lowercase();
    n.split('.').next().unwrap_or_default().to_owned()
}

/// The node at the far end of `far`, seen from `from`: the one node
/// whose port has `far`'s UUID as its own, else the one named so.
fn resolve<'a>(
    nodes: &'a BTreeMap<String, NodeCabling>,
    from: &str,
    far: &FarEnd,
) -> Option<&'a str> {
    let only = |matches: Vec<&'a str>| match matches.as_slice() {
        [n] => Some(*n),
        _ => None,
    };
    let others = || nodes.iter().filter(|(n, _)| n.as_str() != from);
    let uid = far.remote_uid.to_ascii_lowercase();
    let owns_uid = |c: &NodeCabling| {
        let own = |p: &FarEnd| !p.local_uid.is_empty() && p.local_uid.to_ascii_lowercase() == uid;
        c.ports.values().any(own)
    };
    let by_uid = others()
        .filter(|(_, c)| owns_uid(c))
        .map(|(n, _)| n.as_str());
    if let Some(n) = only(by_uid.collect()).filter(|_| !uid.is_empty()) {
        return Some(n);
    }
    if far.remote_name.is_empty() {
        return None;
    }
    let name = fold(&far.remote_name);
    let answers = |n: &str, c: &NodeCabling| {
        fold(n) == name || (!c.hostname.is_empty() && fold(&c.hostname) == name)
    };
    let by_name = others()
        .filter(|(n, c)| answers(n, c))
        .map(|(n, _)| n.as_str());
    only(by_name.collect())
}

/// A vertex: a node's bridge or lone port, or the unknown end of a cable.
type Vertex = (String, String);

/// The edges of the cabling: one per cable, between the vertices of its
/// two ends (see the module's decisions).
fn cables(nodes: &BTreeMap<String, NodeCabling>) -> Vec<(Vertex, Vertex)> {
    // (node, far node) -> the node's ports towards it, in name order.
    let mut towards: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for (node, c) in nodes {
        for (port, far) in &c.ports {
            if let Some(other) = resolve(nodes, node, far) {
                towards.entry((node, other)).or_default().push(port);
            }
        }
    }
    let vertex = |node: &str, port: Option<&&str>, far: &str, i: usize| -> Vertex {
        match port {
            Some(p) => {
                let c = &nodes[node];
                (node.to_owned(), c.bridge_of(p).unwrap_or(p).to_owned())
            }
            // An end its node did not report: a vertex of its own.
            None => (node.to_owned(), format!("?{far}#{i}")),
        }
    };
    let mut edges = Vec::new();
    let pairs: BTreeSet<(&str, &str)> =
        towards.keys().map(|&(a, b)| (a.min(b), a.max(b))).collect();
    for (a, b) in pairs {
        let ab = towards.get(&(a, b)).map(Vec::as_slice).unwrap_or_default();
        let ba = towards.get(&(b, a)).map(Vec::as_slice).unwrap_or_default();
        for i in 0..ab.len().max(ba.len()) {
            edges.push((vertex(a, ab.get(i), b, i), vertex(b, ba.get(i), a, i)));
        }
    }
    edges
}

/// Every bridge with at least one cable, as (node, bridge), and whether
/// it lies on a loop of cables.
pub fn cabled_bridges(nodes: &BTreeMap<String, NodeCabling>) -> BTreeMap<Vertex, bool> {
    let edges = cables(nodes);
    let mut index: BTreeMap<&Vertex, usize> = BTreeMap::new();
    for v in edges.iter().flat_map(|(a, b)| [a, b]) {
        let next = index.len();
        index.entry(v).or_insert(next);
    }
    let on_loop = |skip: usize| {
        let mut uf = UnionFind::new(index.len());
        for (_, (a, b)) in edges.iter().enumerate().filter(|&(i, _)| i != skip) {
            uf.union(index[a], index[b]);
        }
        let (a, b) = &edges[skip];
        uf.equiv(index[a], index[b])
    };
    let is_bridge = |(node, v): &Vertex| nodes.get(node).is_some_and(|c| c.bridges.contains_key(v));
    let mut out: BTreeMap<Vertex, bool> = BTreeMap::new();
    for (i, (a, b)) in edges.iter().enumerate() {
        let looped = on_loop(i);
        for v in [a, b].into_iter().filter(|v| is_bridge(v)) {
            *out.entry(v.clone()).or_default() |= looped;
        }
    }
    out
}

/// The bridges, as (node, bridge), that lie on a loop of cables.
pub fn bridge_cycles(nodes: &BTreeMap<String, NodeCabling>) -> BTreeSet<Vertex> {
    let cabled = cabled_bridges(nodes);
    cabled
        .into_iter()
        .filter(|(_, looped)| *looped)
        .map(|(v, _)| v)
        .collect()
}

/// State behind the cabling family.
#[derive(Debug, Default, Clone)]
pub struct CablingMetrics {
    nodes: BTreeMap<String, NodeCabling>,
}

impl CablingMetrics {
    /// A node's `Hello`: its cabling replaces what an earlier one said.
    pub fn on_hello(&mut self, node: &str, hostname: &str, interfaces: &[Interface]) {
        let c = NodeCabling::from_hello(hostname, interfaces);
        self.nodes.insert(node.to_owned(), c);
    }
}

impl Domain for CablingMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let cabled = cabled_bridges(&self.nodes);
        e.family(
            &CYCLE,
            cabled
                .iter()
                .map(|(k, looped)| ([k.0.as_str(), k.1.as_str()], u64::from(*looped))),
        );
    }

    fn forget(&mut self, node: &str) {
        self.nodes.remove(node);
    }
}
