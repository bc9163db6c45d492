//! boltwatch's Prometheus exposition, shared by the collector (every node,
//! from the store) and the agent (its own node, from the records it
//! produces, `--metrics-listen`): one declaration per family and one code
//! path from a record to its series, so a family has the same name, type,
//! unit, help and label names on both by construction.
//!
//! | module | families |
//! |---|---|
//! | [`agent`] | agent info, its own drops and refusals |
//! | [`rtt`] | RTT histograms (at rest and under load), newest-window gauges, probe counters |
//! | [`rdma`] | RDMA probe RTT histogram, newest median, ping counters, newest burst send bandwidth, errors by device and class |
//! | [`link`] | interface counters and throughput, link up and admin state, down events, speed, kind, path (what a failed check saw: [`path`]) |
//! | [`mtu`] | path MTU, MTU mismatch of a link's two ends |
//! | [`thermal`] | temperatures, throttling, CPU frequency |
//! | [`outage`] | link and service outage counts and seconds |
//! | [`power`] | sleeps of the node and the time asleep |
//! | [`fabric`] | fabric checks (settings that take a cluster down) and RDMA port state |
//! | [`service`] | service checks |
//! | [`bandwidth`] | bandwidth test results and counters, the thermal verdict of the last test per end |
//! | [`process`] | `process_*` of the serving process (procfs at scrape time, no records) |
//!
//! Each record domain names the payload kinds its `apply` reads in its
//! module's `KINDS` ([`RecordMetrics::DOMAIN_KINDS`] collects them); a test
//! refuses a schema kind that no domain reads, and a domain that reacts to
//! a kind it does not name.
//!
//! and the parts they share: [`family`] (declarations and the one text
//! writer), [`histogram`], [`rate`], [`gzip`], [`key`] (series looked up
//! by the record's borrowed label values). [`RecordMetrics`] holds the
//! record domains in exposition order; the collector wraps it with its own
//! domains (stream state, ingest and store health, soaks, remote write,
//! build info), the agent with its build info.
//!
//! Records reach the domains through the [`Domain`] trait: every domain
//! sees every record and looks at its own kinds only (the `_ => {}` or
//! `let ... else` in each `apply` is that, by design, not a forgotten
//! kind), so adding a payload kind is one new (or extended) module here
//! and, for a new module, one line in [`RecordMetrics`].
//! Some series exist before their own records (a probed link has outage
//! and bandwidth counters at 0): owners record such [`Subjects`]; the
//! domains that render per-subject series read them.
//!
//! Pure: nothing here does I/O or reads a clock, except
//! [`process::read_self`] (procfs, called by the HTTP handlers).
//!
//! Why not the `metrics` and `metrics-exporter-prometheus` crates: the
//! agent's RTT windows arrive pre-bucketed (schema-3 bucket counts) with an
//! exact nanosecond sum. `metrics::Histogram` only records single `f64`
//! observations, which the exporter buckets itself (into per-name fixed
//! buckets, or a summary): replaying a bucket count as observations at its
//! bound would export a wrong `_sum`, and the exporter has no way to set a
//! histogram's buckets, sum and count directly. It renders only series that
//! were recorded, so a family declared but still empty (HELP and TYPE with
//! no samples: a fresh collector, a link with no bandwidth test yet) would
//! be missing from the scrape, and it has no per-node removal for the
//! collector's staleness rule (only an idle timeout per metric kind). Its
//! HTTP listener answers GET on any path, without the connection,
//! request-size and time bounds every boltwatch port has. Carrying the
//! RTT families would have meant a second exposition path beside this one,
//! which is what sharing this crate avoids.

pub mod agent;
pub mod bandwidth;
pub mod cabling;
mod domain;
pub mod fabric;
pub mod family;
pub mod gzip;
pub mod histogram;
pub mod key;
pub mod link;
pub mod mtu;
pub mod outage;
pub mod path;
pub mod power;
pub mod process;
pub mod rate;
pub mod rdma;
pub mod rtt;
pub mod service;
pub mod testing;
pub mod thermal;

use boltwatch_proto::v1::{Hello, Interface, Record};

use family::{Exposition, Family};

pub use domain::{Domain, NodePeer, NodePeerService, Snapshot, Subjects};

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Declares [`RecordMetrics`] with one field per record domain, in
/// exposition order, and the loops over them.
macro_rules! record_domains {
    ($($field:ident: $module:ident::$ty:ident,)+) => {
        /// The series derived from records, for any number of nodes (the
        /// collector) or one (the agent). `Clone` so a server renders a
        /// copy outside its lock.
        #[derive(Debug, Default, Clone)]
        pub struct RecordMetrics {
            subjects: Subjects,
            $($field: $module::$ty,)+
        }

        impl RecordMetrics {
            fn each(&self, mut f: impl FnMut(&dyn Domain, &Subjects)) {
                $(f(&self.$field, &self.subjects);)+
            }

            fn each_mut(&mut self, mut f: impl FnMut(&mut dyn Domain, &mut Subjects)) {
                $(f(&mut self.$field, &mut self.subjects);)+
            }

            /// Every family of the record domains, in exposition order.
            pub const FAMILIES: &'static [&'static [Family]] = &[$($module::FAMILIES),+];

            /// Each record domain's module and the payload kinds its
            /// `apply` reads (the module's `KINDS`), in exposition order.
            pub const DOMAIN_KINDS: &'static [(&'static str, &'static [&'static str])] =
                &[$((stringify!($module), $module::KINDS)),+];
        }
    };
}

// Register a new record domain here (and `pub mod` it above); its module
// declares `FAMILIES` (with `families!`) and `KINDS`.
record_domains! {
    agent: agent::AgentMetrics,
    rtt: rtt::RttMetrics,
    rdma: rdma::RdmaMetrics,
    link: link::LinkMetrics,
    mtu: mtu::MtuMetrics,
    cabling: cabling::CablingMetrics,
    thermal: thermal::ThermalMetrics,
    outage: outage::OutageMetrics,
    power: power::PowerMetrics,
    fabric: fabric::FabricMetrics,
    service: service::ServiceMetrics,
    bandwidth: bandwidth::BandwidthMetrics,
}

impl RecordMetrics {
    /// No records yet.
    pub fn new() -> RecordMetrics {
        RecordMetrics::default()
    }

    /// A new record (a duplicate must not be passed: counters would count
    /// it twice).
    pub fn apply_record(&mut self, r: &Record) {
        self.each_mut(|d, subjects| d.apply(r, subjects));
    }

    /// A node's agent, known before its records (a `Hello`, the store):
    /// its agent series exist, at 0; `info` replaces what was known unless
    /// it is `None`.
    pub fn on_node(&mut self, node: &str, info: Option<agent::AgentInfo>) {
        self.agent.on_node(node, info);
    }

    /// The interfaces a node's agent watches (its `Hello`): their series
    /// exist from now on, with the speed and kind the agent discovered.
    pub fn on_hello_interfaces(&mut self, node: &str, interfaces: &[Interface]) {
        self.link.on_hello_interfaces(node, interfaces);
    }

    /// The peers a node's agent probes, its host name and its interfaces
    /// (its `Hello`): the MTU of its end of each link, and its cables.
    pub fn on_hello_links(&mut self, hello: &Hello) {
        self.mtu
            .on_hello(&hello.node, &hello.peers, &hello.interfaces);
        let c = &mut self.cabling;
        c.on_hello(&hello.node, &hello.hostname, &hello.interfaces);
    }

    /// Drops the node's gauges, keeps its counters (see [`Domain::forget`]).
    pub fn forget(&mut self, node: &str) {
        self.each_mut(|d, _| d.forget(node));
    }

    /// What the records named.
    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// Appends every record family, in order.
    pub fn render_into(&self, e: &mut Exposition) {
        self.each(|d, subjects| d.render(e, subjects));
    }

    /// The record families alone, as text.
    pub fn render(&self) -> String {
        let mut e = Exposition::new();
        self.render_into(&mut e);
        e.finish()
    }

    /// Every record family, in exposition order.
    pub fn families() -> Vec<Family> {
        Self::FAMILIES.concat()
    }
}

#[cfg(test)]
mod tests;
