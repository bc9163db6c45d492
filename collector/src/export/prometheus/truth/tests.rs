//! Unit tests of the link-truth metrics, through [`MetricsState`].

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    Interface, InterfaceCounters, LinkEvent, LinkEventSource, Outage, OutageCause, PathCheck,
    Record, ServiceCheck, ThermalReading, Throttle,
};

use super::super::MetricsState;

fn rec(node: &str, boot: &str, unix_ns: u64, payload: Payload) -> Record {
    Record {
        node: node.into(),
        boot_id: boot.into(),
        seq: unix_ns,
        unix_ns,
        payload: Some(payload),
    }
}

fn value(m: &MetricsState, series: &str) -> Option<String> {
    let text = m.render();
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')
            .map(str::to_string)
    })
}

fn link_event(carrier: bool, down_count: u64, source: LinkEventSource) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: "tb0".into(),
        carrier,
        carrier_down_count: down_count,
        source: source as i32,
        ..Default::default()
    })
}

fn counters(carrier: bool, down_count: u64, speed: u64) -> Payload {
    Payload::Counters(InterfaceCounters {
        interface: "tb0".into(),
        carrier,
        carrier_known: true,
        carrier_down_count: down_count,
        speed_bits_per_second: speed,
        ..Default::default()
    })
}

const TB0: &str = "{node=\"a\",interface=\"tb0\"}";

#[test]
fn down_events_take_the_kernel_count_when_it_saw_more() {
    let mut m = MetricsState::new();
    // Startup sighting: the kernel had counted 3 drops before the agent.
    m.apply_record(&rec(
        "a",
        "b1",
        1,
        link_event(true, 3, LinkEventSource::Startup),
    ));
    let down = format!("boltwatch_link_down_events_total{TB0}");
    let up = format!("boltwatch_link_up{TB0}");
    assert_eq!(value(&m, &down).as_deref(), Some("0"));
    assert_eq!(value(&m, &up).as_deref(), Some("1"));
    m.apply_record(&rec(
        "a",
        "b1",
        2,
        link_event(false, 4, LinkEventSource::Netlink),
    ));
    assert_eq!(value(&m, &down).as_deref(), Some("1"));
    assert_eq!(value(&m, &up).as_deref(), Some("0"));
    // Two more flaps merged by the kernel into one notification pair.
    m.apply_record(&rec(
        "a",
        "b1",
        3,
        link_event(true, 4, LinkEventSource::Netlink),
    ));
    m.apply_record(&rec("a", "b1", 4, counters(true, 6, 0)));
    assert_eq!(value(&m, &down).as_deref(), Some("3"));
    // A new boot of the agent starts its own baseline; boots add up.
    m.apply_record(&rec(
        "a",
        "b2",
        10,
        link_event(true, 6, LinkEventSource::Startup),
    ));
    m.apply_record(&rec(
        "a",
        "b2",
        11,
        link_event(false, 7, LinkEventSource::Netlink),
    ));
    assert_eq!(value(&m, &down).as_deref(), Some("4"));
    // An older counter reading replayed late changes neither up nor downs.
    m.apply_record(&rec("a", "b2", 9, counters(true, 6, 0)));
    assert_eq!(value(&m, &up).as_deref(), Some("0"));
    assert_eq!(value(&m, &down).as_deref(), Some("4"));
}

#[test]
fn down_events_are_counted_without_a_kernel_count() {
    // macOS: no carrier_down_count, only kernel events.
    let mut m = MetricsState::new();
    let ke = LinkEventSource::KernelEvent;
    m.apply_record(&rec(
        "a",
        "b1",
        1,
        link_event(false, 0, LinkEventSource::Startup),
    ));
    m.apply_record(&rec("a", "b1", 2, link_event(true, 0, ke)));
    m.apply_record(&rec("a", "b1", 3, link_event(false, 0, ke)));
    m.apply_record(&rec("a", "b1", 4, link_event(true, 0, ke)));
    m.apply_record(&rec("a", "b1", 5, link_event(false, 0, ke)));
    let down = format!("boltwatch_link_down_events_total{TB0}");
    assert_eq!(value(&m, &down).as_deref(), Some("2"));
}

#[test]
fn speed_and_info_from_hello_then_counters() {
    let mut m = MetricsState::new();
    m.on_hello_interfaces(
        "a",
        &[Interface {
            name: "tb0".into(),
            kind: "thunderbolt".into(),
            speed_bits_per_second: 40_000_000_000,
            generation: "4".into(),
            ..Default::default()
        }],
    );
    let speed = format!("boltwatch_link_speed_bits_per_second{TB0}");
    assert_eq!(value(&m, &speed).as_deref(), Some("40000000000"));
    assert_eq!(
        value(
            &m,
            "boltwatch_link_info{node=\"a\",interface=\"tb0\",kind=\"thunderbolt\",generation=\"4\"}"
        )
        .as_deref(),
        Some("1")
    );
    // The series exist before any record: no carrier known yet, 0 downs.
    assert_eq!(
        value(&m, &format!("boltwatch_link_down_events_total{TB0}")).as_deref(),
        Some("0")
    );
    m.apply_record(&rec("a", "b1", 5, counters(true, 0, 80_000_000_000)));
    assert_eq!(value(&m, &speed).as_deref(), Some("80000000000"));
    // A counters reading without a speed keeps the known one.
    m.apply_record(&rec("a", "b1", 6, counters(true, 0, 0)));
    assert_eq!(value(&m, &speed).as_deref(), Some("80000000000"));
}

fn outage(id: u64, cause: OutageCause, service: &str, start: u64, end: Option<u64>) -> Payload {
    Payload::Outage(Outage {
        peer: "b".into(),
        interface: "tb0".into(),
        cause: cause as i32,
        start_unix_ns: start,
        end_unix_ns: end,
        service: service.into(),
        outage_id: id,
    })
}

#[test]
fn outages_count_at_start_and_add_seconds_at_end() {
    let mut m = MetricsState::new();
    let ab = "{node=\"a\",peer=\"b\"}";
    let count = format!("boltwatch_outages_total{ab}");
    let secs = format!("boltwatch_outage_seconds_total{ab}");
    let s = 1_000_000_000_000;
    m.apply_record(&rec(
        "a",
        "b1",
        1,
        outage(1, OutageCause::Carrier, "", s, None),
    ));
    assert_eq!(value(&m, &count).as_deref(), Some("1"));
    assert_eq!(value(&m, &secs).as_deref(), Some("0"));
    // The end record is authoritative: it widened to BOTH.
    let end = Some(s + 1_500_000_000);
    m.apply_record(&rec("a", "b1", 2, outage(1, OutageCause::Both, "", s, end)));
    assert_eq!(value(&m, &count).as_deref(), Some("1"));
    assert_eq!(value(&m, &secs).as_deref(), Some("1.5"));
    // An outage whose start record was lost still counts once.
    let end2 = Some(s + 4_250_000_000);
    m.apply_record(&rec(
        "a",
        "b1",
        3,
        outage(2, OutageCause::ProbeLoss, "", s + 4_000_000_000, end2),
    ));
    assert_eq!(value(&m, &count).as_deref(), Some("2"));
    assert_eq!(value(&m, &secs).as_deref(), Some("1.75"));
    // The same id in another boot is another outage.
    m.apply_record(&rec(
        "a",
        "b2",
        4,
        outage(1, OutageCause::Carrier, "", s, None),
    ));
    assert_eq!(value(&m, &count).as_deref(), Some("3"));
    // Service outages are counted apart.
    m.apply_record(&rec(
        "a",
        "b1",
        5,
        outage(9, OutageCause::Service, "web", s, None),
    ));
    m.apply_record(&rec(
        "a",
        "b1",
        6,
        outage(9, OutageCause::Service, "web", s, Some(s + 2_000_000_000)),
    ));
    assert_eq!(value(&m, &count).as_deref(), Some("3"));
    let svc = "{node=\"a\",peer=\"b\",service=\"web\"}";
    assert_eq!(
        value(&m, &format!("boltwatch_service_outages_total{svc}")).as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&m, &format!("boltwatch_service_outage_seconds_total{svc}")).as_deref(),
        Some("2")
    );
}

#[test]
fn path_service_and_throttle_follow_the_newest_record() {
    let mut m = MetricsState::new();
    let path = |ok| {
        Payload::Path(PathCheck {
            peer: "b".into(),
            expected_interface: "tb0".into(),
            route_interface: if ok { "tb0" } else { "wlan0" }.into(),
            ok,
        })
    };
    m.apply_record(&rec("a", "b1", 1, path(true)));
    m.apply_record(&rec("a", "b1", 3, path(false)));
    m.apply_record(&rec("a", "b1", 2, path(true)));
    assert_eq!(
        value(&m, "boltwatch_path_ok{node=\"a\",peer=\"b\"}").as_deref(),
        Some("0")
    );
    // Known peers have outage series at 0 before any outage.
    assert_eq!(
        value(&m, "boltwatch_outages_total{node=\"a\",peer=\"b\"}").as_deref(),
        Some("0")
    );

    let svc = |up, connect_ns| {
        Payload::Service(ServiceCheck {
            peer: "b".into(),
            service: "ssh".into(),
            address: "10.0.0.2:22".into(),
            up,
            connect_ns,
            error: String::new(),
        })
    };
    let labels = "{node=\"a\",peer=\"b\",service=\"ssh\"}";
    m.apply_record(&rec("a", "b1", 1, svc(true, 250_000)));
    assert_eq!(
        value(&m, &format!("boltwatch_service_up{labels}")).as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&m, &format!("boltwatch_service_connect_seconds{labels}")).as_deref(),
        Some("0.00025")
    );
    m.apply_record(&rec("a", "b1", 2, svc(false, 0)));
    assert_eq!(
        value(&m, &format!("boltwatch_service_up{labels}")).as_deref(),
        Some("0")
    );
    assert_eq!(
        value(&m, &format!("boltwatch_service_connect_seconds{labels}")).as_deref(),
        Some("0.00025")
    );
    assert_eq!(
        value(&m, &format!("boltwatch_service_outages_total{labels}")).as_deref(),
        Some("0")
    );

    let thermal = |throttled, ratio| {
        Payload::Thermal(ThermalReading {
            sensors: vec![],
            throttle: Some(Throttle {
                throttled,
                pressure_level: u32::from(throttled),
                cpu_frequency_ratio: ratio,
                throttle_events: 0,
                source: "thermal_throttle".into(),
            }),
        })
    };
    m.apply_record(&rec("a", "b1", 1, thermal(true, 0.0)));
    assert_eq!(
        value(&m, "boltwatch_thermal_throttled{node=\"a\"}").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&m, "boltwatch_thermal_pressure_level{node=\"a\"}").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&m, "boltwatch_cpu_frequency_ratio{node=\"a\"}"),
        None,
        "0 is unknown"
    );
    m.apply_record(&rec("a", "b1", 2, thermal(false, 0.5)));
    assert_eq!(
        value(&m, "boltwatch_thermal_throttled{node=\"a\"}").as_deref(),
        Some("0")
    );
    assert_eq!(
        value(&m, "boltwatch_cpu_frequency_ratio{node=\"a\"}").as_deref(),
        Some("0.5")
    );
}
