//! The outage tracker role: one thread owns every peer's
//! [`OutageTracker`]; the STAMP senders, the link watcher and the service
//! checks report to it through one channel, each message naming its peer,
//! and it emits the outages they add up to.

use std::sync::mpsc;
use std::thread::JoinHandle;

use boltwatch_common::clock::now_unix_ns;
use boltwatch_proto::v1::record::Payload;
use tracing::warn;

use super::crew::Crew;
use super::topology::Topology;
use crate::config::Config;
use crate::error::Error;
use crate::link::LinkChange;
use crate::outage::{OutageIds, OutageInput, OutageTracker, OutageTrackers};
use crate::service::ServiceChange;
use crate::sink::Observer;
use crate::stamp::ProbeEvent;

/// The started tracker, while roles still take observers of it.
pub(super) struct Tracker {
    tx: mpsc::Sender<OutageInput>,
    thread: JoinHandle<()>,
}

/// The tracker once every producer holds its observer: it ends when they
/// have all stopped.
pub(super) struct Running(JoinHandle<()>);

pub(super) fn start(crew: &Crew, config: &Config, topology: &Topology) -> Result<Tracker, Error> {
    let ids = OutageIds::new();
    let trackers = topology
        .peers
        .iter()
        .map(|p| {
            OutageTracker::new(
                &p.name,
                &p.interface,
                config.outage_after_missing,
                ids.clone(),
            )
        })
        .collect();
    let mut trackers = OutageTrackers::new(trackers);
    let (tx, rx) = mpsc::channel::<OutageInput>();
    let sink = crew.sink.clone();
    let thread = std::thread::Builder::new()
        .name("outage".into())
        .spawn(move || {
            // Ends when every producer (senders, watcher, service checks) is gone.
            for input in rx {
                for o in trackers.apply(input, now_unix_ns()) {
                    sink.emit(Payload::Outage(o));
                }
            }
        })
        .map_err(|source| Error::Spawn {
            what: "outage tracker".into(),
            source,
        })?;
    Ok(Tracker { tx, thread })
}

impl Tracker {
    /// Where the STAMP sender of peer `peer` reports probe outcomes.
    pub fn probes(&self, peer: usize) -> Observer<ProbeEvent> {
        Observer::wrapping(self.tx.clone(), move |event| OutageInput::Probe {
            peer,
            event,
        })
    }

    /// Where the link watcher reports carrier changes.
    pub fn links(&self) -> Observer<LinkChange> {
        Observer::wrapping(self.tx.clone(), OutageInput::Link)
    }

    /// Where the link watcher reports the bridge member port of a peer.
    pub fn ports(&self) -> Observer<crate::link::PeerPort> {
        Observer::wrapping(self.tx.clone(), OutageInput::Port)
    }

    /// Where the service checks of peer `peer` report changes.
    pub fn services(&self, peer: usize) -> Observer<ServiceChange> {
        Observer::wrapping(self.tx.clone(), move |change| OutageInput::Service {
            peer,
            change,
        })
    }

    /// Lets go of the input channel: from now on only the producers hold it.
    pub fn running(self) -> Running {
        Running(self.thread)
    }
}

impl Running {
    /// Waits for the tracker to emit what the stopped producers reported.
    pub async fn join(self) {
        let thread = self.0;
        if !matches!(
            tokio::task::spawn_blocking(move || thread.join()).await,
            Ok(Ok(()))
        ) {
            warn!("outage tracker panicked");
        }
    }
}
