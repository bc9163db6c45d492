//! The STAMP sender role: one session-sender thread per peer, reporting
//! each probe's fate to the outage tracker and tagging the RTT windows a
//! bandwidth test overlapped.

use super::crew::Crew;
use super::outage_tracker::Tracker;
use super::topology::Topology;
use crate::bandwidth::load::LoadBoard;
use boltwatch_proto::v1::Peer;

use crate::config::{Config, PeerConfig};
use crate::error::Error;
use crate::metrics::late::LateReplies;
use crate::stamp::{self, SenderOptions, Target};

pub(super) fn start(
    crew: &mut Crew,
    config: &Config,
    topology: &Topology,
    load: &LoadBoard,
    outage: &Tracker,
    late: &LateReplies,
) -> Result<(), Error> {
    for (i, (peer, cfg)) in topology.peers.iter().zip(&config.peers).enumerate() {
        let target = target(peer, cfg, config, "STAMP sender")?;
        let opts = SenderOptions {
            observer: Some(outage.probes(i)),
            load: load.tag(&peer.name),
            late: config.probe_late,
            late_replies: late.counter(i),
            ..SenderOptions::every(config.probe_interval, config.probe_timeout)
        };
        let spawned = stamp::spawn_sender(
            target,
            opts,
            crew.sink.clone(),
            crew.health.clone(),
            crew.stop.clone(),
        );
        crew.thread(format!("STAMP sender to {}", peer.name), spawned)?;
    }
    Ok(())
}

/// The STAMP target of `peer` (configured as `cfg`), for the role `what`:
/// the RTT sender and the path MTU discovery probe the same path.
pub(super) fn target(
    peer: &Peer,
    cfg: &PeerConfig,
    config: &Config,
    what: &str,
) -> Result<Target, Error> {
    // A scoped address binds to its scope, and must: without the bind
    // its probes would take whichever cable the route names.
    let addr = cfg.scoped().socket_addr().map_err(|source| Error::Spawn {
        what: format!("{what} to {}", peer.name),
        source,
    })?;
    Ok(Target {
        peer: peer.name.clone(),
        addr,
        interface: peer.interface.clone(),
        bind_device: cfg.interface.clone().or_else(|| config.interface.clone()),
        bind_required: cfg.interface.is_some(),
    })
}
