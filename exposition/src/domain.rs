//! What every metrics domain is and shares: the [`Domain`] trait, the
//! [`Subjects`] records name (series that exist before their own
//! records), and [`Snapshot`], the state of a domain fed from outside the
//! records.

use std::collections::BTreeSet;

use boltwatch_proto::v1::Record;

use crate::family::Exposition;

/// One domain of metrics.
pub trait Domain: std::fmt::Debug + Send {
    /// A newly stored record. `apply` looks at its own kinds only (a record
    /// domain's are its module's `KINDS`) and ignores every other record,
    /// by design: every domain sees every record, and that each kind has a
    /// domain is checked over all of them (`tests/kinds.rs`), not by a
    /// match here. A domain fed from elsewhere (the soaks table, the
    /// senders, procfs) takes none.
    fn apply(&mut self, _r: &Record, _subjects: &mut Subjects) {}
    /// Appends every family of the domain (its module's `FAMILIES`, in
    /// order), also those with no series yet.
    fn render(&self, e: &mut Exposition, subjects: &Subjects);
    /// The node's agent is gone for good (the collector's staleness rule):
    /// drop its gauges, keep its counters.
    fn forget(&mut self, _node: &str) {}
}

/// (node, peer).
pub type NodePeer = (String, String);
/// (node, peer, service).
pub type NodePeerService = (String, String, String);

/// The state of a domain fed from outside the records (procfs, the soaks
/// table): the latest value, replaced whole.
#[derive(Debug, Default, Clone)]
pub struct Snapshot<T>(T);

impl<T> Snapshot<T> {
    /// The value the next render shows.
    pub fn set(&mut self, value: T) {
        self.0 = value;
    }

    /// The value set last.
    pub fn get(&self) -> &T {
        &self.0
    }
}

/// What records named, for series that exist before their own records.
#[derive(Debug, Default, Clone)]
pub struct Subjects {
    /// Links probed by RTT windows.
    pub probed: BTreeSet<NodePeer>,
    /// Links probed or path-checked: their outage series exist.
    pub peers: BTreeSet<NodePeer>,
    /// Services checked on a peer: their outage series exist.
    pub services: BTreeSet<NodePeerService>,
}
