//! Every metric the collector exports: its name, help, labels, the state
//! behind it, and the Prometheus text exposition (format 0.0.4) rendering.
//!
//! Pure: ingest calls the `on_*` methods with decoded records *after* they
//! were newly committed (duplicates never reach [`MetricsState::apply_record`],
//! so a replayed spool cannot double count) and `/metrics` calls
//! [`MetricsState::render`]. Nothing here does I/O or reads a clock.
//!
//! Restart policy: accumulated counters (probe counts, the RTT histogram,
//! records received, agent stats) start at 0 when the collector starts;
//! Prometheus treats that as a counter reset. Kernel interface counters are
//! exported as the agent read them, so they continue where they were.
//!
//! Gauges that describe "now" (temperature, carrier, last-window RTT, kernel
//! counters) keep the value with the newest agent timestamp, so records
//! replayed late from a spool do not overwrite fresher ones.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use boltwatch_proto::histogram::{indexes_spanning, upper_bound_seconds};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Interface, InterfaceCounters, Record, RttSummary};

mod truth;

/// The content type of [`MetricsState::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The RTT histogram's classic bucket range, seconds.
pub const RTT_RANGE_SECONDS: (f64, f64) = (10e-6, 5e-3);

/// Upper bounds of the commit-time histogram, seconds.
pub const COMMIT_BOUNDS_SECONDS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Labels of `boltwatch_ingest_errors_total`, all exported from the start.
pub const INGEST_ERROR_KINDS: [&str; 10] = [
    "no_hello",
    "bad_hello",
    "node_mismatch",
    "invalid_record",
    "store",
    "transport",
    // Issue 5 (spool/auth/limits): refusals an agent retries or must fix.
    "unauthenticated",
    "permission_denied",
    "rate_limited",
    "batch_too_large",
];

/// Kind label of records whose payload this build does not know.
pub const UNKNOWN_KIND: &str = "unknown";

const IFACE_COUNTERS: [(&str, &str); 8] = [
    (
        "boltwatch_interface_receive_bytes_total",
        "Bytes received, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_transmit_bytes_total",
        "Bytes transmitted, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_receive_packets_total",
        "Packets received, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_transmit_packets_total",
        "Packets transmitted, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_receive_errors_total",
        "Receive errors, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_transmit_errors_total",
        "Transmit errors, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_receive_drops_total",
        "Received packets dropped, the kernel's counter as read by the agent.",
    ),
    (
        "boltwatch_interface_transmit_drops_total",
        "Packets dropped on transmit, the kernel's counter as read by the agent.",
    ),
];

/// The classic `le` bounds of `boltwatch_rtt_seconds`: the schema-3 bucket
/// bounds spanning [`RTT_RANGE_SECONDS`].
pub fn rtt_bounds() -> Vec<f64> {
    rtt_indexes().map(upper_bound_seconds).collect()
}

fn rtt_indexes() -> std::ops::RangeInclusive<i32> {
    indexes_spanning(RTT_RANGE_SECONDS.0, RTT_RANGE_SECONDS.1)
}

/// Position in the classic buckets of agent bucket `index`: the first bound
/// at or above the agent bucket's bound, or `len` (only `+Inf`) when it is
/// above them all.
pub fn classic_slot(index: i32) -> usize {
    let r = rtt_indexes();
    if index <= *r.start() {
        0
    } else if index > *r.end() {
        (r.end() - r.start() + 1) as usize
    } else {
        (index - r.start()) as usize
    }
}

#[derive(Debug, Clone, Copy)]
struct Latest<T> {
    unix_ns: u64,
    value: T,
}

fn newer<T>(slot: &mut Option<Latest<T>>, unix_ns: u64, value: T) {
    if slot.as_ref().is_none_or(|l| unix_ns >= l.unix_ns) {
        *slot = Some(Latest { unix_ns, value });
    }
}

#[derive(Debug, Default)]
struct AgentState {
    open_streams: usize,
    /// (version, os, boot_id) of the latest Hello.
    info: Option<(String, String, String)>,
    duplicates: u64,
    /// boot id -> (seq, malformed, dropped) of its newest AgentStats.
    stats: BTreeMap<String, (u64, u64, u64)>,
}

#[derive(Debug, Default)]
struct RttSeries {
    /// Classic buckets (non-cumulative) plus one overflow slot.
    buckets: Vec<u64>,
    sum_ns: u128,
    count: u64,
    sent: u64,
    received: u64,
    lost: u64,
    /// min, p50, p99, max in seconds of the newest window (NaN when it had
    /// no replies).
    last: Option<Latest<[f64; 4]>>,
}

#[derive(Debug, Default)]
struct IfaceSeries {
    counters: Option<Latest<[u64; 8]>>,
    carrier: Option<Latest<bool>>,
}

/// A simple fixed-bucket histogram for the collector's own timings.
#[derive(Debug, Clone, Default)]
struct FixedHistogram {
    buckets: [u64; COMMIT_BOUNDS_SECONDS.len()],
    sum: f64,
    count: u64,
}

/// All exported state. Wrap it in a mutex; every method is quick.
#[derive(Debug, Default)]
pub struct MetricsState {
    agents: BTreeMap<String, AgentState>,
    rtt: BTreeMap<(String, String), RttSeries>,
    interfaces: BTreeMap<(String, String), IfaceSeries>,
    temperatures: BTreeMap<(String, String), Latest<f64>>,
    records_received: BTreeMap<(String, String), u64>,
    malformed_connections: u64,
    ingest_errors: BTreeMap<&'static str, u64>,
    commit: FixedHistogram,
    store_records: u64,
    truth: truth::TruthState,
    bandwidth: bandwidth::BandwidthMetrics,
}

impl MetricsState {
    /// Empty state with the collector's own series at 0.
    pub fn new() -> MetricsState {
        let mut s = MetricsState::default();
        for k in INGEST_ERROR_KINDS {
            s.ingest_errors.insert(k, 0);
        }
        s
    }

    /// A node known from the store at startup: its series exist (agent_up 0)
    /// before it reconnects.
    pub fn on_known_node(&mut self, node: &str, info: Option<(String, String, String)>) {
        let a = self.agents.entry(node.to_string()).or_default();
        if a.info.is_none() {
            a.info = info;
        }
    }

    /// An agent stream opened with a valid `Hello`.
    pub fn on_hello(&mut self, node: &str, version: &str, os: &str, boot_id: &str) {
        let a = self.agents.entry(node.to_string()).or_default();
        a.open_streams += 1;
        a.info = Some((version.into(), os.into(), boot_id.into()));
    }

    /// The interfaces a node's `Hello` described (discovery: kind, speed,
    /// Thunderbolt generation): their link series exist from now on. Ingest
    /// calls it with `hello.interfaces` right after [`MetricsState::on_hello`].
    pub fn on_hello_interfaces(&mut self, node: &str, interfaces: &[Interface]) {
        self.truth.on_hello_interfaces(node, interfaces);
    }

    /// An agent stream that had sent a valid `Hello` closed.
    pub fn on_stream_closed(&mut self, node: &str) {
        if let Some(a) = self.agents.get_mut(node) {
            a.open_streams = a.open_streams.saturating_sub(1);
        }
    }

    /// Whether the node has an open stream.
    pub fn connected(&self, node: &str) -> bool {
        self.agents.get(node).is_some_and(|a| a.open_streams > 0)
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
        self.agents.entry(node.to_string()).or_default().duplicates += duplicates;
        self.store_records = total_records;
        let h = &mut self.commit;
        if let Some(i) = COMMIT_BOUNDS_SECONDS
            .iter()
            .position(|b| commit_seconds <= *b)
        {
            h.buckets[i] += 1;
        }
        h.sum += commit_seconds;
        h.count += 1;
    }

    /// Sets the stored-records gauge (at startup).
    pub fn set_store_records(&mut self, n: u64) {
        self.store_records = n;
    }

    /// A connection on the gRPC port did not start with the HTTP/2 preface.
    pub fn on_malformed_connection(&mut self) {
        self.malformed_connections += 1;
    }

    /// An ingest failure of the given kind (one of [`INGEST_ERROR_KINDS`]).
    pub fn on_ingest_error(&mut self, kind: &'static str) {
        *self.ingest_errors.entry(kind).or_default() += 1;
    }

    /// A newly stored record; duplicates must not be passed here.
    pub fn apply_record(&mut self, r: &Record) {
        let kind = r.payload.as_ref().map_or(UNKNOWN_KIND, Payload::kind);
        *self
            .records_received
            .entry((r.node.clone(), kind.to_string()))
            .or_default() += 1;
        self.truth.apply(r);
        self.bandwidth.apply(r);
        match &r.payload {
            Some(Payload::Rtt(s)) => self.apply_rtt(&r.node, s),
            Some(Payload::Counters(c)) => self.apply_counters(&r.node, r.unix_ns, c),
            Some(Payload::LinkEvent(e)) => {
                let i = self.iface(&r.node, &e.interface);
                newer(&mut i.carrier, r.unix_ns, e.carrier);
            }
            Some(Payload::Thermal(t)) => {
                for s in &t.sensors {
                    let slot = self
                        .temperatures
                        .entry((r.node.clone(), s.name.clone()))
                        .or_insert(Latest {
                            unix_ns: r.unix_ns,
                            value: s.celsius,
                        });
                    if r.unix_ns >= slot.unix_ns {
                        *slot = Latest {
                            unix_ns: r.unix_ns,
                            value: s.celsius,
                        };
                    }
                }
            }
            Some(Payload::AgentStats(s)) => {
                let a = self.agents.entry(r.node.clone()).or_default();
                let e = a.stats.entry(r.boot_id.clone()).or_insert((0, 0, 0));
                if r.seq >= e.0 {
                    *e = (r.seq, s.malformed_packets, s.dropped_records);
                }
            }
            _ => {}
        }
    }

    fn iface(&mut self, node: &str, interface: &str) -> &mut IfaceSeries {
        self.interfaces
            .entry((node.to_string(), interface.to_string()))
            .or_default()
    }

    fn apply_counters(&mut self, node: &str, unix_ns: u64, c: &InterfaceCounters) {
        let i = self.iface(node, &c.interface);
        let values = [
            c.receive_bytes,
            c.transmit_bytes,
            c.receive_packets,
            c.transmit_packets,
            c.receive_errors,
            c.transmit_errors,
            c.receive_drops,
            c.transmit_drops,
        ];
        newer(&mut i.counters, unix_ns, values);
        if c.carrier_known {
            newer(&mut i.carrier, unix_ns, c.carrier);
        }
    }

    fn apply_rtt(&mut self, node: &str, s: &RttSummary) {
        let slots = rtt_indexes().count() + 1;
        let series = self
            .rtt
            .entry((node.to_string(), s.peer.clone()))
            .or_insert_with(|| RttSeries {
                buckets: vec![0; slots],
                ..Default::default()
            });
        for b in &s.buckets {
            series.buckets[classic_slot(b.index)] += b.count;
        }
        series.sum_ns += u128::from(s.sum_ns);
        series.count += s.received;
        series.sent += s.sent;
        series.received += s.received;
        series.lost += s.lost;
        let secs = |ns: u64| {
            if s.received == 0 {
                f64::NAN
            } else {
                ns as f64 / 1e9
            }
        };
        newer(
            &mut series.last,
            s.window_start_unix_ns,
            [
                secs(s.min_ns),
                secs(s.p50_ns),
                secs(s.p99_ns),
                secs(s.max_ns),
            ],
        );
    }

    /// Renders the text exposition format.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(16 * 1024);
        self.render_agents(&mut o);
        self.render_rtt(&mut o);
        self.render_interfaces(&mut o);
        self.truth.render(&mut o);
        self.bandwidth.render(&mut o);
        header(
            &mut o,
            "boltwatch_temperature_celsius",
            "Temperature of a sensor, newest reading.",
            "gauge",
        );
        for ((node, sensor), v) in &self.temperatures {
            sample(
                &mut o,
                "boltwatch_temperature_celsius",
                &[("node", node), ("sensor", sensor)],
                fmt_f64(v.value),
            );
        }
        header(
            &mut o,
            "boltwatch_records_received_total",
            "Records newly stored, by producing node and payload kind.",
            "counter",
        );
        for ((node, kind), n) in &self.records_received {
            sample(
                &mut o,
                "boltwatch_records_received_total",
                &[("node", node), ("kind", kind)],
                n.to_string(),
            );
        }
        self.render_self(&mut o);
        o
    }

    fn render_agents(&self, o: &mut String) {
        header(
            o,
            "boltwatch_agent_up",
            "1 while the node's agent has a stream open to the collector.",
            "gauge",
        );
        for (node, a) in &self.agents {
            let up = if a.open_streams > 0 { "1" } else { "0" };
            sample(o, "boltwatch_agent_up", &[("node", node)], up.into());
        }
        header(
            o,
            "boltwatch_agent_info",
            "Agent version, OS and boot id of the node's latest agent boot.",
            "gauge",
        );
        for (node, a) in &self.agents {
            if let Some((version, os, boot)) = &a.info {
                let labels = [
                    ("node", node.as_str()),
                    ("version", version),
                    ("os", os),
                    ("boot_id", boot),
                ];
                sample(o, "boltwatch_agent_info", &labels, "1".into());
            }
        }
        header(
            o,
            "boltwatch_records_duplicate_total",
            "Records received that were already stored.",
            "counter",
        );
        for (node, a) in &self.agents {
            sample(
                o,
                "boltwatch_records_duplicate_total",
                &[("node", node)],
                a.duplicates.to_string(),
            );
        }
        header(
            o,
            "boltwatch_agent_malformed_packets_total",
            "STAMP packets the agent dropped as malformed, summed over its boots.",
            "counter",
        );
        for (node, a) in &self.agents {
            let n: u64 = a.stats.values().map(|s| s.1).sum();
            sample(
                o,
                "boltwatch_agent_malformed_packets_total",
                &[("node", node)],
                n.to_string(),
            );
        }
        header(
            o,
            "boltwatch_agent_dropped_records_total",
            "Records the agent dropped (queue or spool full), summed over its boots.",
            "counter",
        );
        for (node, a) in &self.agents {
            let n: u64 = a.stats.values().map(|s| s.2).sum();
            sample(
                o,
                "boltwatch_agent_dropped_records_total",
                &[("node", node)],
                n.to_string(),
            );
        }
        // The spool is the agent's only queue, so its drops are the same
        // records; the separate name lets dashboards tell spool overflow
        // from other losses should agents ever drop elsewhere.
        header(
            o,
            "boltwatch_spool_dropped_records_total",
            "Records the agent's spool dropped at its size cap, oldest first, summed over its boots.",
            "counter",
        );
        for (node, a) in &self.agents {
            let n: u64 = a.stats.values().map(|s| s.2).sum();
            sample(
                o,
                "boltwatch_spool_dropped_records_total",
                &[("node", node)],
                n.to_string(),
            );
        }
    }

    fn render_rtt(&self, o: &mut String) {
        let bounds: Vec<String> = rtt_bounds().into_iter().map(fmt_f64).collect();
        header(
            o,
            "boltwatch_rtt_seconds",
            "STAMP round-trip time to the peer, reflector turnaround subtracted.",
            "histogram",
        );
        for ((node, peer), s) in &self.rtt {
            let mut cum = 0u64;
            for (le, n) in bounds.iter().zip(&s.buckets) {
                cum += n;
                sample(
                    o,
                    "boltwatch_rtt_seconds_bucket",
                    &[("node", node), ("peer", peer), ("le", le)],
                    cum.to_string(),
                );
            }
            sample(
                o,
                "boltwatch_rtt_seconds_bucket",
                &[("node", node), ("peer", peer), ("le", "+Inf")],
                s.count.to_string(),
            );
            let sum = s.sum_ns as f64 / 1e9;
            sample(
                o,
                "boltwatch_rtt_seconds_sum",
                &[("node", node), ("peer", peer)],
                fmt_f64(sum),
            );
            sample(
                o,
                "boltwatch_rtt_seconds_count",
                &[("node", node), ("peer", peer)],
                s.count.to_string(),
            );
        }
        let gauges = [
            (
                "boltwatch_rtt_min_seconds",
                "Smallest RTT of the newest probe window.",
            ),
            (
                "boltwatch_rtt_p50_seconds",
                "Median RTT of the newest probe window.",
            ),
            (
                "boltwatch_rtt_p99_seconds",
                "99th percentile RTT of the newest probe window.",
            ),
            (
                "boltwatch_rtt_max_seconds",
                "Largest RTT of the newest probe window.",
            ),
        ];
        for (i, (name, help)) in gauges.iter().enumerate() {
            header(o, name, help, "gauge");
            for ((node, peer), s) in &self.rtt {
                if let Some(l) = &s.last {
                    sample(
                        o,
                        name,
                        &[("node", node), ("peer", peer)],
                        fmt_f64(l.value[i]),
                    );
                }
            }
        }
        let counters = [
            (
                "boltwatch_probe_sent_total",
                "STAMP probes sent to the peer.",
            ),
            (
                "boltwatch_probe_received_total",
                "STAMP probes answered by the peer in time.",
            ),
            (
                "boltwatch_probe_lost_total",
                "STAMP probes not answered within the timeout.",
            ),
        ];
        for (i, (name, help)) in counters.iter().enumerate() {
            header(o, name, help, "counter");
            for ((node, peer), s) in &self.rtt {
                let v = [s.sent, s.received, s.lost][i];
                sample(o, name, &[("node", node), ("peer", peer)], v.to_string());
            }
        }
    }

    fn render_interfaces(&self, o: &mut String) {
        for (i, (name, help)) in IFACE_COUNTERS.iter().enumerate() {
            header(o, name, help, "counter");
            for ((node, iface), s) in &self.interfaces {
                if let Some(c) = &s.counters {
                    sample(
                        o,
                        name,
                        &[("node", node), ("interface", iface)],
                        c.value[i].to_string(),
                    );
                }
            }
        }
        header(
            o,
            "boltwatch_interface_carrier",
            "1 when the interface has carrier (physical link), newest observation.",
            "gauge",
        );
        for ((node, iface), s) in &self.interfaces {
            if let Some(c) = &s.carrier {
                let v = if c.value { "1" } else { "0" };
                sample(
                    o,
                    "boltwatch_interface_carrier",
                    &[("node", node), ("interface", iface)],
                    v.into(),
                );
            }
        }
    }

    fn render_self(&self, o: &mut String) {
        header(
            o,
            "boltwatch_ingest_malformed_connections_total",
            "Connections to the gRPC port that did not start with the HTTP/2 preface.",
            "counter",
        );
        sample(
            o,
            "boltwatch_ingest_malformed_connections_total",
            &[],
            self.malformed_connections.to_string(),
        );
        header(
            o,
            "boltwatch_ingest_errors_total",
            "Agent streams or batches rejected or failed, by reason.",
            "counter",
        );
        for (kind, n) in &self.ingest_errors {
            sample(
                o,
                "boltwatch_ingest_errors_total",
                &[("kind", kind)],
                n.to_string(),
            );
        }
        let h = &self.commit;
        header(
            o,
            "boltwatch_store_commit_seconds",
            "Time to store and commit one record batch.",
            "histogram",
        );
        let mut cum = 0;
        for (b, n) in COMMIT_BOUNDS_SECONDS.iter().zip(&h.buckets) {
            cum += n;
            sample(
                o,
                "boltwatch_store_commit_seconds_bucket",
                &[("le", &fmt_f64(*b))],
                cum.to_string(),
            );
        }
        sample(
            o,
            "boltwatch_store_commit_seconds_bucket",
            &[("le", "+Inf")],
            h.count.to_string(),
        );
        sample(o, "boltwatch_store_commit_seconds_sum", &[], fmt_f64(h.sum));
        sample(
            o,
            "boltwatch_store_commit_seconds_count",
            &[],
            h.count.to_string(),
        );
        header(
            o,
            "boltwatch_store_records",
            "Records held in the store.",
            "gauge",
        );
        sample(
            o,
            "boltwatch_store_records",
            &[],
            self.store_records.to_string(),
        );
    }
}

fn header(o: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(o, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(o, "# TYPE {name} {kind}");
}

fn sample(o: &mut String, name: &str, labels: &[(&str, &str)], value: String) {
    o.push_str(name);
    if !labels.is_empty() {
        o.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(o, "{k}=\"{}\"", escape_label(v));
        }
        o.push('}');
    }
    o.push(' ');
    o.push_str(&value);
    o.push('\n');
}

/// Escapes a label value: backslash, double quote and line feed.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Escapes HELP text: backslash and line feed.
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Formats a sample value or `le` bound; Rust's shortest round-trip form,
/// which Prometheus parses back to the same float.
pub fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

mod bandwidth;
pub use bandwidth::CounterRate;

#[cfg(test)]
mod tests;
