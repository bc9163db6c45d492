//! Interface counters and throughput, carrier, down events, speed, kind
//! and path.

use super::*;
use boltwatch_proto::v1::{
    BridgeLoop, Downshift, Interface, InterfaceCounters, LinkEvent, LinkEventSource, PathCheck,
    ThunderboltPort,
};

const TB0: &str = "{node=\"a\",interface=\"tb0\"}";
const S: u64 = 1_000_000_000;

fn link_event(carrier: bool, down_count: u64, source: LinkEventSource) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: "tb0".into(),
        carrier,
        carrier_down_count: down_count,
        source: source as i32,
        ..Default::default()
    })
}

fn counters(carrier: bool, down_count: u64, speed: u64, bytes: [u64; 2]) -> Payload {
    Payload::Counters(InterfaceCounters {
        interface: "tb0".into(),
        receive_bytes: bytes[0],
        transmit_bytes: bytes[1],
        carrier,
        carrier_known: true,
        carrier_down_count: down_count,
        speed_bits_per_second: speed,
        ..Default::default()
    })
}

/// Applies `(unix_ns, payload)` in order as boot `boot` of node a.
fn feed(m: &mut Metrics, boot: &str, records: Vec<(u64, Payload)>) {
    for (t, p) in records {
        m.apply_record(&rec("a", boot, t, t, p));
    }
}

#[test]
fn down_events_take_the_kernel_count_when_it_saw_more() {
    use LinkEventSource::{Netlink, Startup};
    // (boot, agent time, record, down events after it, carrier after it).
    let steps = [
        // Startup sighting: the kernel had counted 3 drops before the agent.
        ("b1", 1, link_event(true, 3, Startup), "0", "1"),
        ("b1", 2, link_event(false, 4, Netlink), "1", "0"),
        // Two more flaps merged by the kernel into one notification pair.
        ("b1", 3, link_event(true, 4, Netlink), "1", "1"),
        ("b1", 4, counters(true, 6, 0, [0; 2]), "3", "1"),
        // A new boot of the agent starts its own baseline; boots add up.
        ("b2", 10, link_event(true, 6, Startup), "3", "1"),
        ("b2", 11, link_event(false, 7, Netlink), "4", "0"),
        // An older counter reading replayed late changes neither.
        ("b2", 9, counters(true, 6, 0, [0; 2]), "4", "0"),
    ];
    let mut m = Metrics::new();
    let down = format!("boltwatch_link_down_events_total{TB0}");
    let up = format!("boltwatch_link_up{TB0}");
    for (boot, t, p, downs, carrier) in steps {
        feed(&mut m, boot, vec![(t, p)]);
        assert_eq!(value(&m, &down).as_deref(), Some(downs), "after {t}");
        assert_eq!(value(&m, &up).as_deref(), Some(carrier), "after {t}");
    }
}

#[test]
fn down_events_are_counted_without_a_kernel_count() {
    // macOS: no carrier_down_count, only kernel events.
    let ke = LinkEventSource::KernelEvent;
    let mut m = Metrics::new();
    feed(
        &mut m,
        "b1",
        vec![
            (1, link_event(false, 0, LinkEventSource::Startup)),
            (2, link_event(true, 0, ke)),
            (3, link_event(false, 0, ke)),
            (4, link_event(true, 0, ke)),
            (5, link_event(false, 0, ke)),
        ],
    );
    let down = format!("boltwatch_link_down_events_total{TB0}");
    assert_eq!(value(&m, &down).as_deref(), Some("2"));
}

#[test]
fn speed_and_info_from_hello_then_counters() {
    let mut m = Metrics::new();
    let tb0 = Interface {
        name: "tb0".into(),
        kind: "thunderbolt".into(),
        speed_bits_per_second: 40_000_000_000,
        generation: "4".into(),
        ..Default::default()
    };
    m.link.on_hello_interfaces("a", &[tb0]);
    let speed = format!("boltwatch_link_speed_bytes_per_second{TB0}");
    assert_eq!(value(&m, &speed).as_deref(), Some("5000000000"));
    let info =
        "boltwatch_link_info{node=\"a\",interface=\"tb0\",kind=\"thunderbolt\",generation=\"4\"}";
    assert_eq!(value(&m, info).as_deref(), Some("1"));
    // The series exist before any record: no carrier known yet, 0 downs.
    let down = format!("boltwatch_link_down_events_total{TB0}");
    assert_eq!(value(&m, &down).as_deref(), Some("0"));
    assert_eq!(value(&m, &format!("boltwatch_link_up{TB0}")), None);
    feed(
        &mut m,
        "b1",
        vec![(5, counters(true, 0, 80_000_000_000, [0; 2]))],
    );
    assert_eq!(value(&m, &speed).as_deref(), Some("10000000000"));
    // A counters reading without a speed keeps the known one.
    feed(&mut m, "b1", vec![(6, counters(true, 0, 0, [0; 2]))]);
    assert_eq!(value(&m, &speed).as_deref(), Some("10000000000"));
}

#[test]
fn newest_carrier_wins_between_counters_and_events() {
    let mut m = Metrics::new();
    feed(
        &mut m,
        "b",
        vec![
            (300, counters(true, 0, 0, [1234, 0])),
            (400, link_event(false, 0, LinkEventSource::Netlink)),
            (350, counters(true, 0, 0, [1000, 0])),
        ],
    );
    assert_eq!(
        value(&m, &format!("boltwatch_link_up{TB0}")).as_deref(),
        Some("0")
    );
    let rx = format!("boltwatch_interface_receive_bytes_total{TB0}");
    assert_eq!(value(&m, &rx).as_deref(), Some("1000"));
}

#[test]
fn throughput_rendered_per_direction_from_the_second_reading() {
    let mut m = Metrics::new();
    feed(&mut m, "b", vec![(S, counters(true, 0, 0, [0, 0]))]);
    let name = "boltwatch_interface_throughput_bytes_per_second";
    assert!(!m.render().contains(&format!("{name}{{")));
    feed(
        &mut m,
        "b",
        vec![(2 * S, counters(true, 0, 0, [1_250_000_000, 125]))],
    );
    let series = |d: &str| format!("{name}{{node=\"a\",interface=\"tb0\",direction=\"{d}\"}}");
    assert_eq!(value(&m, &series("receive")).as_deref(), Some("1250000000"));
    assert_eq!(value(&m, &series("transmit")).as_deref(), Some("125"));
}

#[test]
fn path_follows_the_newest_check_and_creates_the_outage_series() {
    let path = |ok| {
        Payload::Path(PathCheck {
            peer: "b".into(),
            expected_interface: "tb0".into(),
            route_interface: if ok { "tb0" } else { "wlan0" }.into(),
            ok,
            path_mtu: 0,
        })
    };
    let mut m = Metrics::new();
    feed(
        &mut m,
        "b1",
        vec![(1, path(true)), (3, path(false)), (2, path(true))],
    );
    let ab = "{node=\"a\",peer=\"b\"}";
    assert_eq!(
        value(&m, &format!("boltwatch_path_ok{ab}")).as_deref(),
        Some("0")
    );
    // Known peers have outage series at 0 before any outage, but no
    // bandwidth counters: only probed links have those.
    let outages = format!("boltwatch_outages_total{ab}");
    assert_eq!(value(&m, &outages).as_deref(), Some("0"));
    assert_eq!(
        value(&m, &format!("boltwatch_bandwidth_tests_total{ab}")),
        None
    );
}

fn fabric(lanes: u32, lane_gbps: u64, generation: &str, downshift: Downshift) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: "tb0".into(),
        source: LinkEventSource::Fabric as i32,
        thunderbolt: Some(ThunderboltPort {
            rx_lanes: lanes,
            tx_lanes: lanes,
            rx_lane_bits_per_second: lane_gbps * S,
            tx_lane_bits_per_second: lane_gbps * S,
            generation: generation.into(),
            downshift: downshift as i32,
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn fabric_events_set_lanes_speeds_downshift_and_generation_not_carrier() {
    let mut m = Metrics::new();
    feed(
        &mut m,
        "b1",
        vec![
            (1, link_event(true, 0, LinkEventSource::Startup)),
            (2, fabric(2, 40, "5", Downshift::Unspecified)),
        ],
    );
    let get = |m: &Metrics, name: &str, extra: &str| {
        let series = format!("{name}{{node=\"a\",interface=\"tb0\"{extra}}}");
        value(m, &series)
    };
    let rx = ",direction=\"receive\"";
    let tx = ",direction=\"transmit\"";
    assert_eq!(
        get(&m, "boltwatch_link_downshifted", "").as_deref(),
        Some("0")
    );
    assert_eq!(get(&m, "boltwatch_link_lanes", rx).as_deref(), Some("2"));
    assert_eq!(
        get(&m, "boltwatch_link_lane_speed_bytes_per_second", tx).as_deref(),
        Some("5000000000")
    );
    let speed = "boltwatch_link_speed_bytes_per_second";
    assert_eq!(get(&m, speed, "").as_deref(), Some("10000000000"));
    let info = ",kind=\"thunderbolt\",generation=\"5\"";
    assert_eq!(get(&m, "boltwatch_link_info", info).as_deref(), Some("1"));

    // Down to one 20 Gb/s lane: downshifted, the speed follows, and
    // carrier is untouched and no down event is counted.
    feed(
        &mut m,
        "b1",
        vec![(3, fabric(1, 20, "5", Downshift::BelowCapability))],
    );
    assert_eq!(
        get(&m, "boltwatch_link_downshifted", "").as_deref(),
        Some("1")
    );
    assert_eq!(get(&m, "boltwatch_link_lanes", tx).as_deref(), Some("1"));
    assert_eq!(get(&m, speed, "").as_deref(), Some("2500000000"));
    assert_eq!(get(&m, "boltwatch_link_up", "").as_deref(), Some("1"));
    let downs = get(&m, "boltwatch_link_down_events_total", "");
    assert_eq!(downs.as_deref(), Some("0"));

    // A late, older reading does not undo the newer one.
    feed(
        &mut m,
        "b1",
        vec![(2, fabric(2, 40, "5", Downshift::Unspecified))],
    );
    assert_eq!(
        get(&m, "boltwatch_link_downshifted", "").as_deref(),
        Some("1")
    );
    feed(
        &mut m,
        "b1",
        vec![(4, fabric(2, 40, "5", Downshift::Unspecified))],
    );
    assert_eq!(
        get(&m, "boltwatch_link_downshifted", "").as_deref(),
        Some("0")
    );
}

fn bridge_loop(suspected: bool) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: "bridge0".into(),
        source: LinkEventSource::BridgeLoop as i32,
        bridge_loop: Some(BridgeLoop {
            suspected,
            flood_packets_per_second: 5000.0,
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn bridge_loop_events_set_the_verdict_not_carrier() {
    let mut m = Metrics::new();
    let series = "boltwatch_bridge_loop_suspected{node=\"a\",interface=\"bridge0\"}";
    let up = "boltwatch_link_up{node=\"a\",interface=\"bridge0\"}";
    assert_eq!(value(&m, series), None, "no series before a verdict");
    feed(&mut m, "b1", vec![(1, bridge_loop(false))]);
    assert_eq!(value(&m, series).as_deref(), Some("0"));
    assert_eq!(value(&m, up), None, "a verdict is no carrier reading");
    feed(&mut m, "b1", vec![(3, bridge_loop(true))]);
    assert_eq!(value(&m, series).as_deref(), Some("1"));
    // A late replay of the older verdict does not lower it.
    feed(&mut m, "b1", vec![(2, bridge_loop(false))]);
    assert_eq!(value(&m, series).as_deref(), Some("1"));
    feed(&mut m, "b1", vec![(4, bridge_loop(false))]);
    assert_eq!(value(&m, series).as_deref(), Some("0"));
    let down = "boltwatch_link_down_events_total{node=\"a\",interface=\"bridge0\"}";
    assert_eq!(value(&m, down).as_deref(), Some("0"));
}
