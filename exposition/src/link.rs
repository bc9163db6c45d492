//! Links and interfaces (`link_event`, `counters` and `path` records, and
//! the interfaces of each `Hello`): the kernel's interface counters and the
//! throughput between two readings, carrier, carrier losses, speed and
//! kind, and whether the route to each peer leaves through the expected
//! interface.
//!
//! Decisions, so the numbers can be read without the code:
//! - `boltwatch_link_up` is the newest carrier observation, from link
//!   events and from the counters' carrier (when the OS knew it),
//!   whichever is newer by agent time.
//! - `boltwatch_link_down_events_total` counts, per agent boot, the larger
//!   of (a) the growth of the kernel's `carrier_down_count` seen in link
//!   events and counters (max minus min, so late replays cannot double
//!   count) and (b) the carrier-down link events that were not the startup
//!   sighting. (a) still counts flaps the kernel merged into one
//!   notification; (b) covers platforms without a kernel count (macOS).
//!   The sum over boots starts at 0 when the collector starts.
//! - Speed and kind come from the node's `Hello` first; a counters reading
//!   with a known speed replaces the speed.
//! - A Thunderbolt fabric link event (source `FABRIC`) says nothing of
//!   carrier; it sets the port's lanes, lane speeds and downshift verdict
//!   (`boltwatch_link_downshifted`, 1 while the agent judges the port
//!   downshifted, whichever rule), replaces the speed with the slower
//!   direction's lanes times lane speed when both are known, and the
//!   generation of `boltwatch_link_info` with the one the port showed
//!   ("5" once it ran 40 Gb/s lanes).
//! - `boltwatch_link_admin_up` is the newest administrative state (IFF_UP)
//!   of link events that observe carrier (not fabric or bridge loop ones).
//! - `boltwatch_path_route_info` is the newest path check: the expected
//!   interface, the one the route leaves through, and a `state` from
//!   [`crate::path::state`] over that and the expected interface's newest
//!   admin and carrier observations.
//! - A bridge loop link event (source `BRIDGE_LOOP`, the interface being
//!   the bridge) says nothing of carrier either; it sets
//!   `boltwatch_bridge_loop_suspected` to the agent's newest verdict.

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    Downshift, Interface, InterfaceCounters, LinkEvent, LinkEventSource, Record, ThunderboltPort,
};

use crate::domain::{Domain, NodePeer, Subjects};
use crate::family::{families, labels, pair, At, Exposition, Family, Newest};
use crate::key;
use crate::path::Route;
use crate::rate::CounterRate;

use labels::NODE_INTERFACE as NI;

/// A kernel interface counter, named after its [`InterfaceCounters`] field.
macro_rules! kernel {
    ($field:literal) => {
        concat!("boltwatch_interface_", $field, "_total")
    };
    (help $what:literal) => {
        concat!($what, ", the kernel's counter as read by the agent.")
    };
}

/// The payload kinds [`LinkMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["link_event", "counters", "path"];

families! {
    RX_BYTES = Counter(kernel!("receive_bytes"), "bytes", NI, kernel!(help "Bytes received"));
    TX_BYTES = Counter(kernel!("transmit_bytes"), "bytes", NI, kernel!(help "Bytes transmitted"));
    RX_PACKETS = Counter(kernel!("receive_packets"), "", NI, kernel!(help "Packets received"));
    TX_PACKETS = Counter(kernel!("transmit_packets"), "", NI, kernel!(help "Packets transmitted"));
    RX_ERRORS = Counter(kernel!("receive_errors"), "", NI, kernel!(help "Receive errors"));
    TX_ERRORS = Counter(kernel!("transmit_errors"), "", NI, kernel!(help "Transmit errors"));
    RX_DROPS = Counter(kernel!("receive_drops"), "", NI, kernel!(help "Received packets dropped"));
    TX_DROPS = Counter(kernel!("transmit_drops"), "", NI, kernel!(help "Packets dropped on transmit"));
    THROUGHPUT = Gauge("boltwatch_interface_throughput_bytes_per_second", "bytes_per_second", &["node", "interface", "direction"], "Interface throughput between the last two counter readings.");
    UP = Gauge("boltwatch_link_up", "", NI, "1 when the interface has carrier, from link events and counters, newest observation.");
    DOWN_EVENTS = Counter("boltwatch_link_down_events_total", "", NI, "Carrier losses of the interface: the kernel's carrier_down_count growth or the down events seen, whichever is larger, summed over agent boots.");
    SPEED = Gauge("boltwatch_link_speed_bytes_per_second", "bytes_per_second", NI, "Link speed of the interface as reported by the OS or Thunderbolt discovery.");
    DOWNSHIFTED = Gauge("boltwatch_link_downshifted", "", NI, "1 when the Thunderbolt port negotiated fewer lanes or slower lanes than its generation supports or than it negotiated earlier in the agent's boot, else 0.");
    LANES = Gauge("boltwatch_link_lanes", "", &["node", "interface", "direction"], "Lanes the Thunderbolt port negotiated, per direction.");
    LANE_SPEED = Gauge("boltwatch_link_lane_speed_bytes_per_second", "bytes_per_second", &["node", "interface", "direction"], "Speed of one lane of the Thunderbolt port as negotiated, per direction.");
    LOOP_SUSPECTED = Gauge("boltwatch_bridge_loop_suspected", "", NI, "1 while the agent suspects frames circulate through the bridge (flooded frames far above the node's own, or learnt MACs moving between members), else 0.");
    INFO = Gauge("boltwatch_link_info", "", &["node", "interface", "kind", "generation"], "Interface kind and Thunderbolt generation from the agent's discovery; always 1.");
    ADMIN_UP = Gauge("boltwatch_link_admin_up", "", NI, "1 when the interface is administratively up (IFF_UP), 0 when it was set down, newest link event.");
    PATH_OK = Gauge("boltwatch_path_ok", "", labels::NODE_PEER, "1 when the route to the peer leaves through the expected interface.");
    PATH_ROUTE = Gauge("boltwatch_path_route_info", "", &["node", "peer", "interface", "route_interface", "state"], "Newest path check to the peer: the expected interface, the one the route leaves through (empty: no route) and the state (ok, admin_down, no_carrier, no_route, other_interface); always 1.");
}

/// The kernel's interface counters, in [`InterfaceCounters`] field order.
const COUNTERS: [Family; 8] = [
    RX_BYTES, TX_BYTES, RX_PACKETS, TX_PACKETS, RX_ERRORS, TX_ERRORS, RX_DROPS, TX_DROPS,
];

type NodeIf = (String, String);

#[derive(Debug, Default, Clone)]
struct DownCount {
    /// Smallest and largest kernel `carrier_down_count` seen in this boot.
    kernel: Option<(u64, u64)>,
    /// Carrier-down link events that were not startup sightings.
    events: u64,
}

impl DownCount {
    fn widen(&mut self, v: u64) {
        self.kernel = Some(match self.kernel {
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
            None => (v, v),
        });
    }

    fn total(&self) -> u64 {
        let k = self.kernel.map_or(0, |(lo, hi)| hi - lo);
        k.max(self.events)
    }
}

/// Kind and generation from discovery.
#[derive(Debug, Clone)]
struct Discovered {
    kind: String,
    generation: String,
}

#[derive(Debug, Default, Clone)]
struct Iface {
    counters: Newest<[u64; 8]>,
    rate: CounterRate,
    up: Newest<bool>,
    admin: Newest<bool>,
    /// Per agent boot id.
    downs: BTreeMap<String, DownCount>,
    speed: Newest<u64>,
    info: Option<Discovered>,
    /// The newest fabric reading of a Thunderbolt port.
    fabric: Newest<ThunderboltPort>,
    /// The newest bridge loop verdict, for a bridge.
    bridge_loop: Newest<bool>,
}

/// State behind the link and interface families.
#[derive(Debug, Default, Clone)]
pub struct LinkMetrics {
    interfaces: BTreeMap<NodeIf, Iface>,
    paths: BTreeMap<NodePeer, Newest<Route>>,
}

impl LinkMetrics {
    /// Runs `f` on the interface's state, made if new.
    fn iface<R>(&mut self, node: &str, name: &str, f: impl FnOnce(&mut Iface) -> R) -> R {
        let make = || (node.to_owned(), name.to_owned());
        key::with(&mut self.interfaces, key::pair(&(node, name)), make, f)
    }

    /// The interfaces of a node's `Hello`: their series exist from now on,
    /// with the speed and kind the agent discovered.
    pub fn on_hello_interfaces(&mut self, node: &str, interfaces: &[Interface]) {
        for i in interfaces {
            self.iface(node, &i.name, |s| {
                s.info = Some(Discovered {
                    kind: i.kind.clone(),
                    generation: i.generation.clone(),
                });
                if i.speed_bits_per_second > 0 {
                    // The Hello has no time of its own; any counter reading
                    // wins.
                    s.speed.seed(i.speed_bits_per_second);
                }
            });
        }
    }

    fn link_event(&mut self, r: &Record, e: &LinkEvent) {
        if e.source == LinkEventSource::Fabric as i32 {
            if let Some(tb) = &e.thunderbolt {
                self.iface(&r.node, &e.interface, |s| Self::fabric(s, r, tb));
            }
            return;
        }
        if e.source == LinkEventSource::BridgeLoop as i32 {
            if let Some(l) = &e.bridge_loop {
                let suspected = l.suspected;
                self.iface(&r.node, &e.interface, |s| {
                    s.bridge_loop.update(At::of(r), suspected)
                });
            }
            return;
        }
        self.iface(&r.node, &e.interface, |s| {
            s.up.update(At::of(r), e.carrier);
            s.admin.update(At::of(r), e.admin_up);
            let d = s.downs.entry(r.boot_id.clone()).or_default();
            d.widen(e.carrier_down_count);
            let startup = e.source == LinkEventSource::Startup as i32;
            if !e.carrier && !startup {
                d.events += 1;
            }
        });
    }

    fn fabric(s: &mut Iface, r: &Record, tb: &ThunderboltPort) {
        s.fabric.update(At::of(r), tb.clone());
        let rx = tb.rx_lane_bits_per_second * u64::from(tb.rx_lanes);
        let tx = tb.tx_lane_bits_per_second * u64::from(tb.tx_lanes);
        if rx > 0 && tx > 0 {
            s.speed.update(At::of(r), rx.min(tx));
        }
        if !tb.generation.is_empty() {
            let kind = s.info.as_ref().map(|d| d.kind.clone());
            s.info = Some(Discovered {
                kind: kind.unwrap_or_else(|| "thunderbolt".to_string()),
                generation: tb.generation.clone(),
            });
        }
    }

    fn counters(&mut self, r: &Record, c: &InterfaceCounters) {
        self.iface(&r.node, &c.interface, |s| Self::count(s, r, c));
    }

    fn count(s: &mut Iface, r: &Record, c: &InterfaceCounters) {
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
        s.counters.update(At::of(r), values);
        s.rate
            .update(r.unix_ns, [c.receive_bytes, c.transmit_bytes]);
        if c.carrier_known {
            s.up.update(At::of(r), c.carrier);
        }
        if c.speed_bits_per_second > 0 {
            s.speed.update(At::of(r), c.speed_bits_per_second);
        }
        let boot = || r.boot_id.clone();
        key::with(&mut s.downs, r.boot_id.as_str(), boot, |d| {
            d.widen(c.carrier_down_count)
        });
    }
}

impl LinkMetrics {
    fn render_fabric(e: &mut Exposition, ifs: &BTreeMap<NodeIf, Iface>) {
        let ports = || {
            ifs.iter()
                .filter_map(|((n, i), s)| Some((n.as_str(), i.as_str(), s.fabric.get()?)))
        };
        e.family(
            &DOWNSHIFTED,
            ports().map(|(n, i, tb)| {
                let down = tb.downshift != Downshift::Unspecified as i32;
                ([n, i], u64::from(down))
            }),
        );
        e.family(
            &LANES,
            ports().flat_map(|(n, i, tb)| {
                [
                    ([n, i, "receive"], u64::from(tb.rx_lanes)),
                    ([n, i, "transmit"], u64::from(tb.tx_lanes)),
                ]
            }),
        );
        e.family(
            &LANE_SPEED,
            // The schema's bits, exported in bytes (base unit).
            ports().flat_map(|(n, i, tb)| {
                [
                    ([n, i, "receive"], tb.rx_lane_bits_per_second as f64 / 8.0),
                    ([n, i, "transmit"], tb.tx_lane_bits_per_second as f64 / 8.0),
                ]
            }),
        );
    }
}

impl LinkMetrics {
    fn render_paths(&self, e: &mut Exposition) {
        let routes = || {
            self.paths
                .iter()
                .filter_map(|((n, p), r)| Some((n.as_str(), p.as_str(), r.get()?)))
        };
        e.family(
            &PATH_OK,
            routes().map(|(n, p, r)| ([n, p], u64::from(r.ok))),
        );
        e.family(
            &PATH_ROUTE,
            routes().map(|(n, p, r)| {
                let key = (n.to_owned(), r.expected.clone());
                let i = self.interfaces.get(&key);
                let admin = i.and_then(|i| i.admin.get().copied());
                let carrier = i.and_then(|i| i.up.get().copied());
                let state = crate::path::state(r, admin, carrier);
                ([n, p, r.expected.as_str(), r.via.as_str(), state], 1u64)
            }),
        );
    }
}

impl Domain for LinkMetrics {
    fn apply(&mut self, r: &Record, subjects: &mut Subjects) {
        match &r.payload {
            Some(Payload::LinkEvent(e)) => self.link_event(r, e),
            Some(Payload::Counters(c)) => self.counters(r, c),
            Some(Payload::Path(p)) => {
                let key = (r.node.clone(), p.peer.clone());
                self.paths.entry(key.clone()).or_default().update(
                    At::of(r),
                    Route {
                        ok: p.ok,
                        expected: p.expected_interface.clone(),
                        via: p.route_interface.clone(),
                    },
                );
                subjects.peers.insert(key);
            }
            _ => {}
        }
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let ifs = &self.interfaces;
        for (i, f) in COUNTERS.iter().enumerate() {
            e.family(
                f,
                ifs.iter()
                    .filter_map(|(k, s)| Some((pair(k), s.counters.get()?[i]))),
            );
        }
        e.family(
            &THROUGHPUT,
            ifs.iter().flat_map(|((n, i), s)| {
                let (n, i) = (n.as_str(), i.as_str());
                let rates = s.rate.bytes_per_second();
                rates
                    .into_iter()
                    .flat_map(move |[rx, tx]| [([n, i, "receive"], rx), ([n, i, "transmit"], tx)])
            }),
        );
        e.family(
            &UP,
            ifs.iter()
                .filter_map(|(k, s)| Some((pair(k), *s.up.get()?))),
        );
        e.family(
            &DOWN_EVENTS,
            ifs.iter()
                .map(|(k, s)| (pair(k), s.downs.values().map(DownCount::total).sum::<u64>())),
        );
        e.family(
            &SPEED,
            // The schema's bits, exported in bytes (base unit).
            ifs.iter()
                .filter_map(|(k, s)| Some((pair(k), *s.speed.get()? as f64 / 8.0))),
        );
        Self::render_fabric(e, ifs);
        e.family(
            &LOOP_SUSPECTED,
            ifs.iter()
                .filter_map(|(k, s)| Some((pair(k), u64::from(*s.bridge_loop.get()?)))),
        );
        e.family(
            &INFO,
            ifs.iter().filter_map(|((n, i), s)| {
                let d = s.info.as_ref()?;
                Some(([n.as_str(), i, &d.kind, &d.generation], 1u64))
            }),
        );
        e.family(
            &ADMIN_UP,
            ifs.iter()
                .filter_map(|(k, s)| Some((pair(k), u64::from(*s.admin.get()?)))),
        );
        self.render_paths(e);
    }

    fn forget(&mut self, node: &str) {
        for ((n, _), s) in self.interfaces.iter_mut() {
            if n == node {
                // Counters stay; what describes "now" goes.
                s.rate = CounterRate::default();
                s.up = Newest::default();
                s.admin = Newest::default();
                s.speed = Newest::default();
                s.info = None;
                s.fabric = Newest::default();
                s.bridge_loop = Newest::default();
            }
        }
        self.paths.retain(|(n, _), _| n != node);
    }
}
