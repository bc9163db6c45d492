//! Everything the collector exports on `/metrics`: the exporter state
//! ([`Metrics`], shared as [`SharedMetrics`]) that ingest writes to and the
//! HTTP server reads from, split by domain.
//!
//! The record domains (agent info and counters, RTT, links, thermals,
//! outages, services, bandwidth), the family declarations, the one text
//! writer and `process_*` live in the `boltwatch-exposition` crate, shared
//! with the agent's own `/metrics` (`--metrics-listen`), so a family has
//! the same name, type and labels on both. They are re-exported here under
//! their old paths (`export::rtt`, `export::family`, ...). The collector
//! adds what only it knows:
//!
//! | module | fed by | families |
//! |---|---|---|
//! | [`connection`] | Hello, stream close, duplicates | agent up, duplicate records |
//! | `boltwatch_exposition::RecordMetrics` | every record, Hello interfaces | see that crate's module map |
//! | [`soak`] | the soaks table | running soaks: info, elapsed, verdict per SLO line, marks |
//! | [`remote_write`] | the senders | remote write per endpoint: sent, failed, dropped, pending, last success |
//! | [`health`] | every record, commits, refusals | the collector's ingest and store health |
//! | [`watched`] | `crate::run::watched` | the store filesystem's free bytes, TLS certificate expiry |
//! | [`build`] | nothing | the collector's build info |
//! | [`process`] | procfs at scrape time | `process_*` |
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
//! Gauges that describe "now" keep the value of the latest record in the
//! agent's order: by sequence number within a boot, by time stamp between
//! boots ([`family::Newest`]).
//!
//! Staleness: a node whose agent has had no stream for the grace period
//! ([`Metrics::set_stale_after`], config key `stale_after`) loses its
//! gauges (temperatures, throttling, bandwidth results, link state and
//! speed, path, services, newest RTT window): every record domain's
//! [`Domain::forget`] drops them, so rules on them resolve, while
//! `boltwatch_agent_up` stays at 0 and every counter stays. The grace
//! counts from the first [`Metrics::sweep`] (each scrape) that sees the
//! node disconnected; new records after a reconnect bring the gauges back.

pub mod build;
pub mod connection;
pub mod health;
pub mod remote_write;
pub mod soak;
pub mod watched;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use boltwatch_proto::v1::{Hello, Interface, Record};

use boltwatch_exposition::family::{Exposition, Family};
use boltwatch_exposition::{agent, process, Domain, RecordMetrics};

/// The default of the collector's `stale_after`.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(300);

/// All exported state. Shared as [`SharedMetrics`]; every method is
/// quick. `Clone` so `/metrics` renders a copy outside the lock.
#[derive(Debug, Default, Clone)]
pub struct Metrics {
    /// None: [`DEFAULT_STALE_AFTER`].
    stale_after: Option<Duration>,
    connection: connection::ConnectionMetrics,
    records: RecordMetrics,
    soak: soak::SoakMetrics,
    remote_write: remote_write::RemoteWriteMetrics,
    health: health::HealthMetrics,
    watched: watched::WatchedMetrics,
    build: build::BuildInfo,
    process: process::ProcessMetrics,
}

impl Metrics {
    /// The collector's own domains after the record domains, in
    /// exposition order.
    fn after_records(&self) -> [&dyn Domain; 6] {
        [
            &self.soak,
            &self.remote_write,
            &self.health,
            &self.watched,
            &self.build,
            &self.process,
        ]
    }

    /// Every family `/metrics` declares, in exposition order.
    pub fn families(&self) -> Vec<Family> {
        [
            connection::FAMILIES,
            &RecordMetrics::families(),
            soak::FAMILIES,
            remote_write::FAMILIES,
            health::FAMILIES,
            watched::FAMILIES,
            build::FAMILIES,
            process::FAMILIES,
        ]
        .concat()
    }

    /// The families whose series the records alone determine, the same
    /// after replaying the store as live: what remote write pushes. Every
    /// record domain's (a new one included), but the agent info (from the
    /// `Hello`), and the records received; not the collector's own (stream
    /// state, ingest and store health, soaks, remote write, build info,
    /// `process_*`), which are only scraped.
    pub fn record_families() -> Vec<Family> {
        let records = RecordMetrics::families().into_iter();
        let mut out: Vec<Family> = records.filter(|f| *f != agent::INFO).collect();
        out.extend_from_slice(health::FROM_RECORDS);
        out
    }
}

impl Metrics {
    /// Empty state with the collector's own series at 0.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// A newly stored record; duplicates must not be passed here.
    pub fn apply_record(&mut self, r: &Record) {
        self.connection.on_record(r);
        self.records.apply_record(r);
        self.health.on_record(r);
    }

    /// The records standing for a rollup of `replaced` pruned raw records
    /// (see `store::rollup`), in the startup rebuild: applied as records,
    /// and the received-records counter still counts every raw one.
    pub fn apply_rollup(&mut self, records: &[Record], replaced: u64) {
        for r in records {
            self.apply_record(r);
        }
        if let Some(first) = records.first() {
            let more = replaced.saturating_sub(records.len() as u64);
            self.health.count_received(first, more);
        }
    }

    /// Renders the text exposition format.
    pub fn render(&self) -> String {
        let mut e = Exposition::new();
        let subjects = self.records.subjects();
        self.connection.render(&mut e, subjects);
        self.records.render_into(&mut e);
        for d in self.after_records() {
            d.render(&mut e, subjects);
        }
        e.finish()
    }

    /// A node known from the store at startup: its series exist (agent_up 0)
    /// before it reconnects.
    pub fn on_known_node(&mut self, node: &str, info: Option<agent::AgentInfo>) {
        self.connection.on_known_node(node);
        self.records.on_node(node, info);
    }

    /// Every node known from the store, its records or a Hello.
    pub fn known_nodes(&self) -> impl Iterator<Item = &str> {
        self.connection.nodes()
    }

    /// An agent stream opened with a valid `Hello`, which described the
    /// interfaces the agent watches.
    pub fn on_hello(&mut self, node: &str, info: agent::AgentInfo, interfaces: &[Interface]) {
        self.connection.on_hello(node);
        self.records.on_node(node, Some(info));
        self.records.on_hello_interfaces(node, interfaces);
    }

    /// The peers a `Hello` names and its interfaces: the MTU of the
    /// node's end of each link (series only for links its records name,
    /// which the series budget bounds), and its cables.
    pub fn on_hello_links(&mut self, hello: &Hello) {
        self.records.on_hello_links(hello);
    }

    /// An agent stream that had sent a valid `Hello` closed.
    pub fn on_stream_closed(&mut self, node: &str) {
        self.connection.on_stream_closed(node);
    }

    /// Whether the node has an open stream.
    pub fn connected(&self, node: &str) -> bool {
        self.connection.connected(node)
    }

    /// The grace period after which a disconnected agent's gauges go.
    pub fn set_stale_after(&mut self, grace: Duration) {
        self.stale_after = Some(grace);
    }

    /// Forgets the gauges of nodes disconnected for the grace period as of
    /// `now` (called before each render).
    pub fn sweep(&mut self, now: Instant) {
        let grace = self.stale_after.unwrap_or(DEFAULT_STALE_AFTER);
        for node in self.connection.newly_stale(now, grace) {
            // Only the record domains hold a node's gauges.
            self.records.forget(&node);
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
        self.connection.on_duplicates(node, duplicates);
        self.records.on_node(node, None);
        self.health.on_commit(total_records, commit_seconds);
    }

    /// The running soaks and their verdict so far.
    pub fn set_soaks(&mut self, running: Vec<soak::LiveSoak>) {
        self.soak.set(running);
    }

    /// One soak's live state after a write to it (`None`: not shown).
    pub fn put_soak(&mut self, name: &str, soak: Option<soak::LiveSoak>) {
        self.soak.put(name, soak);
    }

    /// One shown soak's marks after a mark was added.
    pub fn set_soak_marks(&mut self, name: &str, marks: Vec<soak::LiveMark>) {
        self.soak.set_marks(name, marks);
    }

    /// Remote write's per-endpoint counters, for its senders.
    pub fn remote_write(&mut self) -> &mut remote_write::RemoteWriteMetrics {
        &mut self.remote_write
    }

    /// What the collector watches of its surroundings, for
    /// `crate::run::watched`.
    pub fn watched(&mut self) -> &mut watched::WatchedMetrics {
        &mut self.watched
    }

    /// Sets the stored-records gauge (at startup).
    pub fn set_store_records(&mut self, n: u64) {
        self.health.set_store_records(n);
    }

    /// Sets the raw-retention gauges: the pruning mark and the records
    /// held as rollups.
    pub fn set_retention(&mut self, pruned_until_ns: u64, rollup_records: u64) {
        self.health.set_retention(pruned_until_ns, rollup_records);
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

    /// An HTTP connection or API request turned away (one of
    /// [`health::HTTP_REFUSED_KINDS`]).
    pub fn on_http_refused(&mut self, kind: &'static str) {
        self.health.on_http_refused(kind);
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
