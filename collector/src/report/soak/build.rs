//! [`Builder`]: accumulates the decoded records of a [`Scope`]
//! (streaming), each kind into its concern's accumulator;
//! [`Builder::finish`] (in `finish.rs`) computes the [`super::Report`].

use std::collections::{BTreeMap, BTreeSet};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Hello, Outage, Record, RttSummary, ServiceCheck};
use boltwatch_store::{Minute, Window as Win};
use prost::Message;

use super::bandwidth::Test;
use super::coverage::BootAcc;
use super::facts::Facts;
use super::rtt::LinkAcc;
use super::thermal::NodeAcc;
use crate::soak::{Mark, Slo};

/// The agent's RTT window (`WINDOW` in the agent's `stamp::sender`): a
/// link has at most one window a slot of this length, which bounds the
/// windows a report keeps ([`Builder::window_cap`]).
const WINDOW_SLOT_NS: u64 = 1_000_000_000;

/// How long after the range's end records are still read: an RTT window
/// belongs to the range of its start, and its record is stamped when it
/// closes, so the last windows of a range arrive after it (a minute also
/// covers a rolled-up minute starting at the end).
pub const CLOSE_MARGIN_NS: u64 = 60_000_000_000;

/// What a report covers.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Soak name (or `from-to` for an ad-hoc range).
    pub name: String,
    /// Range start, unix ns (inclusive).
    pub from_unix_ns: u64,
    /// Range end, unix ns (exclusive).
    pub to_unix_ns: u64,
    /// Only these nodes (empty: all).
    pub nodes: Vec<String>,
    /// Thresholds.
    pub slo: Slo,
    /// Workload marks.
    pub marks: Vec<Mark>,
}

/// The kinds of sparse records a report keeps per node, each within its
/// own budget ([`Builder::room`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Sparse {
    Outage,
    Counters,
    Bandwidth,
    Thermal,
    Service,
}

/// Accumulates a soak's records; see the module documentation.
#[derive(Debug)]
pub struct Builder {
    pub(super) scope: Scope,
    /// The soak's nodes (empty: all).
    pub(super) only: BTreeSet<String>,
    /// (node, peer) -> RTT windows.
    pub(super) links: BTreeMap<(String, String), LinkAcc>,
    /// TCP bandwidth tests.
    pub(super) tests: Vec<Test>,
    /// node -> thermal readings.
    pub(super) thermal: BTreeMap<String, NodeAcc>,
    /// (node, peer, service) -> (checks, up).
    pub(super) services: BTreeMap<(String, String, String), (u64, u64)>,
    /// (node, boot, record), in range or not.
    pub(super) outages: Vec<(String, String, Outage)>,
    /// (node, boot) -> sequence numbers and drops.
    pub(super) boots: BTreeMap<(String, String), BootAcc>,
    /// Records in range.
    pub(super) records: u64,
    /// Nodes with records in range.
    pub(super) seen: BTreeSet<String>,
    /// (node, kind) -> items of its sparse records kept ([`Builder::room`]).
    kept: BTreeMap<(String, Sparse), u64>,
    /// Counters, Hellos, agent load, restarts and link events.
    pub(super) facts: Facts,
    /// RDMA probe windows, by link.
    pub(super) rdma: super::rdma::RdmaAcc,
}

impl Builder {
    /// An empty report over `scope`.
    pub fn new(scope: Scope) -> Builder {
        Builder {
            only: scope.nodes.iter().cloned().collect(),
            scope,
            links: BTreeMap::new(),
            tests: Vec::new(),
            thermal: BTreeMap::new(),
            services: BTreeMap::new(),
            outages: Vec::new(),
            boots: BTreeMap::new(),
            records: 0,
            seen: BTreeSet::new(),
            kept: BTreeMap::new(),
            facts: Facts::default(),
            rdma: Default::default(),
        }
    }

    /// A `Hello` the store kept of `node` (its agent started at `started`):
    /// the inventory's OS, agent version and interfaces.
    pub fn add_hello(&mut self, node: &str, started: u64, h: &Hello) {
        if !self.foreign(node) {
            self.facts.hello(node, started, h, self.scope.to_unix_ns);
        }
    }

    /// A node or peer outside the soak's nodes (a soak of a and b ignores
    /// c's records and a's probes of c).
    fn foreign(&self, name: &str) -> bool {
        !self.only.is_empty() && !self.only.contains(name)
    }

    fn in_range(&self, t: u64) -> bool {
        (self.scope.from_unix_ns..self.scope.to_unix_ns).contains(&t)
    }

    /// The record times to read: the range and [`CLOSE_MARGIN_NS`] after.
    pub fn scan_range(&self) -> (u64, u64) {
        let (from, to) = (self.scope.from_unix_ns, self.scope.to_unix_ns);
        (from, to.saturating_add(CLOSE_MARGIN_NS))
    }

    /// One stored record. Records outside the range are ignored except
    /// outages (which may have started before it) and RTT windows, which
    /// belong to the range by their start (and count as records by their
    /// own time, as every record does).
    pub fn add(&mut self, node: &str, boot: &str, seq: u64, unix_ns: u64, p: Option<&Payload>) {
        if self.foreign(node) {
            return;
        }
        if let Some(Payload::Rtt(r)) = p {
            if !self.foreign(&r.peer) && self.in_range(Win::of(r, unix_ns).t) {
                self.add_rtt(node, r, unix_ns);
            }
        }
        // An outage towards a node outside the soak is not the soak's: its
        // verdict judges only the links between its own nodes.
        match p {
            Some(Payload::Outage(o))
                if !self.foreign(&o.peer) && self.room(node, Sparse::Outage) =>
            {
                self.outages.push((node.into(), boot.into(), o.clone()));
            }
            _ => {}
        }
        if !self.in_range(unix_ns) {
            return;
        }
        self.count(node, boot, (seq, seq), 1);
        if !matches!(p, Some(Payload::Counters(_))) || self.room(node, Sparse::Counters) {
            self.facts.add(node, boot, unix_ns, p, &self.scope.marks);
        }
        match p {
            Some(Payload::Bandwidth(bw))
                if !self.foreign(&bw.peer) && self.room(node, Sparse::Bandwidth) =>
            {
                self.tests.extend(Test::of(node, bw, unix_ns));
            }
            Some(Payload::Thermal(th)) if self.room(node, Sparse::Thermal) => {
                self.thermal
                    .entry(node.into())
                    .or_default()
                    .add(th, unix_ns);
            }
            Some(Payload::Service(c))
                if !self.foreign(&c.peer) && self.room(node, Sparse::Service) =>
            {
                self.add_check(node, c)
            }
            Some(Payload::RdmaProbe(r))
                if !self.foreign(r.rtt.as_ref().map_or("", |s| &s.peer)) =>
            {
                self.rdma.add(node, r);
            }
            Some(Payload::AgentStats(s)) => {
                let key = (node.to_string(), boot.to_string());
                let b = self.boots.get_mut(&key).expect("counted above");
                b.note_drops(s.dropped_records);
            }
            _ => {}
        }
    }

    /// One rolled-up minute (raw RTT summaries or counters of one boot's
    /// minute, replaced under raw retention): counted and read as the
    /// records it replaced. The store's scan hands over the minutes that
    /// start in the range, so a range that does not start and end on a
    /// minute reads its first and last minutes whole.
    ///
    /// Its windows belong to the range by their start: a minute after the
    /// range gives only the windows that started in it (and none of its
    /// merged figures, which cannot be split).
    pub fn add_minute(&mut self, m: &Minute<'_>) {
        let node = m.node;
        if self.foreign(node) || m.minute < self.scope.from_unix_ns {
            return;
        }
        let Some(seqs) = m.seq_bounds() else {
            return;
        };
        let whole = self.in_range(m.minute);
        if whole {
            self.count(node, m.boot_id, seqs, m.records());
            // A counters minute keeps its newest reading whole: read as
            // that reading (stored bytes passed validation).
            if let Some((t, raw)) = m.counters() {
                let p = Record::decode(raw).ok().and_then(|r| r.payload);
                if self.room(node, Sparse::Counters) {
                    self.facts
                        .add(node, m.boot_id, t, p.as_ref(), &self.scope.marks);
                }
            }
        }
        let cap = self.window_cap();
        let range = self.scope.from_unix_ns..self.scope.to_unix_ns;
        for l in m.links() {
            if self.foreign(l.peer()) {
                continue;
            }
            self.links
                .entry((node.into(), l.peer().into()))
                .or_default()
                .add_minute(&l, m.minute, whole, range.clone(), cap);
        }
    }

    /// Counts `n` records in range of `node`'s `boot`, sequence numbers
    /// `min..=max`.
    fn count(&mut self, node: &str, boot: &str, (min, max): (u64, u64), n: u64) {
        self.records += n;
        self.seen.insert(node.to_string());
        self.boots
            .entry((node.into(), boot.into()))
            .or_default()
            .note(min, max, n);
    }

    /// Whether one more of `node`'s sparse records of `kind` (an outage,
    /// a counters reading, a bandwidth test, a thermal reading, a service
    /// check) may be kept: at most twice the range's seconds and a margin
    /// per kind, far above what a real agent sends (a reading every few
    /// seconds, a test every few minutes), so a report's memory follows
    /// its nodes and range, not a hostile agent's record count (a node's
    /// distinct sensors are bounded apart, [`super::thermal::MAX_SENSORS`]).
    /// Each kind has its own budget: one shared by all let a node's
    /// counters, readings and checks use it up late in a long range and
    /// then every later outage fell out of the verdict (the 60-minute chaos
    /// soak, issue 27). Counters come one record per interface per
    /// `counters_interval` (1 s by default), and a Mac watches a bridge and
    /// its three ports: their budget is four times the others'. Records
    /// beyond it still count for completeness.
    fn room(&mut self, node: &str, kind: Sparse) -> bool {
        let per_kind = match kind {
            Sparse::Counters => 4,
            Sparse::Outage | Sparse::Bandwidth | Sparse::Thermal | Sparse::Service => 1,
        };
        let cap = per_kind * (2 * self.window_cap() as u64 + 1024);
        let key = (node.to_string(), kind);
        let kept = self.kept.entry(key).or_default();
        *kept += 1;
        *kept <= cap
    }

    /// Windows one link keeps at most: one per second of the range, the
    /// agent's window length (and two for a range's ragged ends).
    pub(super) fn window_cap(&self) -> usize {
        let span = self
            .scope
            .to_unix_ns
            .saturating_sub(self.scope.from_unix_ns);
        usize::try_from(span / WINDOW_SLOT_NS + 2).unwrap_or(usize::MAX)
    }

    fn add_rtt(&mut self, node: &str, r: &RttSummary, unix_ns: u64) {
        let cap = self.window_cap();
        self.links
            .entry((node.into(), r.peer.clone()))
            .or_default()
            .add(r, unix_ns, cap);
    }

    fn add_check(&mut self, node: &str, c: &ServiceCheck) {
        let e = self
            .services
            .entry((node.into(), c.peer.clone(), c.service.clone()))
            .or_default();
        e.0 += 1;
        e.1 += u64::from(c.up);
    }
}
