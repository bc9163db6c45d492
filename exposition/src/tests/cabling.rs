//! Loops of cables through bridges, from `Hello`s: the rule
//! ([`bridge_cycles`]) on hand-drawn clusters and on seeded random trees
//! with one cable added, and the family it renders.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use boltwatch_common::testing::proptest_config;
use boltwatch_proto::v1::{Hello, Interface};
use proptest::prelude::*;

use super::*;
use crate::cabling::{bridge_cycles, NodeCabling};

/// A Thunderbolt port of node `node` cabled to node `to` (by UUID: each
/// node's ports share its domain UUID `uid-<node>`).
fn port(node: &str, name: &str, to: &str) -> Interface {
    Interface {
        name: name.into(),
        kind: "thunderbolt".into(),
        remote_uid: format!("uid-{to}"),
        local_uid: format!("uid-{node}"),
        ..Default::default()
    }
}

fn bridge(name: &str, members: &[&str]) -> Interface {
    Interface {
        name: name.into(),
        kind: "bridge".into(),
        members: members.iter().map(|m| m.to_string()).collect(),
        ..Default::default()
    }
}

/// A node whose ports `cables` (port name, far node) are all in `bridge0`
/// when `bridged`, else each on its own.
fn node(name: &str, bridged: bool, cables: &[(&str, &str)]) -> (String, NodeCabling) {
    let mut ifs: Vec<Interface> = cables.iter().map(|(p, to)| port(name, p, to)).collect();
    if bridged {
        let members: Vec<&str> = cables.iter().map(|(p, _)| *p).collect();
        ifs.push(bridge("bridge0", &members));
    }
    (name.to_owned(), NodeCabling::from_hello("", &ifs))
}

fn flagged(cycles: &BTreeSet<(String, String)>) -> Vec<&str> {
    cycles.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn a_ring_of_bridged_macs_is_a_loop() {
    let ring: BTreeMap<_, _> = [
        node("a", true, &[("en1", "b"), ("en2", "c")]),
        node("b", true, &[("en1", "c"), ("en2", "a")]),
        node("c", true, &[("en1", "a"), ("en2", "b")]),
    ]
    .into();
    assert_eq!(flagged(&bridge_cycles(&ring)), ["a", "b", "c"]);
}

#[test]
fn one_node_that_does_not_bridge_breaks_the_loop() {
    let ring: BTreeMap<_, _> = [
        node("a", true, &[("en1", "b"), ("en2", "c")]),
        node("b", true, &[("en1", "c"), ("en2", "a")]),
        node("c", false, &[("en1", "a"), ("en2", "b")]),
    ]
    .into();
    assert!(bridge_cycles(&ring).is_empty());
}

#[test]
fn two_cables_between_two_bridges_are_a_loop() {
    let pair: BTreeMap<_, _> = [
        node("a", true, &[("en1", "b"), ("en2", "b")]),
        node("b", true, &[("en1", "a"), ("en2", "a")]),
    ]
    .into();
    assert_eq!(flagged(&bridge_cycles(&pair)), ["a", "b"]);

    // The same cables to a node that keeps its ports apart: no loop.
    let apart: BTreeMap<_, _> = [
        node("a", true, &[("en1", "b"), ("en2", "b")]),
        node("b", false, &[("en1", "a"), ("en2", "a")]),
    ]
    .into();
    assert!(bridge_cycles(&apart).is_empty());
}

#[test]
fn a_far_node_without_a_hello_closes_no_loop() {
    // b has two cables to x, which sent no Hello: its bridging is unknown.
    let nodes: BTreeMap<_, _> = [node("b", true, &[("en1", "x"), ("en2", "x")])].into();
    assert!(bridge_cycles(&nodes).is_empty());
}

#[test]
fn far_ends_match_by_name_when_no_uuid_does() {
    let by_name = |port: &str, far: &str| Interface {
        name: port.into(),
        remote_name: far.into(),
        ..Default::default()
    };
    let n = |name: &str, host: &str, far: [&str; 2]| {
        let ifs = [
            by_name("tb0", far[0]),
            by_name("tb1", far[1]),
            bridge("br0", &["tb0", "tb1"]),
        ];
        (name.to_owned(), NodeCabling::from_hello(host, &ifs))
    };
    // Host names with a domain, a `.local` and another case still match;
    // a node's name matches as well as its host name.
    let ring: BTreeMap<_, _> = [
        n("a", "mini-a.lab.example", ["MINI-B.local", "c"]),
        n("b", "mini-b", ["c.", "mini-a"]),
        n("c", "", ["mini-a", "mini-b"]),
    ]
    .into();
    assert_eq!(flagged(&bridge_cycles(&ring)), ["a", "b", "c"]);

    // Two nodes answer to one name: that cable is no cable.
    let mut twins = ring.clone();
    twins.get_mut("c").unwrap().hostname = "mini-b".into();
    assert!(bridge_cycles(&twins).is_empty());
}

/// Hellos in, `boltwatch_bridge_cycle` out; a node forgotten takes its
/// cables with it.
#[test]
fn the_family_has_a_sample_per_cabled_bridge() {
    let mut m = Metrics::new();
    for (name, cables) in [
        ("a", [("en1", "b"), ("en2", "b")]),
        ("b", [("en1", "a"), ("en2", "a")]),
    ] {
        let mut interfaces: Vec<Interface> =
            cables.iter().map(|(p, to)| port(name, p, to)).collect();
        interfaces.push(bridge("bridge0", &["en1", "en2"]));
        interfaces.push(bridge("bridge9", &["en9"])); // no cable: no sample
        m.on_hello_links(&Hello {
            node: name.into(),
            interfaces,
            ..Default::default()
        });
    }
    let text = m.render();
    assert_eq!(
        sample(
            &text,
            "boltwatch_bridge_cycle{node=\"a\",interface=\"bridge0\"}"
        ),
        Some("1".into())
    );
    assert_eq!(
        sample(
            &text,
            "boltwatch_bridge_cycle{node=\"b\",interface=\"bridge0\"}"
        ),
        Some("1".into())
    );
    assert_eq!(
        sample(
            &text,
            "boltwatch_bridge_cycle{node=\"a\",interface=\"bridge9\"}"
        ),
        None
    );
    m.forget("b");
    let text = m.render();
    assert_eq!(
        sample(
            &text,
            "boltwatch_bridge_cycle{node=\"a\",interface=\"bridge0\"}"
        ),
        None
    );
}

/// The nodes on the tree path between `from` and `to`, found by a
/// breadth-first search (independent of the rule under test).
fn tree_path(edges: &[(usize, usize)], from: usize, to: usize) -> BTreeSet<usize> {
    let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        for &(a, b) in edges {
            for (x, y) in [(a, b), (b, a)] {
                if x == v && y != from && !prev.contains_key(&y) {
                    prev.insert(y, v);
                    queue.push_back(y);
                }
            }
        }
    }
    let mut path = BTreeSet::from([to]);
    let mut v = to;
    while v != from {
        v = prev[&v];
        path.insert(v);
    }
    path
}

/// A cluster cabled as `edges`, every node bridging all its ports.
fn cluster(n: usize, edges: &[(usize, usize)]) -> BTreeMap<String, NodeCabling> {
    let name = |i: usize| format!("n{i:02}");
    (0..n)
        .map(|i| {
            let cables: Vec<(String, String)> = edges
                .iter()
                .enumerate()
                .filter_map(|(k, &(a, b))| match i {
                    _ if i == a => Some((format!("en{k}"), name(b))),
                    _ if i == b => Some((format!("en{k}"), name(a))),
                    _ => None,
                })
                .collect();
            let refs: Vec<(&str, &str)> = cables
                .iter()
                .map(|(p, t)| (p.as_str(), t.as_str()))
                .collect();
            node(&name(i), true, &refs)
        })
        .collect()
}

proptest! {
    #![proptest_config(proptest_config(256))]

    /// A tree of bridged nodes has no loop; one more cable between two
    /// nodes closes exactly the loop along the tree path between them.
    #[test]
    fn one_cable_more_than_a_tree_closes_its_path(
        parents in proptest::collection::vec(any::<u16>(), 1..12),
        extra in (any::<u16>(), any::<u16>()),
    ) {
        let n = parents.len() + 1;
        // Node i + 1 hangs off one of the nodes before it.
        let mut edges: Vec<(usize, usize)> =
            parents.iter().enumerate().map(|(i, p)| (usize::from(*p) % (i + 1), i + 1)).collect();
        prop_assert!(bridge_cycles(&cluster(n, &edges)).is_empty());

        let (a, b) = (usize::from(extra.0) % n, usize::from(extra.1) % n);
        prop_assume!(a != b);
        let expected: Vec<String> = tree_path(&edges, a, b).into_iter().map(|i| format!("n{i:02}")).collect();
        edges.push((a, b));
        let got: Vec<String> = bridge_cycles(&cluster(n, &edges)).into_iter().map(|(n, _)| n).collect();
        prop_assert_eq!(got, expected);
    }
}
