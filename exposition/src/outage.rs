//! Outages (`outage` records), which come in pairs (start, end) keyed by
//! (agent boot, outage id).
//!
//! Link outages (carrier, probe loss, both) are counted in
//! `boltwatch_outages_total{node,peer}` when the first of the pair arrives,
//! and their duration is added to `boltwatch_outage_seconds_total` when the
//! end arrives. Service outages go to
//! `boltwatch_service_outages_total{node,peer,service}` and
//! `boltwatch_service_outage_seconds_total` instead, so link availability
//! is not diluted by a stopped daemon. Ended outages with carrier loss are
//! also counted in `boltwatch_carrier_outages_total{node,peer,interface}`,
//! which names the cable: a peer behind a bridge's member port has that
//! port as its outages' interface. Every probed or path-checked link
//! and every checked service has its series at 0 before its first outage.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Outage, OutageCause, Record};

use crate::domain::{Domain, NodePeer, NodePeerService, Subjects};
use crate::family::{families, labels, pair, triple, Exposition};

/// The payload kinds [`OutageMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["outage"];

families! {
    LINK_COUNT = Counter("boltwatch_outages_total", "", labels::NODE_PEER, "Link outages towards the peer (carrier loss or consecutive lost probes), counted when they start.");
    LINK_SECONDS = Counter("boltwatch_outage_seconds_total", "seconds", labels::NODE_PEER, "Duration of ended link outages towards the peer, added when each ends.");
    CARRIER_COUNT = Counter("boltwatch_carrier_outages_total", "", labels::NODE_PEER_INTERFACE, "Ended link outages towards the peer whose cause includes carrier loss, by the interface that lost it (for a peer behind a bridge, the member port it sits behind), counted when they end.");
    SERVICE_COUNT = Counter("boltwatch_service_outages_total", "", labels::NODE_PEER_SERVICE, "Service outages (failed TCP connect checks) on the peer, counted when they start.");
    SERVICE_SECONDS = Counter("boltwatch_service_outage_seconds_total", "seconds", labels::NODE_PEER_SERVICE, "Duration of ended service outages on the peer, added when each ends.");
}

#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    count: u64,
    seconds: f64,
}

/// State behind the outage families.
#[derive(Debug, Default, Clone)]
pub struct OutageMetrics {
    links: BTreeMap<NodePeer, Totals>,
    /// (node, peer, interface) -> ended carrier outages.
    carriers: BTreeMap<(String, String, String), u64>,
    services: BTreeMap<NodePeerService, Totals>,
    /// (node, boot, outage id) -> whether the end was accounted.
    seen: HashMap<(String, String, u64), bool>,
}

impl OutageMetrics {
    fn add(&mut self, r: &Record, o: &Outage) {
        let key = (r.node.clone(), r.boot_id.clone(), o.outage_id);
        let first = !self.seen.contains_key(&key);
        let ended = self.seen.get(&key).copied().unwrap_or(false);
        let end_now = o.end_unix_ns.is_some() && !ended;
        self.seen.insert(key, ended || end_now);
        let seconds = match o.end_unix_ns {
            Some(end) if end_now => end.saturating_sub(o.start_unix_ns) as f64 / 1e9,
            _ => 0.0,
        };
        let totals = if o.cause == OutageCause::Service as i32 {
            let k = (r.node.clone(), o.peer.clone(), o.service.clone());
            self.services.entry(k).or_default()
        } else {
            let k = (r.node.clone(), o.peer.clone());
            self.links.entry(k).or_default()
        };
        totals.count += u64::from(first);
        totals.seconds += seconds;
        let carrier = [OutageCause::Carrier as i32, OutageCause::Both as i32].contains(&o.cause);
        if end_now && carrier {
            let k = (r.node.clone(), o.peer.clone(), o.interface.clone());
            *self.carriers.entry(k).or_default() += 1;
        }
    }
}

/// `totals` over its own keys and `known` ones (at 0), in key order.
fn with_known<'a, K: Ord>(
    totals: &'a BTreeMap<K, Totals>,
    known: &'a BTreeSet<K>,
) -> impl Iterator<Item = (&'a K, Totals)> {
    let keys: BTreeSet<&K> = totals.keys().chain(known).collect();
    keys.into_iter()
        .map(|k| (k, totals.get(k).copied().unwrap_or_default()))
}

impl Domain for OutageMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        if let Some(Payload::Outage(o)) = &r.payload {
            self.add(r, o);
        }
    }

    fn render(&self, e: &mut Exposition, subjects: &Subjects) {
        let links: Vec<_> = with_known(&self.links, &subjects.peers).collect();
        e.family(&LINK_COUNT, links.iter().map(|(k, t)| (pair(k), t.count)));
        e.family(
            &LINK_SECONDS,
            links.iter().map(|(k, t)| (pair(k), t.seconds)),
        );
        e.family(
            &CARRIER_COUNT,
            self.carriers.iter().map(|(k, n)| (triple(k), *n)),
        );
        let services: Vec<_> = with_known(&self.services, &subjects.services).collect();
        e.family(
            &SERVICE_COUNT,
            services.iter().map(|(k, t)| (triple(k), t.count)),
        );
        e.family(
            &SERVICE_SECONDS,
            services.iter().map(|(k, t)| (triple(k), t.seconds)),
        );
    }
}
