//! The path MTU role: one thread that runs an in-band path MTU discovery
//! ([`crate::stamp::pmtu`]) towards each peer in turn, at start and then
//! every `path_mtu_interval`, and publishes each peer's result for the
//! path watch, which carries it in its `PathCheck` records.
//!
//! One peer at a time, so the discovery's packets add at most one probe
//! rate to the node's traffic however many peers it has. The ceiling is
//! the MTU of the interface towards the peer, read before each discovery
//! (an operator may change it); a peer whose interface MTU is unknown is
//! not searched (a search capped at the floor would report the floor as
//! the path MTU).

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::crew::Crew;
use super::senders;
use super::topology::Topology;
use crate::config::Config;
use crate::discovery;
use crate::error::Error;
use crate::stamp::pmtu::{self, Options};
use crate::stamp::Target;

/// How often the thread looks at the stop token between discoveries.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Each peer's newest path MTU (0: unknown), in the topology's order.
pub(super) type PathMtus = Vec<watch::Receiver<u32>>;

pub(super) fn start(
    crew: &mut Crew,
    config: &Config,
    topology: &Topology,
) -> Result<PathMtus, Error> {
    let mut targets = Vec::new();
    let mut publish = Vec::new();
    let mut receivers = Vec::new();
    for (peer, cfg) in topology.peers.iter().zip(&config.peers) {
        targets.push(senders::target(peer, cfg, config, "path MTU discovery")?);
        let (tx, rx) = watch::channel(0u32);
        publish.push(tx);
        receivers.push(rx);
    }
    let round = Round {
        targets,
        results: publish,
        sysfs_root: config.sysfs_root.clone(),
        pace: config.probe_interval,
        timeout: config.probe_timeout,
    };
    let every = config.path_mtu_interval;
    let stop = crew.stop.clone();
    let spawned = std::thread::Builder::new()
        .name("path-mtu".into())
        .spawn(move || run(&round, every, &stop));
    crew.thread("path MTU discovery", spawned)?;
    Ok(receivers)
}

/// What one round of discoveries needs.
struct Round {
    targets: Vec<Target>,
    results: Vec<watch::Sender<u32>>,
    sysfs_root: std::path::PathBuf,
    pace: Duration,
    timeout: Duration,
}

fn run(round: &Round, every: Duration, stop: &CancellationToken) {
    let mut next = Instant::now();
    while !stop.is_cancelled() {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(STOP_POLL.min(next - now));
            continue;
        }
        for (target, result) in round.targets.iter().zip(&round.results) {
            if stop.is_cancelled() {
                return;
            }
            if let Some(mtu) = round.discover(target, stop) {
                let was = result.send_replace(mtu);
                if was != mtu {
                    info!(peer = %target.peer, path_mtu = mtu, was, "path MTU changed");
                }
            }
        }
        next = Instant::now() + every;
    }
}

impl Round {
    /// The path MTU towards `target` (0: nothing came back); `None` when
    /// there was nothing to search or the agent is stopping.
    fn discover(&self, target: &Target, stop: &CancellationToken) -> Option<u32> {
        let ceiling = discovery::describe(&target.interface, &self.sysfs_root).mtu;
        if ceiling == 0 {
            debug!(peer = %target.peer, interface = %target.interface,
                "interface MTU unknown; path MTU not searched");
            return None;
        }
        let opts = Options {
            ceiling,
            pace: self.pace,
            timeout: self.timeout,
        };
        match pmtu::discover(target, &opts, stop) {
            Ok(_) if stop.is_cancelled() => None,
            Ok(found) => Some(found.unwrap_or(0)),
            Err(e) => {
                warn!(peer = %target.peer, error = %e, "path MTU discovery failed");
                Some(0)
            }
        }
    }
}
