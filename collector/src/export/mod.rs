//! Everything the collector exports on `/metrics`: the exporter state
//! ([`Metrics`], shared as [`SharedMetrics`]) that ingest writes to and the
//! HTTP server reads from, split by domain.
//!
//! Each domain module is the single owner of the payload kinds it turns
//! into series, declares its families once ([`family::Family`]) and hands
//! its samples to the one text writer ([`family::Exposition`]):
//!
//! | module | payload kinds | families |
//! |---|---|---|
//! | [`rtt`] | `rtt` | RTT histograms (at rest and under load), newest-window gauges, probe counters |
//! | [`link`] | `link_event`, `counters`, `path` | interface counters and throughput, link up, down events, speed, kind, path |
//! | [`thermal`] | `thermal` | temperatures, throttling, CPU frequency |
//! | [`outage`] | `outage` | link and service outage counts and seconds |
//! | [`service`] | `service` | service checks |
//! | [`bandwidth`] | `bandwidth` | bandwidth test results and counters |
//! | [`soak`] | none (the soaks table) | running soaks: info, elapsed, verdict per SLO line |
//! | [`remote_write`] | none (the senders) | remote write per endpoint: sent, failed, dropped, pending, last success |
//! | [`agent`] | `agent_stats` (and Hello, stream close) | agent up, info, its own drops |
//! | [`health`] | every record (and commits, refusals) | the collector's ingest and store health |
//! | [`process`] | none (procfs at scrape time) | the collector's build info and `process_*` |
//!
//! Records reach the domains through the [`Domain`] trait: every domain
//! sees every newly stored record and picks the kinds it owns, so adding a
//! payload kind is one new (or extended) module here, registered by one line
//! in the `domains!` list of this file, with no central `match` on the
//! payload.
//!
//! Some series exist before their own records: a probed link has outage and
//! bandwidth counters at 0, a checked service has outage counters at 0.
//! Owners record such [`Subjects`]; the domains that render per-subject
//! series read them.
//!
//! Pure: ingest calls the `on_*` methods after a record was newly committed
//! (duplicates never reach [`Metrics::apply_record`], so a replayed spool
//! cannot double count) and `/metrics` calls [`Metrics::render`]. Nothing
//! here does I/O or reads a clock.
//!
//! Restart policy: accumulated counters (probe counts, the RTT histograms,
//! records received, agent stats) are rebuilt when the collector starts by
//! replaying the store in arrival order (`crate::remote_write::log::rebuild`),
//! so they continue across restarts. Kernel interface counters are
//! exported as the agent read them, so they continue where they were.
//! Gauges that describe "now" keep the value with the newest agent
//! timestamp ([`family::Newest`]).
//!
//! Staleness: a node whose agent has had no stream for the grace period
//! ([`Metrics::set_stale_after`], config key `stale_after`) loses its
//! gauges (temperatures, throttling, bandwidth results, link state and
//! speed, path, services, newest RTT window): every domain's
//! [`Domain::forget`] drops them, so rules on them resolve, while
//! `boltwatch_agent_up` stays at 0 and every counter stays. The grace
//! counts from the first [`Metrics::sweep`] (each scrape) that sees the
//! node disconnected; new records after a reconnect bring the gauges back.

pub mod agent;
pub mod bandwidth;
pub mod family;
pub mod gzip;
pub mod health;
pub mod histogram;
pub mod link;
pub mod outage;
pub mod process;
pub mod rate;
pub mod remote_write;
pub mod rtt;
pub mod service;
pub mod soak;
pub mod thermal;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use boltwatch_proto::v1::{Interface, Record};

use family::{Exposition, Family};

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One domain of metrics.
pub trait Domain: std::fmt::Debug + Send {
    /// A newly stored record; a domain ignores the kinds it does not own
    /// (one fed from elsewhere, the soaks table, the senders or procfs,
    /// takes none).
    fn apply(&mut self, _r: &Record, _subjects: &mut Subjects) {}
    /// Appends every family of the domain (its module's `FAMILIES`, in
    /// order), also those with no series yet.
    fn render(&self, e: &mut Exposition, subjects: &Subjects);
    /// The node's agent is gone for good (see "Staleness" above): drop its
    /// gauges, keep its counters.
    fn forget(&mut self, _node: &str) {}
}

/// The default of the collector's `stale_after`.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(300);

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

/// Declares [`Metrics`] with one field per domain, in exposition order, and
/// the loops over them.
macro_rules! domains {
    ($($field:ident: $module:ident::$ty:ident,)+) => {
        /// All exported state. Shared as [`SharedMetrics`]; every method is
        /// quick. `Clone` so `/metrics` renders a copy outside the lock.
        #[derive(Debug, Default, Clone)]
        pub struct Metrics {
            subjects: Subjects,
            /// None: [`DEFAULT_STALE_AFTER`].
            stale_after: Option<Duration>,
            $($field: $module::$ty,)+
        }

        impl Metrics {
            fn each(&self, mut f: impl FnMut(&dyn Domain, &Subjects)) {
                $(f(&self.$field, &self.subjects);)+
            }

            fn each_mut(&mut self, mut f: impl FnMut(&mut dyn Domain, &mut Subjects)) {
                $(f(&mut self.$field, &mut self.subjects);)+
            }

            /// Every family `/metrics` declares, in exposition order.
            pub fn families(&self) -> Vec<Family> {
                [$($module::FAMILIES),+].concat()
            }
        }
    };
}

// Register a new domain here (and `pub mod` it above).
domains! {
    agent: agent::AgentMetrics,
    rtt: rtt::RttMetrics,
    link: link::LinkMetrics,
    thermal: thermal::ThermalMetrics,
    outage: outage::OutageMetrics,
    service: service::ServiceMetrics,
    bandwidth: bandwidth::BandwidthMetrics,
    soak: soak::SoakMetrics,
    remote_write: remote_write::RemoteWriteMetrics,
    health: health::HealthMetrics,
    process: process::ProcessMetrics,
}

impl Metrics {
    /// Empty state with the collector's own series at 0.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// A newly stored record; duplicates must not be passed here.
    pub fn apply_record(&mut self, r: &Record) {
        self.each_mut(|d, subjects| d.apply(r, subjects));
    }

    /// Renders the text exposition format.
    pub fn render(&self) -> String {
        let mut e = Exposition::new();
        self.each(|d, subjects| d.render(&mut e, subjects));
        e.finish()
    }

    /// A node known from the store at startup: its series exist (agent_up 0)
    /// before it reconnects.
    pub fn on_known_node(&mut self, node: &str, info: Option<agent::AgentInfo>) {
        self.agent.on_known_node(node, info);
    }

    /// An agent stream opened with a valid `Hello`, which described the
    /// interfaces the agent watches.
    pub fn on_hello(&mut self, node: &str, info: agent::AgentInfo, interfaces: &[Interface]) {
        self.agent.on_hello(node, info);
        self.link.on_hello_interfaces(node, interfaces);
    }

    /// An agent stream that had sent a valid `Hello` closed.
    pub fn on_stream_closed(&mut self, node: &str) {
        self.agent.on_stream_closed(node);
    }

    /// Whether the node has an open stream.
    pub fn connected(&self, node: &str) -> bool {
        self.agent.connected(node)
    }

    /// The grace period after which a disconnected agent's gauges go.
    pub fn set_stale_after(&mut self, grace: Duration) {
        self.stale_after = Some(grace);
    }

    /// Forgets the gauges of nodes disconnected for the grace period as of
    /// `now` (called before each render).
    pub fn sweep(&mut self, now: Instant) {
        let grace = self.stale_after.unwrap_or(DEFAULT_STALE_AFTER);
        for node in self.agent.newly_stale(now, grace) {
            self.each_mut(|d, _| d.forget(&node));
        }
    }

    /// The collector process's own figures for the next render (`None`
    /// where there is no procfs).
    pub fn set_process(&mut self, stats: Option<process::ProcessStats>) {
        self.process.set(stats);
    }

    /// A batch was committed: `duplicates` of its records were already
    /// stored, the store now holds `total_records`, and it took
    /// `commit_seconds`.
    pub fn on_commit(
        &mut self,
        node: &str,
        duplicates: u64,
        total_records: u64,
        commit_seconds: f64,
    ) {
        self.agent.on_duplicates(node, duplicates);
        self.health.on_commit(total_records, commit_seconds);
    }

    /// The running soaks and their verdict so far.
    pub fn set_soaks(&mut self, running: Vec<soak::LiveSoak>) {
        self.soak.set(running);
    }

    /// Remote write's per-endpoint counters, for its senders.
    pub fn remote_write(&mut self) -> &mut remote_write::RemoteWriteMetrics {
        &mut self.remote_write
    }

    /// Sets the stored-records gauge (at startup).
    pub fn set_store_records(&mut self, n: u64) {
        self.health.set_store_records(n);
    }

    /// A connection on the gRPC port did not start with the HTTP/2 preface.
    pub fn on_malformed_connection(&mut self) {
        self.health.on_malformed_connection();
    }

    /// `n` records (or Hello interfaces) kept off `/metrics` because their
    /// node is over its budget of distinct `dim` values.
    pub fn on_series_refused(&mut self, dim: crate::ingest::series::Dim, n: u64) {
        self.health.on_series_refused(dim.label(), n);
    }

    /// An ingest failure of the given kind (one of
    /// [`health::INGEST_ERROR_KINDS`]).
    pub fn on_ingest_error(&mut self, kind: &'static str) {
        self.health.on_ingest_error(kind);
    }
}

/// The exporter state shared by ingest (writes), the acceptor and HTTP
/// (reads).
#[derive(Debug, Clone, Default)]
pub struct SharedMetrics(Arc<Mutex<Metrics>>);

impl SharedMetrics {
    /// Fresh state.
    pub fn new() -> SharedMetrics {
        SharedMetrics(Arc::new(Mutex::new(Metrics::new())))
    }

    /// Locks the state; a panic elsewhere must not stop the exporter.
    pub fn lock(&self) -> MutexGuard<'_, Metrics> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
