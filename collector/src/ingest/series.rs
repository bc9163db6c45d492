//! The cardinality budget of `/metrics`: how many series each node may
//! have, counted as distinct label sets (the peer, interface, sensor and
//! service a record's series carry besides the node), and how many nodes
//! there may be. Pure: records in, a verdict out.
//!
//! Why label sets and not values per label: 512 peer names times 448
//! service names stay under any cap on values per label and still made
//! 229,376 service series of one node. A label set is what a series is,
//! whichever family renders it, so counting sets bounds every family at
//! once: the same set from an RTT window and a bandwidth test is one set.
//!
//! Why at ingest and not in each export domain: every domain keys its state
//! by these names, so one check before a record reaches the domains bounds
//! all of them, and a domain added later is bounded without knowing it.
//! A record over the budget is still stored (it is valid data, the API and
//! reports see it); it only stays out of `/metrics`, counted in
//! `boltwatch_ingest_series_refused_total{kind}`, the kind being the first
//! label of the set over the budget (the peer, for most records).

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};

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
        // The RDMA device is a per-port name: budgeted as an interface.
        Some(Payload::FabricCheck(c)) => (
            [
                (Dim::Interface, &c.interface),
                (Dim::Interface, &c.device),
                none,
            ],
            &[],
        ),
        // The device is budgeted as an interface, as for fabric checks.
        Some(Payload::RdmaProbe(p)) => {
            let (peer, interface) = p
                .rtt
                .as_ref()
                .map_or(("", ""), |s| (s.peer.as_str(), s.interface.as_str()));
            (
                [
                    (Dim::Peer, peer),
                    (Dim::Interface, interface),
                    (Dim::Interface, &p.device),
                ],
                &[],
            )
        }
        // No label but the node's; `None` is a kind this build cannot name.
        Some(Payload::AgentStats(_) | Payload::Power(_)) | None => ([none; 3], &[]),
    };
    fixed
        .into_iter()
        .chain(sensors.iter().map(|s| (Dim::Sensor, s.name.as_str())))
        .filter(|(_, s)| !s.is_empty())
}

/// The label sets of a record, as hashes, each with the label that names
/// its kind (its first, in field order: the peer, if any): a thermal reading's sensors are
/// a set each, any other record's names are one set. A record with no
/// names (agent stats) has none.
fn label_sets<'r>(keys: &'r RandomState, r: &'r Record) -> impl Iterator<Item = (Dim, u64)> + 'r {
    let each = matches!(r.payload, Some(Payload::Thermal(_)));
    let whole = subjects(r).next().filter(|_| !each);
    let whole = whole.map(|(dim, _)| (dim, set_hash(keys, subjects(r))));
    let sensors = subjects(r).filter(move |_| each);
    whole
        .into_iter()
        .chain(sensors.map(move |n| (n.0, set_hash(keys, std::iter::once(n)))))
}

/// A label set's hash: each label, the value's length and the value, then
/// their count, so that sets of different sizes differ. The labels go
/// through a stack buffer into one `write` (SipHash's cost per call was
/// most of the budget's share of ingest); a set too long for it is
/// written in parts, at the same places for the same set, so the same set
/// still hashes alike.
fn set_hash<'a>(keys: &RandomState, names: impl Iterator<Item = (Dim, &'a str)>) -> u64 {
    let mut h = keys.build_hasher();
    let mut buf = [0u8; 128];
    let mut len = 0;
    let mut put = |h: &mut std::hash::DefaultHasher, bytes: &[u8]| {
        if len + bytes.len() > buf.len() {
            h.write(&buf[..len]);
            len = 0;
        }
        if bytes.len() > buf.len() {
            h.write(bytes);
        } else {
            buf[len..len + bytes.len()].copy_from_slice(bytes);
            len += bytes.len();
        }
    };
    let mut n = 0u8;
    for (dim, name) in names {
        put(&mut h, &[dim as u8]);
        put(&mut h, &(name.len() as u64).to_le_bytes());
        put(&mut h, name.as_bytes());
        n = n.wrapping_add(1);
    }
    put(&mut h, &[n]);
    h.write(&buf[..len]);
    h.finish()
}

/// Label sets seen per node.
#[derive(Debug)]
pub struct Budget {
    per_node: usize,
    /// Keys the set hashes: random per process, so label values cannot be
    /// chosen to collide and pass as a set already counted.
    keys: RandomState,
    nodes: HashMap<String, Sets>,
}

/// One node's label sets, by hash. The hashes are already keyed SipHash
/// outputs (random per process), so the set takes them as they are:
/// hashing them again cost as much as hashing the labels.
type Sets = HashSet<u64, nohash_hasher::BuildNoHashHasher<u64>>;

impl Budget {
    /// At most `per_node` distinct label sets per node.
    pub fn new(per_node: usize) -> Budget {
        Budget {
            per_node,
            keys: RandomState::new(),
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
        self.nodes.insert(node.to_string(), Sets::default());
        true
    }

    /// Admits all of `r`'s label sets for `node`, or none: `Err` names the
    /// kind of the first set over the budget.
    pub fn admit(&mut self, node: &str, r: &Record) -> Result<(), Dim> {
        match self.node(node) {
            Some(mut n) => n.admit(r),
            None => Err(first_kind(r)),
        }
    }

    /// `node`'s budget, for admitting many records with one lookup of the
    /// node; `None` when the node itself is over [`MAX_NODES`].
    pub fn node(&mut self, node: &str) -> Option<NodeBudget<'_>> {
        if !self.admit_node(node) {
            return None;
        }
        Some(NodeBudget {
            per_node: self.per_node,
            keys: &self.keys,
            sets: self.nodes.get_mut(node).expect("admitted above"),
        })
    }

    /// The interfaces of a `Hello` that fit the budget, in order; the rest
    /// are counted by the caller.
    pub fn interfaces(&mut self, node: &str, all: &[Interface]) -> (Vec<Interface>, usize) {
        let Some(mut budget) = self.node(node) else {
            return (Vec::new(), all.len());
        };
        let mut kept = Vec::new();
        for i in all {
            let name = (Dim::Interface, i.name.as_str());
            let set = (Dim::Interface, set_hash(budget.keys, std::iter::once(name)));
            if budget.admit_sets(std::iter::once(set)).is_ok() {
                kept.push(i.clone());
            }
        }
        let refused = all.len() - kept.len();
        (kept, refused)
    }
}

/// The kind counted when a record is refused with its node: its first
/// label, as for a set over the budget.
pub fn first_kind(r: &Record) -> Dim {
    subjects(r).next().map_or(Dim::Peer, |(d, _)| d)
}

/// One node's part of a [`Budget`].
pub struct NodeBudget<'b> {
    per_node: usize,
    keys: &'b RandomState,
    sets: &'b mut Sets,
}

impl NodeBudget<'_> {
    /// Admits all of `r`'s label sets, or none: `Err` names the kind of
    /// the first set over the budget.
    pub fn admit(&mut self, r: &Record) -> Result<(), Dim> {
        let keys = self.keys;
        self.admit_sets(label_sets(keys, r))
    }

    /// Admits all of `sets` (hashes, each with its kind), or none.
    fn admit_sets(&mut self, sets: impl Iterator<Item = (Dim, u64)>) -> Result<(), Dim> {
        // Nearly always every set is known already: nothing to count, and
        // nothing allocated (a thermal reading's few sensors at most).
        let mut new: Vec<(Dim, u64)> = Vec::new();
        for (dim, h) in sets {
            if !self.sets.contains(&h) && !new.iter().any(|(_, n)| *n == h) {
                new.push((dim, h));
            }
        }
        if let Some((dim, _)) = new.first() {
            if self.sets.len() + new.len() > self.per_node {
                return Err(*dim);
            }
        }
        self.sets.extend(new.into_iter().map(|(_, h)| h));
        Ok(())
    }
}

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
            assert_eq!(b.admit("a", &rtt(p)), Ok(()));
        }
        assert_eq!(b.admit("a", &rtt("p4")), Err(Dim::Peer));
        // Known names still pass, and other nodes have their own budget.
        assert_eq!(b.admit("a", &rtt("p2")), Ok(()));
        assert_eq!(b.admit("b", &rtt("p4")), Ok(()));
    }

    fn svc(peer: &str, service: &str) -> Record {
        Record {
            payload: Some(Payload::Service(ServiceCheck {
                peer: peer.into(),
                service: service.into(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn a_refused_record_admits_none_of_its_names() {
        let mut b = Budget::new(1);
        assert_eq!(b.admit("a", &svc("p", "ssh")), Ok(()));
        assert_eq!(b.admit("a", &svc("q", "ssh")), Err(Dim::Peer));
        assert_eq!(b.admit("a", &svc("p", "http")), Err(Dim::Peer));
        assert_eq!(b.admit("a", &svc("p", "ssh")), Ok(()));
    }

    #[test]
    fn combinations_count_as_series_not_values() {
        // 4 peers x 4 services: 4 values per label, 16 label sets.
        let mut b = Budget::new(10);
        let mut admitted = 0;
        for p in 0..4 {
            for s in 0..4 {
                if b.admit("a", &svc(&format!("p{p}"), &format!("s{s}")))
                    .is_ok()
                {
                    admitted += 1;
                }
            }
        }
        assert_eq!(admitted, 10);
    }

    #[test]
    fn one_label_set_is_one_series_whichever_kind_carries_it() {
        use boltwatch_proto::v1::{BandwidthResult, TemperatureSensor, ThermalReading};
        let mut b = Budget::new(3);
        assert_eq!(b.admit("a", &rtt("p")), Ok(()));
        let bw = Record {
            payload: Some(Payload::Bandwidth(BandwidthResult {
                peer: "p".into(),
                interface: "lo".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(b.admit("a", &bw), Ok(()), "same set as the RTT window");
        // A thermal reading's sensors are a set each: two fit, three not.
        let thermal = |names: &[&str]| Record {
            payload: Some(Payload::Thermal(ThermalReading {
                sensors: names
                    .iter()
                    .map(|n| TemperatureSensor {
                        name: n.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                throttle: None,
            })),
            ..Default::default()
        };
        assert_eq!(b.admit("a", &thermal(&["c", "d", "e"])), Err(Dim::Sensor));
        assert_eq!(b.admit("a", &thermal(&["c", "d"])), Ok(()));
        assert_eq!(b.admit("a", &thermal(&["d", "c"])), Ok(()));
        assert_eq!(b.admit("a", &rtt("q")), Err(Dim::Peer));
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
    fn node_count_is_capped() {
        let mut b = Budget::new(1);
        for i in 0..MAX_NODES {
            assert!(b.admit_node(&format!("n{i}")));
        }
        assert!(!b.admit_node("one-more"));
        assert!(b.admit_node("n0"));
    }

    #[test]
    fn a_set_hashes_alike_however_long_and_only_its_own_split_alike() {
        let keys = RandomState::new();
        let h = |names: &[(Dim, &str)]| set_hash(&keys, names.iter().copied());
        let long = "p".repeat(200);
        let sets: [&[(Dim, &str)]; 6] = [
            &[(Dim::Peer, "ab"), (Dim::Interface, "c")],
            &[(Dim::Peer, "a"), (Dim::Interface, "bc")],
            &[(Dim::Interface, "ab"), (Dim::Peer, "c")],
            &[(Dim::Peer, "abc")],
            &[(Dim::Peer, &long), (Dim::Interface, "en0")],
            &[(Dim::Peer, &long[..199]), (Dim::Interface, "pen0")],
        ];
        for (i, a) in sets.iter().enumerate() {
            // Over the stack buffer or not, the same set hashes the same.
            assert_eq!(h(a), h(a), "{a:?}");
            for b in &sets[i + 1..] {
                assert_ne!(h(a), h(b), "{a:?} ~ {b:?}");
            }
        }
    }
}
