//! Service checks (`service` records): whether the newest TCP connect check
//! of each peer service succeeded, and the newest *successful* connect
//! time (`boltwatch_service_up` says whether it is current). Service
//! outages are [`super::outage`]'s.

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::Record;

use crate::domain::{Domain, NodePeerService, Subjects};
use crate::family::{families, labels::NODE_PEER_SERVICE, triple, At, Exposition, Newest};
use crate::key;

/// The payload kinds [`ServiceMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["service"];

families! {
    UP = Gauge("boltwatch_service_up", "", NODE_PEER_SERVICE, "1 when the newest TCP connect check of the peer's service succeeded.");
    CONNECT_SECONDS = Gauge("boltwatch_service_connect_seconds", "seconds", NODE_PEER_SERVICE, "TCP connect time of the newest successful check of the peer's service.");
}

/// State behind the service families.
#[derive(Debug, Default, Clone)]
pub struct ServiceMetrics {
    services: BTreeMap<NodePeerService, ServiceState>,
}

/// One service of one peer, as one node checks it.
#[derive(Debug, Default, Clone)]
struct ServiceState {
    /// Whether the newest check connected.
    up: Newest<bool>,
    /// Connect time of the newest check that connected.
    connect_seconds: Newest<f64>,
}

impl Domain for ServiceMetrics {
    fn apply(&mut self, r: &Record, subjects: &mut Subjects) {
        let Some(Payload::Service(c)) = &r.payload else {
            return;
        };
        let k = (r.node.as_str(), c.peer.as_str(), c.service.as_str());
        let owned = || (r.node.clone(), c.peer.clone(), c.service.clone());
        key::with(&mut self.services, key::triple(&k), owned, |s| {
            s.up.update(At::of(r), c.up);
            if c.up {
                s.connect_seconds
                    .update(At::of(r), c.connect_ns as f64 / 1e9);
            }
        });
        key::insert(&mut subjects.services, key::triple(&k), owned);
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let svc = &self.services;
        e.family(
            &UP,
            svc.iter()
                .filter_map(|(k, s)| Some((triple(k), *s.up.get()?))),
        );
        e.family(
            &CONNECT_SECONDS,
            svc.iter()
                .filter_map(|(k, s)| Some((triple(k), *s.connect_seconds.get()?))),
        );
    }

    fn forget(&mut self, node: &str) {
        // Outage counters are `outage`'s and stay.
        self.services.retain(|(n, _, _), _| n != node);
    }
}
