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
    let watcher = link::spawn_watcher(
        topology.interfaces.clone(),
        config.sysfs_root.clone(),
        crew.sink.clone(),
        Some(outage.links()),
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
