//! The outage tracker role: one thread owns every peer's
//! [`OutageTracker`]; the STAMP senders, the link watcher and the service
//! checks report to it through one channel, each message naming its peer,
//! and it emits the outages they add up to. The power role reports this
//! node's sleeps there too.

use std::sync::mpsc;
use std::thread::JoinHandle;

use boltwatch_proto::v1::record::Payload;
use tracing::{debug, warn};

use super::crew::Crew;
use super::topology::Topology;
use crate::config::Config;
use crate::error::Error;
use crate::link::LinkChange;
use crate::outage::{on_wall_clock, OutageIds, OutageInput, OutageTracker, OutageTrackers};
use crate::power::{self, PowerEvent, SleepDetector};
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
            .notification_lag(config.probe_timeout)
        })
        .collect();
    let mut trackers = OutageTrackers::new(trackers);
    let (tx, rx) = mpsc::channel::<OutageInput>();
    let sink = crew.sink.clone();
    let thread = std::thread::Builder::new()
        .name("outage".into())
        .spawn(move || {
            let mut sleeps = SleepDetector::new();
            // Ends when every producer (senders, watcher, service checks) is gone.
            for input in rx {
                // A wake shows in the clocks at once: learn of the sleep
                // before the first reply after it ends the outage it made.
                // Read errors are the power role's to report.
                if let Ok(r) = power::read_clocks() {
                    for e in sleeps.on_reading(r) {
                        trackers.apply(OutageInput::Power(e), e.at_unix_ns);
                    }
                }
                let outages = trackers.apply(input, crate::clock::now_ns());
                if outages.is_empty() {
                    continue;
                }
                let wall = crate::clock::read();
                for o in outages {
                    // The detection bench reads these times (bench/detect.sh).
                    debug!(peer = %o.peer, id = o.outage_id, ends = o.end_unix_ns.is_some(), "outage record emitted");
                    sink.emit(Payload::Outage(on_wall_clock(o, &wall)));
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

    /// Where the power role reports this node's sleeps and wakes.
    pub fn power(&self) -> Observer<PowerEvent> {
        Observer::wrapping(self.tx.clone(), OutageInput::Power)
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
