//! What the running watcher loop holds: the watched set, where records go
//! and the stop flag. Built by `spawn_watcher` and consumed by
//! `reconcile::run`, so it lives apart from both.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use boltwatch_proto::v1::record::Payload;

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
}
