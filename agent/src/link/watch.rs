//! What the running watcher loop holds: the watched set, where records go
//! and the stop flag. Built by `spawn_watcher` and consumed by
//! `reconcile::run`, so it lives apart from both.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BridgeLoop, LinkEvent, LinkEventSource};

use super::bridge_loop::Verdict;
use super::debounce::Accepted;
use super::state::LinkChange;
use crate::sink::{Observer, Sink};

/// What a watcher needs; built by [`super::spawn_watcher`].
#[derive(Debug)]
pub(super) struct Watch {
    /// Interfaces asked for (empty: every interface).
    pub(super) interfaces: Vec<String>,
    /// Where the records go.
    pub(super) sink: Sink,
    /// Who hears of each change, if anyone.
    pub(super) observer: Option<Observer<LinkChange>>,
    /// Set to stop the watcher.
    pub(super) stop: Arc<AtomicBool>,
}

impl Watch {
    /// True if `name` is watched (an empty list watches everything).
    pub(super) fn wants(&self, name: &str) -> bool {
        self.interfaces.is_empty() || self.interfaces.iter().any(|i| i == name)
    }

    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Emits what the tracker accepted, seen at timeline time `at_ns`, and
    /// tells the observer (on the timeline, as the outage tracker compares
    /// it with probe times; the record gets the wall-clock time).
    pub(super) fn report(&self, at_ns: u64, accepted: Accepted) {
        tracing::debug!(
            interface = %accepted.event.interface,
            carrier = accepted.event.carrier,
            admin_up = accepted.event.admin_up,
            down_count = accepted.event.carrier_down_count,
            source = ?accepted.change.source,
            "link event"
        );
        if let Some(obs) = &self.observer {
            obs.observe(accepted.change);
        }
        self.sink.emit_at(
            crate::clock::read().to_unix(at_ns),
            Payload::LinkEvent(accepted.event),
        );
    }

    /// Emits the loop detector's verdict on `bridge`, seen at timeline
    /// time `at_ns`: a link event of source `BRIDGE_LOOP`, which says
    /// nothing of carrier.
    pub(super) fn report_loop(&self, at_ns: u64, bridge: &str, v: Verdict) {
        if v.suspected {
            tracing::warn!(%bridge, flood_pps = v.flood_pps, own_pps = v.own_pps, mac_moves = v.mac_moves, "bridge loop suspected");
        } else {
            tracing::info!(%bridge, mac_moves = v.mac_moves, "no bridge loop suspected");
        }
        let event = LinkEvent {
            interface: bridge.to_owned(),
            source: LinkEventSource::BridgeLoop as i32,
            bridge_loop: Some(BridgeLoop {
                suspected: v.suspected,
                flood_packets_per_second: v.flood_pps,
                own_packets_per_second: v.own_pps,
                mac_moves: v.mac_moves,
            }),
            ..LinkEvent::default()
        };
        self.sink.emit_at(
            crate::clock::read().to_unix(at_ns),
            Payload::LinkEvent(event),
        );
    }
}
