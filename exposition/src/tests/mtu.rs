//! Path MTU and the MTU mismatch of a link's two ends, from `path` records
//! and `Hello`s.

use super::*;
use crate::mtu::mismatch;
use boltwatch_proto::v1::{Hello, Interface, PathCheck, Peer};

fn path(peer: &str, mtu: u32) -> Payload {
    Payload::Path(PathCheck {
        peer: peer.into(),
        expected_interface: "tb0".into(),
        route_interface: "tb0".into(),
        ok: true,
        path_mtu: mtu,
    })
}

/// A `Hello` of `node` whose interface `tb0`, towards `peer`, has `mtu`.
fn hello(m: &mut Metrics, node: &str, peer: &str, mtu: u32) {
    let peers = [Peer {
        name: peer.into(),
        address: "10.0.0.2:862".into(),
        interface: "tb0".into(),
    }];
    let ifs = [Interface {
        name: "tb0".into(),
        mtu,
        ..Default::default()
    }];
    m.on_hello_links(&Hello {
        node: node.into(),
        peers: peers.into(),
        interfaces: ifs.into(),
        ..Default::default()
    });
}

#[test]
fn the_verdict_compares_ends_and_paths() {
    let s = Some;
    // Nothing or one end alone: nothing to compare.
    assert_eq!(mismatch([None, None], [None, None]), None);
    assert_eq!(mismatch([s(9000), None], [None, None]), None);
    assert_eq!(mismatch([s(9000), s(0)], [s(0), None]), None);
    // A path alone has no end to be below.
    assert_eq!(mismatch([None, None], [s(1500), None]), None);
    // Both ends.
    assert_eq!(mismatch([s(9000), s(9000)], [None, None]), Some(false));
    assert_eq!(mismatch([s(9000), s(1500)], [None, None]), Some(true));
    assert_eq!(mismatch([s(1500), s(9000)], [None, None]), Some(true));
    // Equal ends, a path below them either way (a narrower hop between).
    assert_eq!(
        mismatch([s(9000), s(9000)], [s(9000), s(9000)]),
        Some(false)
    );
    assert_eq!(mismatch([s(9000), s(9000)], [s(9000), s(1500)]), Some(true));
    // One end and a path: the path rule alone.
    assert_eq!(mismatch([s(9000), None], [s(9000), None]), Some(false));
    assert_eq!(mismatch([s(9000), None], [s(1500), None]), Some(true));
    // The narrow end's own search stops at its MTU: still a mismatch.
    assert_eq!(mismatch([s(1500), s(9000)], [s(1500), None]), Some(true));
}

#[test]
fn both_hellos_and_the_paths_make_the_series() {
    let mut m = Metrics::new();
    hello(&mut m, "a", "b", 9000);
    hello(&mut m, "b", "a", 1500);
    let ab = "{node=\"a\",peer=\"b\"}";
    let ba = "{node=\"b\",peer=\"a\"}";
    let mtu = |m: &Metrics, k: &str| value(m, &format!("boltwatch_path_mtu_bytes{k}"));
    let bad = |m: &Metrics, k: &str| value(m, &format!("boltwatch_link_mtu_mismatch{k}"));
    // No record named the link yet: no series, though both Hellos are in.
    assert_eq!(bad(&m, ab), None);
    // A path check before its discovery finished: no path MTU sample.
    m.apply_record(&rec("a", "b1", 1, 10, path("b", 0)));
    assert_eq!(mtu(&m, ab), None);
    assert_eq!(bad(&m, ab).as_deref(), Some("1"));
    m.apply_record(&rec("a", "b1", 2, 20, path("b", 1500)));
    m.apply_record(&rec("b", "b2", 1, 20, path("a", 1500)));
    assert_eq!(mtu(&m, ab).as_deref(), Some("1500"));
    assert_eq!(bad(&m, ba).as_deref(), Some("1"));
    // b is raised to 9000 and says so in a new Hello: the ends agree, but
    // the newest paths are still 1500 until the next discovery.
    hello(&mut m, "b", "a", 9000);
    assert_eq!(bad(&m, ab).as_deref(), Some("1"));
    m.apply_record(&rec("a", "b1", 3, 30, path("b", 9000)));
    m.apply_record(&rec("b", "b2", 2, 30, path("a", 9000)));
    assert_eq!(bad(&m, ab).as_deref(), Some("0"));
    assert_eq!(bad(&m, ba).as_deref(), Some("0"));
    // A late replay of an old check does not bring 1500 back.
    m.apply_record(&rec("a", "b1", 2, 20, path("b", 1500)));
    assert_eq!(mtu(&m, ab).as_deref(), Some("9000"));
    // A gone agent's gauges go.
    m.forget("a");
    assert_eq!(mtu(&m, ab), None);
}

#[test]
fn an_mtu_changed_on_a_running_node_counts_from_its_counters() {
    use boltwatch_proto::v1::InterfaceCounters;
    let counters = |iface: &str, mtu| {
        Payload::Counters(InterfaceCounters {
            interface: iface.into(),
            mtu,
            ..Default::default()
        })
    };
    let mut m = Metrics::new();
    hello(&mut m, "a", "b", 9000);
    hello(&mut m, "b", "a", 1500);
    m.apply_record(&rec("a", "b1", 1, 10, path("b", 1500)));
    let ab = "boltwatch_link_mtu_mismatch{node=\"a\",peer=\"b\"}";
    assert_eq!(value(&m, ab).as_deref(), Some("1"));
    // b's operator raises tb0 to 9000; its next counters say so (a reading
    // of an interface no peer is behind changes nothing).
    m.apply_record(&rec("b", "b2", 1, 20, counters("en0", 1500)));
    m.apply_record(&rec("b", "b2", 2, 20, counters("tb0", 9000)));
    m.apply_record(&rec("a", "b1", 2, 30, path("b", 9000)));
    assert_eq!(value(&m, ab).as_deref(), Some("0"));
    // A reading that does not know the MTU (0) keeps the known one; a
    // later Hello does not undo a newer counters reading.
    m.apply_record(&rec("b", "b2", 3, 40, counters("tb0", 0)));
    hello(&mut m, "b", "a", 1500);
    assert_eq!(value(&m, ab).as_deref(), Some("0"));
}
