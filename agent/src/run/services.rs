//! The service check role: one task per peer and configured service,
//! emitting every check and reporting changes to the outage tracker.

use super::crew::Crew;
use super::outage_tracker::Tracker;
use crate::config::Config;
use crate::service::{self, ServiceTarget};

pub(super) fn start(crew: &mut Crew, config: &Config, outage: &Tracker) {
    for (i, peer) in config.peers.iter().enumerate() {
        for svc in &config.services {
            let target = ServiceTarget {
                peer: peer.name.clone(),
                service: svc.name.clone(),
                addr: service::service_addr(peer.addr.ip(), svc.port),
            };
            let check = service::watch(
                target,
                config.service_interval,
                crew.sink.clone(),
                outage.services(i),
            );
            crew.task(check);
        }
    }
}
