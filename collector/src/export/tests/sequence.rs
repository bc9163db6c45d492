//! A fixed sequence of collector events that touches nearly every family,
//! for the checks of the whole exposition in [`super::exposition`]
//! (`promtool check metrics` on real samples).

use boltwatch_proto::v1::*;

use super::{rec, window, Payload};
use crate::export::Metrics;
use boltwatch_exposition::agent::AgentInfo;

fn counters(iface: &str, rx: u64, carrier: Option<bool>, down: u64, speed: u64) -> Payload {
    Payload::Counters(InterfaceCounters {
        interface: iface.into(),
        receive_bytes: rx,
        transmit_bytes: rx / 2,
        receive_packets: rx / 1000,
        transmit_packets: rx / 2000,
        receive_errors: 1,
        transmit_errors: 2,
        receive_drops: 3,
        transmit_drops: 4,
        carrier: carrier.unwrap_or(false),
        carrier_known: carrier.is_some(),
        carrier_down_count: down,
        speed_bits_per_second: speed,
        ..Default::default()
    })
}

fn link(iface: &str, carrier: bool, down: u64, source: LinkEventSource) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: iface.into(),
        carrier,
        carrier_down_count: down,
        source: source as i32,
        ..Default::default()
    })
}

fn thermal(c: f64, throttle: Option<(bool, u32, Option<f64>)>) -> Payload {
    Payload::Thermal(ThermalReading {
        sensors: vec![
            TemperatureSensor {
                name: "cpu \"die\" 0".into(),
                celsius: c,
                ..Default::default()
            },
            TemperatureSensor {
                name: "nvme".into(),
                celsius: c - 10.0,
                ..Default::default()
            },
        ],
        throttle: throttle.map(|(throttled, pressure_level, ratio)| Throttle {
            throttled,
            pressure_level,
            cpu_frequency_ratio: ratio,
            ..Default::default()
        }),
    })
}

fn bw(peer: &str, start: u64, dir: Direction, proto: Protocol, bps: f64, err: &str) -> Payload {
    Payload::Bandwidth(BandwidthResult {
        peer: peer.into(),
        direction: dir as i32,
        protocol: proto as i32,
        start_unix_ns: start,
        bits_per_second: bps,
        retransmits: 7,
        error: err.into(),
        ..Default::default()
    })
}

fn svc(peer: &str, name: &str, up: bool, connect_ns: u64) -> Payload {
    Payload::Service(ServiceCheck {
        peer: peer.into(),
        service: name.into(),
        up,
        connect_ns,
        ..Default::default()
    })
}

fn outage(
    peer: &str,
    id: u64,
    cause: OutageCause,
    svc: &str,
    start: u64,
    end: Option<u64>,
) -> Payload {
    Payload::Outage(Outage {
        peer: peer.into(),
        interface: "tb0".into(),
        cause: cause as i32,
        start_unix_ns: start,
        end_unix_ns: end,
        service: svc.into(),
        outage_id: id,
    })
}

fn path(peer: &str, ok: bool) -> Payload {
    Payload::Path(PathCheck {
        peer: peer.into(),
        expected_interface: "tb0".into(),
        route_interface: if ok { "tb0" } else { "wlan0" }.into(),
        ok,
        path_mtu: 0,
    })
}

fn stats(malformed: u64, dropped: u64) -> Payload {
    Payload::AgentStats(AgentStats {
        malformed_packets: malformed,
        dropped_records: dropped,
        ..Default::default()
    })
}

/// Drives `m` through the sequence.
pub(super) fn drive(m: &mut Metrics) {
    const S: u64 = 1_000_000_000;
    let t0 = 1_700_000_000 * S;
    m.set_store_records(12);
    let info = |version: &str, os: &str, boot: &str| AgentInfo {
        version: version.into(),
        os: os.into(),
        boot_id: boot.into(),
    };
    m.on_known_node("c", Some(info("0.0.9", "macos 15", "c-old")));
    m.on_known_node("d", None);
    m.on_malformed_connection();
    m.on_ingest_error("rate_limited");
    m.on_ingest_error("store");
    m.on_ingest_error("store");
    for (node, peer) in [("a", "b"), ("b", "a")] {
        m.on_hello(
            node,
            info("0.1.0", "linux 6.1", &format!("{node}-1")),
            &[
                Interface {
                    name: "tb0".into(),
                    kind: "thunderbolt".into(),
                    speed_bits_per_second: 40_000_000_000,
                    generation: "4".into(),
                    ..Default::default()
                },
                Interface {
                    name: "lo".into(),
                    kind: "loopback".into(),
                    ..Default::default()
                },
            ],
        );
        let boot = format!("{node}-1");
        let r = |seq: u64, dt: u64, p| rec(node, &boot, seq, t0 + dt * S, p);
        let recs = vec![
            r(1, 0, link("tb0", true, 3, LinkEventSource::Startup)),
            r(
                2,
                1,
                window(
                    peer,
                    t0 + S,
                    &[1_000, 40_000, 80_000, 85_000, 9_000_000, 2 * S],
                    1,
                    false,
                ),
            ),
            r(3, 2, window(peer, t0 + 2 * S, &[60_000, 70_000], 0, true)),
            r(4, 3, window(peer, t0 + 3 * S, &[], 4, false)),
            r(5, 4, counters("tb0", 1_000_000, Some(true), 3, 0)),
            r(6, 5, counters("tb0", 3_500_000, None, 5, 80_000_000_000)),
            r(7, 6, link("tb0", false, 6, LinkEventSource::Netlink)),
            r(8, 7, link("tb0", true, 6, LinkEventSource::Netlink)),
            r(9, 2, counters("en0", 10, Some(false), 0, 1_000_000_000)),
            r(10, 8, thermal(55.5, Some((true, 1, None)))),
            r(11, 9, thermal(61.25, Some((false, 0, Some(0.625))))),
            r(12, 10, thermal(40.0, None)),
            r(
                13,
                11,
                bw(
                    peer,
                    t0 + 11 * S,
                    Direction::Upload,
                    Protocol::Tcp,
                    30e9,
                    "",
                ),
            ),
            r(
                14,
                11,
                bw(
                    peer,
                    t0 + 11 * S,
                    Direction::Download,
                    Protocol::Tcp,
                    29.5e9,
                    "",
                ),
            ),
            r(
                15,
                12,
                bw(
                    peer,
                    t0 + 12 * S,
                    Direction::Upload,
                    Protocol::Udp,
                    0.0,
                    "refused",
                ),
            ),
            r(16, 13, svc(peer, "ssh", true, 250_000)),
            r(17, 14, svc(peer, "ssh", false, 0)),
            r(18, 14, svc(peer, "web", true, 1_500_000)),
            r(
                19,
                15,
                outage(peer, 1, OutageCause::Carrier, "", t0 + 6 * S, None),
            ),
            r(
                20,
                16,
                outage(
                    peer,
                    1,
                    OutageCause::Both,
                    "",
                    t0 + 6 * S,
                    Some(t0 + 7 * S + S / 4),
                ),
            ),
            r(
                21,
                17,
                outage(peer, 2, OutageCause::Service, "ssh", t0 + 14 * S, None),
            ),
            r(22, 18, path(peer, true)),
            r(23, 19, path(peer, false)),
            r(24, 20, path("z", true)),
            r(25, 21, stats(3, 1)),
            r(26, 22, stats(5, 2)),
        ];
        for x in &recs {
            m.apply_record(x);
        }
        m.apply_record(&rec(node, "old-boot", 4, t0 - S, stats(7, 9)));
        m.on_commit(node, 2, 40, 0.003);
        m.on_commit(node, 0, 41, 7.0);
    }
    m.on_hello("we\"ird\\node\n", info("0.1.0", "linux", "w1"), &[]);
    m.on_stream_closed("b");
    m.on_stream_closed("we\"ird\\node\n");
}
