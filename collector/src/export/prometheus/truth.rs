//! The "link truth" metrics: link state and down events, the outage ledger,
//! path assurance, link speed and kind, throttling and service checks. Pure,
//! like its parent: fed decoded records, rendered to text.
//!
//! Decisions, so the numbers can be read without the code:
//! - `boltwatch_link_up` is the newest carrier observation, from link events
//!   and from the counters' carrier, whichever is newer by agent time.
//! - `boltwatch_link_down_events_total` counts, per agent boot, the larger
//!   of (a) the growth of the kernel's `carrier_down_count` seen in link
//!   events and counters (max minus min, so late replays cannot double
//!   count) and (b) the carrier-down link events that were not the startup
//!   sighting. (a) still counts flaps the kernel merged into one
//!   notification; (b) covers platforms without a kernel count (macOS).
//!   The sum over boots starts at 0 when the collector starts.
//! - Outage records come in pairs (start, end) keyed by (boot, outage id).
//!   Link outages (carrier, probe loss, both) are counted in
//!   `boltwatch_outages_total{node,peer}` when the first of the pair
//!   arrives, and their duration is added to
//!   `boltwatch_outage_seconds_total` when the end arrives. Service outages
//!   go to `boltwatch_service_outages_total{node,peer,service}` and
//!   `boltwatch_service_outage_seconds_total` instead, so link availability
//!   is not diluted by a stopped daemon.
//! - `boltwatch_service_connect_seconds` keeps the newest *successful*
//!   connect time; `boltwatch_service_up` says whether it is current.
//! - `boltwatch_cpu_frequency_ratio` appears once a reading knows the ratio
//!   (a ratio of 0 means unknown in the schema).

use std::collections::{BTreeMap, HashMap};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Interface, LinkEventSource, Outage, OutageCause, Record};

use super::{fmt_f64, header, newer, sample, Latest};

type NodeIf = (String, String);
type NodePeer = (String, String);
type NodePeerSvc = (String, String, String);

#[derive(Debug, Default)]
struct DownCount {
    /// Smallest and largest kernel `carrier_down_count` seen in this boot.
    kernel: Option<(u64, u64)>,
    /// Carrier-down link events that were not startup sightings.
    events: u64,
}

impl DownCount {
    fn total(&self) -> u64 {
        let k = self.kernel.map_or(0, |(lo, hi)| hi - lo);
        k.max(self.events)
    }
}

#[derive(Debug, Default)]
struct LinkSeries {
    up: Option<Latest<bool>>,
    /// Per boot id.
    downs: BTreeMap<String, DownCount>,
    speed: Option<Latest<u64>>,
    /// (kind, generation) from the node's newest Hello.
    info: Option<(String, String)>,
}

#[derive(Debug, Default)]
struct OutageTotals {
    count: u64,
    seconds: f64,
}

#[derive(Debug, Default)]
struct ThrottleState {
    throttled: Option<Latest<bool>>,
    pressure: Option<Latest<u32>>,
    ratio: Option<Latest<f64>>,
}

#[derive(Debug, Default)]
struct ServiceState {
    up: Option<Latest<bool>>,
    connect_seconds: Option<Latest<f64>>,
}

/// State behind the link-truth metrics.
#[derive(Debug, Default)]
pub(super) struct TruthState {
    links: BTreeMap<NodeIf, LinkSeries>,
    outages: BTreeMap<NodePeer, OutageTotals>,
    service_outages: BTreeMap<NodePeerSvc, OutageTotals>,
    /// (node, boot, outage id) -> whether the end was accounted.
    seen_outages: HashMap<(String, String, u64), bool>,
    paths: BTreeMap<NodePeer, Latest<bool>>,
    throttle: BTreeMap<String, ThrottleState>,
    services: BTreeMap<NodePeerSvc, ServiceState>,
}

impl TruthState {
    /// The interfaces of a node's `Hello`: their series exist from now on,
    /// with the speed and kind the agent discovered.
    pub(super) fn on_hello_interfaces(&mut self, node: &str, interfaces: &[Interface]) {
        for i in interfaces {
            let s = self.link(node, &i.name);
            s.info = Some((i.kind.clone(), i.generation.clone()));
            if i.speed_bits_per_second > 0 && s.speed.is_none() {
                // The Hello has no time of its own; any counter reading wins.
                s.speed = Some(Latest {
                    unix_ns: 0,
                    value: i.speed_bits_per_second,
                });
            }
        }
    }

    fn link(&mut self, node: &str, iface: &str) -> &mut LinkSeries {
        self.links
            .entry((node.to_owned(), iface.to_owned()))
            .or_default()
    }

    fn outage_peer(&mut self, node: &str, peer: &str) {
        self.outages
            .entry((node.to_owned(), peer.to_owned()))
            .or_default();
    }

    /// A newly stored record.
    pub(super) fn apply(&mut self, r: &Record) {
        let node = r.node.as_str();
        match &r.payload {
            Some(Payload::LinkEvent(e)) => {
                let s = self.link(node, &e.interface);
                newer(&mut s.up, r.unix_ns, e.carrier);
                let d = s.downs.entry(r.boot_id.clone()).or_default();
                widen(&mut d.kernel, e.carrier_down_count);
                let startup = e.source == LinkEventSource::Startup as i32;
                if !e.carrier && !startup {
                    d.events += 1;
                }
            }
            Some(Payload::Counters(c)) => {
                let s = self.link(node, &c.interface);
                if c.carrier_known {
                    newer(&mut s.up, r.unix_ns, c.carrier);
                }
                if c.speed_bits_per_second > 0 {
                    newer(&mut s.speed, r.unix_ns, c.speed_bits_per_second);
                }
                let d = s.downs.entry(r.boot_id.clone()).or_default();
                widen(&mut d.kernel, c.carrier_down_count);
            }
            Some(Payload::Rtt(s)) => self.outage_peer(node, &s.peer),
            Some(Payload::Path(p)) => {
                self.outage_peer(node, &p.peer);
                let slot = self
                    .paths
                    .entry((node.to_owned(), p.peer.clone()))
                    .or_insert(Latest {
                        unix_ns: r.unix_ns,
                        value: p.ok,
                    });
                if r.unix_ns >= slot.unix_ns {
                    *slot = Latest {
                        unix_ns: r.unix_ns,
                        value: p.ok,
                    };
                }
            }
            Some(Payload::Outage(o)) => self.apply_outage(r, o),
            Some(Payload::Thermal(t)) => {
                if let Some(th) = &t.throttle {
                    let s = self.throttle.entry(node.to_owned()).or_default();
                    newer(&mut s.throttled, r.unix_ns, th.throttled);
                    newer(&mut s.pressure, r.unix_ns, th.pressure_level);
                    if th.cpu_frequency_ratio > 0.0 {
                        newer(&mut s.ratio, r.unix_ns, th.cpu_frequency_ratio);
                    }
                }
            }
            Some(Payload::Service(c)) => {
                let s = self
                    .services
                    .entry((node.to_owned(), c.peer.clone(), c.service.clone()))
                    .or_default();
                newer(&mut s.up, r.unix_ns, c.up);
                if c.up {
                    newer(&mut s.connect_seconds, r.unix_ns, c.connect_ns as f64 / 1e9);
                }
                self.service_outages
                    .entry((node.to_owned(), c.peer.clone(), c.service.clone()))
                    .or_default();
            }
            _ => {}
        }
    }

    fn apply_outage(&mut self, r: &Record, o: &Outage) {
        let key = (r.node.clone(), r.boot_id.clone(), o.outage_id);
        let first = !self.seen_outages.contains_key(&key);
        let ended = self.seen_outages.get(&key).copied().unwrap_or(false);
        let end_now = o.end_unix_ns.is_some() && !ended;
        self.seen_outages.insert(key, ended || end_now);
        let seconds = match o.end_unix_ns {
            Some(end) if end_now => end.saturating_sub(o.start_unix_ns) as f64 / 1e9,
            _ => 0.0,
        };
        let totals = if o.cause == OutageCause::Service as i32 {
            self.service_outages
                .entry((r.node.clone(), o.peer.clone(), o.service.clone()))
                .or_default()
        } else {
            self.outages
                .entry((r.node.clone(), o.peer.clone()))
                .or_default()
        };
        if first {
            totals.count += 1;
        }
        totals.seconds += seconds;
    }

    /// Appends the link-truth metric families.
    pub(super) fn render(&self, o: &mut String) {
        self.render_links(o);
        self.render_outages(o);
        self.render_thermal(o);
        self.render_services(o);
    }

    fn render_links(&self, o: &mut String) {
        let ni = |(n, i): &NodeIf| [("node", n.clone()), ("interface", i.clone())];
        header(
            o,
            "boltwatch_link_up",
            "1 when the interface has carrier, from link events and counters, newest observation.",
            "gauge",
        );
        for (k, s) in &self.links {
            if let Some(up) = &s.up {
                put(o, "boltwatch_link_up", &ni(k), bool01(up.value));
            }
        }
        header(
            o,
            "boltwatch_link_down_events_total",
            "Carrier losses of the interface: the kernel's carrier_down_count growth or the down events seen, whichever is larger, summed over agent boots.",
            "counter",
        );
        for (k, s) in &self.links {
            let n: u64 = s.downs.values().map(DownCount::total).sum();
            put(o, "boltwatch_link_down_events_total", &ni(k), n.to_string());
        }
        header(
            o,
            "boltwatch_link_speed_bits_per_second",
            "Link speed of the interface as reported by the OS or Thunderbolt discovery.",
            "gauge",
        );
        for (k, s) in &self.links {
            if let Some(v) = &s.speed {
                put(
                    o,
                    "boltwatch_link_speed_bits_per_second",
                    &ni(k),
                    v.value.to_string(),
                );
            }
        }
        header(
            o,
            "boltwatch_link_info",
            "Interface kind and Thunderbolt generation from the agent's discovery; always 1.",
            "gauge",
        );
        for ((n, i), s) in &self.links {
            if let Some((kind, generation)) = &s.info {
                let labels = [
                    ("node", n.clone()),
                    ("interface", i.clone()),
                    ("kind", kind.clone()),
                    ("generation", generation.clone()),
                ];
                put(o, "boltwatch_link_info", &labels, "1".into());
            }
        }
        header(
            o,
            "boltwatch_path_ok",
            "1 when the route to the peer leaves through the expected interface.",
            "gauge",
        );
        for ((n, p), v) in &self.paths {
            let labels = [("node", n.clone()), ("peer", p.clone())];
            put(o, "boltwatch_path_ok", &labels, bool01(v.value));
        }
    }

    fn render_outages(&self, o: &mut String) {
        header(
            o,
            "boltwatch_outages_total",
            "Link outages towards the peer (carrier loss or consecutive lost probes), counted when they start.",
            "counter",
        );
        for ((n, p), t) in &self.outages {
            let labels = [("node", n.clone()), ("peer", p.clone())];
            put(o, "boltwatch_outages_total", &labels, t.count.to_string());
        }
        header(
            o,
            "boltwatch_outage_seconds_total",
            "Duration of ended link outages towards the peer, added when each ends.",
            "counter",
        );
        for ((n, p), t) in &self.outages {
            let labels = [("node", n.clone()), ("peer", p.clone())];
            put(
                o,
                "boltwatch_outage_seconds_total",
                &labels,
                fmt_f64(t.seconds),
            );
        }
        header(
            o,
            "boltwatch_service_outages_total",
            "Service outages (failed TCP connect checks) on the peer, counted when they start.",
            "counter",
        );
        for ((n, p, s), t) in &self.service_outages {
            let labels = [
                ("node", n.clone()),
                ("peer", p.clone()),
                ("service", s.clone()),
            ];
            put(
                o,
                "boltwatch_service_outages_total",
                &labels,
                t.count.to_string(),
            );
        }
        header(
            o,
            "boltwatch_service_outage_seconds_total",
            "Duration of ended service outages on the peer, added when each ends.",
            "counter",
        );
        for ((n, p, s), t) in &self.service_outages {
            let labels = [
                ("node", n.clone()),
                ("peer", p.clone()),
                ("service", s.clone()),
            ];
            put(
                o,
                "boltwatch_service_outage_seconds_total",
                &labels,
                fmt_f64(t.seconds),
            );
        }
    }

    fn render_thermal(&self, o: &mut String) {
        header(
            o,
            "boltwatch_thermal_throttled",
            "1 when the node was thermally throttled during the newest reading interval.",
            "gauge",
        );
        for (n, s) in &self.throttle {
            if let Some(v) = &s.throttled {
                put(
                    o,
                    "boltwatch_thermal_throttled",
                    &[("node", n.clone())],
                    bool01(v.value),
                );
            }
        }
        header(
            o,
            "boltwatch_thermal_pressure_level",
            "Thermal pressure level (0 nominal; macOS levels, 1 on Linux while throttled).",
            "gauge",
        );
        for (n, s) in &self.throttle {
            if let Some(v) = &s.pressure {
                put(
                    o,
                    "boltwatch_thermal_pressure_level",
                    &[("node", n.clone())],
                    v.value.to_string(),
                );
            }
        }
        header(
            o,
            "boltwatch_cpu_frequency_ratio",
            "Current over maximum CPU frequency, averaged over frequency domains.",
            "gauge",
        );
        for (n, s) in &self.throttle {
            if let Some(v) = &s.ratio {
                put(
                    o,
                    "boltwatch_cpu_frequency_ratio",
                    &[("node", n.clone())],
                    fmt_f64(v.value),
                );
            }
        }
    }

    fn render_services(&self, o: &mut String) {
        let labels = |(n, p, s): &NodePeerSvc| {
            [
                ("node", n.clone()),
                ("peer", p.clone()),
                ("service", s.clone()),
            ]
        };
        header(
            o,
            "boltwatch_service_up",
            "1 when the newest TCP connect check of the peer's service succeeded.",
            "gauge",
        );
        for (k, s) in &self.services {
            if let Some(v) = &s.up {
                put(o, "boltwatch_service_up", &labels(k), bool01(v.value));
            }
        }
        header(
            o,
            "boltwatch_service_connect_seconds",
            "TCP connect time of the newest successful check of the peer's service.",
            "gauge",
        );
        for (k, s) in &self.services {
            if let Some(v) = &s.connect_seconds {
                put(
                    o,
                    "boltwatch_service_connect_seconds",
                    &labels(k),
                    fmt_f64(v.value),
                );
            }
        }
    }
}

fn widen(range: &mut Option<(u64, u64)>, v: u64) {
    *range = Some(match *range {
        Some((lo, hi)) => (lo.min(v), hi.max(v)),
        None => (v, v),
    });
}

fn bool01(v: bool) -> String {
    if v { "1" } else { "0" }.to_owned()
}

fn put(o: &mut String, name: &str, labels: &[(&str, String)], value: String) {
    let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    sample(o, name, &l, value);
}

#[cfg(test)]
mod tests;
