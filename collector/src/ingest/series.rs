//! The cardinality budget of `/metrics`: how many distinct peers,
//! interfaces, sensors and services each node may have series for, and how
//! many nodes there may be. Pure: names in, a verdict out.
//!
//! Why at ingest and not in each export domain: every domain keys its state
//! by these names, so one check before a record reaches the domains bounds
//! all of them, and a domain added later is bounded without knowing it.
//! A record over the budget is still stored (it is valid data, the API and
//! reports see it); it only stays out of `/metrics`, counted in
//! `boltwatch_ingest_series_refused_total{label}`.

use std::collections::{BTreeSet, HashMap};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Interface, Record, TemperatureSensor};

/// Most distinct nodes with series. With tokens the table bounds the nodes
/// already; without, this keeps a stream of invented node names from
/// growing the state.
pub const MAX_NODES: usize = 4096;

/// A label whose distinct values are budgeted per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    /// `peer`.
    Peer,
    /// `interface`.
    Interface,
    /// `sensor`.
    Sensor,
    /// `service`.
    Service,
}

impl Dim {
    /// The label name, as counted in `boltwatch_ingest_series_refused_total`.
    pub fn label(self) -> &'static str {
        match self {
            Dim::Peer => "peer",
            Dim::Interface => "interface",
            Dim::Sensor => "sensor",
            Dim::Service => "service",
        }
    }
}

/// The budgeted names a record carries (empty names are not series), in
/// field order. An iterator, not a list: it runs for every record, twice
/// (label checks in `validate`, then the budget).
///
/// The match lists every payload kind, no `_`: a new kind does not compile
/// until it says which of its fields are `peer`, `interface`, `sensor` or
/// `service` labels, so none goes unchecked and unbudgeted.
pub fn subjects(r: &Record) -> impl Iterator<Item = (Dim, &str)> + Clone + '_ {
    // Up to three fixed names, then a thermal reading's sensors.
    let none = (Dim::Peer, "");
    let (fixed, sensors): ([(Dim, &str); 3], &[TemperatureSensor]) = match &r.payload {
        Some(Payload::Rtt(s)) => (
            [(Dim::Peer, &s.peer), (Dim::Interface, &s.interface), none],
            &[],
        ),
        Some(Payload::LinkEvent(e)) => ([(Dim::Interface, &e.interface), none, none], &[]),
        Some(Payload::Counters(c)) => ([(Dim::Interface, &c.interface), none, none], &[]),
        Some(Payload::Thermal(t)) => ([none; 3], &t.sensors),
        Some(Payload::Bandwidth(b)) => (
            [(Dim::Peer, &b.peer), (Dim::Interface, &b.interface), none],
            &[],
        ),
        Some(Payload::Service(s)) => (
            [(Dim::Peer, &s.peer), (Dim::Service, &s.service), none],
            &[],
        ),
        Some(Payload::Outage(o)) => (
            [
                (Dim::Peer, &o.peer),
                (Dim::Interface, &o.interface),
                (Dim::Service, &o.service),
            ],
            &[],
        ),
        Some(Payload::Path(p)) => (
            [
                (Dim::Peer, &p.peer),
                (Dim::Interface, &p.expected_interface),
                (Dim::Interface, &p.route_interface),
            ],
            &[],
        ),
        // No label but the node's; `None` is a kind this build cannot name.
        Some(Payload::AgentStats(_)) | None => ([none; 3], &[]),
    };
    fixed
        .into_iter()
        .chain(sensors.iter().map(|s| (Dim::Sensor, s.name.as_str())))
        .filter(|(_, s)| !s.is_empty())
}

/// Distinct names seen per node and label.
#[derive(Debug)]
pub struct Budget {
    per_node: usize,
    nodes: HashMap<String, Names>,
}

/// One node's distinct names, per [`Dim`] (indexed by `Dim as usize`).
type Names = [BTreeSet<String>; 4];

impl Budget {
    /// At most `per_node` distinct names per node and label.
    pub fn new(per_node: usize) -> Budget {
        Budget {
            per_node,
            nodes: HashMap::new(),
        }
    }

    /// Whether `node` has, or may get, series.
    pub fn admit_node(&mut self, node: &str) -> bool {
        if self.nodes.contains_key(node) {
            return true;
        }
        if self.nodes.len() >= MAX_NODES {
            return false;
        }
        self.nodes.insert(node.to_string(), Names::default());
        true
    }

    /// Admits all of `names` for `node`, or none: `Err` names the first
    /// label over the budget.
    pub fn admit<'a>(
        &mut self,
        node: &str,
        names: impl IntoIterator<Item = (Dim, &'a str)> + Clone,
    ) -> Result<(), Dim> {
        match self.node(node) {
            Some(mut n) => n.admit(names),
            None => Err(names.into_iter().next().map_or(Dim::Peer, |(d, _)| d)),
        }
    }

    /// `node`'s budget, for admitting many records' names with one lookup
    /// of the node; `None` when the node itself is over [`MAX_NODES`].
    pub fn node(&mut self, node: &str) -> Option<NodeBudget<'_>> {
        if !self.admit_node(node) {
            return None;
        }
        Some(NodeBudget {
            per_node: self.per_node,
            names: self.nodes.get_mut(node).expect("admitted above"),
        })
    }
    /// The interfaces of a `Hello` that fit the budget, in order; the rest
    /// are counted by the caller.
    pub fn interfaces(&mut self, node: &str, all: &[Interface]) -> (Vec<Interface>, usize) {
        let mut kept = Vec::new();
        let mut refused = 0;
        for i in all {
            match self.admit(node, [(Dim::Interface, i.name.as_str())]) {
                Ok(()) => kept.push(i.clone()),
                Err(_) => refused += 1,
            }
        }
        (kept, refused)
    }
}

/// One node's part of a [`Budget`].
pub struct NodeBudget<'b> {
    per_node: usize,
    names: &'b mut Names,
}

impl NodeBudget<'_> {
    /// Admits all of `names`, or none: `Err` names the first label over
    /// the budget.
    pub fn admit<'a>(
        &mut self,
        names: impl IntoIterator<Item = (Dim, &'a str)> + Clone,
    ) -> Result<(), Dim> {
        let sets = &mut *self.names;
        // Nearly always every name is known already: nothing to count.
        if names
            .clone()
            .into_iter()
            .all(|(dim, name)| sets[dim as usize].contains(name))
        {
            return Ok(());
        }
        let mut new: [BTreeSet<&str>; 4] = Default::default();
        for (dim, name) in names {
            if !sets[dim as usize].contains(name) {
                new[dim as usize].insert(name);
            }
        }
        for (i, names) in new.iter().enumerate() {
            if !names.is_empty() && sets[i].len() + names.len() > self.per_node {
                return Err(DIMS[i]);
            }
        }
        for (set, names) in sets.iter_mut().zip(new) {
            set.extend(names.into_iter().map(str::to_string));
        }
        Ok(())
    }
}

/// Every [`Dim`], by `Dim as usize`.
const DIMS: [Dim; 4] = [Dim::Peer, Dim::Interface, Dim::Sensor, Dim::Service];

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{RttSummary, ServiceCheck};

    fn rtt(peer: &str) -> Record {
        Record {
            node: "a".into(),
            payload: Some(Payload::Rtt(RttSummary {
                peer: peer.into(),
                interface: "lo".into(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn subjects_are_the_non_empty_names_in_field_order() {
        use boltwatch_proto::v1::{Outage, PathCheck, TemperatureSensor, ThermalReading};
        let of = |payload| {
            let r = Record {
                payload: Some(payload),
                ..Default::default()
            };
            let names: Vec<(Dim, String)> = subjects(&r).map(|(d, s)| (d, s.into())).collect();
            names
        };
        let path = of(Payload::Path(PathCheck {
            peer: "p".into(),
            expected_interface: "en1".into(),
            route_interface: "en2".into(),
            ..Default::default()
        }));
        use Dim::*;
        let owned = |v: &[(Dim, &str)]| -> Vec<(Dim, String)> {
            v.iter().map(|(d, s)| (*d, s.to_string())).collect()
        };
        assert_eq!(
            path,
            owned(&[(Peer, "p"), (Interface, "en1"), (Interface, "en2")])
        );
        let outage = of(Payload::Outage(Outage {
            peer: "p".into(),
            service: "ssh".into(),
            ..Default::default()
        }));
        assert_eq!(outage, owned(&[(Peer, "p"), (Service, "ssh")]));
        let sensor = |name: &str| TemperatureSensor {
            name: name.into(),
            ..Default::default()
        };
        let thermal = of(Payload::Thermal(ThermalReading {
            sensors: vec![sensor("case"), sensor(""), sensor("ssd")],
            throttle: None,
        }));
        assert_eq!(thermal, owned(&[(Sensor, "case"), (Sensor, "ssd")]));
        assert_eq!(subjects(&Record::default()).count(), 0);
    }

    #[test]
    fn names_beyond_the_cap_are_refused_known_ones_pass() {
        let mut b = Budget::new(3);
        for p in ["p1", "p2", "p3"] {
            assert_eq!(b.admit("a", subjects(&rtt(p))), Ok(()));
        }
        assert_eq!(b.admit("a", subjects(&rtt("p4"))), Err(Dim::Peer));
        // Known names still pass, and other nodes have their own budget.
        assert_eq!(b.admit("a", subjects(&rtt("p2"))), Ok(()));
        assert_eq!(b.admit("b", subjects(&rtt("p4"))), Ok(()));
    }

    #[test]
    fn a_refused_record_admits_none_of_its_names() {
        let mut b = Budget::new(1);
        let svc = |peer: &str, service: &str| Record {
            payload: Some(Payload::Service(ServiceCheck {
                peer: peer.into(),
                service: service.into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(b.admit("a", subjects(&svc("p", "ssh"))), Ok(()));
        assert_eq!(b.admit("a", subjects(&svc("q", "ssh"))), Err(Dim::Peer));
        assert_eq!(b.admit("a", subjects(&svc("p", "http"))), Err(Dim::Service));
        assert_eq!(b.admit("a", subjects(&svc("p", "ssh"))), Ok(()));
    }

    #[test]
    fn hello_interfaces_are_trimmed_to_the_cap() {
        let mut b = Budget::new(2);
        let ifs: Vec<Interface> = (0..5)
            .map(|i| Interface {
                name: format!("en{i}"),
                ..Default::default()
            })
            .collect();
        let (kept, refused) = b.interfaces("a", &ifs);
        assert_eq!((kept.len(), refused), (2, 3));
    }

    #[test]
    fn dims_are_indexed_by_their_discriminant() {
        for (i, d) in DIMS.iter().enumerate() {
            assert_eq!(*d as usize, i);
        }
    }

    #[test]
    fn node_count_is_capped() {
        let mut b = Budget::new(1);
        for i in 0..MAX_NODES {
            assert!(b.admit_node(&format!("n{i}")));
        }
        assert!(!b.admit_node("one-more"));
        assert!(b.admit_node("n0"));
    }
}
