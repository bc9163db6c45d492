//! The one way measurements leave a probe: [`Sink::emit`]; and the one way
//! a producer tells another part of the agent what it saw: [`Observer`].
//!
//! Probes, watchers and readers never talk to the network or the spool.
//! They hand a payload and its timestamp to the sink; the transport task
//! (see [`crate::transport`]) gives each record its boot id and contiguous
//! sequence number, queues it and ships it. The channel is unbounded on
//! purpose: the transport drains it at once into its own bounded queue, which
//! is where overflow is counted, so a probe thread never blocks on I/O.

use boltwatch_proto::v1::record::Payload;
use tokio::sync::mpsc;

pub use observer::Observer;

mod observer;

/// A payload with the time it was observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// Observation time, unix nanoseconds.
    pub unix_ns: u64,
    /// The measurement.
    pub payload: Payload,
}

/// Cloneable handle through which every record is emitted.
#[derive(Debug, Clone)]
pub struct Sink {
    tx: mpsc::UnboundedSender<Emitted>,
}

impl Sink {
    /// A sink and the receiving end the transport drains.
    pub fn new() -> (Sink, mpsc::UnboundedReceiver<Emitted>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Sink { tx }, rx)
    }

    /// Emits `payload` stamped with the current time.
    pub fn emit(&self, payload: Payload) {
        self.emit_at(crate::clock::unix_now(), payload);
    }

    /// Emits `payload` observed at wall-clock `unix_ns`: a timeline
    /// reading goes through [`crate::clock::Reading::to_unix`] first.
    pub fn emit_at(&self, unix_ns: u64, payload: Payload) {
        // A closed channel means the agent is shutting down; dropping is right.
        let _ = self.tx.send(Emitted { unix_ns, payload });
    }
}
