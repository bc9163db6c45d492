//! Link and service outages, and service checks.

use super::*;
use boltwatch_proto::v1::{Outage, OutageCause, ServiceCheck};

const SEC: u64 = 1_000_000_000;

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
    use OutageCause::*;
    let mut m = Metrics::new();
    let ab = "{node=\"a\",peer=\"b\"}";
    let count = format!("boltwatch_outages_total{ab}");
    let secs = format!("boltwatch_outage_seconds_total{ab}");
    let s = 1_000 * SEC;
    let mut seq = 0;
    let mut apply = |m: &mut Metrics, boot: &str, p| {
        seq += 1;
        m.apply_record(&rec("a", boot, seq, seq, p));
    };
    apply(&mut m, "b1", outage(1, Carrier, "", s, None));
    assert_eq!(value(&m, &count).as_deref(), Some("1"));
    assert_eq!(value(&m, &secs).as_deref(), Some("0"));
    // The end record is authoritative: it widened to BOTH.
    apply(&mut m, "b1", outage(1, Both, "", s, Some(s + 3 * SEC / 2)));
    assert_eq!(value(&m, &count).as_deref(), Some("1"));
    assert_eq!(value(&m, &secs).as_deref(), Some("1.5"));
    // An outage whose start record was lost still counts once.
    let start2 = s + 4 * SEC;
    apply(
        &mut m,
        "b1",
        outage(2, ProbeLoss, "", start2, Some(start2 + SEC / 4)),
    );
    assert_eq!(value(&m, &count).as_deref(), Some("2"));
    assert_eq!(value(&m, &secs).as_deref(), Some("1.75"));
    // The same id in another boot is another outage.
    apply(&mut m, "b2", outage(1, Carrier, "", s, None));
    assert_eq!(value(&m, &count).as_deref(), Some("3"));
    // Service outages are counted apart.
    apply(&mut m, "b1", outage(9, Service, "web", s, None));
    apply(
        &mut m,
        "b1",
        outage(9, Service, "web", s, Some(s + 2 * SEC)),
    );
    assert_eq!(value(&m, &count).as_deref(), Some("3"));
    let svc = "{node=\"a\",peer=\"b\",service=\"web\"}";
    let n = format!("boltwatch_service_outages_total{svc}");
    assert_eq!(value(&m, &n).as_deref(), Some("1"));
    let secs = format!("boltwatch_service_outage_seconds_total{svc}");
    assert_eq!(value(&m, &secs).as_deref(), Some("2"));
}

/// Ended carrier outages by the interface that lost carrier: a peer behind
/// a bridge member names the member.
#[test]
fn carrier_outages_name_their_interface_when_they_end() {
    use OutageCause::*;
    let mut m = Metrics::new();
    let on = |port: &str| {
        format!("boltwatch_carrier_outages_total{{node=\"a\",peer=\"b\",interface=\"{port}\"}}")
    };
    let s = 1_000 * SEC;
    let mut seq = 0;
    let mut apply = |m: &mut Metrics, p: Payload| {
        seq += 1;
        m.apply_record(&rec("a", "b1", seq, seq, p));
    };
    let at = |id, cause, port: &str, end| {
        let Payload::Outage(mut o) = outage(id, cause, "", s, end) else {
            unreachable!()
        };
        o.interface = port.into();
        Payload::Outage(o)
    };
    apply(&mut m, at(1, Carrier, "en2", None));
    assert_eq!(value(&m, &on("en2")), None, "counted when it ends");
    apply(&mut m, at(1, Carrier, "en2", Some(s + SEC)));
    apply(&mut m, at(1, Carrier, "en2", Some(s + SEC)));
    assert_eq!(value(&m, &on("en2")).as_deref(), Some("1"), "once");
    // Widened to BOTH: carrier loss was part of it.
    apply(&mut m, at(2, Both, "en3", Some(s + 2 * SEC)));
    apply(&mut m, at(3, ProbeLoss, "en3", Some(s + 3 * SEC)));
    assert_eq!(value(&m, &on("en3")).as_deref(), Some("1"));
}

#[test]
fn service_checks_keep_the_last_good_connect_time() {
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
    let mut m = Metrics::new();
    let labels = "{node=\"a\",peer=\"b\",service=\"ssh\"}";
    let up = format!("boltwatch_service_up{labels}");
    let connect = format!("boltwatch_service_connect_seconds{labels}");
    m.apply_record(&rec("a", "b1", 1, 1, svc(true, 250_000)));
    assert_eq!(value(&m, &up).as_deref(), Some("1"));
    assert_eq!(value(&m, &connect).as_deref(), Some("0.00025"));
    m.apply_record(&rec("a", "b1", 2, 2, svc(false, 0)));
    assert_eq!(value(&m, &up).as_deref(), Some("0"));
    assert_eq!(value(&m, &connect).as_deref(), Some("0.00025"));
    // A checked service has its outage series at 0 before any outage.
    let outages = format!("boltwatch_service_outages_total{labels}");
    assert_eq!(value(&m, &outages).as_deref(), Some("0"));
}
