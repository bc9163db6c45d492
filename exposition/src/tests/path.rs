//! What a failed path check observed: `boltwatch_path_route_info`'s state
//! from the expected interface's newest admin and carrier observations,
//! and `boltwatch_link_admin_up`.

use super::*;
use boltwatch_proto::v1::{LinkEvent, LinkEventSource, PathCheck};

fn path(via: &str) -> Payload {
    Payload::Path(PathCheck {
        peer: "b".into(),
        expected_interface: "tb0".into(),
        route_interface: via.into(),
        ok: via == "tb0",
        path_mtu: 0,
    })
}

fn link(admin_up: bool, carrier: bool) -> Payload {
    Payload::LinkEvent(LinkEvent {
        interface: "tb0".into(),
        carrier,
        admin_up,
        source: LinkEventSource::Netlink as i32,
        ..Default::default()
    })
}

fn route_info(m: &Metrics) -> Vec<String> {
    m.render()
        .lines()
        .filter(|l| l.starts_with("boltwatch_path_route_info{"))
        .map(str::to_owned)
        .collect()
}

fn info(via: &str, state: &str) -> Vec<String> {
    vec![format!(
        "boltwatch_path_route_info{{node=\"a\",peer=\"b\",interface=\"tb0\",\
         route_interface=\"{via}\",state=\"{state}\"}} 1"
    )]
}

#[test]
fn route_info_says_what_the_failed_check_saw() {
    let mut m = Metrics::new();
    let mut at = 0;
    let mut feed = |m: &mut Metrics, p: Payload| {
        at += 1;
        m.apply_record(&rec("a", "b1", at, at, p));
    };
    feed(&mut m, link(true, true));
    feed(&mut m, path("tb0"));
    assert_eq!(route_info(&m), info("tb0", "ok"));
    feed(&mut m, path("wlan0"));
    assert_eq!(route_info(&m), info("wlan0", "other_interface"));
    feed(&mut m, link(false, false));
    assert_eq!(route_info(&m), info("wlan0", "admin_down"));
    let admin = "boltwatch_link_admin_up{node=\"a\",interface=\"tb0\"}";
    assert_eq!(value(&m, admin).as_deref(), Some("0"));
    feed(&mut m, link(true, false));
    feed(&mut m, path(""));
    assert_eq!(route_info(&m), info("", "no_carrier"));
    assert_eq!(value(&m, admin).as_deref(), Some("1"));
    feed(&mut m, link(true, true));
    assert_eq!(route_info(&m), info("", "no_route"));
    assert_eq!(
        value(&m, "boltwatch_path_ok{node=\"a\",peer=\"b\"}").as_deref(),
        Some("0")
    );
}
