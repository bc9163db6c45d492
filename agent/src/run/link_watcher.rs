//! The link watcher role: link events become records at once and carrier
//! changes go to the outage tracker. Without it (an OS or a sandbox with no
//! kernel events) the agent runs on, and carrier is still sampled with the
//! counters.

use tracing::warn;

use super::crew::Crew;
use super::outage_tracker::Tracker;
use super::topology::Topology;
use crate::config::Config;
use crate::link;

pub(super) fn start(crew: &mut Crew, config: &Config, topology: &Topology, outage: &Tracker) {
    // Every peer's IP, in the tracker's order: a peer reached over a
    // bridge follows the member port it sits behind.
    let peers = config.peers.iter().map(|p| p.addr.ip()).collect();
    let watcher = link::spawn_watcher_for_peers(
        topology.interfaces.clone(),
        config.sysfs_root.clone(),
        crew.sink.clone(),
        Some(outage.links()),
        peers,
        outage.ports(),
    );
    match watcher {
        Ok(w) => crew.joins("link watcher", move || {
            w.stop();
            true
        }),
        Err(e) => {
            warn!(error = %e, "link events unavailable; carrier is still sampled with the counters")
        }
    }
}
